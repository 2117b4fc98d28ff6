#!/usr/bin/env bash
# Session 37's run R: the three attention shapes still slower than torch (big prefill, the
# held-out causal D = 128, the square causal D = 64) and four prefills used nowhere before, in
# the blocks, splits and block sizes the planner can already make (--block, --split,
# gpu_threads), against each default; plus the two causal shapes of session 36 whose merge
# rule was not replayed. Each variant is a different, equally defined IR with its own CPU bits.
# Usage: exp-cases.sh KILN ARCH
# att NAME SHAPE MASK [options] (scripts/gpu/exp-attention.sh).
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
SQ=1,16,4,1024,1024,64,64
att sq_default $SQ causal
att sq_32x64 $SQ causal --block 32x64
att sq_32x64_nosplit $SQ causal --block 32x64 --split off
att sq_32x64_t256 $SQ causal --block 32x64 --set gpu_threads=256
att sq_32x32 $SQ causal --block 32x32
HC=1,16,4,384,384,128,128
att hc_default $HC causal
att hc_split6 $HC causal --split 6
att hc_nosplit $HC causal --split off
att hc_32x32 $HC causal --block 32x32
att hc_32x32_split6 $HC causal --block 32x32 --split 6
att hc_8x32_split6 $HC causal --block 8x32 --split 6
BIG=1,32,8,512,512,128,128
att big_default $BIG none
att big_32x32 $BIG none --block 32x32
att big_32x32_t256 $BIG none --block 32x32 --set gpu_threads=256
att big_8x32 $BIG none --block 8x32
M1=2,10,5,200,700,96,80
att m1_default $M1 causal
att m1_32x32 $M1 causal --block 32x32
M2=1,12,4,150,600,64,64
att m2_default $M2 causal
att m2_32x64 $M2 causal --block 32x64
N1=2,32,8,512,512,64,64
att n1_default $N1 causal
att n1_32x64 $N1 causal --block 32x64
N2=1,32,8,1024,1024,128,128
att n2_default $N2 causal
att n2_32x32 $N2 causal --block 32x32
att n2_split2 $N2 causal --split 2
att big_32x64 $BIG none --block 32x64
att hc_32x64 $HC causal --block 32x64
# The same two with this session's partial double buffering (K double, V single by cp.async
# waited for at P.V), captured by the build that plans it (PTX differs from the two above).
att big_32x64_mix $BIG none --block 32x64
att hc_32x64_mix $HC causal --block 32x64
# D = 64 shapes in 128 rows (group x BQ): the causal prefill of the archive, a Llama-like
# causal varlen prefill (prompts 64/192/256/512 packed), default and 16 queries a block.
C=2,12,4,77,300,64,64
att causal_default $C causal
att causal_32x64 $C causal --block 32x64
vl() { local name=$1; shift
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape 4,32,4,1024,512,64,64 \
    --kv-cache dense --varlen --mask causal --arg lens=64,192,256,512 --arg cu_seqlens=0,64,256,512,1024 \
    --flops $((2*32*(64*65/2+192*193/2+256*257/2+512*513/2)*128)) --digest-only "$@"; }
vl varlen_default
vl varlen_16x64 --block 16x64

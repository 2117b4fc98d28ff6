#!/usr/bin/env bash
# Session 42's run AA, third archive: the MHA prefill with D = 128 that stays 1.28x torch's
# efficient attention (torch's own choice for one query head per KV head), in the blocks and
# splits the library's options can already give: each a different, equally defined IR with its
# own CPU bits. Usage: mha-cases.sh KILN ARCH
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
export KILN_CACHE_DIR=off
S=2,16,16,300,300,128,128
att mha_default $S causal
att mha_b32x32 $S causal --block 32x32
att mha_b32x64 $S causal --block 32x64
att mha_split2 $S causal --split 2
att mha_t256 $S causal --set gpu_threads=256
B=1,32,32,512,512,128,128
att mha_big_default $B none
att mha_big_b32x32 $B none --block 32x32

#!/usr/bin/env bash
# Session 43's run AB: shapes no earlier run captured, as the library plans them for the GPU
# (default blocks, splits, parts, tiles): prefills with one query head per KV head (where
# torch's own SDPA choice is efficient attention, not math), head dims 64, 80, 96 and 128,
# GQA prefills and decodes of model sizes, GEMMs of model layers, row kernels. Attention is
# timed against torch's fastest FP32 SDPA call and the call issue 31 names
# (scripts/gpu/torch_peers.py), the rest against torch eager.
# Usage: cases.sh KILN ARCH
# att NAME SHAPE MASK [options] (scripts/gpu/exp-attention.sh).
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
export KILN_CACHE_DIR=off
# One query head per KV head.
att mha_d64_gpt2_causal 1,12,12,1024,1024,64,64 causal
att mha_d64_bert_none 4,12,12,512,512,64,64 none
att mha_d64_2048_causal 1,16,16,2048,2048,64,64 causal
att mha_d64_333_causal 2,8,8,333,333,64,64 causal
att mha_d128_llama2_causal 1,32,32,1024,1024,128,128 causal
att mha_d80_causal 1,20,20,512,512,80,80 causal
att mha_d96_none 2,8,8,700,700,96,96 none
# Grouped heads.
att gqa_d128_2000_causal 1,32,8,2000,2000,128,128 causal
att gqa_d64_group7_causal 1,14,2,500,500,64,64 causal
att gqa_d128_chunk_causal 2,24,8,128,1200,128,128 causal
att gqa_d128_group5_none 1,40,8,256,256,128,128 none
att gqa_decode_8x1500 8,32,8,1,1500,128,128 none
att gqa_decode_group8_8192 1,64,8,1,8192,128,128 none
lib() {  # NAME KERNEL SHAPE FLOPS [options]
  local name=$1 kernel=$2 shape=$3 flops=$4
  shift 4
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel "$kernel" --shape "$shape" --flops "$flops" \
    --digest-only "$@"
}
g() { lib "gemm_$1x$2x$3" gemm "$1,$2,$3" $((2 * $1 * $2 * $3)); }
g 128 11008 4096
g 2048 2048 512
g 7 4096 4096
g 1000 1000 1000
g 512 3000 777
for s in 3000,3000 1,100000 250,10000; do lib softmax_${s/,/x} softmax $s 0; done
for s in 333,4096 2048,8192; do lib layernorm_${s/,/x} layernorm $s 0; done
for s in 1,4096 512,11008; do lib rmsnorm_${s/,/x} rmsnorm $s 0; done

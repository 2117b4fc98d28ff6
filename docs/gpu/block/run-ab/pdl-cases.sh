#!/usr/bin/env bash
# Session 43's run AB, third archive: kernels of several phases with and without knob
# gpu_dependent_launch (the later phase launched with programmatic stream serialization, waiting
# for the phase before at its entry: the same IR and bits), paired: decodes with a split, a
# prefill with a split, softmax rows in parts, gemm with split K.
# Usage: pdl-cases.sh KILN ARCH
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
export KILN_CACHE_DIR=off
both() {  # NAME then the capture's arguments after --case
  local name=$1
  shift
  "$kiln" gpu-capture --archive "$arch" --case "${name}_base" --digest-only "$@"
  "$kiln" gpu-capture --archive "$arch" --case "${name}_pdl" --digest-only "$@" --set gpu_dependent_launch=on
}
dec() {  # NAME SHAPE
  IFS=, read -r b hq hkv q k d dv <<<"$2"
  both "$1" --kernel attention --shape "$2" --mask none --flops $((2 * b * hq * q * k * (d + dv)))
}
dec decode 1,8,2,1,2053,80,96
dec long_decode 1,32,8,1,4096,128,128
dec batched_decode 8,32,8,1,1500,128,128
dec decode_group8_8192 1,64,8,1,8192,128,128
dec mha_decode 1,8,8,1,2048,64,64
both prefill_split --kernel attention --shape 2,8,8,333,333,64,64 --mask causal --flops $((2 * 8 * 333 * 333 * 128))
both softmax_parts --kernel softmax --shape 1,100000 --flops 0
both gemm_splitk --kernel gemm --shape 7,4096,4096 --flops $((2 * 7 * 4096 * 4096))

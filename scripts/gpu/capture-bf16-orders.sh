#!/usr/bin/env bash
# The GPU archive of the bf16 mma orders (docs/ir.md, MMA: bf16_dot and bf16_pairs), which the
# GPU's lanes realization runs as integer steps: library GEMMs with f32 or bf16 A and B, B as
# K x N and N x K, odd K (a pair's last contribution alone), a split-K decode, and every bf16 bit
# pattern as A (--input-bits a=0: zeros, subnormals, infinities, NaNs) in both orders. Each case
# is checked on the CPU against the interpreter bit for bit (and the FP64 oracle where the
# inputs are numbers) before it is archived; the replay compares the GPU's output bytes.
# Usage: scripts/gpu/capture-bf16-orders.sh [KILN] [ARCHIVE]   (defaults: build/bin/kiln,
# gpu-bf16-orders); then on the GPU machine scripts/gpu/run-on-device.sh ARCHIVE.
set -euo pipefail
kiln=$(realpath "${1:-build/bin/kiln}")
arch=$(realpath -m "${2:-gpu-bf16-orders}")
rm -rf "$arch"
gemm() {  # NAME SHAPE [OPTIONS...]
  local name=$1 shape=$2
  shift 2
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel gemm --shape "$shape" "$@"
}
att() {  # NAME SHAPE [OPTIONS...]: attention in the bf16 pairs order
  local name=$1 shape=$2
  shift 2
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape "$shape" --order bf16_pairs "$@"
}
gemm pairs_37x40x101_a16b16 37,40,101 --order bf16_pairs --a-dtype bf16 --b-dtype bf16
gemm pairs_5x40x65_tb 5,40,65 --order bf16_pairs --b-dtype bf16 --trans-b
gemm pairs_64x96x130_f32 64,96,130 --order bf16_pairs
gemm dot_37x40x100_b16 37,40,100 --order bf16_dot --b-dtype bf16
gemm pairs_1x300x2047 1,300,2047 --order bf16_pairs --b-dtype bf16
gemm pairs_every_bf16_a 256,48,256 --order bf16_pairs --a-dtype bf16 --b-dtype bf16 --input-bits a=0
gemm dot_every_bf16_a 256,48,256 --order bf16_dot --a-dtype bf16 --b-dtype bf16 --input-bits a=0
# Attention in the bf16 pairs order (attention --order bf16_pairs): decode (odd D: a pair's last
# contribution alone), a causal prefill, a KV cache with 16-bit K/V.
att attn_pairs_decode_bf16 1,8,2,1,203,80,96 --mask none --kv-dtype bf16
att attn_pairs_decode_odd_d 1,6,2,1,77,33,17 --mask none
att attn_pairs_prefill_causal 2,4,2,9,67,16,24 --mask causal --kv-dtype bf16
att attn_pairs_cache_f16 2,8,2,1,300,64,64 --mask none --kv-cache dense --kv-dtype f16 --arg lens=300,123

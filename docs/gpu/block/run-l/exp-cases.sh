#!/usr/bin/env bash
# Session 23's first H200 run: big prefill's blocks with one block per SM allowed (knob
# gpu_blocks_per_sm), the square causal prefill, decode4096's early copies and splits.
set -euo pipefail
kiln=$(realpath ${1:-build/bin/kiln}); arch=$(realpath -m ${2:-exp-archive}); base=$(realpath ${BASE:-build-base/bin/kiln})  # the commit before (base_* cases)
cd "$(dirname "$0")/../../../.."
rm -rf "$arch"
att() { local name=$1 shape=$2; shift 2
  IFS=, read -r b hq hkv q k d dv <<<"$shape"
  local bin=$kiln; [[ $name == base_* ]] && bin=$base
  "$bin" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape "$shape" --flops $((2*b*hq*q*k*(d+dv))) "$@"; }
att big_prefill 1,32,8,512,512,128,128 --mask none
att bp_16x64 1,32,8,512,512,128,128 --mask none --block 16x64 --digest-only
att bp_32x32 1,32,8,512,512,128,128 --mask none --block 32x32 --digest-only
att bp_32x64 1,32,8,512,512,128,128 --mask none --block 32x64 --set max_local_bytes=1048576 --digest-only
att bp_8x64 1,32,8,512,512,128,128 --mask none --block 8x64 --digest-only
att bp_16x32_one 1,32,8,512,512,128,128 --mask none --set gpu_blocks_per_sm=1 --digest-only
# causal: flops over visible pairs approximated as half
att causal_sq 1,16,4,1024,1024,64,64 --mask causal
att causal_sq_32x64 1,16,4,1024,1024,64,64 --mask causal --block 32x64 --set max_local_bytes=1048576 --digest-only
att causal_sq_16x128 1,16,4,1024,1024,64,64 --mask causal --block 16x128 --digest-only
att decode4096 1,32,8,1,4096,128,128 --mask none
att decode4096_early 1,32,8,1,4096,128,128 --mask none --set gpu_early_copies=on
att decode4096_s16 1,32,8,1,4096,128,128 --mask none --split 16
att decode4096_s24 1,32,8,1,4096,128,128 --mask none --split 24
att decode 1,8,2,1,2053,80,96 --mask none
att decode_early 1,8,2,1,2053,80,96 --mask none --set gpu_early_copies=on
att decode_s8 1,8,2,1,2053,80,96 --mask none --split 8
att decode_s22 1,8,2,1,2053,80,96 --mask none --split 22
att heldout_decode96 2,16,4,1,3001,96,96 --mask none
att heldout_decode96_s6 2,16,4,1,3001,96,96 --mask none --split 6
att heldout_decode96_s24 2,16,4,1,3001,96,96 --mask none --split 24
att batched_decode32_split4 32,8,2,1,2053,80,96 --mask none --split 4 --block 1x32 --merge-columns off --set gpu_realization=lanes
att decode4096_split16 1,32,8,1,4096,128,128 --mask none --split 16 --block 1x32 --merge-columns off --set gpu_realization=lanes
att decode_split16 1,8,2,1,2053,80,96 --mask none --split 16 --block 1x32 --merge-columns off --set gpu_realization=lanes
att tail_split16 1,6,2,1,2053,80,96 --mask none --split 16 --block 1x32 --merge-columns off --set gpu_realization=lanes
att base_big_prefill 1,32,8,512,512,128,128 --mask none --digest-only
att base_causal_sq 1,16,4,1024,1024,64,64 --mask causal --digest-only
att base_decode4096 1,32,8,1,4096,128,128 --mask none --digest-only
att base_decode 1,8,2,1,2053,80,96 --mask none --digest-only
"$kiln" gpu-capture --archive "$arch" --case gemm_decode_4x4096x4096 --kernel gemm --shape 4,4096,4096 --flops $((2*4*4096*4096))
"$base" gpu-capture --archive "$arch" --case base_gemm_decode_4x4096x4096 --kernel gemm --shape 4,4096,4096 --flops $((2*4*4096*4096)) --digest-only
# fill paths of a K-inner stage: registers (async off), 16-bit views, KV caches, paged, varlen
att bp_async_off 1,32,8,512,512,128,128 --mask none --set gpu_async_copy=off --digest-only
att decode_kv_bf16 1,8,2,1,2053,80,96 --mask none --kv-dtype bf16
att kv_paged 5,8,2,1,1024,64,64 --mask none --kv-cache paged --page 64 --pages 83
att kv_dense_causal 5,8,2,3,1024,64,64 --kv-cache dense --mask causal
"$kiln" gpu-capture --archive "$arch" --case varlen_prefill_llama --kernel attention --shape 4,32,4,1024,512,64,64 --kv-cache dense --varlen --mask causal --arg lens=64,192,256,512 --arg cu_seqlens=0,64,256,512,1024
"$base" gpu-capture --archive "$arch" --case base_varlen_prefill_llama --kernel attention --shape 4,32,4,1024,512,64,64 --kv-cache dense --varlen --mask causal --arg lens=64,192,256,512 --arg cu_seqlens=0,64,256,512,1024 --digest-only
att small_prefill 1,4,2,32,65,32,32 --mask none
att causal_prefill 2,12,4,77,300,64,64 --mask causal
att odd_heldout 2,6,2,200,333,48,40 --mask causal
du -sh "$arch"

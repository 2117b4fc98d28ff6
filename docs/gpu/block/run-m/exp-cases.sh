#!/usr/bin/env bash
# Session 25's first H100/H200 run: wide (16-byte) cp.async copies of V-like stages and one
# alignment test per stage, and mma loops that read the next trip's operands ahead (knob
# gpu_read_ahead), against the commit before (base_* cases, BASE's kiln).
set -euo pipefail
kiln=$(realpath ${1:-build/bin/kiln}); arch=$(realpath -m ${2:-exp-archive}); base=$(realpath ${BASE:-build-base/bin/kiln})
cd "$(dirname "$0")/../../../.."
rm -rf "$arch"
att() { local name=$1 shape=$2; shift 2
  IFS=, read -r b hq hkv q k d dv <<<"$shape"
  local bin=$kiln; [[ $name == base_* ]] && bin=$base
  "$bin" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape "$shape" --flops $((2*b*hq*q*k*(d+dv))) "$@"; }
gemm() { local name=$1 shape=$2; shift 2
  IFS=, read -r m n k <<<"$shape"
  local bin=$kiln; [[ $name == base_* ]] && bin=$base
  "$bin" gpu-capture --archive "$arch" --case "$name" --kernel gemm --shape "$shape" --flops $((2*m*n*k)) "$@"; }
for pre in "" base_; do
  att ${pre}big_prefill 1,32,8,512,512,128,128 --mask none
  att ${pre}causal_sq 1,16,4,1024,1024,64,64 --mask causal
  att ${pre}heldout_causal_d128 1,16,4,384,384,128,128 --mask causal
  att ${pre}decode4096 1,32,8,1,4096,128,128 --mask none
  att ${pre}decode 1,8,2,1,2053,80,96 --mask none
  att ${pre}small_prefill 1,4,2,32,65,32,32 --mask none
  att ${pre}causal_prefill 2,12,4,77,300,64,64 --mask causal
  "$([[ $pre == base_ ]] && echo "$base" || echo "$kiln")" gpu-capture --archive "$arch" --case ${pre}varlen_prefill_llama --kernel attention --shape 4,32,4,1024,512,64,64 --kv-cache dense --varlen --mask causal --arg lens=64,192,256,512 --arg cu_seqlens=0,64,256,512,1024
  gemm ${pre}gemm_4096 4096,4096,4096
  gemm ${pre}gemm_1024 1024,1024,1024
  gemm ${pre}gemm_300x200x129 300,200,129
done
# the new code with read-ahead off (the copies alone)
att bp_ra_off 1,32,8,512,512,128,128 --mask none --set gpu_read_ahead=off --digest-only
att causal_sq_ra_off 1,16,4,1024,1024,64,64 --mask causal --set gpu_read_ahead=off --digest-only
gemm gemm_4096_ra_off 4096,4096,4096 --set gpu_read_ahead=off
# larger blocks with the new code
att bp_32x64 1,32,8,512,512,128,128 --mask none --block 32x64 --set max_local_bytes=1048576 --digest-only
att bp_32x32 1,32,8,512,512,128,128 --mask none --block 32x32 --digest-only
att causal_sq_32x64 1,16,4,1024,1024,64,64 --mask causal --block 32x64 --set max_local_bytes=1048576 --digest-only
att heldout_causal_d128_32x32 1,16,4,384,384,128,128 --mask causal --block 32x32 --digest-only
du -sh "$arch"
# (added before the run) max/min reductions by butterfly shuffles, the build after
att bp_bfly 1,32,8,512,512,128,128 --mask none --digest-only
att causal_sq_bfly 1,16,4,1024,1024,64,64 --mask causal --digest-only
att heldout_causal_d128_bfly 1,16,4,384,384,128,128 --mask causal --digest-only
"$kiln" gpu-capture --archive "$arch" --case softmax_33x5000 --kernel softmax --shape 33,5000 --digest-only
"$base" gpu-capture --archive "$arch" --case base_softmax_33x5000 --kernel softmax --shape 33,5000 --digest-only

#!/usr/bin/env bash
# Session 33's run: mma loops that read the next trip's operands ahead (knob gpu_read_ahead) on
# decode-like programs (a thread holds few accumulators), paired with the default on the same
# build; plus split and key-block variants of the long decode.
set -euo pipefail
kiln=$(realpath ${1:-build/bin/kiln}); arch=$(realpath -m ${2:-exp-archive})
cd "$(dirname "$0")/../../../.."
rm -rf "$arch"
att() { local name=$1 shape=$2; shift 2
  IFS=, read -r b hq hkv q k d dv <<<"$shape"
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape "$shape" --flops $((2*b*hq*q*k*(d+dv))) "$@"; }
for ra in off on; do
  att decode4096_ra_$ra 1,32,8,1,4096,128,128 --mask none --set gpu_read_ahead=$ra
  att decode_ra_$ra 1,8,2,1,2053,80,96 --mask none --set gpu_read_ahead=$ra
  att mha_decode_ra_$ra 1,8,8,1,2048,64,64 --mask none --set gpu_read_ahead=$ra
  att tail_ra_$ra 1,6,2,1,2053,80,96 --mask none --set gpu_read_ahead=$ra
  att heldout_decode_d128_ra_$ra 2,28,4,1,3001,128,128 --mask none --set gpu_read_ahead=$ra
  att heldout_decode_d80_ra_$ra 1,12,4,1,1500,80,96 --mask none --set gpu_read_ahead=$ra
  att heldout_decode_d64_ra_$ra 3,10,5,1,2500,64,64 --mask none --set gpu_read_ahead=$ra
  att cache_decode4096_ra_$ra 1,32,8,1,4096,128,128 --mask none --kv-cache dense --arg lens=4000 --set gpu_read_ahead=$ra
  att paged_decode_ra_$ra 2,32,8,1,2048,128,128 --mask none --kv-cache paged --page 16 --arg lens=2000,1500 --set gpu_read_ahead=$ra
  att bf16_decode4096_ra_$ra 1,32,8,1,4096,128,128 --mask none --kv-dtype bf16 --set gpu_read_ahead=$ra
  att small_prefill_ra_$ra 1,4,2,32,65,32,32 --mask none --set gpu_read_ahead=$ra
done
# the long decode with early copies, and other splits / key blocks, read ahead on
att decode4096_ra_on_early 1,32,8,1,4096,128,128 --mask none --set gpu_read_ahead=on --set gpu_early_copies=on
att decode4096_ra_on_s24 1,32,8,1,4096,128,128 --mask none --split 24 --set gpu_read_ahead=on
att decode4096_ra_on_s48 1,32,8,1,4096,128,128 --mask none --split 48 --set gpu_read_ahead=on
att decode4096_ra_on_b64 1,32,8,1,4096,128,128 --mask none --block 1x64 --set gpu_read_ahead=on
du -sh "$arch"
# fewer threads (more keys, so more FMA chains, per thread) and 64-key blocks with a block per SM
for ra in off on; do
  att decode4096_t64_ra_$ra 1,32,8,1,4096,128,128 --mask none --set gpu_threads=64 --set gpu_read_ahead=$ra
  att decode_t64_ra_$ra 1,8,2,1,2053,80,96 --mask none --set gpu_threads=64 --set gpu_read_ahead=$ra
done
att decode4096_t32_ra_on 1,32,8,1,4096,128,128 --mask none --set gpu_threads=32 --set gpu_read_ahead=on
att decode4096_b64_one_ra_on 1,32,8,1,4096,128,128 --mask none --block 1x64 --set gpu_blocks_per_sm=1 --set gpu_read_ahead=on
att decode4096_b64_one_t64_ra_on 1,32,8,1,4096,128,128 --mask none --block 1x64 --set gpu_blocks_per_sm=1 --set gpu_threads=64 --set gpu_read_ahead=on
du -sh "$arch"
# prefill: an mma loop's steps per trip (the planner's 48 registers of row and column values
# per trip, raised by a build of this commit that read KILN_X_SR / KILN_X_MS; that build was not
# kept: 96 is the planner's value since run O, so today's default gives the sr96 cases' PTX)
for sr in 48 96 160 320; do
  ms=8; [[ $sr == 320 ]] && ms=16
  extra=(--digest-only); [[ $sr == 48 ]] && extra=()
  KILN_X_SR=$sr KILN_X_MS=$ms att big_prefill_sr$sr 1,32,8,512,512,128,128 --mask none "${extra[@]}"
  KILN_X_SR=$sr KILN_X_MS=$ms att heldout_causal_d128_sr$sr 1,16,4,384,384,128,128 --mask causal --digest-only
  KILN_X_SR=$sr KILN_X_MS=$ms att causal_sq_sr$sr 1,16,4,1024,1024,64,64 --mask causal --digest-only
  KILN_X_SR=$sr KILN_X_MS=$ms att causal_prefill_sr$sr 2,12,4,77,300,64,64 --mask causal --digest-only
done
du -sh "$arch"

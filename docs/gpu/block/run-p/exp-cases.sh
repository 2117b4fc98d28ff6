#!/usr/bin/env bash
# Session 36's run: D = 128 prefills in the key blocks and block sizes the planner can already
# make (--block, gpu_threads), against the default, on the same build (each a different, equally
# defined IR: its own CPU bits).
set -euo pipefail
kiln=$(realpath ${1:-build/bin/kiln}); arch=$(realpath -m ${2:-exp-archive})
cd "$(dirname "$0")/../../../.."
rm -rf "$arch"
c() { "$kiln" gpu-capture --archive "$arch" "$@"; }
F=$((2 * 32 * 512 * 512 * 256))
c --case big_default --kernel attention --shape 1,32,8,512,512,128,128 --mask none --flops $F
c --case big_16x64 --kernel attention --shape 1,32,8,512,512,128,128 --mask none --flops $F --block 16x64
c --case big_16x64_t256 --kernel attention --shape 1,32,8,512,512,128,128 --mask none --flops $F --block 16x64 \
  --set gpu_threads=256
c --case big_16x128_t256 --kernel attention --shape 1,32,8,512,512,128,128 --mask none --flops $F --block 16x128 \
  --set gpu_threads=256
F2=$((2 * 16 * 384 * 384 * 256 / 2))
c --case hc_default --kernel attention --shape 1,16,4,384,384,128,128 --mask causal --flops $F2
c --case hc_16x64 --kernel attention --shape 1,16,4,384,384,128,128 --mask causal --flops $F2 --block 16x64

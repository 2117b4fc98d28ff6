#!/usr/bin/env bash
# Session 39's run X: the doubled query blocks of GQA groups of 5 and 7 (commit 6b8a197) where
# no run had timed them: packed causal prefills on a dense KV cache (the library's blocks of
# queries for a GPU) and a paged cache of 16-position pages (16-key blocks); the default
# against the blocks before it (given with --block). Each variant is a different, equally
# defined IR with its own CPU bits.
# Usage: exp-cases.sh KILN ARCH
set -euo pipefail
kiln=$(realpath "$1"); arch=$(realpath -m "$2")
cd "$(dirname "$0")/../../../.."
rm -rf "$arch"
# vp NAME SHAPE PROMPTS [options]: a packed causal prefill, flops over the visible pairs.
vp() { local name=$1 shape=$2 prompts=$3; shift 3
  IFS=, read -r b hq hkv t k d dv <<<"$shape"
  local cu=0 at=0 pairs=0 n
  for n in ${prompts//,/ }; do at=$((at + n)); cu+=",$at"; pairs=$((pairs + n * (n + 1) / 2)); done
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape "$shape" --kv-cache dense \
    --varlen --mask causal --arg "lens=$prompts" --arg "cu_seqlens=$cu" --flops $((2 * hq * pairs * (d + dv))) \
    --digest-only "$@"; }
vp vl7_default 4,28,4,1024,512,64,64 64,192,256,512
vp vl7_8x64 4,28,4,1024,512,64,64 64,192,256,512 --block 8x64
vp vl7d128_default 2,28,4,1024,768,128,128 256,768
vp vl7d128_8x32 2,28,4,1024,768,128,128 256,768 --block 8x32
vp vl5_default 4,20,4,1024,512,64,64 64,192,256,512
vp vl5_8x64 4,20,4,1024,512,64,64 64,192,256,512 --block 8x64
# A paged cache, 16-position pages (16-key blocks), a causal prefill of 256 queries per sequence.
pg() { local name=$1; shift
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape 2,28,4,256,512,64,64 \
    --kv-cache paged --mask causal --arg lens=300,512 --flops $((2*2*28*256*512*128/2)) --digest-only "$@"; }
pg pg7_default
pg pg7_8x16 --block 8x16

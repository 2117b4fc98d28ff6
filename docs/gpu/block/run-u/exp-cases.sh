#!/usr/bin/env bash
# Session 39's run U: a causal split rule (an experimental registry_attention.cpp: chunks of the KV blocks per
# program slot, at least 3, where a causal prefill's programs see different numbers of blocks),
# chosen from run T's two shapes, on six causal shapes it had not seen: each `*_new` case is the
# library's default now, each `*_old` the split the rule before it chose (given with --split).
# Both with the longest programs first (gpu_heavy_first, the default). The rule was not kept
# (3 of the 6 shapes slower, docs/gpu.md "Run U"): with a later build the `*_new` cases are the
# split the library chooses without it.
# Usage: exp-cases.sh KILN ARCH
set -euo pipefail
kiln=$(realpath "$1"); arch=$(realpath -m "$2")
cd "$(dirname "$0")/../../../.."
rm -rf "$arch"
# att NAME SHAPE [options]: causal; FLOPs of the scores and the values, half of them.
att() { local name=$1 shape=$2; shift 2
  IFS=, read -r b hq hkv q k d dv <<<"$shape"
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape "$shape" --mask causal \
    --flops $((b*hq*q*k*(d+dv))) --digest-only "$@"; }
while read -r name shape old; do
  att "${name}_new" "$shape"
  att "${name}_old" "$shape" --split "$old"
done <<'CASES'
u1 1,8,2,2048,2048,64,64 off
u2 1,16,4,768,768,128,128 off
u3 1,28,4,512,512,128,128 off
u4 1,12,4,150,600,64,64 5
u5 1,32,4,512,512,64,64 off
u6 4,16,4,256,256,128,128 off
CASES

#!/usr/bin/env bash
# Session 36's run Q: a split's merge with a group of 4 columns per thread and the rest of the
# block along the rows (src/plan/block.cpp, rowsFirst), paired with the commit before (bb8cd9b,
# columns first). Run once per build: PREFIX base with the commit before's kiln, new with this
# one, into the same archive; exp-index.txt is the interleaved order the replay took.
# Usage: exp-cases.sh KILN ARCH PREFIX
set -euo pipefail
kiln=$(realpath "$1"); arch=$(realpath -m "$2"); p=$3
cd "$(dirname "$0")/../../../.."
att() { local name=$1 shape=$2; shift 2
  IFS=, read -r b hq hkv q k d dv <<<"$shape"
  "$kiln" gpu-capture --archive "$arch" --case "${p}_$name" --kernel attention --shape "$shape" \
    --flops $((2*b*hq*q*k*(d+dv))) "$@"; }
att hc 1,16,4,384,384,128,128 --mask causal
att decode4096 1,32,8,1,4096,128,128 --mask none
att decode 1,8,2,1,2053,80,96 --mask none
att causal 2,12,4,77,300,64,64 --mask causal
att sqcausal 1,16,4,1024,1024,64,64 --mask causal
att heldout_decode 2,28,4,1,3001,128,128 --mask none

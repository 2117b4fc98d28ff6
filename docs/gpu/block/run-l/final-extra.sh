#!/usr/bin/env bash
# Run L's final replay: after scripts/gpu/capture.sh, run K's held-out cases and these (the
# base_* ones by the build of commit d31da7f, before P was put by vector stores: the paired
# comparison; the vector stores were taken out after the run, so today's code is d31da7f's). Usage (repository root): BASE=path/to/kiln bash docs/gpu/block/run-l/final-extra.sh
set -e
k=build/bin/kiln; a=gpu-archive; base=${BASE:?BASE names the kiln of commit d31da7f}
cap() { "$k" gpu-capture --archive "$a" "$@"; }
att() { local name=$1 shape=$2; shift 2
  IFS=, read -r b hq hkv q kk d dv <<<"$shape"
  "$k" gpu-capture --archive "$a" --case "$name" --kernel attention --shape "$shape" --flops $((2*b*hq*q*kk*(d+dv))) --digest-only "$@"; }
bash docs/gpu/block/run-k/heldout-cases.sh
att causal_sq 1,16,4,1024,1024,64,64 --mask causal
att causal_sq_32x64 1,16,4,1024,1024,64,64 --mask causal --block 32x64 --set max_local_bytes=1048576
att heldout_prefill_causal_32x32 1,16,4,384,384,128,128 --mask causal --block 32x32
k=$base
att base_big_prefill 1,32,8,512,512,128,128 --mask none
att base_causal_sq 1,16,4,1024,1024,64,64 --mask causal
"$k" gpu-capture --archive "$a" --case base_varlen_prefill_llama --kernel attention --shape 4,32,4,1024,512,64,64 --kv-cache dense --varlen --mask causal --arg lens=64,192,256,512 --arg cu_seqlens=0,64,256,512,1024 --digest-only
du -sh "$a"

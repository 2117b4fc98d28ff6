#!/usr/bin/env bash
# Session 42's run AA, beside the whole archive (scripts/gpu/capture.sh): attention and the row
# kernels on shapes the archive does not hold, as the library plans them for the GPU (the
# default blocks, splits and parts), attention timed against torch's fastest FP32 SDPA call and
# against the call issue 31 names (enable_gqa=True, torch's own backend), the row kernels
# against torch eager (scripts/gpu/torch_peers.py).
# Usage: cases.sh KILN ARCH
# att NAME SHAPE MASK [options] (scripts/gpu/exp-attention.sh).
source "$(dirname "$0")/../../../../scripts/gpu/exp-attention.sh" "$@"
export KILN_CACHE_DIR=off
att causal_d128_384 1,16,4,384,384,128,128 causal
att causal_d128_1024 1,32,8,1024,1024,128,128 causal
att none_d128_256x1024 1,16,4,256,1024,128,128 none
att none_d128_group7 1,28,4,512,512,128,128 none
att causal_mha_d128 2,16,16,300,300,128,128 causal
att none_d64_777 1,32,8,777,777,64,64 none
att causal_d64_2048 1,32,8,2048,2048,64,64 causal
att decode_d128_3000 4,32,8,1,3000,128,128 none
# The row kernels (issue 31: within 2x of torch eager), shapes of run Y and new ones.
lib() {  # NAME KERNEL SHAPE [options]
  local name=$1 kernel=$2 shape=$3
  shift 3
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel "$kernel" --shape "$shape" --flops 0 --digest-only "$@"
}
for s in 2048,2048 300,1500 500,2500 17,777 4,16000 77,3333 1,50000; do lib softmax_${s/,/x} softmax $s; done
for s in 1000,1000 64,4096 123,2049 4096,1024; do lib layernorm_${s/,/x} layernorm $s; done
for s in 4096,4096 64,3000 257,5120 8,11008; do lib rmsnorm_${s/,/x} rmsnorm $s; done

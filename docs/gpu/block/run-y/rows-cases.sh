#!/usr/bin/env bash
# Session 40's run Y, second archive: the row kernels on shapes not timed before (issue 31 asks
# softmax, layernorm and RMSNorm within 2x of torch eager), and softmax as one tile per row
# padded to a multiple of 256 columns (32 up to 1024; read -inf past the end), one exp per
# element, instead of per-column running values over 1024-column chunks (three exps per
# element). `_pad` cases: captured with the experimental variable KILN_PAD_ROW (the most
# columns padded so), not kept; a different, equally defined IR with its own CPU bits.
# Run twice: by main's build (c5c81cc plus the variable) into an emptied ARCH, then by the build
# whose shared-memory folds read 8 contributions a trip (PREFIX u_, added to ARCH).
# Usage: rows-cases.sh KILN ARCH [PREFIX]
set -euo pipefail
kiln=$(realpath "$1")
arch=$(realpath -m "$2")
pre=${3:-}
cd "$(dirname "${BASH_SOURCE[0]}")/../../../.."
[ -n "$pre" ] || rm -rf "$arch"
export KILN_CACHE_DIR=off
lib() {  # NAME KERNEL SHAPE [options]
  local name=$1 kernel=$2 shape=$3
  shift 3
  "$kiln" gpu-capture --archive "$arch" --case "$pre$name" --kernel "$kernel" --shape "$shape" --flops 0 --digest-only "$@"
}
for s in 64,3000 1000,1000 128,4096 100,100 2048,2048 17,777 256,8192 4,16000; do
  n=${s/,/x}
  lib softmax_$n softmax $s
  KILN_PAD_ROW=16384 lib softmax_${n}_pad softmax $s --parts off
done
lib softmax_33x5000 softmax 33,5000
lib softmax_33x5000_whole softmax 33,5000 --parts off
KILN_PAD_ROW=16384 lib softmax_33x5000_pad softmax 33,5000 --parts off
for s in 64,4096 1000,1000 7,5000 512,768; do lib layernorm_${s/,/x} layernorm $s; done
for s in 64,3000 1000,1000 7,5000 4096,4096; do lib rmsnorm_${s/,/x} rmsnorm $s; done

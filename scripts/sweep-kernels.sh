#!/usr/bin/env bash
# Exhaustive correctness sweep of the kernel library through the CLI (not part of ctest):
# every attention shape x mask x block x knob set, `--check f64` (FP64 reference) and
# `--check bitexact` (strict-f32 interpreter), then the other kernels on ragged shapes under
# the same knob sets. Blocks include BQ > Q and BK > K cases.
#
#   scripts/sweep-kernels.sh [KILN_BIN]        (default build/bin/kiln)
#   JOBS=2 scripts/sweep-kernels.sh            parallel runs (default: nproc)
#   QUICK=1 scripts/sweep-kernels.sh           default knobs only
#
# Prints one line per failing run and a summary; exits 1 if any run failed.
set -uo pipefail

kiln=${1:-build/bin/kiln}
jobs=${JOBS:-$(nproc)}
if [ ! -x "$kiln" ]; then
  echo "sweep-kernels: no kiln binary at $kiln (make build first)" >&2
  exit 2
fi

seed="--set packet_width=8 --set block_size=32 --set local_lanes=1 --set max_unrolled_tile_elements=64 \
--set max_unrolled_region_work=4096"
knob_sets=("")
if [ -z "${QUICK:-}" ]; then
  for r in 1 4; do
    for cap in 0 8; do
      for p in off on; do
        knob_sets+=("$seed --set mma_output_block=$r --set max_unrolled_mma_terms=$cap --set full_packet=$p")
      done
    done
  done
  knob_sets+=("--threads 2" "--set packet_width=4" "--set packet_width=16" "--set max_unrolled_tile_elements=0")
fi

attention_shapes=(1,8,2,1,2053,80,96 1,8,8,1,2048,64,64 1,4,2,32,65,32,32 1,6,2,1,2053,80,96
  1,4,2,65,131,64,64 1,8,2,256,1024,64,64 1,8,2,3,67,80,96 2,8,1,1,2053,80,96 1,16,4,1,8193,128,128
  1,4,1,64,128,32,32 1,2,1,9,4,4,4 1,2,1,3,0,4,4 3,6,3,17,29,12,20)
blocks=(1x16 4x16 8x32 2x8 16x64 1x1)

other=(
  "softmax --shape 1,1" "softmax --shape 7,13" "softmax --shape 3,1031" "softmax --shape 2,8193"
  "softmax --shape 1,16411" "rmsnorm --shape 1,1" "rmsnorm --shape 11,127" "rmsnorm --shape 3,8193 --eps 1e-5"
  "layernorm --shape 1,1" "layernorm --shape 7,13" "layernorm --shape 2,9001 --eps 0"
  "swiglu --shape 1,1" "swiglu --shape 7,131" "swiglu --shape 3,8193"
  "rope --shape 1,1,2" "rope --shape 17,3,10" "rope --shape 5,7,6 --style interleaved"
  "rope --shape 2053,2,64 --base 500000" "rope --shape 31,4,128 --style interleaved"
  "gelu --shape 1" "gelu --shape 97 --approx tanh" "gelu --shape 8193" "gelu --shape 8191 --approx erf"
  "gemm --shape 1,1,1" "gemm --shape 13,17,29" "gemm --shape 37,20,45 --trans-b" "gemm --shape 64,64,64"
  "gemm --shape 5,3,0 --trans-b"
)

cmds=$(mktemp)
trap 'rm -f "$cmds"' EXIT
for knobs in "${knob_sets[@]}"; do
  for shape in "${attention_shapes[@]}"; do
    for mask in causal none; do
      for block in "${blocks[@]}"; do
        for check in f64 bitexact; do
          echo "--kernel attention --shape $shape --mask $mask --block $block $knobs --check $check" >>"$cmds"
        done
      done
    done
  done
  for k in "${other[@]}"; do
    for check in f64 bitexact; do echo "--kernel $k $knobs --check $check" >>"$cmds"; done
  done
done

total=$(wc -l <"$cmds")
echo "sweep-kernels: $total runs, $jobs at a time"
# Each line: "ok" or "FAIL <args>: <output on one line>".
results=$(xargs -P "$jobs" -I{} sh -c 'if out=$("$0" run {} 2>&1); then echo ok; else
  printf "FAIL %s: %s\n" "{}" "$(echo "$out" | tr "\n" " ")"; fi' "$kiln" <"$cmds")
failed=$(echo "$results" | grep -c '^FAIL' || true)
echo "$results" | grep '^FAIL' || true
echo "sweep-kernels: $((total - failed)) passed, $failed failed"
[ "$failed" -eq 0 ]

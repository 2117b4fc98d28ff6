#!/usr/bin/env bash
# CLI tests for the kernel library: `kiln kernels`, `kiln run --kernel ... --check f64|bitexact`,
# `kiln compile --kernel ...`, and the errors of bad shapes and options (exit 1, naming the
# parameter). Usage: bash kernels.sh KILN_BIN SOURCE_DIR
# Prints one line per case and "N passed, M failed"; exits 1 if any case failed.
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
kiln=$1
src=$2
# shellcheck source=lib/harness.bash
source "$(dirname "$0")/lib/harness.bash"

seed_knobs=(--set packet_width=8 --set block_size=32 --set local_lanes=1 --set max_unrolled_tile_elements=64
  --set max_unrolled_region_work=4096)

# ---- listing ----
run "$kiln" kernels
expect "kernels lists attention with its shape" 0 '^attention  --shape B,Hq,Hkv,Q,K,D,Dv'
for k in gemm softmax rmsnorm layernorm swiglu rope gelu; do
  grep -q "^$k  --shape" "$tmp/out" && pass "kernels lists $k" || fail "kernels lists $k"
done

# ---- run ----
run "$kiln" run --kernel attention --shape 1,8,2,1,2053,80,96 --check f64
expect "run attention decode f64" 0 '^check f64: PASS'
run "$kiln" run --kernel attention --shape 1,4,2,32,65,32,32 --block 4x16 --mask causal --check bitexact \
  "${seed_knobs[@]}" --set mma_output_block=4 --set max_unrolled_mma_terms=8 --set full_packet=on
expect "run attention prefill bitexact under the seed knobs" 0 '^check bitexact: PASS'
run "$kiln" run --kernel attention --shape 1,4,2,9,33,16,8 --mask none --block 8x32 --scale 0.25 --threads 2 \
  --seed 5 --check f64 --json
expect "run attention --json" 0 '"pass":true'
run "$kiln" run --kernel attention --shape 1,2,1,3,0,4,4 --check f64
expect "run attention K=0" 0 'PASS  max_abs_err 0'
run "$kiln" run --kernel gemm --shape 13,17,29 --trans-b --check f64
expect "run gemm --trans-b" 0 'PASS'
for k in "softmax --shape 3,8193" "rmsnorm --shape 5,1031 --eps 1e-5" "layernorm --shape 7,13" \
  "swiglu --shape 7,131" "rope --shape 17,3,10 --style interleaved --base 500000" "gelu --shape 97 --approx tanh"; do
  # shellcheck disable=SC2086
  run "$kiln" run --kernel $k --check f64
  expect "run $k" 0 '^check f64: PASS'
done
run "$kiln" run "$src/examples/softmax.tile" --check f64
expect "run FILE still works" 0 '^check f64: PASS'

# ---- compile ----
run "$kiln" compile --kernel attention --shape 1,8,2,1,64,16,16 --emit ir
expect "compile --kernel --emit ir" 0 '%q: view<f32>\[1, 8, 1, 16\]'
run "$kiln" compile --kernel gemm --shape 4,5,6 --trans-b --emit ir
expect "compile gemm --trans-b names gemm_tn" 0 '^kernel @gemm_tn'
run "$kiln" compile --kernel attention --shape 1,8,2,1,64,16,16 --set mma_output_block=4 --emit report
expect "compile --kernel --set report" 0 '"mma_output_block"'

# ---- errors: exit 1, one line naming the parameter ----
bad() {
  local name=$1 re=$2
  shift 2
  run "$kiln" run "$@" --check f64
  expect "$name" 1 '' "$re"
}
bad "Hq not a multiple of Hkv" 'attention: Hq=6 is not a multiple of Hkv=4 \(--shape B,Hq,Hkv,Q,K,D,Dv\)' \
  --kernel attention --shape 1,6,4,1,16,8,8
bad "D = 0" 'attention: D=0 must be at least 1' --kernel attention --shape 1,8,2,1,16,0,8
bad "negative K" 'attention: K=-1 must be at least 0' --kernel attention --shape 1,8,2,1,-1,8,8
bad "rows = 0" 'softmax: rows=0 must be at least 1' --kernel softmax --shape 0,5
bad "wrong field count" "has 6 fields; expected 7: B,Hq,Hkv,Q,K,D,Dv" --kernel attention --shape 1,8,2,1,16,8
bad "not an integer" "Q='x' is not an integer" --kernel attention --shape 1,8,2,x,16,8,8
bad "block too large" 'BQ\*BK=8192 exceeds 4096' --kernel attention --shape 1,8,2,1,16,8,8 --block 64x128
bad "block BQ out of range" 'BQ=1000 is out of range' --kernel attention --shape 1,8,2,1,16,8,8 --block 1000x1
bad "block malformed" "--block '4' is not BQxBK" --kernel attention --shape 1,8,2,1,16,8,8 --block 4
bad "bad mask" "--mask 'left' is not one of causal\|none" --kernel attention --shape 1,8,2,1,16,8,8 --mask left
bad "option of another kernel" 'option --trans-b does not apply to attention' \
  --kernel attention --shape 1,8,2,1,16,8,8 --trans-b
bad "unknown kernel" "unknown kernel 'flash'" --kernel flash --shape 1
bad "missing shape" '--kernel attention needs --shape B,Hq,Hkv,Q,K,D,Dv' --kernel attention
bad "odd head_dim" 'rope: head_dim=7 must be even' --kernel rope --shape 3,2,7
bad "bad eps" 'rmsnorm: --eps=-1 is out of range' --kernel rmsnorm --shape 3,4 --eps -1
bad "bad approx" "gelu: --approx 'fast' is not one of erf\|tanh" --kernel gelu --shape 8 --approx fast
bad "FILE and --kernel" 'not both' "$src/examples/softmax.tile" --kernel softmax --shape 3,4
bad "kernel option without --kernel" '--mask is an option of library kernels' "$src/examples/softmax.tile" --mask none
bad "no kernel at all" 'no kernel'
run "$kiln" compile --kernel attention --shape 1,6,4,1,16,8,8 --emit ir
expect "compile reports the same error" 1 '' 'kiln compile: error: attention: Hq=6 is not a multiple of Hkv=4'
run "$kiln" run --kernel attention --shape 1,8,2,1,16,8,8 --frobnicate 3 --check f64
expect "unknown CLI option is a usage error" 2

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

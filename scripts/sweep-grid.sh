#!/usr/bin/env bash
# The full knob grid of the backend (not a unit test: it takes long). For every example (or
# the .tile files given) and every point of
#   W in {1,4,8,16} x R in {1,2,4} x max_unrolled_mma_terms in {0,8}
#   x max_unrolled_tile_elements in {0,16,64} x full_packet on/off x partitions in {1,4}
#   x mma_indexable_snapshot on/off x threads in {1,2}
# runs `kiln run FILE --check bitexact`. SAMPLE=N runs N points chosen at random per file
# (seeded by SEED, default 1) instead of all 1152.
# Usage: scripts/sweep-grid.sh [KILN_BIN] [FILE...]
set -u
kiln=${1:-build/bin/kiln}
shift || true
files=("$@")
if [ ${#files[@]} -eq 0 ]; then files=(examples/*.tile); fi
points=()
for w in 1 4 8 16; do for r in 1 2 4; do for cap in 0 8; do for t in 0 16 64; do
  for fp in on off; do for p in 1 4; do for ix in on off; do for th in 1 2; do
    points+=("--set packet_width=$w --set block_size=32 --set mma_output_block=$r --set max_unrolled_mma_terms=$cap --set max_unrolled_tile_elements=$t --set full_packet=$fp --set reduction_partitions=$p --set mma_indexable_snapshot=$ix --threads $th")
  done; done; done; done
done; done; done; done
pass=0
fail=0
for f in "${files[@]}"; do
  selected=("${points[@]}")
  if [ -n "${SAMPLE:-}" ]; then
    mapfile -t selected < <(printf '%s\n' "${points[@]}" | shuf -n "$SAMPLE" --random-source=<(yes "${SEED:-1}"))
  fi
  for pt in "${selected[@]}"; do
    # shellcheck disable=SC2086
    if out=$("$kiln" run "$f" --check bitexact $pt 2>&1); then
      pass=$((pass + 1))
    else
      fail=$((fail + 1))
      echo "FAIL $f $pt: $out"
    fi
  done
  echo "$f: done"
done
echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]

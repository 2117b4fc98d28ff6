#!/usr/bin/env bash
# `kiln fuzz` (docs/fuzz.md): every reproducer under tests/fuzz/ replays clean (each is a bug the
# fuzzer found: bitexact against strict-f32, or the f64 check where its .knobs turn on
# fast_math); the CLI's errors; a short campaign is deterministic and prints its JSON summary;
# a reproducer's files are complete. (The time-bounded campaign of `make test` is the ctest
# fuzz.campaign.) Usage: bash fuzz.sh KILN_BIN SOURCE_DIR
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

# --- regression reproducers
repros=("$src"/tests/fuzz/*.tile)
for f in "${repros[@]}"; do
  run "$kiln" fuzz --replay "$f"
  expect "replay ${f#"$src"/}" 0 '"verdict": "pass"'
done

# --- --replay --shrink: a reproducer that still fails shrinks into FILE.shrunk.tile (which fails
# the same way); one that passes is left alone
cp "$src/tests/fuzz/reduce_ordered_init_first.tile" "$tmp/r.tile"
run "$kiln" fuzz --replay "$tmp/r.tile" --shrink --shrink-seconds 5
if grep -q '"verdict": "pass"' "$tmp/out"; then
  expect "replay --shrink of a passing reproducer" 0 '"verdict": "pass"'
  if [ -e "$tmp/r.shrunk.tile" ]; then fail "a passing reproducer is not shrunk"; else pass "a passing reproducer is not shrunk"; fi
else
  expect "replay --shrink of a failing reproducer names the shrunk file" 1 '"shrunk": ".*r.shrunk.tile"'
  run "$kiln" fuzz --replay "$tmp/r.shrunk.tile"
  expect "the shrunk reproducer still fails" 1 '"verdict": "mismatch"'
fi

# --- options and errors
run "$kiln" fuzz --help
expect "kiln fuzz --help" 0 '--programs'
for opt in --seed --time-limit --set --out --replay; do
  if grep -q -- "$opt" "$tmp/out"; then pass "kiln fuzz --help documents $opt"; else fail "kiln fuzz --help documents $opt"; fi
done
run "$kiln" fuzz --programs 1 --set packet_width=3
expect "a pinned knob outside its range is an error naming it" 1 '' "knob 'packet_width'"
run "$kiln" fuzz --programs 1 --set no_such_knob=1
expect "an unknown pinned knob is an error" 1 '' "no_such_knob"
run "$kiln" fuzz --replay "$tmp/missing.tile"
expect "replay of a missing file is a diagnostic" 1 '' 'missing.tile'
printf -- '--set packet_width=4\n--frobnicate\n' >"$tmp/bad.knobs"
cp "${repros[0]}" "$tmp/bad.tile"
run "$kiln" fuzz --replay "$tmp/bad.tile"
expect "a bad .knobs line is named" 1 '' 'bad.knobs:2'

# --- a short campaign: the JSON summary, the same twice (but for the seconds and the paths)
run "$kiln" fuzz --programs 12 --seed 5 --shrink-seconds 1 --out "$tmp/a"
rc_a=$rc
sed '/"seconds"/d; /"reproducer"/d' "$tmp/out" >"$tmp/a.json"
for field in seed programs runs passed mismatches crashes errors refused generator_bugs seconds isas failures refusals; do
  if grep -q "\"$field\"" "$tmp/out"; then pass "summary has \"$field\""; else fail "summary has \"$field\""; fi
done
if grep -q '"programs": 12,' "$tmp/out"; then pass "12 programs ran"; else fail "12 programs ran" "$(head -c 300 "$tmp/out")"; fi
run "$kiln" fuzz --programs 12 --seed 5 --shrink-seconds 1 --out "$tmp/b"
sed '/"seconds"/d; /"reproducer"/d' "$tmp/out" >"$tmp/b.json"
if [ "$rc" -eq "$rc_a" ] && cmp -s "$tmp/a.json" "$tmp/b.json"; then
  pass "same seed, same summary"
else
  fail "same seed, same summary" "$(diff "$tmp/a.json" "$tmp/b.json" | head -5)"
fi
# The ISAs drawn: those this host runs (KILN_HOST_WITHOUT_AVX512, as `make test` sets it for a
# second pass, stands for a CPU without AVX-512); a pinned ISA it cannot run is refused up front.
if [ -n "${KILN_HOST_WITHOUT_AVX512:-}" ] && [ "${KILN_HOST_WITHOUT_AVX512}" != 0 ]; then
  if grep -q '"isas": \[ *"native", *"avx2" *\]' <(tr -d '\n' <"$tmp/a.json"); then
    pass "summary's isas: native and avx2 (no AVX-512 here)"
  else
    fail "summary's isas: native and avx2 (no AVX-512 here)" "$(grep -A4 isas "$tmp/a.json")"
  fi
  run "$kiln" fuzz --programs 1 --set isa=avx512
  expect "a pinned isa=avx512 is refused on a host without it" 2 '' 'isa=avx512.*no AVX-512'
else
  if grep -q '"avx2"' "$tmp/a.json"; then pass "summary lists isas"; else fail "summary lists isas" "$(head -c 300 "$tmp/a.json")"; fi
fi
run "$kiln" fuzz --programs 0 --seed 5
expect "zero programs: an empty, passing summary" 0 '"programs": 0,'
run "$kiln" fuzz --programs 1000 --seed 5 --time-limit 0.001 --out "$tmp/c"
expect "the time limit stops the campaign after its first program" 0 '"programs": 1,' 'time limit'

# --- reproducer files, when the short campaign found something
for t in "$tmp"/a/fuzz-5-*.tile; do
  [ -e "$t" ] || break
  case $t in *.orig.tile) continue ;; esac
  base=${t%.tile}
  if [ -s "$base.reason" ] && [ -e "$base.knobs" ] && [ -s "$base.orig.tile" ]; then
    pass "reproducer $(basename "$t") has .reason, .knobs, .orig.tile"
  else
    fail "reproducer $(basename "$t") has .reason, .knobs, .orig.tile"
  fi
  run "$kiln" check "$t"
  expect "reproducer $(basename "$t") verifies" 0 ': ok$'
done

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

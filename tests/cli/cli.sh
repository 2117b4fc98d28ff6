#!/usr/bin/env bash
# CLI tests for the kiln binary: help, check, print round trip, eval JSON and determinism,
# error handling. Usage: bash cli.sh KILN_BIN SOURCE_DIR
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
shopt -s nullglob

# that NAME CMD...: a case that passes when CMD succeeds.
that() {
  local name=$1
  shift
  if "$@"; then pass "$name"; else fail "$name"; fi
}

# Kernels of our own, written per docs/ir.md, so that the eval cases do not depend on which
# examples exist.
cat >"$tmp/scale.tile" <<'TILE'
# y = exp(x) * 2, in tiles of 16
kernel @scale_exp(%x: view<f32>[1000], %y: view<f32>[1000]) {
  parallel (%p) in (63) {
    %o = mul %p, 16 : i64
    %t = load %x[%o] as [n:16] fill 0 : f32[n:16]
    %e = exp %t : f32[n:16]
    %two = const 2 : f32
    %r = mul %e, %two : f32[n:16]
    store %r, %y[%o] as [n:16]
  }
}
TILE
cat >"$tmp/addk.tile" <<'TILE'
kernel @add_k(%x: view<f32>[16], %k: i64, %y: view<f32>[16]) {
  parallel (%p) in (1) {
    %t = load %x[0] as [n:16]
    %kf = cast %k : f32
    %r = add %t, %kf
    store %r, %y[0] as [n:16]
  }
}
TILE
printf 'kernel @broken(%%x: view<f32>[4]) {\n  parallel (%%p) in (1) {\n    %%t = frobnicate %%x\n  }\n}\n' \
  >"$tmp/broken.tile"
cat >"$tmp/nanlog.tile" <<'TILE'
kernel @nan_log(%x: view<f32>[64], %y: view<f32>[64]) {
  parallel (%p) in (1) {
    %t = load %x[0] as [n:64]
    %l = log %t
    store %l, %y[0] as [n:64]
  }
}
TILE
printf 'this is not a kernel\n' >"$tmp/garbage.tile"

# --- help
run "$kiln" --help
expect "kiln --help" 0 'Subcommands'
for sub in check print eval; do
  that "kiln --help lists $sub" grep -Eq "^ +$sub " "$tmp/out"
done
run "$kiln" check --help
expect "kiln check --help" 0 'FILE'
run "$kiln" print --help
expect "kiln print --help" 0 'canonical'
run "$kiln" eval --help
expect "kiln eval --help" 0 '--partitions'
for opt in --seed --mode --arg; do
  that "kiln eval --help documents $opt" grep -q -- "$opt" "$tmp/out"
done

# --- check: every example and every text-IR test is valid
tiles=("$src"/examples/*.tile "$src"/tests/ir/*.tile)
that "found .tile files in examples/ and tests/ir/ (${#tiles[@]})" [ ${#tiles[@]} -gt 0 ]
for f in "${tiles[@]}"; do
  rel=${f#"$src"/}
  run "$kiln" check "$f"
  expect "check $rel" 0 ': ok$'
done
run "$kiln" check "$tmp/scale.tile" "$tmp/addk.tile"
expect "check two files prints two ok lines" 0 'addk.tile: ok'

# --- print: canonical text round-trips
for f in "${tiles[@]}" "$tmp/scale.tile" "$tmp/addk.tile"; do
  rel=${f#"$src"/}
  rel=${rel#"$tmp"/}
  if "$kiln" print "$f" >"$tmp/p1.tile" 2>"$tmp/err" && "$kiln" print "$tmp/p1.tile" >"$tmp/p2.tile" 2>>"$tmp/err" &&
    cmp -s "$tmp/p1.tile" "$tmp/p2.tile"; then
    pass "print round trip $rel"
  else
    fail "print round trip $rel" "$(head -c 300 "$tmp/err")"
  fi
done
run "$kiln" print - <"$tmp/scale.tile"
expect "print reads stdin with -" 0 '^kernel @scale_exp'

# --- eval: JSON fields, determinism, modes
json_fields='"kernel"|"mode"|"seed"|"outputs"|"name"|"shape"|"sha256"|"min"|"max"|"mean"'
run "$kiln" eval "$tmp/scale.tile"
expect "eval default mode is f64" 0 '"mode": "f64"'
that "eval default seed is 0" grep -q '"seed": 0,' "$tmp/out"
that "eval JSON has all 10 fields" [ "$(grep -Eo "$json_fields" "$tmp/out" | sort -u | wc -l)" -eq 10 ]
num='-?[0-9][0-9.e+-]*'
that "eval output y: name, shape, sha256, finite stats" grep -Eq \
  "\\{\"name\":\"y\",\"shape\":\\[1000\\],\"sha256\":\"[0-9a-f]{64}\",\"min\":$num,\"max\":$num,\"mean\":$num\\}" "$tmp/out"
if command -v python3 >/dev/null && python3 -c 'import json' 2>/dev/null; then
  that "eval output is valid JSON" python3 -c 'import json,sys; json.load(open(sys.argv[1]))' "$tmp/out" 2>/dev/null
fi

"$kiln" eval "$tmp/scale.tile" --seed 7 >"$tmp/s7a" 2>&1
"$kiln" eval "$tmp/scale.tile" --seed 7 >"$tmp/s7b" 2>&1
"$kiln" eval "$tmp/scale.tile" --seed 8 >"$tmp/s8" 2>&1
sha() { grep -Eo '"sha256":"[0-9a-f]{64}"' "$1" | head -1; }
same() { [ -n "$(sha "$1")" ] && cmp -s "$1" "$2"; }
that "eval same seed gives the same bytes" same "$tmp/s7a" "$tmp/s7b"
differ() { [ -n "$(sha "$1")" ] && [ -n "$(sha "$2")" ] && [ "$(sha "$1")" != "$(sha "$2")" ]; }
that "eval different seed gives a different sha256" differ "$tmp/s7a" "$tmp/s8"

run "$kiln" eval "$tmp/scale.tile" --mode strict-f32
expect "eval --mode strict-f32" 0 '"mode": "strict-f32"'
run "$kiln" eval "$tmp/scale.tile" --mode f64
expect "eval --mode f64" 0 '"mode": "f64"'

for f in "$src"/examples/*.tile; do
  rel=${f#"$src"/}
  for mode in f64 strict-f32; do
    run "$kiln" eval "$f" --mode "$mode"
    expect "eval $rel --mode $mode" 0 '"sha256":"[0-9a-f]{64}"'
  done
done

run "$kiln" eval "$tmp/addk.tile" --arg k=3
expect "eval --arg sets an i64 scalar" 0 '"sha256"'
cp "$tmp/out" "$tmp/k3"
run "$kiln" eval "$tmp/addk.tile" --arg k=4
that "eval --arg value changes the output" differ "$tmp/k3" "$tmp/out"
run "$kiln" eval "$tmp/nanlog.tile" --mode strict-f32
expect "eval NaN output: stats are null" 0 '"min":null,"max":null,"mean":null\}'
run "$kiln" eval "$tmp/addk.tile" --partitions 16
expect "eval --partitions 16" 0 '"sha256"'

# --- errors
run "$kiln" check "$tmp/missing.tile"
expect "check missing file: exit 1 with a diagnostic" 1 '' 'missing\.tile:0:0: error: '
run "$kiln" print "$tmp/missing.tile"
expect "print missing file: exit 1" 1 '' 'missing\.tile:0:0: error: '
run "$kiln" eval "$tmp/missing.tile"
expect "eval missing file: exit 1" 1 '' 'missing\.tile:0:0: error: '
run "$kiln" check "$tmp/broken.tile"
expect "check invalid kernel: FILE:LINE:COL: error: ... [code]" 1 '' 'broken\.tile:[0-9]+:[0-9]+: error: .*\[[a-z0-9-]+\]$'
run "$kiln" check "$tmp/scale.tile" "$tmp/broken.tile" "$tmp/garbage.tile"
all_reported() {
  [ "$rc" -eq 1 ] && grep -q 'scale.tile: ok' "$tmp/out" && grep -q 'broken.tile:' "$tmp/err" &&
    grep -q 'garbage.tile:' "$tmp/err"
}
that "check reports every bad file and still passes the good one" all_reported
run "$kiln" print "$tmp/garbage.tile"
expect "print invalid kernel: exit 1, nothing on stdout" 1 '' 'garbage\.tile:'
that "print invalid kernel writes no stdout" [ ! -s "$tmp/out" ]
run "$kiln" eval "$tmp/broken.tile"
expect "eval invalid kernel: exit 1" 1 '' 'broken\.tile:'
head -c 4096 /dev/urandom >"$tmp/random.tile"
run "$kiln" check "$tmp/random.tile"
expect "check random bytes: exit 1 with a diagnostic" 1 '' 'random\.tile:'

run "$kiln" frobnicate
expect "unknown subcommand rejected" 2 '' 'frobnicate'
run "$kiln"
expect "no subcommand rejected" 2
run "$kiln" check --bogus "$tmp/scale.tile"
expect "unknown option rejected" 2 '' 'bogus'
run "$kiln" check
expect "check without FILE rejected" 2
run "$kiln" eval "$tmp/scale.tile" --mode bogus
expect "eval --mode bogus rejected" 2 '' 'bogus'
run "$kiln" eval "$tmp/scale.tile" --partitions 0
expect "eval --partitions 0 rejected" 2
run "$kiln" eval "$tmp/scale.tile" --seed -1
expect "eval --seed -1 rejected" 2
run "$kiln" eval "$tmp/scale.tile" --seed 18446744073709551616
expect "eval --seed 2^64 rejected" 2
run "$kiln" eval "$tmp/scale.tile" --seed 18446744073709551615
expect "eval --seed 2^64-1 accepted" 0 '"seed": 18446744073709551615,'
run "$kiln" eval "$tmp/addk.tile" --arg k
expect "eval --arg without = rejected" 2 '' 'NAME=VALUE'
run "$kiln" eval "$tmp/addk.tile" --arg nosuch=1
expect "eval --arg naming no parameter: exit 1" 1 '' 'error'
run "$kiln" eval "$tmp/addk.tile" --arg k=1 --arg k=2
expect "eval --arg given twice: exit 1" 1 '' 'twice'
run "$kiln" print "$tmp/scale.tile" "$tmp/addk.tile"
expect "print with two files rejected" 2

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

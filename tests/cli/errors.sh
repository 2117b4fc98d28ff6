#!/usr/bin/env bash
# Bad input never crashes `kiln check`: every tests/error/*.tile declares on its first line
#   # expect: LINE:COL CODE   -> exit 1; the first diagnostic is FILE:LINE:COL: error: ... [CODE]
#   # expect: ok              -> exit 0
# A zero-byte file cannot hold that line; it expects 1:1 syntax. Then large inputs made on the
# fly (10 MB of ops, of garbage, one huge token, deep nesting) must end in a diagnostic or
# success within the time limit: never a signal.
# Usage: bash errors.sh KILN_BIN SOURCE_DIR
set -u

if [ $# -ne 2 ]; then
  echo "usage: bash $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
KILN=$1
SRC=$2
LIMIT=${KILN_ERRORS_TIMEOUT:-60}  # seconds per case

passed=0
failed=0
pass() {
  echo "PASS $1"
  passed=$((passed + 1))
}
fail() {
  echo "FAIL $1: $2"
  failed=$((failed + 1))
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kiln-errors.XXXXXX") || exit 2
trap 'rm -rf "$tmp"' EXIT

# Runs `kiln check FILE`; sets rc, and leaves stderr in $tmp/err.
check() {
  timeout "$LIMIT" "$KILN" check "$1" >"$tmp/out" 2>"$tmp/err"
  rc=$?
}

# Common verdicts on rc: a timeout or a signal fails the case whatever was expected.
abnormal() {
  if [ "$rc" -eq 124 ]; then
    echo "timed out after ${LIMIT}s"
  elif [ "$rc" -ge 128 ]; then
    echo "crashed (exit $rc, signal $((rc - 128))): $(tail -c 300 "$tmp/err" | tr '\n' ' ')"
  fi
}

first_error() { grep -a -m1 ': error: ' "$tmp/err"; }

shopt -s nullglob
files=("$SRC"/tests/error/*.tile)
if [ ${#files[@]} -eq 0 ]; then
  fail "corpus" "no files in $SRC/tests/error"
fi

for file in "${files[@]}"; do
  name=$(basename "$file" .tile)
  if [ ! -s "$file" ]; then
    expect="1:1 syntax"
  else
    expect=$(head -n1 "$file" | tr -d '\r' | sed -n 's/^# expect: *//p')
  fi
  if [ -z "$expect" ]; then
    fail "$name" "first line is not '# expect: LINE:COL CODE' or '# expect: ok'"
    continue
  fi
  check "$file"
  why=$(abnormal)
  if [ -n "$why" ]; then
    fail "$name" "$why"
    continue
  fi
  if [ "$expect" = "ok" ]; then
    if [ "$rc" -eq 0 ]; then
      pass "$name"
    else
      fail "$name" "expected a valid kernel (exit 0), got exit $rc: $(first_error)"
    fi
    continue
  fi
  pos=${expect%% *}
  code=${expect#* }
  line=$(first_error)
  if [ "$rc" -ne 1 ]; then
    fail "$name" "expected exit 1, got $rc"
  elif [[ "$line" != "$file:$pos: error: "* ]]; then
    fail "$name" "expected the first diagnostic at $file:$pos, got: ${line:-nothing on stderr}"
  elif [[ "$line" != *"[$code]" ]]; then
    fail "$name" "expected code [$code], got: $line"
  else
    pass "$name"
  fi
done

# Generated inputs: exit 0, or exit 1 with a positioned diagnostic; in time; never a signal.
generated() {
  local name=$1 file=$2
  local start end
  start=$(date +%s)
  check "$file"
  end=$(date +%s)
  why=$(abnormal)
  if [ -n "$why" ]; then
    fail "$name" "$why"
  elif [ "$rc" -eq 0 ]; then
    pass "$name (valid, $((end - start))s)"
  elif [ "$rc" -eq 1 ] && first_error | grep -qa "^$file:[0-9]*:[0-9]*: error: .*\[[a-z0-9-]*\]"; then
    pass "$name (diagnosed, $((end - start))s)"
  else
    fail "$name" "exit $rc without a FILE:LINE:COL diagnostic: $(head -c 300 "$tmp/err" | tr '\n' ' ')"
  fi
}

# ~10 MB, ~250k ops: a long chain of elementwise ops in one program.
awk 'BEGIN {
  print "kernel @big(%x: view<f32>[64], %y: view<f32>[64]) {"
  print "  parallel (%p) in (4) {"
  print "    %v0 = load %x[0] as [n:16]"
  for (i = 1; i <= 250000; i++) printf "    %%v%d = add %%v%d, %%v0 : f32[n:16]\n", i, i - 1
  print "    store %v250000, %y[0] as [n:16]"
  print "  }"
  print "}"
}' >"$tmp/big_ops.tile"
generated "generated_big_ops" "$tmp/big_ops.tile"

# The same size, every op broken: the diagnostics must stay bounded.
awk 'BEGIN {
  print "kernel @bad(%x: view<f32>[64]) {"
  print "  parallel (%p) in (4) {"
  print "    %a = load %x[0] as [n:16]"
  print "    %b = load %x[0] as [m:16]"
  for (i = 0; i < 250000; i++) printf "    %%v%d = add %%a, %%b\n", i
  print "  }"
  print "}"
}' >"$tmp/big_errors.tile"
generated "generated_big_errors" "$tmp/big_errors.tile"
if [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -gt 1000 ]; then
  fail "generated_big_errors_bounded" "$(wc -l <"$tmp/err") lines of diagnostics"
else
  pass "generated_big_errors_bounded"
fi

# 10 MB of random bytes.
head -c 10485760 /dev/urandom >"$tmp/garbage.tile"
generated "generated_garbage" "$tmp/garbage.tile"

# 10 MB of NUL bytes after a valid start.
{
  printf 'kernel @k(%%x: view<f32>[64]) {\n  parallel (%%p) in (4) {\n    %%a = load %%x['
  head -c 10485760 /dev/zero
} >"$tmp/nul.tile"
generated "generated_nul_bytes" "$tmp/nul.tile"

# One 10 MB token (a value name) and one 10 MB integer literal.
{
  printf 'kernel @k(%%x: view<f32>[64]) {\n  parallel (%%p) in (4) {\n    %%'
  head -c 10485760 /dev/zero | tr '\0' 'a'
  printf ' = load %%x[0] as [n:16]\n  }\n}\n'
} >"$tmp/long_name.tile"
generated "generated_long_name" "$tmp/long_name.tile"
{
  printf 'kernel @k(%%x: view<f32>[64]) {\n  parallel (%%p) in (4) {\n    %%a = load %%x['
  head -c 10485760 /dev/zero | tr '\0' '9'
  printf '] as [n:16]\n  }\n}\n'
} >"$tmp/long_int.tile"
generated "generated_long_int" "$tmp/long_int.tile"

# 100k nested loops (and their closing braces): no unbounded recursion.
awk 'BEGIN {
  print "kernel @deep(%x: view<f32>[64]) {"
  print "  parallel (%p) in (4) {"
  for (i = 0; i < 100000; i++) printf "serial %%i%d = 0 to 2 {\n", i
  for (i = 0; i < 100000; i++) print "}"
  print "  }"
  print "}"
}' >"$tmp/deep.tile"
generated "generated_deep_nesting" "$tmp/deep.tile"

# 100k unclosed '(' / '[' / '{'.
{
  printf 'kernel @k(%%x: view<f32>[64]) {\n  parallel (%%p) in (4) {\n'
  head -c 100000 /dev/zero | tr '\0' '{'
} >"$tmp/braces.tile"
generated "generated_open_braces" "$tmp/braces.tile"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

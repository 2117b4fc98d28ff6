#!/usr/bin/env bash
# The on-disk object cache across processes (docs/cache.md): two processes compiling the same
# kernel at once both succeed and leave one valid entry; a new process then compiles nothing
# (cache hit); a flipped byte in the entry is detected, removed and rebuilt;
# `kiln cache info|clear`; KILN_CACHE_DIR=off. Usage: bash cache.sh KILN_BIN SOURCE_DIR
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
kiln=$1
# shellcheck source=lib/harness.bash
source "$(dirname "$0")/lib/harness.bash"

export KILN_CACHE_DIR=$tmp/cache
att=(--kernel attention --shape 1,8,2,1,300,80,96 --mask causal)

# Two processes at once on an empty cache.
"$kiln" run "${att[@]}" --check bitexact >"$tmp/a.out" 2>"$tmp/a.err" &
pa=$!
"$kiln" run "${att[@]}" --check bitexact >"$tmp/b.out" 2>"$tmp/b.err" &
pb=$!
wait $pa
ra=$?
wait $pb
rb=$?
n=$(find "$KILN_CACHE_DIR" -type f | wc -l)
if [ $ra -eq 0 ] && [ $rb -eq 0 ] && [ "$n" -eq 1 ] && [ -s "$(find "$KILN_CACHE_DIR" -name '*.kc')" ]; then
  pass "two concurrent processes: both pass, one entry"
else
  fail "two concurrent processes" "exit $ra/$rb, $n files: $(cat "$tmp/a.err" "$tmp/b.err" | head -c 300)"
fi

# A new process compiles nothing.
run "$kiln" run "${att[@]}" --check bitexact --json
if [ $rc -eq 0 ] && python3 - "$tmp/out" <<'PY' 2>"$tmp/py"; then
import json, sys
j = json.load(open(sys.argv[1]))
assert j["pass"] is True
c = j["compile"]
assert c["cache"] == "hit", c
# No timing decides the verdict (the sanitizer build on a busy machine is slow): a hit reads
# the entry instead of compiling, and says how long the compile it replaced took.
assert c["saved_ms"] > 0, c
PY
  pass "a new process: cache hit (compiles nothing)"
else
  fail "a new process: cache hit" "exit $rc: $(cat "$tmp/py" "$tmp/err" | tail -c 300)"
fi
run "$kiln" run "${att[@]}"
expect "text verdict names the hit" 0 "compile [0-9.]+ ms, cache hit \([0-9.]+ ms saved\)"

# A flipped byte: detected, removed with a warning, rebuilt; the run still passes.
entry=$(find "$KILN_CACHE_DIR" -name '*.kc')
python3 -c "
import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x40; open(p, 'wb').write(b)" "$entry"
run "$kiln" run "${att[@]}" --check bitexact
expect "flipped byte: warned, rebuilt, still correct" 0 "cache miss" "cache entry .* is corrupted \(its digest does not match its contents\); removed, compiling again"
run "$kiln" run "${att[@]}" --check bitexact
expect "the rebuilt entry is a hit" 0 "cache hit"

run "$kiln" cache info
expect "cache info" 0 "entries +1"
run "$kiln" cache clear
expect "cache clear" 0 "removed 1 entry"
run "$kiln" cache info
expect "cache info after clear" 0 "entries +0"

KILN_CACHE_DIR=off run "$kiln" run "${att[@]}"
expect "KILN_CACHE_DIR=off: no cache" 0 "cache off"
KILN_CACHE_MAX_MB=lots run "$kiln" run "${att[@]}"
expect "bad KILN_CACHE_MAX_MB" 1 "" "KILN_CACHE_MAX_MB='lots' is not a size in MiB"
run "$kiln" cache frob
expect "cache: unknown action" 2 "" "frob"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]

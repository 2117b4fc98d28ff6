#!/usr/bin/env bash
# CLI tests of `kiln bench` and `kiln audit` on a tiny attention case (a few seconds): the
# general --arm form, the archive checked by sha256sum and by the audit (twice, same bytes),
# refusal of an existing folder, a tampered archive, usage errors.
# Usage: bash bench.sh KILN_BIN SOURCE_DIR
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

d=$tmp/run
run "$kiln" bench --kernel attention --shape 1,2,1,1,33,16,16 --arm a:max_unrolled_mma_terms=0 \
  --arm b:max_unrolled_mma_terms=8 --quick --out "$d"
expect "bench --kernel --arm --quick: the table" 0 '^\| case \| P \| R \| a µs \| b µs \| paired b/a \| range' ''
expect "bench: totals as planned" 0 'captures 2/2, visits 4/4, samples 12/12; compilations during replay: 0'
if (cd "$d" && sha256sum --quiet -c SHA256SUMS); then pass "sha256sum -c inside the archive"; else fail "sha256sum -c"; fi

run "$kiln" audit "$d"
expect "audit passes" 0 '"verdict": "pass"'
cp "$tmp/out" "$tmp/audit1"
run "$kiln" audit "$d"
if cmp -s "$tmp/audit1" "$tmp/out"; then pass "audit prints the same bytes twice"; else fail "audit is not deterministic"; fi

run "$kiln" bench --kernel attention --shape 1,2,1,1,33,16,16 --arm a: --arm b:full_packet=on --quick --out "$d"
expect "bench refuses an existing --out" 1 '' 'already exists'

cp -r "$d" "$tmp/bad"
printf 'x' | dd of="$tmp/bad/table.md" bs=1 seek=0 conv=notrunc status=none
run "$kiln" audit "$tmp/bad"
expect "audit fails after a one-byte change" 1 '"verdict": "fail"'

run "$kiln" bench --kernel attention --shape 1,2,1,1,33,16,16 --arm a: --out "$tmp/one"
expect "bench needs exactly two arms" 1 '' 'exactly two --arm'
run "$kiln" bench --kernel attention --shape 1,2,1,1,33,16,16 --arm a:nope=1 --arm b: --out "$tmp/nope"
expect "bench names an unknown knob" 1 '' 'nope'
run "$kiln" bench --preset no-such --out "$tmp/np"
expect "bench names the presets" 1 '' 'seed-mma-roll'
run "$kiln" bench --preset seed-mma-roll --arm a: --out "$tmp/mix"
expect "a preset takes no --arm" 1 '' 'takes no'
run "$kiln" bench --kernel attention --shape 1,2,1,1,33,16,16 --arm a: --arm b:
expect "bench needs --out" 2 '' 'out'
run "$kiln" bench "$src/examples/softmax.tile" --arm a: --arm b: --out "$tmp/file"
expect "bench refuses a .tile file by name" 2 '' "softmax.tile': bench times library kernels only"
run "$kiln" audit "$tmp/no-such-archive"
expect "audit of a missing folder fails" 1 '"verdict": "fail"'

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# The GPU record (docs/gpu/) cannot drift from today's codegen silently: three of its cases are
# captured again with scripts/gpu/capture.sh (an example, a split decode of two phases, and the
# same with the lanes in one thread's registers) and their PTX must have the SHA-256 that
# docs/gpu/archive/ptx.sha256 records for the PTX that ran on the H200, their manifests
# (parameters, launch geometry, the FNV-1a digests of the expected outputs) and kernel.tile the
# committed ones. A change to the lowering that alters them must come with a new GPU run (or a
# stated reason) and new digests.
# Usage: bash gpu_record.sh KILN_BIN SOURCE_DIR. Prints one line per check and "N passed, M failed".
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
kiln=$1
root=$2
# shellcheck source=lib/harness.bash
source "$(dirname "$0")/lib/harness.bash"
record=$root/docs/gpu/archive
cases=(example_softmax decode_split16 decode_split16_registers)

if bash "$root/scripts/gpu/capture.sh" "$kiln" "$tmp/a" "${cases[@]}" >"$tmp/log" 2>&1; then
  pass "capture.sh captures ${cases[*]}"
else
  fail "capture.sh: $(tail -3 "$tmp/log")"
fi
for c in "${cases[@]}"; do
  want=$(grep " $c/kernel.ptx\$" "$record/ptx.sha256" | cut -c1-64)
  got=$(sha256sum <"$tmp/a/$c/kernel.ptx" 2>/dev/null | cut -c1-64)
  if [[ -n "$want" && "$want" == "$got" ]]; then
    pass "$c: PTX digest is the recorded one"
  else
    fail "$c: PTX digest ${got:-missing}, the record says ${want:-nothing} (docs/gpu/archive/ptx.sha256)"
  fi
  for f in manifest.txt kernel.tile; do
    if cmp -s "$tmp/a/$c/$f" "$record/$c/$f"; then pass "$c: $f as recorded"; else fail "$c: $f differs from docs/gpu/archive/$c/$f"; fi
  done
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

#!/usr/bin/env bash
# The main job (`make run`): for every examples/*.tile, in sorted order, check it, print its
# canonical text and evaluate it in the interpreter in f64 and strict-f32 modes.
# Usage: scripts/run-examples.sh KILN_BIN
# Keeps going after a failing step; exits 1 if any step failed.
set -uo pipefail

if [ $# -ne 1 ]; then
  echo "usage: $0 KILN_BIN" >&2
  exit 2
fi
kiln=$1
case $kiln in */*) kiln=$(cd "$(dirname "$kiln")" && pwd)/$(basename "$kiln") ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1  # paths in the output are relative to the repository root
export LC_ALL=C       # sorted glob order independent of the locale

shopt -s nullglob
examples=(examples/*.tile)
if [ ${#examples[@]} -eq 0 ]; then
  echo "run-examples: no examples/*.tile found" >&2
  exit 1
fi

failures=()
step() {  # step LABEL CMD...: run one step under a header, remember a failure
  local label=$1
  shift
  echo "--- $label"
  if ! "$@"; then
    echo "!!! FAILED: $label" >&2
    failures+=("$label")
  fi
}

for file in "${examples[@]}"; do
  echo
  echo "=== $file"
  step "kiln check $file" "$kiln" check "$file"
  step "kiln print $file" "$kiln" print "$file"
  step "kiln eval $file --mode f64" "$kiln" eval "$file" --mode f64
  step "kiln eval $file --mode strict-f32" "$kiln" eval "$file" --mode strict-f32
done

echo
if [ ${#failures[@]} -eq 0 ]; then
  echo "run-examples: ${#examples[@]} examples, all steps passed"
  exit 0
fi
echo "run-examples: ${#failures[@]} step(s) failed:" >&2
printf '  %s\n' "${failures[@]}" >&2
exit 1

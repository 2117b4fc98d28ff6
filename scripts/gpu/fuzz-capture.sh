#!/usr/bin/env bash
# A GPU archive of random programs (docs/gpu.md, "Random programs on the GPU"): the programs of
# `kiln fuzz --seed SEED` under the knob points that campaign draws, each captured for target
# nvptx with `kiln gpu-capture` (its CPU run checked bit for bit against the interpreter). A
# program whose knobs allow reassociation or FMA (not bit-exact by definition), or that the
# planner refuses, is skipped and counted; a crash (any exit code but 0 and 1, or an "internal
# error") keeps the program in ARCHIVE.crashes/ and makes the script fail. Arguments after SEED
# go to `kiln fuzz` (e.g. --family block: programs of the GPU's block form, docs/fuzz.md). kiln-replay then checks every captured one on a GPU.
# Usage: scripts/gpu/fuzz-capture.sh [KILN] [ARCHIVE] [PROGRAMS] [SEED] [--set NAME=VALUE]...
#        (defaults: build/bin/kiln, gpu-fuzz-archive, 200, 1; the --set knobs are pinned as
#        `kiln fuzz --set` pins them)
set -euo pipefail
kiln=${1:-build/bin/kiln}
arch=${2:-gpu-fuzz-archive}
programs=${3:-200}
seed=${4:-1}
shift $(($# < 4 ? $# : 4))
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf "$arch"
"$kiln" fuzz --programs "$programs" --seed "$seed" "$@" --emit-programs "$work" >/dev/null
captured=0 skipped=0 crashed=0
for tile in "$work"/fuzz-*.tile; do
  name=$(basename "$tile" .tile)
  args=()
  input_seed=0
  while read -r flag value; do
    case $flag in
      --set) args+=(--set "$value") ;;
      --input-seed) input_seed=$value ;;
    esac
  done <"${tile%.tile}.knobs"
  rc=0
  "$kiln" gpu-capture "$tile" --archive "$arch" --case "$name" --seed "$input_seed" "${args[@]}" \
    >"$work/log" 2>&1 || rc=$?
  if [ "$rc" -eq 1 ] && grep -q "internal error" "$work/log"; then rc=70; fi  # a compiler bug, reported cleanly
  if [ "$rc" -eq 0 ]; then
    captured=$((captured + 1))
  elif [ "$rc" -eq 1 ]; then  # refused with a message (kiln's exit code 1): not bit-exact by definition, or no plan
    skipped=$((skipped + 1))
    echo "skipped $name: $(tail -n 1 "$work/log")"
  else  # a crash (a signal: 128 + N), an internal error or a usage error is a bug: keep the program and its knobs
    crashed=$((crashed + 1))
    mkdir -p "$arch.crashes"
    cp "$tile" "${tile%.tile}.knobs" "$arch.crashes/"
    cp "$work/log" "$arch.crashes/$name.log"
    echo "CRASHED $name (exit code $rc): kept in $arch.crashes/"
  fi
done
echo "captured $captured of $programs programs into $arch ($skipped skipped, $crashed crashed)"
[ "$crashed" -eq 0 ]

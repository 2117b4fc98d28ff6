#!/usr/bin/env bash
# The exhaustive check of the 16-bit conversions on the GPU (docs/ir.md, "16-bit views";
# docs/gpu.md, "16-bit views on the GPU"): an archive whose cases store every one of the 2^32 f32
# patterns into a view<f16> and a view<bf16> (32 cases of 2^27, scripts/gpu/storage-sweep/
# stores.tile) and load every 16-bit pattern of both types (loads.tile). Each case's CPU run is
# checked against the interpreter as any capture's; its outputs travel as digests only (no
# bytes: 2 GiB), which the replay compares bit for bit, NaN payloads included. About 30 minutes
# and 12 GiB of memory here; the archive is small (inputs are made again on the device).
# Usage: scripts/gpu/capture-storage-sweep.sh [KILN] [ARCHIVE]   (defaults: build/bin/kiln, gpu-sweep)
# Replay: kiln-replay ARCHIVE --visits 1 (scripts/gpu/run-on-device.sh replays it when present).
set -euo pipefail
kiln=$(realpath "${1:-build/bin/kiln}")
arch=$(realpath -m "${2:-gpu-sweep}")
cd "$(dirname "$0")/storage-sweep"
rm -rf "$arch"
"$kiln" gpu-capture --archive "$arch" --case loads --input-bits hin=0 --input-bits bin=0 --digest-only loads.tile
for i in $(seq 0 31); do
  base=$(printf '%08x' $((i << 27)))
  "$kiln" gpu-capture --archive "$arch" --case "stores_$base" --input-bits "x=$base" --digest-only stores.tile
done
echo "archive: $arch ($(du -sh "$arch" | cut -f1))"

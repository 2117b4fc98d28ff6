#!/usr/bin/env bash
# What runs on the GPU machine (cwd: the repo root; $OUT: the folder whose files come back).
# Builds kiln-replay with g++ alone, replays the archive (bit-exact check, then the timed set),
# compares every case torch can compute (attention with SDPA, gemm, the row kernels, the
# examples of them: scripts/gpu/torch_peers.py) with torch in FP32, and merges torch's
# acceptance record into $OUT/gpu-acceptance.json. Leaves in $OUT: replay.json,
# gpu-acceptance.json, replay.txt (the replay's output), peers-gpu.json, torch.txt,
# exit-codes.txt.
# Keeps going after a replay mismatch; exits with the replay's exit code (0 all bit-exact,
# 1 a mismatch or error, 2 bad archive or build failure, 77 no GPU).
# Then, when SWEEP is there (scripts/gpu/capture-storage-sweep.sh's archive), replays it once
# (no dump: its outputs are GiBs, compared by digest) into $OUT/sweep/ and prints sweep.txt.
# Usage: scripts/gpu/run-on-device.sh [ARCH [SWEEP]]   (defaults gpu-archive, gpu-sweep)
set -u
arch=${1:-gpu-archive}
sweep=${2:-gpu-sweep}
out=${OUT:?OUT must name the folder whose files come back}
mkdir -p "$out"

echo "== nvidia-smi -L"
nvidia-smi -L || echo "(nvidia-smi failed: $?)"
echo "== g++ --version"
g++ --version | head -n 1

echo "== build kiln-replay"
if ! g++ -O2 -std=c++17 -I src tools/kiln-replay/*.cpp src/gpu/cuda_driver.cpp -ldl -o /tmp/kiln-replay; then
  echo "replay=2 (build failed)" >"$out/exit-codes.txt"
  exit 2
fi

echo "== kiln-replay $arch"
rm -rf /tmp/kiln-dump
/tmp/kiln-replay "$arch" --out "$out" --dump /tmp/kiln-dump 2>&1 | tee "$out/replay.txt"
replay_rc=${PIPESTATUS[0]}
echo "replay=$replay_rc" >"$out/exit-codes.txt"
echo "kiln-replay exit code: $replay_rc"
if [ ! -f "$out/replay.json" ]; then
  echo "no replay.json: nothing to compare with torch"
  exit "$replay_rc"
fi

if [ -d "$sweep" ]; then
  echo "== kiln-replay $sweep (the 16-bit conversions on every input)"
  mkdir -p "$out/sweep"
  /tmp/kiln-replay "$sweep" --out "$out/sweep" --visits 1 --min-visit-ms 1 --max-reps 1 2>&1 | tee "$out/sweep.txt"
  echo "sweep=${PIPESTATUS[0]}" >>"$out/exit-codes.txt"
fi

echo "== torch"
python3 scripts/gpu/torch_peers.py --dump /tmp/kiln-dump --archive "$arch" --replay "$out/replay.json" \
  --out "$out/peers-gpu.json" 2>&1 | tee "$out/torch.txt"
torch_rc=${PIPESTATUS[0]}
echo "torch=$torch_rc" >>"$out/exit-codes.txt"
echo "torch_peers.py exit code: $torch_rc"

echo "== merge the torch set into gpu-acceptance.json"
python3 - "$out/gpu-acceptance.json" "$out/peers-gpu.json" <<'PY' || echo "(merge failed)"
import json, sys
acceptance_path, peers_path = sys.argv[1], sys.argv[2]
with open(acceptance_path) as f:
    acceptance = json.load(f)
with open(peers_path) as f:
    record = json.load(f).get("acceptance")
if record:
    acceptance["sets"] = [s for s in acceptance["sets"] if s.get("name") != record["name"]] + [record]
    with open(acceptance_path, "w") as f:
        json.dump(acceptance, f, indent=2)
        f.write("\n")
    print("merged set %r (accepted: %s)" % (record["name"], record["accepted"]))
else:
    print("no torch acceptance record to merge")
PY

exit "$replay_rc"

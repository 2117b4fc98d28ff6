# Sourced by the GPU experiments' capture scripts (docs/gpu/block/run-*/exp-cases.sh) with their
# arguments KILN ARCH: strict mode, the repository root as the working directory, ARCH emptied,
# and att NAME SHAPE MASK [options], a library attention captured into ARCH with its outputs as
# digests and its FLOPs those of the scores and the values (half of them when causal); and
# sm NAME SHAPE [options], the library softmax likewise (no FLOPs: it is timed by its bytes).
set -euo pipefail
kiln=$(realpath "$1")
arch=$(realpath -m "$2")
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
rm -rf "$arch"
att() {
  local name=$1 shape=$2 mask=$3
  shift 3
  IFS=, read -r b hq hkv q k d dv <<<"$shape"
  local f=$((2 * b * hq * q * k * (d + dv)))
  [ "$mask" = causal ] && f=$((f / 2))
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel attention --shape "$shape" --mask "$mask" \
    --flops $f --digest-only "$@"
}
sm() {
  local name=$1 shape=$2
  shift 2
  "$kiln" gpu-capture --archive "$arch" --case "$name" --kernel softmax --shape "$shape" --flops 0 --digest-only "$@"
}

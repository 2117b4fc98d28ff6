#!/usr/bin/env bash
# The SHA-256 of every object and PTX Kiln makes for a fixed set of requests, one line each
# ("DIGEST  REQUEST"), so that a behaviour-preserving change to the planner or codegen can be
# shown byte-identical: run before and after, then `diff` the two outputs. The set: every
# example (CPU object at isa=avx2 and isa=avx512, and PTX), every library kernel at its peers
# shape (or a fixed shape), and the first N programs of `kiln fuzz --seed 1` under their knob
# points (default 200; another seed with SEED). Compiles only, so it runs on any x86-64 host.
# Usage: scripts/codegen-digests.sh [KILN_BIN] [N] [SEED] > digests.txt
set -euo pipefail
kiln=${1:-build/bin/kiln}
programs=${2:-200}
seed=${3:-1}
root=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export KILN_CACHE_DIR="$tmp/cache"  # never a cached object: every digest is of a fresh compile

digest() {  # REQUEST... : compiles to $tmp/o and prints its digest and the request
  local label=$1
  shift
  if "$kiln" compile "$@" --out "$tmp/o" 2>"$tmp/err"; then
    echo "$(sha256sum <"$tmp/o" | cut -c1-64)  $label"
  else
    echo "error: $(head -c 200 "$tmp/err" | tr '\n' ' ')  $label"
  fi
}

for f in "$root"/examples/*.tile; do
  name=${f#"$root"/}
  for isa in avx2 avx512; do digest "$name isa=$isa obj" "$f" --set isa=$isa --emit obj; done
  digest "$name ptx" "$f" --emit ptx
done

library=(
  "attention 1,8,2,1,2053,80,96" "attention 1,8,8,1,2048,64,64" "attention 1,4,2,32,65,32,32"
  "attention 1,6,2,1,2053,80,96" "attention 1,32,8,1,4096,128,128" "attention 1,32,8,512,512,128,128"
  "gemm 512,512,512" "gemm 300,200,129" "softmax 33,5000" "rmsnorm 37,4096" "layernorm 19,3000"
  "swiglu 64,1000" "rope 16,8,64" "gelu 10000"
)
for req in "${library[@]}"; do
  read -r kernel shape <<<"$req"
  for isa in avx2 avx512; do digest "$kernel $shape isa=$isa obj" --kernel "$kernel" --shape "$shape" --set isa=$isa --emit obj; done
  digest "$kernel $shape ptx" --kernel "$kernel" --shape "$shape" --emit ptx
done

"$kiln" fuzz --seed "$seed" --programs "$programs" --emit-programs "$tmp/fuzz" >/dev/null
for ((n = 0; n < programs; n++)); do
  t="$tmp/fuzz/fuzz-$seed-$n.tile"
  mapfile -t sets < <(grep -- '^--set ' "${t%.tile}.knobs" | sed 's/^--set //')
  args=()
  for s in "${sets[@]}"; do args+=(--set "$s"); done
  digest "fuzz --seed $seed program $n ${sets[*]}" "$t" "${args[@]}" --emit obj
done

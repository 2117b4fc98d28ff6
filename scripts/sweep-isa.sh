#!/usr/bin/env bash
# The bits across the CPU backends (not part of ctest: about a minute on 2 cores). For every example
# kernel and every library kernel (a few shapes each, runtime lengths included) and every point of
#   isa in {avx2, avx512} x packet_width in {auto, 8, 16} x threads in {1, 2}
# runs `kiln run --check bitexact` (the strict-FP32 interpreter's bits) and writes every output
# as .npy; then checks that each kernel's outputs have one digest across all its points. On a CPU
# without AVX-512 the avx512 points are compiled only (`kiln compile`) and listed as not run.
#
#   scripts/sweep-isa.sh [KILN_BIN]          (default build/bin/kiln)
#
# Prints one line per failing point, one per kernel, and a summary; exits 1 if any point failed.
set -uo pipefail
kiln=${1:-build/bin/kiln}
if [ ! -x "$kiln" ]; then
  echo "sweep-isa: no kiln binary at $kiln (make build first)" >&2
  exit 2
fi
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-off}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
has512=0
grep -qw avx512f /proc/cpuinfo && grep -qw avx512bw /proc/cpuinfo && has512=1
[ -n "${KILN_HOST_WITHOUT_AVX512:-}" ] && has512=0  # the tests' switch (src/host/isa.h)

# kernel specs: what follows `kiln run` (a file, or --kernel NAME --shape S [options])
specs=()
for f in examples/*.tile; do specs+=("$f"); done
specs+=(
  "--kernel attention --shape 1,8,2,1,2053,80,96 --mask none"
  "--kernel attention --shape 1,8,8,1,2048,64,64 --mask none"
  "--kernel attention --shape 1,4,2,32,65,32,32"
  "--kernel attention --shape 2,12,4,77,300,64,64"
  "--kernel attention --shape 1,8,2,1,1024,64,64 --kv-cache dense"
  "--kernel attention --shape 3,8,2,40,512,64,64 --kv-cache paged --page 64 --varlen"
  "--kernel gemm --shape 64,100,77"
  "--kernel gemm --shape 33,70,129 --trans-b"
  "--kernel softmax --shape 33,500"
  "--kernel rmsnorm --shape 37,300"
  "--kernel layernorm --shape 19,300"
  "--kernel swiglu --shape 7,100"
  "--kernel rope --shape 5,4,64"
  "--kernel gelu --shape 1000"
  "--kernel attention --shape 1,8,2,1,2053,80,96 --mask none --kv-dtype bf16"
  "--kernel attention --shape 1,4,2,32,65,32,32 --kv-dtype f16"
  "--kernel attention --shape 3,8,2,40,512,64,64 --kv-cache paged --page 64 --varlen --kv-dtype bf16"
  "--kernel gemm --shape 33,70,129 --trans-b --b-dtype bf16"
  "--kernel gemm --shape 5,300,77 --a-dtype f16 --b-dtype f16 --runtime-rows"
  "--kernel rmsnorm --shape 37,300 --dtype bf16"
  "--kernel swiglu --shape 7,100 --dtype f16 --runtime-rows"
  "--kernel rope --shape 5,4,64 --dtype bf16"
)
pass=0 fail=0 notrun=0 kernels_bad=0
for spec in "${specs[@]}"; do
  # the spec's output views, from one default run
  # shellcheck disable=SC2086
  names=$("$kiln" run $spec --check bitexact --json 2>/dev/null |
    /usr/bin/python3 -c 'import json,sys; print(" ".join(o["name"] for o in json.load(sys.stdin)["outputs"]))')
  if [ -z "$names" ]; then
    echo "FAIL  $spec: the default run failed"; fail=$((fail + 1)); kernels_bad=$((kernels_bad + 1)); continue
  fi
  digests=()
  n=0
  for isa in avx2 avx512; do for w in auto 8 16; do for th in 1 2; do
    pt="--set isa=$isa --set packet_width=$w --threads $th"
    n=$((n + 1))
    if [ "$isa" = avx512 ] && [ $has512 -eq 0 ]; then
      # shellcheck disable=SC2086
      if "$kiln" compile $spec $pt --emit obj --out "$tmp/x.o" > /dev/null 2>&1; then
        notrun=$((notrun + 1))
      else
        echo "FAIL  $spec  $pt: does not compile"; fail=$((fail + 1))
      fi
      continue
    fi
    outs=()
    for o in $names; do outs+=("--output" "$o=$tmp/$n.$o.npy"); done
    # shellcheck disable=SC2086
    if out=$("$kiln" run $spec --check bitexact $pt "${outs[@]}" 2>&1); then
      pass=$((pass + 1))
      digests+=("$(cat "$tmp/$n".*.npy | sha256sum | cut -c1-16)")
    else
      fail=$((fail + 1))
      echo "FAIL  $spec  $pt"
      echo "$out" | tail -3 | sed 's/^/      /'
    fi
  done; done; done
  distinct=$(printf '%s\n' "${digests[@]}" | sort -u | wc -l)
  if [ "$distinct" -gt 1 ]; then
    echo "FAIL  $spec: $distinct different output digests across the grid"
    kernels_bad=$((kernels_bad + 1))
  else
    echo "ok    $spec: ${#digests[@]} points, outputs ${digests[0]:-none}"
  fi
done
echo "sweep-isa: $pass points bit-exact, $fail failed, $notrun compiled but not run (no AVX-512 here); $kernels_bad kernels with differing outputs"
[ $fail -eq 0 ] && [ $kernels_bad -eq 0 ]

#!/usr/bin/env bash
# ISAs and hosts: every `isa` compiles on any host (objects, assembly, reports: nothing runs), and
# running code of an ISA the CPU lacks is refused with an error naming the knob and the CPU.
# `make test` runs this twice: as is, and with KILN_HOST_WITHOUT_AVX512=1 (a CPU without AVX-512).
# Usage: bash isa.sh KILN_BIN SOURCE_DIR. Prints one line per case and "N passed, M failed".
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
kiln=$1
# shellcheck source=lib/harness.bash
source "$(dirname "$0")/lib/harness.bash"

no_avx512=0
if [ -n "${KILN_HOST_WITHOUT_AVX512:-}" ] && [ "$KILN_HOST_WITHOUT_AVX512" != 0 ]; then no_avx512=1; fi
if ! grep -qw avx512f /proc/cpuinfo; then no_avx512=1; fi

for isa in avx2 avx512 native; do
  run "$kiln" compile --kernel rmsnorm --shape 64,300 --set isa=$isa --emit obj --out "$tmp/rms-$isa.o"
  expect "compile --emit obj, isa=$isa" 0
  if [ "$(head -c 4 "$tmp/rms-$isa.o" | od -An -c | tr -d ' ')" = '177ELF' ]; then
    pass "isa=$isa: an ELF object"
  else
    fail "isa=$isa: an ELF object"
  fi
  run "$kiln" compile --kernel attention --shape 1,8,2,1,300,32,32 --set isa=$isa --emit asm
  expect "compile --emit asm, isa=$isa" 0
done
# AVX-512 code uses zmm registers, AVX2 code never does.
run "$kiln" compile --kernel gemm --shape 64,64,64 --set isa=avx512 --emit asm
expect "isa=avx512 assembly uses zmm registers" 0 'zmm'
run "$kiln" compile --kernel gemm --shape 64,64,64 --set isa=avx2 --emit asm
if grep -q zmm "$tmp/out"; then fail "isa=avx2 assembly has no zmm register"; else pass "isa=avx2 assembly has no zmm register"; fi
# The same request, compiled twice on this host, is the same object (the digest needs no CPU).
run "$kiln" compile --kernel rmsnorm --shape 64,300 --set isa=avx512 --emit obj --out "$tmp/again.o"
if cmp -s "$tmp/rms-avx512.o" "$tmp/again.o"; then pass "isa=avx512 object is reproducible"; else fail "isa=avx512 object is reproducible"; fi

# Running: avx2 everywhere (an x86-64-v3 CPU is the floor Kiln runs on); avx512 only with AVX-512.
run "$kiln" run --kernel rmsnorm --shape 8,300 --set isa=avx2 --check bitexact
expect "run isa=avx2" 0
run "$kiln" run --kernel rmsnorm --shape 8,300 --set isa=avx512 --check bitexact
if [ "$no_avx512" = 1 ]; then
  expect "run isa=avx512 without AVX-512 is refused, naming the knob and the CPU" 1 '' "isa=avx512: this host's CPU \\(.+\\) has no AVX-512"
  # native then means this CPU without AVX-512: AVX2-wide code, no zmm.
  run "$kiln" compile --kernel gemm --shape 64,64,64 --emit asm
  if grep -q zmm "$tmp/out"; then fail "isa=native has no zmm here"; else pass "isa=native has no zmm here"; fi
else
  expect "run isa=avx512 with AVX-512" 0
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

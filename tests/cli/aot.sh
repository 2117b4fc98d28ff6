#!/usr/bin/env bash
# Objects and C headers for linking into a program of one's own (`kiln compile --emit obj --out
# NAME.o --header NAME.h`, docs/api.md): a kernel with scalar parameters linked into a C program
# and a C++ one, two headers in one translation unit, a default symbol prefix from the kernel's
# name, and the errors (--header without --emit obj or --out, a prefix that is not a C
# identifier, --symbol-prefix without --header). tests/install/embed_aot.sh runs the same path
# from an installed Kiln, with a two-phase kernel compared bit for bit against `kiln run`.
# Usage: bash aot.sh KILN_BIN SOURCE_DIR
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
kiln=$1
src=$2
# shellcheck source=lib/harness.bash
source "$(dirname "$0")/lib/harness.bash"
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-off}
cd "$tmp" || exit 2

cat > axpb.tile <<'TILE'
kernel @axpb(%x: view<f32>[40], %y: view<f32>[40], %a: f32, %n: i64) {
  parallel (%p) in (2) {
    %cst = const 32 : i64
    %o = mul %p, %cst : i64
    %x_t = load %x[%o] as [e:32] fill 0 : f32[e:32]
    %t = mul %x_t, %a : f32[e:32]
    %nf = cast %n : f32
    %u = add %t, %nf : f32[e:32]
    store %u, %y[%o] as [e:32]
  }
}
TILE
run "$kiln" compile axpb.tile --emit obj --out axpb.o --header axpb.h
expect "default prefix from the kernel's name" 0 "symbols axpb_\*"
cat > main.c <<'C'
#include <stdio.h>
#include "axpb.h"
#include "rms.h"
int main(void) {
  float x[AXPB_X_ELEMENTS], y[AXPB_Y_ELEMENTS];
  for (int i = 0; i < AXPB_X_ELEMENTS; ++i) x[i] = (float)i - 20.0f;
  if (axpb_run(x, y, 2.5f, 3) != 0) return 1;
  for (int i = 0; i < AXPB_Y_ELEMENTS; ++i)
    if (y[i] != x[i] * 2.5f + 3.0f) { printf("y[%d] = %g\n", i, y[i]); return 1; }
  printf("axpb ok, %lld blocks, abi %lld\n", (long long)axpb_num_blocks, (long long)axpb_abi_version);
  return 0;
}
C
run "$kiln" compile --kernel rmsnorm --shape 8,64 --emit obj --out rms.o --header rms.h --symbol-prefix rms_
expect "library kernel with --symbol-prefix" 0 "symbols rms_\*"
run cc -std=c99 -Wall -Wextra -Werror main.c axpb.o rms.o -o prog
expect "C program with two headers links" 0
run ./prog
expect "C program runs the kernel with scalar arguments" 0 "axpb ok, [0-9]+ blocks, abi 2"
cp main.c main.cpp
run c++ -std=c++17 -Wall -Wextra -Werror main.cpp axpb.o rms.o -o prog_cpp
expect "the header is valid C++" 0
run ./prog_cpp
expect "C++ program runs the kernel" 0 "axpb ok"
run grep -c "rms_run\|RMS_X_SHAPE { 8, 64 }" rms.h
expect "header declares run and shapes" 0 "^[2-9]"
run "$kiln" compile "$src/tests/ir/runtime_extents.tile" --emit obj --out rows.o --header rows.h
expect "a kernel with runtime extents compiles with a header" 0
run grep -c "ROWS_N_MAX 64\|ROWS_LENS_MIN 0\|ROWS_LENS_MAX 40\|^void rows_phase_blocks" rows.h
expect "header states the ranges and the phase-blocks entry" 0 "^4$"

run "$kiln" compile axpb.tile --emit report --header x.h
expect "--header needs --emit obj" 1 "" "--header needs --emit obj and --out"
run "$kiln" compile axpb.tile --emit obj --header x.h
expect "--header needs --out" 1 "" "--header needs --emit obj and --out"
run "$kiln" compile axpb.tile --emit obj --out a.o --header a.h --symbol-prefix 9lives
expect "prefix must be a C identifier" 1 "" "symbol prefix '9lives' is not a C identifier"
run "$kiln" compile axpb.tile --emit obj --out a.o --symbol-prefix p_
expect "--symbol-prefix needs --header" 1 "" "--symbol-prefix needs --header"
test ! -e a.o && pass "no object written on error" || fail "no object written on error"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

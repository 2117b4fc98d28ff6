#!/usr/bin/env bash
# Kiln as a user outside this source tree gets it (docs/api.md):
#  1. `cmake --install BUILD --prefix P` into a temporary prefix;
#  2. `import kiln` from P's site-packages (not the build tree's): a library kernel on NumPy arrays;
#  3. examples/embed, copied out of the tree, configured with find_package(Kiln) against P only,
#     built and run (DSL kernel vs its own loop, errors as values, a library kernel from two
#     threads and at two thread counts);
#  4. examples/aot: P/bin/kiln compiles two kernels to objects + C headers, a plain C program
#     links them (no Kiln library) and runs; the attention output it wrote is compared bit for bit
#     with `kiln run --input ... --output ...` of the same kernel (NumPy from Debian).
# Usage: embed_aot.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
step() { echo "--- $*"; }

step "cmake --install $build --prefix $tmp/prefix"
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log"
for f in include/kiln/kiln.h include/kiln/kernel.h include/kiln/result.h include/kiln/dsl.h \
         lib/cmake/Kiln/KilnConfig.cmake lib/cmake/Kiln/KilnConfigVersion.cmake bin/kiln; do
  test -e "$tmp/prefix/$f" || { echo "FAIL: the install has no $f"; cat "$tmp/install.log"; exit 1; }
done
ls "$tmp/prefix"/lib*/libkiln.so > /dev/null || { echo "FAIL: the install has no libkiln.so"; exit 1; }
# Nothing installed may point back into the source or build tree.
if grep -rlI -e "$src" -e "$build" "$tmp/prefix/include" "$tmp/prefix"/lib*/cmake; then
  echo "FAIL: installed files name the source or build tree"; exit 1
fi
# The public headers include nothing internal.
if grep -h '#include "' "$tmp/prefix/include/kiln/"*.h | grep -v '"kiln/'; then
  echo "FAIL: a public header includes an internal one"; exit 1
fi

step "import kiln from the installed prefix (its RPATH finds the installed libkiln.so)"
site=$(ls -d "$tmp/prefix"/lib*/python3*/site-packages 2>/dev/null | head -1)
test -n "$site" && test -e "$site/kiln/__init__.py" || { echo "FAIL: the install has no Python package kiln"; exit 1; }
# (an ASan build's module needs the sanitizer runtime preloaded into the uninstrumented python)
preload=""
deps=$(ldd "$site"/kiln/_kiln*.so)  # (not piped into grep -q: with pipefail, ldd's SIGPIPE would fail the test)
if [[ $deps == *libasan* ]]; then
  preload="$(c++ -print-file-name=libasan.so):$(c++ -print-file-name=libubsan.so)"
fi
env PYTHONPATH="$site" PYTHONDONTWRITEBYTECODE=1 LD_PRELOAD="$preload" ASAN_OPTIONS=detect_leaks=0 \
  /usr/bin/python3 - "$tmp/prefix" <<'PY'
import sys, numpy as np, kiln
prefix = sys.argv[1]
assert kiln.__file__.startswith(prefix), kiln.__file__
libs = [l.split()[-1] for l in open("/proc/self/maps") if "libkiln.so" in l]
assert libs and all(l.startswith(prefix) for l in libs), libs
k = kiln.library("softmax", shape=(3, 10))
x = np.arange(30, dtype=np.float32).reshape(3, 10)
y = np.empty_like(x)
k(x, y)
assert kiln.check(k, x, y), "bits differ from the interpreter"
print("import kiln from", kiln.__file__, "with", libs[0])
PY

step "examples/embed against the installed package"
cp -r "$src/examples/embed" "$tmp/embed"
rm -rf "$tmp/embed/build"
cmake -S "$tmp/embed" -B "$tmp/embed/build" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$tmp/prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON > "$tmp/embed-configure.log" ||
  { cat "$tmp/embed-configure.log"; exit 1; }
cmake --build "$tmp/embed/build" > "$tmp/embed-build.log" 2>&1 || { cat "$tmp/embed-build.log"; exit 1; }
"$tmp/embed/build/embed"

step "examples/aot: objects and C headers from the installed kiln, linked by a C program"
kiln="$tmp/prefix/bin/kiln"
cp -r "$src/examples/aot" "$tmp/aot"
cd "$tmp/aot"
attn_shape=1,4,2,1,600,64,64
"$kiln" compile --kernel rmsnorm --shape 64,300 --eps 1e-5 --emit obj --out rms.o --header rms.h --symbol-prefix rms_
"$kiln" compile --kernel attention --shape $attn_shape --mask none --split 2 --emit obj --out attn.o \
  --header attn.h --symbol-prefix attn_
cc -std=c99 -Wall -Wextra -Werror -O2 main.c rms.o attn.o -lm -o aot
mkdir out
./aot out
"$kiln" run --kernel attention --shape $attn_shape --mask none --split 2 --check bitexact \
  --input q=out/q.npy --input k=out/k.npy --input v=out/v.npy --output o=out/o_jit.npy > /dev/null
/usr/bin/python3 - out <<'PY'
import sys, numpy as np
d = sys.argv[1]
a, b = np.load(f"{d}/o.npy"), np.load(f"{d}/o_jit.npy")
assert a.dtype == np.float32 and a.shape == b.shape, (a.dtype, a.shape, b.shape)
diff = int(np.count_nonzero(a.view(np.uint32) != b.view(np.uint32)))
print(f"AOT object vs kiln run: {a.size} floats, {diff} differing bits patterns")
sys.exit(1 if diff else 0)
PY
echo "PASS"

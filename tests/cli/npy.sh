#!/usr/bin/env bash
# Your data in and out of `kiln run` (docs/cli.md, "Your data"): NumPy writes q, k, v; kiln
# runs the library attention on them and writes o.npy; NumPy reads it back and compares it
# with its own attention in float64. Bad .npy files (wrong dtype, wrong shape, truncated, not an
# .npy, Fortran order) and bad names are errors naming the parameter and the problem, exit 1.
# Needs Debian's python3-numpy (scripts/bootstrap.sh installs it) under /usr/bin/python3.
# Usage: bash npy.sh KILN_BIN SOURCE_DIR
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
kiln=$1
# shellcheck source=lib/harness.bash
source "$(dirname "$0")/lib/harness.bash"
py=/usr/bin/python3
export KILN_CACHE_DIR=${KILN_CACHE_DIR:-off}

if ! "$py" -c "import numpy" 2>"$tmp/py"; then
  fail "numpy importable by $py" "$(tail -1 "$tmp/py"); scripts/bootstrap.sh installs python3-numpy"
  echo "$passed passed, $failed failed"
  exit 1
fi

cd "$tmp" || exit 2
"$py" - <<'PY'
import numpy as np
rng = np.random.default_rng(7)
q = rng.standard_normal((2, 8, 5, 32), dtype=np.float32)
k = rng.standard_normal((2, 2, 301, 32), dtype=np.float32)
v = rng.standard_normal((2, 2, 301, 24), dtype=np.float32)
for name, a in (("q", q), ("k", k), ("v", v)):
    np.save(name + ".npy", a)
np.save("f64.npy", q.astype(np.float64))
np.save("i64.npy", q.astype(np.int64))
np.save("short.npy", q[:, :, :4])
np.save("fortran.npy", np.asfortranarray(q))
open("trunc.npy", "wb").write(open("q.npy", "rb").read()[:300])
open("text.npy", "w").write("q = 1, 2, 3\n")
PY

shape=(--kernel attention --shape 2,8,2,5,301,32,24)
for mask in causal none; do
  run "$kiln" run "${shape[@]}" --mask $mask --input q=q.npy --input k=k.npy --input v=v.npy --output o=o_$mask.npy
  expect "run on NumPy inputs ($mask)" 0 "check f64: PASS"
  if "$py" - $mask <<'PY' 2>"$tmp/py"; then
import sys
import numpy as np
causal = sys.argv[1] == "causal"
q, k, v = (np.load(n + ".npy").astype(np.float64) for n in "qkv")
o = np.load("o_%s.npy" % sys.argv[1])
assert o.dtype == np.float32 and o.shape == (2, 8, 5, 24), (o.dtype, o.shape)
B, Hq, Q, D = q.shape
Hkv, K = k.shape[1], k.shape[2]
scale = float(np.float32(1 / np.sqrt(D)))
ref = np.zeros(o.shape)
for b in range(B):
    for h in range(Hq):
        g = h // (Hq // Hkv)
        s = q[b, h] @ k[b, g].T * scale
        if causal:
            s[np.arange(K)[None, :] > np.arange(Q)[:, None] + K - Q] = -np.inf
        p = np.exp(s - s.max(axis=1, keepdims=True))
        ref[b, h] = (p / p.sum(axis=1, keepdims=True)) @ v[b, g]
err = np.abs(o - ref)
assert np.all(err <= 5e-5 + 5e-5 * np.abs(ref)), err.max()
PY
    pass "NumPy reads o.npy ($mask) and it matches NumPy's attention"
  else
    fail "o.npy ($mask) matches NumPy" "$(tail -2 "$tmp/py")"
  fi
done

# kiln eval on the same data: the strict-f32 interpreter's o.npy equals the compiled code's bytes.
run "$kiln" compile "${shape[@]}" --mask causal --emit ir -o att.tile
run "$kiln" eval att.tile --mode strict-f32 --input q=q.npy --input k=k.npy --input v=v.npy --output o=o_eval.npy
expect "eval on NumPy inputs" 0 '"mode": "strict-f32"'
if "$py" -c "import numpy as np, sys; sys.exit(0 if np.load('o_eval.npy').tobytes() == np.load('o_causal.npy').tobytes() else 1)"; then
  pass "eval's o.npy (interpreter) has the native run's bytes"
else
  fail "eval's o.npy (interpreter) has the native run's bytes"
fi
run "$kiln" eval att.tile --input q=short.npy
expect "eval: wrong shape" 1 "" "kiln eval: error: --input q=short.npy: %q is view<f32>"

# The same data bitexact against the interpreter, and the split run on it.
run "$kiln" run "${shape[@]}" --input q=q.npy --input k=k.npy --input v=v.npy --check bitexact --split 3
expect "bitexact on NumPy inputs" 0 "check bitexact: PASS"

bad() {  # bad NAME SPEC TEXT
  run "$kiln" run "${shape[@]}" --input "$2" --input k=k.npy --input v=v.npy
  expect "$1" 1 "" "$3"
}
bad "wrong dtype (float64)" q=f64.npy "--input q=f64.npy: dtype '<f8' is not supported"
bad "wrong dtype (int64 for a view)" q=i64.npy "--input q=i64.npy: %q is view<f32>\[2, 8, 5, 32\] but the file holds int64 data"
bad "wrong shape" q=short.npy "--input q=short.npy: %q is view<f32>\[2, 8, 5, 32\] \(shape \(2, 8, 5, 32\)\) but the file holds float32 \(2, 8, 4, 32\)"
bad "truncated" q=trunc.npy "--input q=trunc.npy: truncated: the shape \(2, 8, 5, 32\) needs 10240 bytes of data"
bad "not an npy" q=text.npy "--input q=text.npy: not an .npy file"
bad "Fortran order" q=fortran.npy "--input q=fortran.npy: the array is in Fortran order"
bad "missing file" q=nope.npy "--input q=nope.npy: cannot read 'nope.npy'"
bad "unknown parameter" x=q.npy "--input x=q.npy: the kernel has no parameter %x \(parameters: %q %k %v %o\)"
bad "no NAME=FILE" q.npy "--input expects NAME=FILE.npy, got 'q.npy'"
run "$kiln" run "${shape[@]}" --output q=out.npy
expect "output that is an input" 1 "" "--output q=out.npy: %q is not an output of the kernel \(%o\)"
run "$kiln" run "${shape[@]}" --output o=/nonexistent/dir/o.npy
expect "unwritable output" 1 "" "--output o=/nonexistent/dir/o.npy: cannot write"

# Integer views (docs/ir.md, "Integer views"): int32 lengths and an int64 table in, int32 and
# int64 outputs back, bitexact against the interpreter; the wrong integer type is refused.
iv=$2/tests/ir/integer_views.tile
"$py" - <<'PY'
import numpy as np
np.save("lens.npy", np.array([0, 1, 16, 17, 31, 32, 40, 5], dtype=np.int32))
np.save("lens64.npy", np.array([0, 1, 16, 17, 31, 32, 40, 5], dtype=np.int64))
np.save("rows.npy", np.array([7, 6, 5, 4, 3, 2, 1, 0], dtype=np.int64))
PY
run "$kiln" run "$iv" --input lens=lens.npy --input rows=rows.npy --check bitexact --output o32=o32.npy \
  --output o64=o64.npy
expect "integer views from NumPy, bitexact" 0 "check bitexact: PASS"
if "$py" - <<'PY' 2>"$tmp/py"; then
import numpy as np
o32, o64 = np.load("o32.npy"), np.load("o64.npy")
assert o32.dtype == np.int32 and o64.dtype == np.int64, (o32.dtype, o64.dtype)
lens = np.load("lens.npy").astype(np.int64)
want = np.arange(16, dtype=np.int64)[None, :] * 1000000007 + lens[:, None]
assert (o64 == want).all() and (o32 == want.astype(np.int32)).all()
PY
  pass "NumPy reads the int32 and int64 outputs and they are the kernel's definition"
else
  fail "integer outputs" "$(tail -2 "$tmp/py")"
fi
run "$kiln" run "$iv" --input lens=lens64.npy
expect "int64 data for a view<i32>" 1 "" "--input lens=lens64.npy: %lens is view<i32>\[8\] but the file holds int64 data; a view<i32> takes int32"
run "$kiln" run "$iv" --input rows=lens.npy
expect "int32 data for a view<i64>" 1 "" "a view<i64> takes int64"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]

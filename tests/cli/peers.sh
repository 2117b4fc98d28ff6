#!/usr/bin/env bash
# Smoke test of `kiln peers` on a tiny shape (the real run takes minutes; see docs/peers.md):
# exit 0, every implementation correct and timed (the OpenBLAS child process included), the
# JSON record's fields, the SVG, the README section, --threads 2, a causal mask, and usage
# errors. Usage: bash peers.sh KILN_BIN SOURCE_DIR
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
kiln=$1
# shellcheck source=lib/harness.bash
source "$(dirname "$0")/lib/harness.bash"
export LC_ALL=C.UTF-8

impls="kiln kiln-seed onednn openblas openblas-coretype native plain"

# check_json FILE THREADS: every implementation present, correct and timed, with all fields.
check_json() {
  python3 - "$1" "$2" "$impls" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
threads = int(sys.argv[2])
want = sys.argv[3].split()
if threads > 1:
    want.insert(1, "kiln-1t")  # kiln on one thread: the run's baseline for the speed-up
entries = doc["entries"]
fields = ["shape", "impl", "threads", "median_us", "min_us", "max_us", "ratio_vs_kiln", "pct_roofline", "correct"]
assert [e["impl"] for e in entries] == want, [e["impl"] for e in entries]
for e in entries:
    for f in fields:
        assert f in e, (e["impl"], f)
    assert e["correct"] is True, (e["impl"], e.get("error"))
    assert e["threads"] == (1 if e["impl"] == "kiln-1t" else threads), e
    assert e["median_us"] > 0 and e["min_us"] <= e["median_us"] <= e["max_us"], e
    assert e["pct_roofline"] > 0 and e["ratio_vs_kiln"] > 0, e
assert abs(entries[0]["ratio_vs_kiln"] - 1.0) < 1e-12
assert doc["shapes"][0]["roofline_us"] > 0 and doc["machine"]["peak_gflops"] > 0
PY
}

shape=1,2,1,1,33,16,16
run "$kiln" peers --only-shapes --shape $shape --quick --budget 2 --out "$tmp/a" --markdown "$tmp/a/section.md"
if [ $rc -eq 0 ]; then pass "tiny shape exits 0"; else fail "tiny shape exits 0" "exit $rc: $(tail -c 600 "$tmp/err")"; fi
if grep -q "== $shape" "$tmp/out" && grep -q "% roofline" "$tmp/out"; then pass "table printed"; else fail "table printed"; fi
if check_json "$tmp/a/peers.json" 1 2>"$tmp/py"; then pass "json: all correct, fields present"; else fail "json" "$(tail -3 "$tmp/py")"; fi
if grep -q "<svg" "$tmp/a/peers.svg" && grep -q "native" "$tmp/a/peers.svg"; then pass "svg written"; else fail "svg written"; fi
if grep -q "## How fast is it?" "$tmp/a/section.md" && grep -q "peers --only-shapes" "$tmp/a/section.md"; then
  pass "markdown section names the command"
else
  fail "markdown section"
fi
if grep -q "OPENBLAS_CORETYPE=" "$tmp/a/peers.json"; then pass "openblas core type reported"; else fail "openblas core type"; fi

run "$kiln" peers --only-shapes --shape 1,4,2,3,20,8,12 --mask causal --threads 2 --quick --budget 2 --json "$tmp/t2.json" --svg "$tmp/t2.svg"
if [ $rc -eq 0 ] && check_json "$tmp/t2.json" 2 2>"$tmp/py"; then
  pass "--threads 2 and causal"
else
  fail "--threads 2 and causal" "exit $rc: $(tail -c 400 "$tmp/err") $(tail -2 "$tmp/py")"
fi

run "$kiln" peers --kernel gemm --only-shapes --shape 19,40,33 --quick --budget 2 --json "$tmp/g.json" --svg "$tmp/g.svg"
if [ $rc -eq 0 ] && python3 - "$tmp/g.json" <<'PY' 2>"$tmp/py"; then
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["kernel"] == "gemm", doc["kernel"]
assert [e["impl"] for e in doc["entries"]] == ["kiln", "onednn", "openblas", "plain"], doc["entries"]
assert all(e["correct"] is True and e["median_us"] > 0 for e in doc["entries"])
assert doc["shapes"][0]["shape"] == "19,40,33" and doc["shapes"][0]["flops"] == 2 * 19 * 40 * 33
PY
  pass "--kernel gemm: kiln, onednn, openblas, plain correct and timed"
else
  fail "--kernel gemm" "exit $rc: $(tail -c 400 "$tmp/err") $(tail -2 "$tmp/py")"
fi
run "$kiln" peers --kernel gemm --only-shapes --shape 4,4,4 --impl native
if [ $rc -eq 1 ] && grep -q "does not compute gemm" "$tmp/err"; then pass "gemm: attention-only impl refused"; else fail "gemm impl" "exit $rc"; fi
run "$kiln" peers --kernel gemm --only-shapes --shape 4,4
if [ $rc -eq 1 ] && grep -q "expected 3: M,N,K" "$tmp/err"; then pass "gemm: bad shape"; else fail "gemm shape" "exit $rc"; fi

# --kv-dtype: Kiln reads 16-bit K/V, kiln-f32 the same values as f32; oneDNN runs its 16-bit
# pipeline where this oneDNN has one (else "unavailable", not a failure); f32-only peers are out.
# With bf16, kiln-bf16pairs: the attention in the bf16 pairs order on VDPBF16PS (or unavailable
# without AVX512-BF16), checked at oneDNN's bf16 tolerance.
for t in bf16 f16; do
  run "$kiln" peers --only-shapes --shape 1,4,2,1,70,16,16 --kv-dtype $t --quick --budget 2 --json "$tmp/h.json" --svg "$tmp/h.svg"
  if [ $rc -eq 0 ] && python3 - "$tmp/h.json" $t <<'PY' 2>"$tmp/py"; then
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["kv_dtype"] == sys.argv[2], doc["kv_dtype"]
rows = {e["impl"]: e for e in doc["entries"]}
pairs = {"kiln-bf16pairs"} if sys.argv[2] == "bf16" else set()
assert set(rows) == {"kiln", "kiln-f32", "kiln-seed", "onednn", "native"} | pairs, sorted(rows)
if pairs:
    d = rows["kiln-bf16pairs"]
    assert d["status"] == "unavailable" or (
        d["correct"] is True and d["tolerance"] == 8e-3 and "bf16_pairs order" in d["detail"]), d
for n in ("kiln", "kiln-f32", "kiln-seed", "native"):
    assert rows[n]["correct"] is True and rows[n]["median_us"] > 0, rows[n]
assert rows["kiln"]["tolerance"] == 5e-5
assert "K/V " + sys.argv[2] in rows["kiln"]["detail"] and "K/V f32" in rows["kiln-f32"]["detail"], rows["kiln"]["detail"]
assert "K/V " + sys.argv[2] in rows["native"]["detail"], rows["native"]["detail"]
assert rows["onednn"]["status"] in ("ok", "unavailable"), rows["onednn"]
assert doc["shapes"][0]["kv_bytes"] == 2 * 2 * 70 * 32, doc["shapes"][0]["kv_bytes"]
PY
    pass "--kv-dtype $t: kiln, kiln-f32, kiln-seed, native correct; onednn ok or unavailable"
  else
    fail "--kv-dtype $t" "exit $rc: $(tail -c 400 "$tmp/err") $(tail -2 "$tmp/py")"
  fi
done
run "$kiln" peers --only-shapes --shape 1,2,1,1,4,8,8 --kv-dtype bf16 --impl openblas
if [ $rc -eq 1 ] && grep -q "implementation 'openblas' reads f32 K/V only" "$tmp/err"; then pass "--kv-dtype: f32-only impl refused"; else fail "--kv-dtype impl" "exit $rc"; fi
# --b-dtype (gemm): Kiln's GEMM reads 16-bit B; oneDNN its 16-bit matmul (or unavailable);
# with bf16, kiln-bf16dot (the bf16 dot order on AMX tiles, or unavailable without them) and
# kiln-bf16pairs (the bf16 pairs order on VDPBF16PS, or unavailable without AVX512-BF16).
run "$kiln" peers --kernel gemm --only-shapes --shape 33,70,300 --b-dtype bf16 --quick --budget 2 --json "$tmp/g.json" --svg "$tmp/g.svg"
if [ $rc -eq 0 ] && python3 - "$tmp/g.json" <<'PY' 2>"$tmp/py"; then
import json, sys
doc = json.load(open(sys.argv[1]))
assert doc["b_dtype"] == "bf16", doc.get("b_dtype")
rows = {e["impl"]: e for e in doc["entries"]}
assert set(rows) == {"kiln", "kiln-bf16dot", "kiln-bf16pairs", "onednn"}, sorted(rows)
assert rows["kiln"]["correct"] is True and "B bf16" in rows["kiln"]["detail"], rows["kiln"]
assert rows["onednn"]["status"] in ("ok", "unavailable"), rows["onednn"]
d = rows["kiln-bf16dot"]
assert d["status"] == "unavailable" or (d["correct"] is True and "mma form amx" in d["detail"]), d
d = rows["kiln-bf16pairs"]
assert d["status"] == "unavailable" or (d["correct"] is True and "on VDPBF16PS" in d["detail"]), d
assert doc["shapes"][0]["kv_bytes"] == 4 * 33 * 300 + 2 * 300 * 70, doc["shapes"][0]["kv_bytes"]
PY
  pass "--b-dtype bf16: kiln correct; kiln-bf16dot, onednn ok or unavailable"
else
  fail "--b-dtype bf16" "exit $rc: $(tail -c 400 "$tmp/err") $(tail -2 "$tmp/py")"
fi
run "$kiln" peers --kernel gemm --only-shapes --shape 4,4,4 --b-dtype f16 --impl openblas
if [ $rc -eq 1 ] && grep -q "implementation 'openblas' reads f32 B only" "$tmp/err"; then pass "--b-dtype: f32-only impl refused"; else fail "--b-dtype impl" "exit $rc"; fi
run "$kiln" peers --only-shapes --shape 1,2,1,1,4,8,8 --b-dtype bf16
if [ $rc -eq 1 ] && grep -q "b-dtype applies to --kernel gemm only" "$tmp/err"; then pass "--b-dtype: attention refused"; else fail "--b-dtype attention" "exit $rc"; fi
run "$kiln" peers --kernel gemm --only-shapes --shape 4,4,4 --kv-dtype bf16
if [ $rc -eq 1 ] && grep -q "kv-dtype applies to attention only" "$tmp/err"; then pass "--kv-dtype: gemm refused"; else fail "--kv-dtype gemm" "exit $rc"; fi

run "$kiln" peers --only-shapes --shape 1,8,3,1,4,8,8
if [ $rc -eq 1 ] && grep -q "multiple of Hkv" "$tmp/err"; then pass "bad shape is an error"; else fail "bad shape" "exit $rc"; fi
run "$kiln" peers --only-shapes --shape 1,2,1,1,4,8,8 --impl nosuch
if [ $rc -eq 1 ] && grep -q "no implementation named 'nosuch'" "$tmp/err"; then pass "unknown impl"; else fail "unknown impl" "exit $rc"; fi
run "$kiln" peers --only-shapes
if [ $rc -eq 1 ] && grep -q "needs at least one --shape" "$tmp/err"; then pass "no shapes"; else fail "no shapes" "exit $rc"; fi

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]

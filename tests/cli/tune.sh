#!/usr/bin/env bash
# `kiln tune` and the tuning database (docs/tune.md): a search within its budget that records an
# entry; run/compile/peers then use the recorded choice where the user chose nothing, say where
# the choice came from (tuned / user / default), and a damaged database is a warning, not an
# error. Timing never decides a verdict here: the test edits the recorded choice itself.
# Usage: bash tune.sh KILN_BIN SOURCE_DIR
set -uo pipefail

if [ $# -ne 2 ]; then
  echo "usage: $0 KILN_BIN SOURCE_DIR" >&2
  exit 2
fi
kiln=$1
# shellcheck source=lib/harness.bash
source "$(dirname "$0")/lib/harness.bash"

export KILN_CACHE_DIR=$tmp/cache
db=$KILN_CACHE_DIR/tuning.json
att=(--kernel attention --shape 1,4,2,1,700,32,32 --mask none)

run "$kiln" tune "${att[@]}" --budget 20 --cycles 1 --json
if [ $rc -eq 0 ] && python3 - "$tmp/out" "$db" <<'PY' 2>"$tmp/py"; then
import json, sys
j = json.load(open(sys.argv[1]))
assert j["seconds"] <= 20 + 5, j["seconds"]
c = j["candidates"]
assert c[0]["choice"] == "default" and c[0]["status"] == "default", c[0]
labels = [x["choice"] for x in c]
assert any(l.startswith("block ") for l in labels) and any(l.startswith("split ") for l in labels), labels
ok = {"default", "kept", "slower", "not faster (range reaches 1)", "wrong", "failed", "skipped (budget)"}
for x in c:
    assert x["status"] in ok, x
    if x["status"] == "kept":
        assert x["ratio_max"] < 1.0, x  # a winner's whole range is below 1
db = json.load(open(sys.argv[2]))
assert db["format"] == "kiln-tuning/1"
assert j["key"] in db["entries"], list(db["entries"])
e = db["entries"][j["key"]]
assert e["kernel"] == "attention" and e["shape"] == "1,4,2,1,700,32,32", e
PY
  pass "tune: within budget, candidates checked and timed, entry recorded"
else
  fail "tune" "exit $rc: $(cat "$tmp/py" "$tmp/err" | tail -c 400)"
fi

run "$kiln" tune "${att[@]}" --budget 0.1 --cycles 1
expect "a tiny budget skips candidates and keeps the default" 0 "skipped \(budget\)" "tune: \["

# Pin the recorded choice to split 3, then use it.
python3 - "$db" <<'PY'
import json, sys
db = json.load(open(sys.argv[1]))
for e in db["entries"].values():
    e["choice"] = {"options": {"split": "3"}, "knobs": []}
json.dump(db, open(sys.argv[1], "w"))
PY
run "$kiln" run "${att[@]}" --check bitexact --json
if [ $rc -eq 0 ] && python3 - "$tmp/out" <<'PY' 2>"$tmp/py"; then
import json, sys
j = json.load(open(sys.argv[1]))
assert j["pass"] is True
assert j["tuning"] == {"source": "tuned", "choice": "split 3"}, j["tuning"]
assert j["library"]["split"].startswith("3 chunks"), j["library"]
PY
  pass "run uses the tuned choice and says so"
else
  fail "run uses the tuned choice" "exit $rc: $(cat "$tmp/py" "$tmp/err" | tail -c 400)"
fi
run "$kiln" run "${att[@]}" --split off
expect "the user's option wins over the tuned one" 0 "tuned choice \(split 3\) overridden by the given options"
run "$kiln" compile "${att[@]}" --emit report
expect "the report names the tuned choice" 0 '"tuned_choice": "split 3"'
run "$kiln" run --kernel attention --shape 1,4,2,1,700,32,32 --mask causal --json
expect "another request: no entry" 0 '"source":"default"'

run "$kiln" peers --only-shapes --shape 1,4,2,1,700,32,32 --quick --budget 2 --json "$tmp/p.json" --svg "$tmp/p.svg"
if [ $rc -eq 0 ] && python3 - "$tmp/p.json" <<'PY' 2>"$tmp/py"; then
import json, sys
doc = json.load(open(sys.argv[1]))
by = {e["impl"]: e for e in doc["entries"]}
assert "kiln-untuned" in by, list(by)
assert "tuned (split 3)" in by["kiln"]["detail"], by["kiln"]["detail"]
assert "untuned" in by["kiln-untuned"]["detail"], by["kiln-untuned"]["detail"]
assert all(e["correct"] is True for e in doc["entries"])
PY
  pass "peers: kiln uses the tuned choice and names it; kiln-untuned beside it"
else
  fail "peers with a tuned entry" "exit $rc: $(cat "$tmp/py" "$tmp/err" | tail -c 400)"
fi

# A .tile kernel: knobs only, each candidate bitexact against the interpreter: the other vector
# width (of this CPU's default), LLVM tuned for this CPU where its model is not the generic one,
# a lane per program.
tile=$2/examples/rmsnorm.tile
"$kiln" compile "$tile" --emit report >"$tmp/generic.json" 2>/dev/null
"$kiln" compile "$tile" --emit report --set tune_cpu=host >"$tmp/host.json" 2>/dev/null
run "$kiln" tune "$tile" --budget 20 --cycles 1 --json
if [ $rc -eq 0 ] && python3 - "$tmp/out" "$tmp/generic.json" "$tmp/host.json" <<'PY' 2>"$tmp/py"; then
import json, sys
j = json.load(open(sys.argv[1]))
generic, host = (json.load(open(f))["target"] for f in sys.argv[2:4])
w = generic["model"]["default_packet_width"]
want = ["default", "packet_width=%d" % (16 if w == 8 else 8)]
if host["tune_cpu"] != generic["tune_cpu"]:
    want.append("tune_cpu=host")
want.append("local_lanes=1")
labels = [c["choice"] for c in j["candidates"]]
assert labels == want, (labels, want)
assert all(c["status"] != "wrong" for c in j["candidates"]), j["candidates"]
PY
  pass "tune a .tile file: knob candidates, checked"
else
  fail "tune a .tile file" "exit $rc: $(cat "$tmp/py" "$tmp/err" | tail -c 400)"
fi
python3 - "$db" <<'PY'
import json, sys
db = json.load(open(sys.argv[1]))
for e in db["entries"].values():
    if e["shape"].startswith("(.tile"):
        e["choice"] = {"options": {}, "knobs": ["packet_width=8"]}
json.dump(db, open(sys.argv[1], "w"))
PY
run "$kiln" run "$tile" --check bitexact
expect "run FILE uses its tuned knobs" 0 "tuned: packet_width=8"
run "$kiln" run "$tile" --check bitexact --set packet_width=4 --json
expect "a --set knob wins over the tuned one" 0 '"source":"user"'

echo "not json" > "$db"
run "$kiln" run "${att[@]}"
expect "a damaged database is a warning" 0 "check f64: PASS" "tuning database .* is not readable; ignoring it"

run "$kiln" tune "$tmp/nothing.tile"
expect "tune: a missing file" 1 "" "nothing.tile:0:0: error: cannot open the file for reading"
run "$kiln" tune --kernel attention --shape 1,4,3,1,7,8,8
expect "tune: a bad request" 1 "" "Hq=4 is not a multiple of Hkv=3"

# 16-bit views travel packed as the kernel takes them (bf16 K/V, f16 weights, bf16 rows); an
# integer view's values are the caller's, so tuning on generated ones is refused by name.
run "$kiln" tune --kernel attention --shape 1,4,2,1,130,32,32 --kv-dtype bf16 --budget 2 --cycles 1
expect "tune: bf16 K/V" 0 "recorded in"
run "$kiln" tune --kernel gemm --shape 9,40,24 --a-dtype bf16 --b-dtype f16 --budget 2 --cycles 1
expect "tune: 16-bit A and B" 0 "recorded in"
run "$kiln" tune --kernel rmsnorm --shape 5,96 --dtype bf16 --budget 2 --cycles 1
expect "tune: bf16 rows" 0 "recorded in"
run "$kiln" tune --kernel attention --shape 2,4,2,1,70,32,32 --kv-cache dense --budget 2 --cycles 1
expect "tune: an integer view is refused" 1 "" "parameter 'lens' is an integer view \\(view<i32>\\[2\\]\\)"

echo "$passed passed, $failed failed"
[ $failed -eq 0 ]

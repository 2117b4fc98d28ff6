#!/usr/bin/env python3
"""Kiln's GPU kernels against PyTorch on the device, case by case of a replayed archive.

For every archive case whose manifest `source` names a kernel torch can compute (the library's
attention, gemm, softmax, rmsnorm, layernorm, gelu, swiglu; and the examples/ files that are
instances of them: peers_kinds.py), this script
  * reads the inputs and Kiln's GPU output that `kiln-replay --dump DIR` wrote;
  * computes the FP64 reference on the GPU in torch.float64 (src/kernels/reference.cpp's math);
  * checks Kiln's output and torch's FP32 output against it with the kind's tolerance
    (5e-5 abs + 5e-5 rel; gemm: 2 sqrt(K) u (|a| |b|)[i,j], u = 2^-24);
  * times torch with CUDA events, each call captured once as a CUDA graph and replayed (its
    kernels without Python's launch gaps; the eager call where capture fails, named), in the
    replay's scheme (V visits, 2 warm-ups and R timed calls
    per case and visit, R chosen in visit 1, hysteresis check of the visit medians) between
    health checks, and compares with Kiln's kernel time from replay.json: the ratio, and both
    against the roofline (FP32 peak and HBM bandwidth, stated figures of an H200).
A case of another kernel, or with an option the comparison does not model (16-bit storage,
runtime rows, KV caches), is listed as skipped with the reason. FP32 is FP32: TF32 is off.

Usage: python3 scripts/gpu/torch_peers.py --dump DIR --archive ARCH --replay REPLAY_JSON --out OUT_JSON
                                          [--visits 3] [--min-visit-ms 20] [--max-reps 200] [--hysteresis 1.5]
Exit codes: 0 every check passed, 1 an FP64 check failed or a case could not be run, 2 bad usage,
77 no torch / no CUDA (OUT_JSON then says why). A skipped case fails nothing.
"""

import argparse
import json
import math
import os
import sys

import peers_common as common
from peers_common import fp64_check, load_view, parse_source, read_index, read_manifest
from peers_kinds import AS_ISSUED, KINDS, Skip, configure, request_of_example

AS_ISSUED_SUFFIX = "@as_issued"  # the timed-set name of a case's second torch call (compare)

FORMAT = "kiln-gpu-peers 2"
REPO = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
NOTE = ("kernel time from CUDA events around one torch call on FP32 cuda tensors (per case `torch.call`; "
        "attention: the fastest SDPA backend that runs); host wall time separately; TF32 off "
        "(torch.backends.cuda.matmul.allow_tf32 = False, torch.backends.cudnn.allow_tf32 = False, float32 matmul "
        "precision 'highest'); refused sets are kept, never mixed with CPU results")


def describe(m):
    """(kind, shape, params, knob sets) of a case's manifest, or Skip."""
    origin, what, shape_text, options, sets = parse_source(m["source"])
    options.pop("digest-only", None)  # how the capture carries the output, not the kernel
    if origin == "library":
        kernel = what
    elif origin == "file":
        kernel, shape_text, options = request_of_example(REPO, what)
    else:
        raise Skip("the manifest names no source")
    if kernel not in KINDS:
        raise Skip("library %s: no torch counterpart here (compared: %s)" % (kernel, ", ".join(KINDS)))
    kind = KINDS[kernel]
    shape, params = configure(kind, shape_text, options)
    return kind, shape, params, sets


def compare(np, torch, args, name, m, row):
    """Fills row with the case's FP64 checks and torch's call; returns (case, ctx, fn) to time,
    or None (row["problems"] says why). Raises Skip for a case that is not compared."""
    kind, s, p, sets = describe(m)
    views = kind.views(s, p)
    row.update({"kind": kind.name, "shape": s, "shape_text": ",".join(str(v) for v in s.values()), "params": p,
                "sets": sets, "tolerance": kind.tolerance(s, p),
                "work": {"flops": kind.flops(s, p), "bytes": 4 * sum(math.prod(d) for _, d in views)}})
    for view, dims in views:
        have = m["views"].get(view)
        if have is None or have["elements"] != math.prod(dims):
            row["problems"].append("view %s: the manifest has %s elements, shape %s needs %d" % (
                view, have["elements"] if have else "no view with", dims, math.prod(dims)))
    out, out_dims = views[-1]
    if not m["views"].get(out, {}).get("written"):
        row["problems"].append("view %s: the manifest does not say the kernel writes it" % out)
    if row["problems"]:
        return None
    d = os.path.join(args.dump, name)
    try:
        x = {view: (common.load_int_view(np, torch, os.path.join(d, view + ".f32"), dims) if view in kind.int_views
                    else load_view(np, torch, os.path.join(d, view + ".f32"), dims)) for view, dims in views[:-1]}
    except (OSError, ValueError) as e:
        row["problems"].append("inputs: %s" % e)
        return None
    x64 = {view: (t if view in kind.int_views else t.double()) for view, t in x.items()}
    ref = kind.reference(torch, x64, s, p)
    bound = kind.bound(torch, x64, ref, s, p)
    digest_only = "--digest-only" in m["source"].split()
    try:
        if digest_only:  # not dumped: the replay compared its digest with the CPU's bytes
            row["kiln"]["fp64_check"] = {
                "pass": True, "digest_only": True,
                "why": "output not dumped (--digest-only): the replay found it equal to the CPU run's bytes, which "
                       "passed the FP64 check at capture"}
        else:
            row["kiln"]["fp64_check"] = fp64_check(
                torch, load_view(np, torch, os.path.join(d, out + ".f32"), out_dims), ref, bound)
    except (OSError, ValueError) as e:
        row["kiln"]["fp64_check"] = {"pass": False, "why": "no GPU output: %s" % e}

    candidates, facts = kind.candidates(torch, x, s, p)
    chosen, tried, outputs = common.pick_candidate(torch, candidates)
    for t in tried:
        if t["supported"]:
            t["fp64_check"] = fp64_check(torch, kind.finish(torch, x, s, p, outputs[t["backend"]]), ref, bound)
    chosen_check = next((t["fp64_check"] for t in tried if chosen and t["backend"] == chosen[0]), None)
    row["torch"] = {"call": kind.call, "backend": chosen[0] if chosen else None, "backends_tried": tried,
                    "fp64_check": chosen_check, **facts}
    if chosen is None:
        row["problems"].append("no torch call ran")
        return None
    entries = [(name, chosen[1], chosen[2])]
    issued = next((c for c in candidates if c[0].startswith(AS_ISSUED)), None)
    if issued and issued[0] != chosen[0] and any(t["backend"] == issued[0] and t["supported"] for t in tried):
        entries.append((name + AS_ISSUED_SUFFIX, issued[1], issued[2]))  # timed in the same set
    return entries


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dump", required=True, help="the kiln-replay --dump folder")
    ap.add_argument("--archive", required=True, help="the GPU archive")
    ap.add_argument("--replay", required=True, help="kiln-replay's replay.json")
    ap.add_argument("--out", required=True, help="the JSON report to write")
    ap.add_argument("--visits", type=int, default=3)
    ap.add_argument("--min-visit-ms", type=float, default=20.0)
    ap.add_argument("--max-reps", type=int, default=200)
    ap.add_argument("--hysteresis", type=float, default=1.5)
    args = ap.parse_args()
    if args.visits < 1 or args.max_reps < 1 or args.min_visit_ms < 0 or args.hysteresis < 1:
        ap.error("--visits and --max-reps must be >= 1, --min-visit-ms >= 0, --hysteresis >= 1")

    def write(doc):
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=2)
            f.write("\n")

    try:
        import numpy as np
        import torch
    except ImportError as e:
        write({"format": FORMAT, "skipped": "no torch/numpy: %s" % e, "cases": [], "acceptance": None})
        print("skipped: %s" % e)
        return 77
    if not torch.cuda.is_available():
        write({"format": FORMAT, "skipped": "torch sees no CUDA device", "cases": [], "acceptance": None})
        print("skipped: torch sees no CUDA device")
        return 77
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    with open(args.replay) as f:
        replay = json.load(f)
    kiln_cases = {c["case"]: c for c in replay.get("cases", [])}
    device = torch.cuda.get_device_name(0)

    # Correctness, case by case: the FP64 reference, Kiln's output, torch's output per call.
    rows, runnable = [], []
    for name in read_index(args.archive):
        kc = kiln_cases.get(name)
        kt = kc.get("timing") if kc else None
        row = {"case": name, "kind": None, "source": "", "problems": [],
               "kiln": {"status": kc["status"] if kc else "absent from replay.json",
                        "kernel_us_median": kt["kernel_us_median"] if kt else None,
                        "timing_accepted": bool(kt["accepted"]) if kt else False, "fp64_check": None}}
        rows.append(row)
        try:
            m = read_manifest(args.archive, name)
        except OSError as e:
            row["problems"].append("manifest: %s" % e)
            continue
        row["source"] = m["source"]
        try:
            entry = compare(np, torch, args, name, m, row)
        except Skip as e:
            row["skipped"] = str(e)
            continue
        if entry:
            runnable.extend(entry)
    compared = [r for r in rows if "skipped" not in r]
    print("torch %s on %s; %d case(s) compared (%s), %d skipped" % (
        torch.__version__, device, len(compared),
        ", ".join("%d %s" % (sum(r["kind"] == k for r in compared), k) for k in KINDS
                  if any(r["kind"] == k for r in compared)) or "none",
        len(rows) - len(compared)))

    # The timed set.
    timings, before, after, reasons = common.timed_set(torch, runnable, args.visits, args.min_visit_ms,
                                                       args.max_reps, args.hysteresis)
    # Issue 31's call is shown beside the fastest; its visits' spread does not refuse the set.
    reasons = [r for r in reasons if not r.split(":")[0].endswith(AS_ISSUED_SUFFIX)]
    accepted = not reasons
    acceptance = {"name": "torch-peers", "accepted": accepted, "reasons": reasons, "health_before": before,
                  "health_after": after, "hysteresis_limit": args.hysteresis,
                  "visit_medians_us": {case: t["visits"] for case, t in timings.items()},
                  "cases": [case for case, _, _ in runnable], "device": device,
                  "torch_version": torch.__version__, "note": NOTE}

    # Per case: the ratio, the roofline, the joint acceptance.
    all_ok = True
    for row in rows:
        row["ratio_kiln_over_torch"] = None
        row["accepted"] = False
        if "skipped" in row:
            continue
        t = timings.get(row["case"])
        if t:
            row["torch"].update(t)
        kus = row["kiln"]["kernel_us_median"]
        tus = t["kernel_us_median"] if t else None
        row["ratio_kiln_over_torch"] = kus / tus if kus and tus else None
        issued = next((b for b in row.get("torch", {}).get("backends_tried", []) if b["backend"].startswith(AS_ISSUED)),
                      None)
        if issued:  # issue 31's call: its own timing, or the chosen one's when it was the fastest
            ti = timings.get(row["case"] + AS_ISSUED_SUFFIX) or (
                t if t and row["torch"]["backend"] == issued["backend"] else None)
            row["torch"]["as_issued"] = {
                "call": issued["backend"], "backend_torch_picks": row["torch"].get("as_issued_backend"),
                "supported": issued["supported"], "why": issued.get("why"),
                "kernel_us_median": ti["kernel_us_median"] if ti else None,
                "flagged": ti["flagged"] if ti else None,
                "ratio_kiln_over_it": kus / ti["kernel_us_median"] if kus and ti else None}
        row["accepted"] = bool(accepted and row["kiln"]["timing_accepted"] and t and not t["flagged"])
        if "work" in row:
            row["roofline"] = common.roofline(row.pop("work"), kus, tus)
        kchk = row["kiln"]["fp64_check"]
        tchk = row.get("torch", {}).get("fp64_check")
        all_ok = all_ok and not row["problems"] and bool(kchk and kchk.get("pass")) and bool(tchk and tchk.get("pass"))

    write({"format": FORMAT, "device": device, "torch_version": torch.__version__,
           "fp32": {"matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                    "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
                    "float32_matmul_precision": torch.get_float32_matmul_precision()},
           "peak": common.PEAK,
           "kiln_timing_accepted": bool(replay.get("summary", {}).get("timing_accepted", False)),
           "cases": rows, "acceptance": acceptance, "note": NOTE})
    print_table(rows)
    if accepted:
        print("\ntorch timing set ACCEPTED")
    else:
        print("\n!!!!!!!! TORCH TIMING SET REFUSED (its numbers are kept, marked refused) !!!!!!!!")
        for r in reasons:
            print("  - %s" % r)
    return 0 if all_ok else 1


def print_table(rows):
    def us(x):
        return "%.1f" % x if x is not None else "-"

    def chk(x):
        return "-" if not x else ("pass" if x.get("pass") else "FAIL")

    def achieved(a):
        if not a:
            return "-"
        flops = "%.2f TFLOP/s, " % a["tflops"] if a["tflops"] is not None else ""
        return "%s%.0f GB/s = %.1f%% of the bound" % (flops, a["gb_per_s"], 100 * a["of_bound"])

    width = max([len("case")] + [len(r["case"]) for r in rows])
    fmt = "%-*s  %-9s  %-22s  %10s  %10s  %-20s  %7s  %-9s  %-10s  %s"
    print("\n" + fmt % (width, "case", "kind", "shape", "kiln us", "torch us", "torch call", "ratio", "fp64 kiln",
                        "fp64 torch", "accepted"))
    for r in rows:
        if "skipped" in r:
            print("%-*s  skipped: %s" % (width, r["case"], r["skipped"]))
            continue
        t = r.get("torch", {})
        ratio = "%.3f" % r["ratio_kiln_over_torch"] if r["ratio_kiln_over_torch"] else "-"
        print(fmt % (width, r["case"], r["kind"], r["shape_text"], us(r["kiln"]["kernel_us_median"]),
                     us(t.get("kernel_us_median")), t.get("backend") or "-", ratio, chk(r["kiln"]["fp64_check"]),
                     chk(t.get("fp64_check")), "yes" if r["accepted"] else "no"))
        roof = r.get("roofline")
        if roof:
            print("    roofline (%s-bound, %.2f us at %.0f TFLOP/s FP32, %.1f TB/s): kiln %s; torch %s" % (
                roof["bound"], roof["bound_us"], common.PEAK["fp32_tflops"], common.PEAK["hbm_tb_per_s"],
                achieved(roof["kiln"]), achieved(roof["torch"])))
        ai = t.get("as_issued")
        if ai:
            if ai["kernel_us_median"]:
                r_it = ai["ratio_kiln_over_it"]
                print("    torch as issue 31 calls it (SDPA, %s, torch's backend: %s): %s us, kiln/that %s%s" % (
                    ai["call"][len(AS_ISSUED):], ai["backend_torch_picks"] or "not reported", us(ai["kernel_us_median"]),
                    "%.3f" % r_it if r_it else "-", ", its visits vary past the limit" if ai["flagged"] else ""))
            else:
                print("    torch as issue 31 calls it (SDPA, %s): %s" % (
                    ai["call"][len(AS_ISSUED):], "does not run: %s" % ai["why"] if not ai["supported"] else "not timed"))
        if t.get("timed_as") and t["timed_as"] != "cuda_graph":
            print("    torch timed as: %s" % t["timed_as"])
        for p in r["problems"]:
            print("    problem: %s" % p)


if __name__ == "__main__":
    sys.exit(main())

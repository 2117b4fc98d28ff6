#!/usr/bin/env python3
"""Kiln's GPU attention against PyTorch's scaled_dot_product_attention, on the device.

For every archive case compiled from the library attention (manifest `source` line with
`attention` and `--shape B,Hq,Hkv,Q,K,D,Dv`), this script
  * reads the inputs q, k, v and Kiln's GPU output o that `kiln-replay --dump DIR` wrote;
  * computes the FP64 reference on the GPU in torch.float64 (GQA: head h reads KV head
    h // (Hq/Hkv); causal = bottom-right aligned: key j is visible to query i iff j <= i + K - Q;
    scale = float32(1/sqrt(D)) unless `--scale S`; rows with no visible key give 0);
  * checks Kiln's output and torch's FP32 SDPA output against it: |got - ref| <= 5e-5 + 5e-5 |ref|;
  * times torch's SDPA with CUDA events (the replay's scheme: V visits, 2 warm-ups and R timed
    calls per case and visit, R chosen in visit 1, hysteresis check of the visit medians) between
    health checks, and compares with Kiln's kernel time from replay.json.

Usage: python3 scripts/gpu/torch_sdpa.py --dump DIR --archive ARCH --replay REPLAY_JSON --out OUT_JSON
                                         [--visits 3] [--min-visit-ms 20] [--max-reps 200] [--hysteresis 1.5]
Exit codes: 0 every check passed, 1 an FP64 check failed or a case could not be run, 2 bad usage,
77 no torch / no CUDA (OUT_JSON then says why).
"""

import argparse
import json
import math
import os
import statistics
import struct
import sys
import time

ATOL = 5e-5
RTOL = 5e-5
WARMUPS = 2
MIN_REPS = 5
HEALTH_LIMITS_US = {"empty_sync": 1000.0, "copy_1mib": 20000.0, "tiny_kernel": 20000.0}
NOTE = ("kernel time from CUDA events around one SDPA call (torch FP32 inputs on cuda; the fastest backend that "
        "runs, GQA by SDPA's enable_gqa or with K and V expanded before the timed call); host wall time "
        "separately; refused sets are kept, never mixed with CPU results")


def f32(x):
    """x rounded to float32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ---- the archive ------------------------------------------------------------------------------


def read_index(arch):
    with open(os.path.join(arch, "index.txt")) as f:
        return [line.strip() for line in f if line.strip()]


def read_source(arch, case):
    """The manifest's `source` text of a case ('' when absent)."""
    with open(os.path.join(arch, case, "manifest.txt")) as f:
        for line in f:
            if line.startswith("source "):
                return line[len("source "):].rstrip("\n")
    return ""


def option(tokens, name):
    """The value of `--name V` or `--name=V` in a token list, or None."""
    for i, t in enumerate(tokens):
        if t == name and i + 1 < len(tokens):
            return tokens[i + 1]
        if t.startswith(name + "="):
            return t[len(name) + 1:]
    return None


def attention_case(source):
    """(shape dict, mask, scale, scale_given) for an attention source line, or None."""
    tokens = source.split()
    if "attention" not in tokens:
        return None
    shape_text = option(tokens, "--shape")
    if shape_text is None:
        return None
    try:
        dims = [int(x) for x in shape_text.split(",")]
    except ValueError:
        return None
    if len(dims) != 7:
        return None
    shape = dict(zip(["B", "Hq", "Hkv", "Q", "K", "D", "Dv"], dims))
    mask = option(tokens, "--mask") or "causal"  # the library's default mask is causal
    scale_text = option(tokens, "--scale")
    scale = f32(float(scale_text)) if scale_text is not None else f32(1.0 / math.sqrt(shape["D"]))
    return shape, mask, scale, scale_text is not None


# ---- checks -----------------------------------------------------------------------------------


def fp64_check(torch, got, ref):
    """|got - ref| <= ATOL + RTOL |ref| element-wise (got any float tensor, ref float64)."""
    g = got.to(torch.float64).reshape(-1)
    r = ref.reshape(-1)
    diff = (g - r).abs()
    bad = ~(diff <= ATOL + RTOL * r.abs())  # NaN in got fails
    finite = torch.isfinite(g) & torch.isfinite(r)
    max_abs = float(diff[finite].max()) if bool(finite.any()) else 0.0
    nz = finite & (r != 0)
    max_rel = float((diff[nz] / r[nz].abs()).max()) if bool(nz.any()) else 0.0
    failing = int(bad.sum())
    first = int(bad.nonzero()[0, 0]) if failing else -1
    return {"pass": failing == 0, "elements": int(r.numel()), "failing": failing, "first_failing": first,
            "max_abs_err": max_abs, "max_rel_err": max_rel, "atol": ATOL, "rtol": RTOL}


def reference(torch, q, k, v, shape, causal, scale):
    """FP64 attention on the device; q, k, v float64 cuda tensors."""
    B, Hq, Hkv, Q, K = shape["B"], shape["Hq"], shape["Hkv"], shape["Q"], shape["K"]
    group = Hq // Hkv
    out = torch.zeros(B, Hq, Q, shape["Dv"], dtype=torch.float64, device=q.device)
    visible = None
    if causal:
        i = torch.arange(Q, device=q.device).unsqueeze(1)
        j = torch.arange(K, device=q.device).unsqueeze(0)
        visible = j <= i + (K - Q)
    for b in range(B):  # one (batch, head) at a time bounds the score matrix's memory
        for h in range(Hq):
            kv = h // group
            s = scale * (q[b, h] @ k[b, kv].transpose(0, 1))  # [Q, K]
            if visible is not None:
                s = s.masked_fill(~visible, float("-inf"))
            row_max = s.max(dim=1, keepdim=True).values
            has_key = torch.isfinite(row_max)
            w = torch.where(has_key, torch.exp(s - torch.where(has_key, row_max, torch.zeros_like(row_max))),
                            torch.zeros_like(s))
            total = w.sum(dim=1, keepdim=True)
            w = torch.where(total > 0, w / torch.where(total > 0, total, torch.ones_like(total)), w)
            out[b, h] = w @ v[b, kv]
    return out


# ---- torch's SDPA ----------------------------------------------------------------------------


def sdpa_candidates(torch, q, k, v, shape, causal, scale):
    """Candidate SDPA calls [(label, context factory, fn)] and how the mask is passed.

    Every backend (flash, efficient, cudnn, math; or the default when torch lacks
    torch.nn.attention) is tried with GQA done by SDPA itself (enable_gqa=True) and with K and V
    expanded to Hq heads beforehand (repeat_interleave outside the timed call)."""
    F = torch.nn.functional
    Q, K = shape["Q"], shape["K"]
    group = shape["Hq"] // shape["Hkv"]

    if not causal:
        mask_args, mask_kind = {}, "none"
    elif Q == K:
        mask_args, mask_kind = {"is_causal": True}, "is_causal"
    else:  # bottom-right aligned: an explicit boolean mask (True = attend)
        i = torch.arange(Q, device=q.device).unsqueeze(1)
        j = torch.arange(K, device=q.device).unsqueeze(0)
        mask_args, mask_kind = {"attn_mask": j <= i + (K - Q)}, "bool_mask_bottom_right"

    if group > 1:
        variants = [("enable_gqa", {"enable_gqa": True}, k, v),
                    ("repeat_kv", {}, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1))]
    else:
        variants = [("mha", {}, k, v)]

    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = [(name.lower(), (lambda b=getattr(SDPBackend, name): sdpa_kernel(b)))
                    for name in ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"]
                    if hasattr(SDPBackend, name)]
    except ImportError:
        import contextlib
        backends = [("default", contextlib.nullcontext)]

    candidates = []
    for backend, ctx in backends:
        for label, kwargs, kk, vv in variants:
            def fn(kk=kk, vv=vv, kwargs=kwargs):
                return F.scaled_dot_product_attention(q, kk, vv, scale=scale, **mask_args, **kwargs)
            candidates.append((backend + "/" + label, ctx, fn))
    return candidates, mask_kind


def time_once(torch, fn, ctx):
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    with ctx():
        t0 = time.perf_counter()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        wall_ms = 1e3 * (time.perf_counter() - t0)
    return start.elapsed_time(stop), wall_ms


def pick_backend(torch, candidates):
    """Runs each candidate; keeps those that work; returns (fastest, tried list, outputs by label)."""
    import warnings
    tried, outputs, best = [], {}, None
    for name, ctx, fn in candidates:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # an unsupported backend warns before it raises
                with ctx():
                    out = fn()
            torch.cuda.synchronize()
            samples = [time_once(torch, fn, ctx)[0] for _ in range(10)]
            ms = statistics.median(samples)
            tried.append({"backend": name, "supported": True, "probe_us_median": 1e3 * ms})
            outputs[name] = out
            if best is None or ms < best[1]:
                best = ((name, ctx, fn), ms)
        except Exception as e:  # noqa: BLE001 - unsupported: RuntimeError, or TypeError without enable_gqa
            why = str(e).splitlines()[0][:300] if str(e) else type(e).__name__
            tried.append({"backend": name, "supported": False, "why": why})
            torch.cuda.synchronize()
    return (best[0] if best else None), tried, outputs


# ---- health -----------------------------------------------------------------------------------


def health(torch):
    steps = []

    def step(name, samples, ok, message):
        us = statistics.median(samples) if samples else 0.0
        limit = HEALTH_LIMITS_US[name]
        passed = ok and us <= limit
        if ok and not passed:
            message += ": median %.1f us is over the limit of %.0f us" % (us, limit)
        steps.append({"name": name, "pass": passed, "us": us, "limit_us": limit, "samples_us": samples,
                      "message": message})

    try:
        torch.cuda.synchronize()
        samples = []
        for _ in range(3):
            t0 = time.perf_counter()
            torch.cuda.synchronize()
            samples.append(1e6 * (time.perf_counter() - t0))
        step("empty_sync", samples, True, "torch.cuda.synchronize with nothing pending")
    except Exception as e:  # noqa: BLE001
        step("empty_sync", [], False, str(e))
    try:
        host = torch.arange(1 << 18, dtype=torch.int32) * 7 + 3
        samples, ok = [], True
        for _ in range(3):
            t0 = time.perf_counter()
            back = host.to("cuda").to("cpu")
            samples.append(1e6 * (time.perf_counter() - t0))
            ok = ok and bool(torch.equal(back, host))
        step("copy_1mib", samples, ok, "1 MiB host->device->host" + (", bytes equal" if ok else ": bytes differ"))
    except Exception as e:  # noqa: BLE001
        step("copy_1mib", [], False, str(e))
    try:
        x = torch.arange(1024, dtype=torch.int32, device="cuda")
        want = torch.arange(1024, dtype=torch.int32) * 2 + 1
        samples, ok = [], True
        for _ in range(3):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            y = x * 2 + 1
            torch.cuda.synchronize()
            samples.append(1e6 * (time.perf_counter() - t0))
            ok = ok and bool(torch.equal(y.cpu(), want))
        step("tiny_kernel", samples, ok, "y = 2x+1 on 1024 int32" + (", all checked" if ok else ": wrong values"))
    except Exception as e:  # noqa: BLE001
        step("tiny_kernel", [], False, str(e))
    return {"pass": all(s["pass"] for s in steps), "steps": steps}


# ---- main -------------------------------------------------------------------------------------


def load_f32(np, path, count):
    data = np.fromfile(path, dtype="<f4")
    if data.size != count:
        raise ValueError("%s: %d floats, expected %d" % (path, data.size, count))
    return data


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
        write({"format": "kiln-gpu-peers 1", "skipped": "no torch/numpy: %s" % e, "cases": [], "acceptance": None})
        print("skipped: %s" % e)
        return 77
    if not torch.cuda.is_available():
        write({"format": "kiln-gpu-peers 1", "skipped": "torch sees no CUDA device", "cases": [], "acceptance": None})
        print("skipped: torch sees no CUDA device")
        return 77

    with open(args.replay) as f:
        replay = json.load(f)
    kiln_cases = {c["case"]: c for c in replay.get("cases", [])}

    # The attention cases and their data.
    cases = []
    for name in read_index(args.archive):
        parsed = attention_case(read_source(args.archive, name))
        if parsed is None:
            continue
        shape, mask, scale, scale_given = parsed
        entry = {"case": name, "shape": shape, "shape_text": ",".join(str(shape[k]) for k in
                                                                      ["B", "Hq", "Hkv", "Q", "K", "D", "Dv"]),
                 "mask": mask, "scale": scale, "scale_given": scale_given, "problems": []}
        kc = kiln_cases.get(name)
        kt = kc.get("timing") if kc else None
        entry["kiln"] = {"status": kc["status"] if kc else "absent from replay.json",
                         "kernel_us_median": kt["kernel_us_median"] if kt else None,
                         "timing_accepted": bool(kt["accepted"]) if kt else False,
                         "fp64_check": None}
        cases.append(entry)

    device = torch.cuda.get_device_name(0)
    print("torch %s on %s; %d attention case(s)" % (torch.__version__, device, len(cases)))

    # Correctness: the FP64 reference, Kiln's output, torch's output per backend.
    runnable = []
    for c in cases:
        s = c["shape"]
        if c["mask"] not in ("none", "causal"):
            c["problems"].append("mask '%s' is not supported here" % c["mask"])
            continue
        if s["Hq"] % s["Hkv"] != 0:
            c["problems"].append("Hq is not a multiple of Hkv")
            continue
        d = os.path.join(args.dump, c["case"])
        try:
            qn = load_f32(np, os.path.join(d, "q.f32"), s["B"] * s["Hq"] * s["Q"] * s["D"])
            kn = load_f32(np, os.path.join(d, "k.f32"), s["B"] * s["Hkv"] * s["K"] * s["D"])
            vn = load_f32(np, os.path.join(d, "v.f32"), s["B"] * s["Hkv"] * s["K"] * s["Dv"])
        except (OSError, ValueError) as e:
            c["problems"].append("inputs: %s" % e)
            continue
        q = torch.from_numpy(qn.copy()).reshape(s["B"], s["Hq"], s["Q"], s["D"]).cuda()
        k = torch.from_numpy(kn.copy()).reshape(s["B"], s["Hkv"], s["K"], s["D"]).cuda()
        v = torch.from_numpy(vn.copy()).reshape(s["B"], s["Hkv"], s["K"], s["Dv"]).cuda()
        causal = c["mask"] == "causal"
        ref = reference(torch, q.double(), k.double(), v.double(), s, causal, c["scale"])

        o_path = os.path.join(d, "o.f32")
        try:
            on = load_f32(np, o_path, s["B"] * s["Hq"] * s["Q"] * s["Dv"])
            c["kiln"]["fp64_check"] = fp64_check(torch, torch.from_numpy(on.copy()).cuda(), ref)
        except (OSError, ValueError) as e:
            c["kiln"]["fp64_check"] = {"pass": False, "why": "no GPU output: %s" % e}

        candidates, mask_kind = sdpa_candidates(torch, q, k, v, s, causal, c["scale"])
        chosen, tried, outputs = pick_backend(torch, candidates)
        for t in tried:
            if t["supported"]:
                t["fp64_check"] = fp64_check(torch, outputs[t["backend"]], ref)
        chosen_check = next((t["fp64_check"] for t in tried if chosen and t["backend"] == chosen[0]), None)
        c["torch"] = {"backend": chosen[0] if chosen else None, "backends_tried": tried, "mask_as": mask_kind,
                      "fp64_check": chosen_check}
        if chosen is None:
            c["problems"].append("no SDPA backend ran")
            continue
        del ref, outputs
        runnable.append((c, chosen, (q, k, v)))

    # The timed set: health, visits, hysteresis, health.
    reasons = []
    before = health(torch)
    if not before["pass"]:
        reasons.append("health check before the set failed: " +
                       "; ".join(st["name"] + ": " + st["message"] for st in before["steps"] if not st["pass"]))
    if not runnable:
        reasons.append("no attention case could be timed")
    per = {c["case"]: {"reps": 0, "kernel": [], "wall": []} for c, _, _ in runnable}
    for visit in range(args.visits):
        for c, (name, ctx, fn), _ in runnable:
            p = per[c["case"]]
            p["kernel"].append([])
            p["wall"].append([])
            wall = 0.0
            for _ in range(WARMUPS):
                _, wall = time_once(torch, fn, ctx)
            if visit == 0:
                p["reps"] = int(min(max(MIN_REPS, math.ceil(args.min_visit_ms / max(wall, 1e-3))), args.max_reps))
            for _ in range(p["reps"]):
                kms, wms = time_once(torch, fn, ctx)
                p["kernel"][-1].append(kms)
                p["wall"][-1].append(wms)
    visit_medians = {}
    for c, _, _ in runnable:
        p = per[c["case"]]
        medians = [statistics.median(k) for k in p["kernel"]]
        allk = [x for k in p["kernel"] for x in k]
        allw = [x for w in p["wall"] for x in w]
        ratio = max(medians) / min(medians) if min(medians) > 0 else None
        flagged = ratio is None or ratio > args.hysteresis
        visit_medians[c["case"]] = [1e3 * m for m in medians]
        c["torch"].update({"reps": p["reps"], "visits": [1e3 * m for m in medians],
                           "kernel_us_median": 1e3 * statistics.median(allk), "kernel_us_min": 1e3 * min(allk),
                           "kernel_us_max": 1e3 * max(allk), "wall_us_median": 1e3 * statistics.median(allw),
                           "hysteresis_ratio": ratio, "flagged": flagged})
        if flagged:
            reasons.append("%s: visit medians vary by %s (limit %.3fx): %s us" % (
                c["case"], "%.3fx" % ratio if ratio else "an unbounded factor", args.hysteresis,
                ", ".join("%.2f" % (1e3 * m) for m in medians)))
    after = health(torch)
    if not after["pass"]:
        reasons.append("health check after the set failed: " +
                       "; ".join(st["name"] + ": " + st["message"] for st in after["steps"] if not st["pass"]))
    accepted = not reasons
    acceptance = {"name": "torch-sdpa", "accepted": accepted, "reasons": reasons, "health_before": before,
                  "health_after": after, "hysteresis_limit": args.hysteresis, "visit_medians_us": visit_medians,
                  "cases": [c["case"] for c, _, _ in runnable], "device": device,
                  "torch_version": torch.__version__, "note": NOTE}

    # Per case: the ratio and the joint acceptance.
    all_ok = True
    for c in cases:
        kus = c["kiln"]["kernel_us_median"]
        tus = c.get("torch", {}).get("kernel_us_median")
        c["ratio_kiln_over_torch"] = kus / tus if kus and tus else None
        c["accepted"] = bool(accepted and c["kiln"]["timing_accepted"] and tus is not None
                             and not c["torch"].get("flagged", True))
        kchk = c["kiln"]["fp64_check"]
        tchk = c.get("torch", {}).get("fp64_check")
        all_ok = all_ok and not c["problems"] and bool(kchk and kchk.get("pass")) and bool(tchk and tchk.get("pass"))

    write({"format": "kiln-gpu-peers 1", "device": device, "torch_version": torch.__version__,
           "tolerance": {"atol": ATOL, "rtol": RTOL}, "kiln_timing_accepted": bool(
               replay.get("summary", {}).get("timing_accepted", False)),
           "cases": cases, "acceptance": acceptance})

    # The table.
    def us(x):
        return "%.1f" % x if x is not None else "-"

    def chk(x):
        return "-" if not x else ("pass" if x.get("pass") else "FAIL")

    width = max([len("case")] + [len(c["case"]) for c in cases])
    print("\n%-*s  %-22s  %-6s  %10s  %10s  %-20s  %7s  %-9s  %-9s  %s" % (
        width, "case", "shape", "mask", "kiln us", "torch us", "torch backend", "ratio", "fp64 kiln", "fp64 torch",
        "accepted"))
    for c in cases:
        t = c.get("torch", {})
        ratio = "%.3f" % c["ratio_kiln_over_torch"] if c["ratio_kiln_over_torch"] else "-"
        print("%-*s  %-22s  %-6s  %10s  %10s  %-20s  %7s  %-9s  %-9s  %s" % (
            width, c["case"], c["shape_text"], c["mask"], us(c["kiln"]["kernel_us_median"]),
            us(t.get("kernel_us_median")), t.get("backend") or "-", ratio, chk(c["kiln"]["fp64_check"]),
            chk(t.get("fp64_check")), "yes" if c["accepted"] else "no"))
        for p in c["problems"]:
            print("    problem: %s" % p)
    if accepted:
        print("\ntorch timing set ACCEPTED")
    else:
        print("\n!!!!!!!! TORCH TIMING SET REFUSED (its numbers are kept, marked refused) !!!!!!!!")
        for r in reasons:
            print("  - %s" % r)
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())

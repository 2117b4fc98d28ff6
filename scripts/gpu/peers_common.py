"""What every kind of case shares in the torch comparison (scripts/gpu/torch_peers.py).

The archive's manifests and source lines, the views kiln-replay --dump wrote, the FP64 check,
CUDA-event timing in the replay's scheme (health steps, visits, hysteresis) and the roofline.
Nothing here knows a kernel's math: that is peers_kinds.py.
"""

import math
import os
import statistics
import struct
import time

# Where the tensors live. The script always uses CUDA; a local test of the math may set "cpu".
DEVICE = "cuda"

WARMUPS = 2
MIN_REPS = 5
HEALTH_LIMITS_US = {"empty_sync": 1000.0, "copy_1mib": 20000.0, "tiny_kernel": 20000.0}

# The roofline's ceilings: stated figures of NVIDIA's H200 SXM datasheet, not measured here.
PEAK = {"fp32_tflops": 67.0, "hbm_tb_per_s": 4.8,
        "source": "stated: NVIDIA H200 SXM datasheet, FP32 without tensor cores 67 TFLOP/s, HBM3e 4.8 TB/s; "
                  "not measured (the device that ran is named in `device`)"}


def f32(x):
    """x rounded to float32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


# ---- the archive ------------------------------------------------------------------------------


def read_index(arch):
    with open(os.path.join(arch, "index.txt")) as f:
        return [line.strip() for line in f if line.strip()]


def read_manifest(arch, case):
    """{source, views {NAME: {elements, init, written}}, scalars {NAME: TEXT}} of a case's manifest."""
    m = {"source": "", "views": {}, "scalars": {}}
    with open(os.path.join(arch, case, "manifest.txt")) as f:
        for line in f:
            t = line.split()
            if not t:
                continue
            if t[0] == "source":
                m["source"] = line[len("source "):].strip()
            elif t[0] == "param" and len(t) >= 8 and t[2] == "view":
                m["views"][t[3]] = {"elements": int(t[4]), "init": t[5], "written": t[6] == "1"}
            elif t[0] == "param" and len(t) >= 5:
                m["scalars"][t[3]] = t[4]
    return m


def parse_source(source):
    """A manifest source line as (origin, what, shape_text, options, sets).

    `library KERNEL --shape S [--OPTION VALUE]... [--set KNOB=V]...` gives ("library", KERNEL, S,
    {OPTION: VALUE}, [KNOB=V]); `file PATH [--set ...]` gives ("file", PATH, None, {}, [...]).
    kiln gpu-capture writes a flag as `--trans-b true`; a bare flag reads as "true" too."""
    tokens = source.split()
    origin, what = (tokens[0], tokens[1]) if len(tokens) >= 2 else ("", "")
    options, sets = {}, []
    i = 2
    while i < len(tokens):
        t = tokens[i]
        i += 1
        if not t.startswith("--"):
            continue
        key, eq, value = t[2:].partition("=")
        if not eq:
            value = "true"
            if i < len(tokens) and not tokens[i].startswith("--"):
                value = tokens[i]
                i += 1
        if key == "set":
            sets.append(value)
        else:
            options[key] = value
    return origin, what, options.pop("shape", None), options, sets


def load_view(np, torch, path, dims):
    """A dumped float32 view as a tensor of shape dims on DEVICE."""
    count = math.prod(dims)
    data = np.fromfile(path, dtype="<f4")
    if data.size != count:
        raise ValueError("%s: %d floats, expected %d" % (path, data.size, count))
    return torch.from_numpy(data.copy()).reshape(dims).to(DEVICE)


def load_int_view(np, torch, path, dims):
    """A dumped integer view (its int32 words) as an int64 tensor of shape dims on DEVICE."""
    count = math.prod(dims)
    data = np.fromfile(path, dtype="<i4")
    if data.size != count:
        raise ValueError("%s: %d integers, expected %d" % (path, data.size, count))
    return torch.from_numpy(data.astype("int64")).reshape(dims).to(DEVICE)


# ---- the FP64 check ---------------------------------------------------------------------------


def fp64_check(torch, got, ref, bound):
    """|got - ref| <= bound element-wise: got any float tensor, ref and bound float64 (the
    tolerance per element, from the case's kind). NaN in got fails."""
    g = got.to(torch.float64).reshape(-1)
    r = ref.reshape(-1)
    b = bound.reshape(-1)
    diff = (g - r).abs()
    bad = ~(diff <= b)
    finite = torch.isfinite(g) & torch.isfinite(r)
    max_abs = float(diff[finite].max()) if bool(finite.any()) else 0.0
    nz = finite & (r != 0)
    max_rel = float((diff[nz] / r[nz].abs()).max()) if bool(nz.any()) else 0.0
    pos = finite & (b > 0)
    worst = float((diff[pos] / b[pos]).max()) if bool(pos.any()) else 0.0
    failing = int(bad.sum())
    first = int(bad.nonzero()[0, 0]) if failing else -1
    return {"pass": failing == 0, "elements": int(r.numel()), "failing": failing, "first_failing": first,
            "max_abs_err": max_abs, "max_rel_err": max_rel, "max_err_over_tolerance": worst}


# ---- timing -----------------------------------------------------------------------------------


# GPU cycles of torch.cuda._sleep enqueued before each timed call: the stream is busy while the
# host enqueues the start event, the call and the stop event, so the events time the call's
# kernels and not the host's launch latency (which varied 9-16 us between visits on the H200).
BUSY_CYCLES = 200000  # about 100 us at the H200's 1.98 GHz


def time_once(torch, fn, ctx):
    """(kernel ms from CUDA events around one call, host wall ms of the call to its synchronize)."""
    start = torch.cuda.Event(enable_timing=True)
    stop = torch.cuda.Event(enable_timing=True)
    with ctx():
        t0 = time.perf_counter()
        if hasattr(torch.cuda, "_sleep"):
            torch.cuda._sleep(BUSY_CYCLES)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        wall_ms = 1e3 * (time.perf_counter() - t0)
    return start.elapsed_time(stop), wall_ms


def graphed(torch, fn, ctx):
    """(callable, how): torch's call captured once in a CUDA graph and replayed, so that the events
    time its kernels and not Python's launch gaps (kiln-replay launches from C++); the eager call
    where capture fails. The graph replays the same kernels on the same buffers."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), ctx():
            for _ in range(3):
                fn()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with ctx(), torch.cuda.graph(graph):
            fn()
        graph.replay()
        torch.cuda.synchronize()
        return graph.replay, "cuda_graph"
    except Exception as e:  # an op that cannot be captured: time the eager call
        torch.cuda.synchronize()
        return fn, "eager (CUDA graph capture failed: %s)" % str(e).splitlines()[0][:200]


def pick_candidate(torch, candidates):
    """Runs each candidate (label, context factory, fn); keeps those that work. Returns (the
    fastest by a 10-call probe, the tried list, outputs by label)."""
    import warnings
    tried, outputs, best = [], {}, None
    for name, ctx, fn in candidates:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # an unsupported SDPA backend warns before it raises
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
            back = host.to(DEVICE).to("cpu")
            samples.append(1e6 * (time.perf_counter() - t0))
            ok = ok and bool(torch.equal(back, host))
        step("copy_1mib", samples, ok, "1 MiB host->device->host" + (", bytes equal" if ok else ": bytes differ"))
    except Exception as e:  # noqa: BLE001
        step("copy_1mib", [], False, str(e))
    try:
        x = torch.arange(1024, dtype=torch.int32, device=DEVICE)
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


def timed_set(torch, entries, visits, min_visit_ms, max_reps, hysteresis):
    """Times entries [(case, context factory, fn)] as kiln-replay times its cases: each call as a
    CUDA graph where it can be captured (graphed); health steps before and after; an untimed
    warm-up visit, then V visits, each
    running every case in turn with 2 warm-ups and R timed calls
    (R set in visit 1 so that a visit takes >= min_visit_ms); a case whose visit medians differ by
    more than `hysteresis` is flagged. Returns ({case: timing}, health before, after, reasons)."""
    reasons = []
    before = health(torch)
    if not before["pass"]:
        reasons.append("health check before the set failed: " +
                       "; ".join(st["name"] + ": " + st["message"] for st in before["steps"] if not st["pass"]))
    if not entries:
        reasons.append("no case could be timed")
    per = {case: {"reps": 0, "kernel": [], "wall": []} for case, _, _ in entries}
    timed_as = {}
    calls = []
    for case, ctx, fn in entries:
        call, how = graphed(torch, fn, ctx)
        timed_as[case] = how
        calls.append((case, ctx, call))
    # A warm-up visit, untimed: every case in turn as a visit runs it (on the H200 the first visit
    # of short cases ran 1.6-1.8x slower than the next two, which refused the set).
    for case, ctx, fn in calls:
        for _ in range(WARMUPS + MIN_REPS):
            time_once(torch, fn, ctx)
    for visit in range(visits):
        for case, ctx, fn in calls:
            p = per[case]
            p["kernel"].append([])
            p["wall"].append([])
            wall = 0.0
            for _ in range(WARMUPS):
                _, wall = time_once(torch, fn, ctx)
            if visit == 0:
                p["reps"] = int(min(max(MIN_REPS, math.ceil(min_visit_ms / max(wall, 1e-3))), max_reps))
            for _ in range(p["reps"]):
                kms, wms = time_once(torch, fn, ctx)
                p["kernel"][-1].append(kms)
                p["wall"][-1].append(wms)
    timings = {}
    for case, _, _ in entries:
        p = per[case]
        medians = [statistics.median(k) for k in p["kernel"]]
        allk = [x for k in p["kernel"] for x in k]
        allw = [x for w in p["wall"] for x in w]
        ratio = max(medians) / min(medians) if min(medians) > 0 else None
        flagged = ratio is None or ratio > hysteresis
        timings[case] = {"reps": p["reps"], "visits": [1e3 * m for m in medians],
                         "kernel_us_median": 1e3 * statistics.median(allk), "kernel_us_min": 1e3 * min(allk),
                         "kernel_us_max": 1e3 * max(allk), "wall_us_median": 1e3 * statistics.median(allw),
                         "hysteresis_ratio": ratio, "flagged": flagged, "timed_as": timed_as[case]}
        if flagged:
            reasons.append("%s: visit medians vary by %s (limit %.3fx): %s us" % (
                case, "%.3fx" % ratio if ratio else "an unbounded factor", hysteresis,
                ", ".join("%.2f" % (1e3 * m) for m in medians)))
    after = health(torch)
    if not after["pass"]:
        reasons.append("health check after the set failed: " +
                       "; ".join(st["name"] + ": " + st["message"] for st in after["steps"] if not st["pass"]))
    return timings, before, after, reasons


# ---- the roofline -----------------------------------------------------------------------------


def roofline(work, kiln_us, torch_us):
    """Achieved TFLOP/s and GB/s of both against PEAK, for work {flops, bytes}: the bound is the
    larger of the flops at the FP32 peak and the bytes at the HBM bandwidth (flops None: not
    counted, the bytes are the bound)."""
    flops, bytes_moved = work["flops"], work["bytes"]
    compute_us = flops / (PEAK["fp32_tflops"] * 1e6) if flops else 0.0  # 1 TFLOP/s = 1e6 flop per us
    memory_us = bytes_moved / (PEAK["hbm_tb_per_s"] * 1e6)  # 1 TB/s = 1e6 bytes per us
    bound_us = max(compute_us, memory_us)

    def achieved(us):
        if not us:
            return None
        return {"tflops": flops / us / 1e6 if flops is not None else None, "gb_per_s": bytes_moved / us / 1e3,
                "of_bound": bound_us / us}

    return {"flops": flops, "bytes": bytes_moved, "bound": "compute" if compute_us > memory_us else "memory",
            "bound_us": bound_us, "kiln": achieved(kiln_us), "torch": achieved(torch_us)}

"""The Llama example's command line (docs/llama.md).

    run.py generate --config configs/small.json --prompts 12,5 --steps 32 [--dtype bf16] [--threads 2] [--isa avx2]
    run.py check    --config configs/small.json --steps 32          # against the NumPy float64 model
    run.py bench    --config configs/tinyllama-1.1b.json --prompt 128 --steps 256 --threads 1,2
    run.py save-weights --config configs/small.json --seed 0 --out small.safetensors

Weights come from --weights FILE.safetensors (Hugging Face names, weights.py) or are drawn
from --seed. Prompts are token ids drawn from --prompt-seed, one per length in --prompts.
"""

import argparse
import hashlib
import json
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import weights as W  # noqa: E402


def load_weights(args, cfg):
    if args.weights:
        tensors, _ = W.read_safetensors(args.weights)
        out = {}
        for name, a in tensors.items():  # BF16 tensors come as bits; the models take float32 values
            out[name] = W.from_bf16_bits(a) if a.dtype == np.uint16 else a
        W.check_weights(cfg, out)
        return out
    return W.generate(cfg, args.seed)


def make_prompts(cfg, lengths, seed):
    rng = np.random.default_rng(seed)
    return [rng.integers(0, cfg["vocab"], n).tolist() for n in lengths]


def lengths_arg(text):
    try:
        out = [int(t) for t in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma-separated list of integers") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"'{text}': every value must be at least 1")
    return out


def variants_arg(text):
    """"f32,bf16:bf16_dot" -> [("f32", "ascending"), ("bf16", "bf16_dot")]."""
    out = []
    for item in (t for t in text.split(",") if t):
        dtype, _, order = item.partition(":")
        if dtype not in ("f32", "bf16") or order not in ("", "ascending", "bf16_dot", "bf16_pairs"):
            raise argparse.ArgumentTypeError(
                f"{item!r}: expected f32 or bf16, optionally :ascending, :bf16_dot or :bf16_pairs")
        out.append((dtype, order or "ascending"))
    return out


def digest(tokens):
    return hashlib.sha256(np.ascontiguousarray(tokens, dtype=np.int64).tobytes()).hexdigest()[:16]


def knobs_of(args):
    knobs = {"threads": args.threads}
    if args.isa:
        knobs["isa"] = args.isa
    return knobs


def run_kiln(args, cfg, w, prompts, steps):
    """Builds the Kiln model, then times a prefill and `steps` decode steps."""
    from kiln_model import KilnLlama

    t0 = time.perf_counter()
    model = KilnLlama(cfg, w, weight_dtype=args.dtype, knobs=knobs_of(args), gemm_order=args.gemm_order)
    build_s = time.perf_counter() - t0
    compiled = len(model.kernels)
    tokens, logits, times = _timed_generate(model, prompts, steps)
    if len(model.kernels) != compiled:
        raise RuntimeError("a kernel was compiled after the model was built")
    return {"impl": f"kiln-{args.dtype}", "build_s": build_s, "kernels": compiled, "tokens": tokens,
            "logits": logits, **times}


def run_torch(args, cfg, w, prompts, steps):
    from reference import Reference

    t0 = time.perf_counter()
    model = Reference(cfg, w, backend=f"torch-{args.dtype}", weight_dtype=args.dtype, threads=args.threads)
    build_s = time.perf_counter() - t0
    tokens, logits, times = _timed_generate(model, prompts, steps)
    return {"impl": f"torch-{args.dtype}", "build_s": build_s, "tokens": tokens, "logits": logits, **times}


def _timed_generate(model, prompts, steps):
    if hasattr(model, "reset_times"):
        model.reset_times()
    t0 = time.perf_counter()
    logits = model.prefill(prompts)
    prefill_s = time.perf_counter() - t0
    prefill_breakdown = _breakdown(model)
    out, all_logits, step_s = [logits.argmax(-1)], [logits], []
    for _ in range(steps):
        t0 = time.perf_counter()
        logits = model.decode(out[-1])
        step_s.append(time.perf_counter() - t0)
        all_logits.append(logits)
        out.append(logits.argmax(-1))
    tokens = np.stack(out, 1)
    times = {"prefill_s": prefill_s, "decode_step_s": step_s}
    if hasattr(model, "reset_times"):
        times["breakdown"] = {"prefill": prefill_breakdown, "decode": _breakdown(model)}
    return tokens, np.stack(all_logits), times


def _breakdown(model):
    """Seconds and launches per kernel kind since the last call (then cleared)."""
    if not hasattr(model, "reset_times"):
        return None
    out = {k: [v, model.calls.get(k, 0)] for k, v in model.times.items()}
    model.reset_times()
    return out


def summary(r, prompts):
    n_prompt = sum(len(p) for p in prompts)
    steps = r["decode_step_s"]
    B = r["tokens"].shape[0]
    out = {k: v for k, v in r.items() if k not in ("tokens", "logits", "decode_step_s")}
    out["prefill_tokens_per_s"] = n_prompt / r["prefill_s"]
    if steps:
        out["decode_tokens_per_s"] = B * len(steps) / sum(steps)
        out["decode_step_ms"] = {"median": 1e3 * float(np.median(steps)), "min": 1e3 * min(steps), "max": 1e3 * max(steps)}
    out["tokens_sha256"] = digest(r["tokens"])
    out["tokens"] = r["tokens"].tolist()
    return out


def cmd_generate(args):
    cfg = W.load_config(args.config)
    w = load_weights(args, cfg)
    prompts = make_prompts(cfg, args.prompts, args.prompt_seed)
    r = (run_torch if args.impl == "torch" else run_kiln)(args, cfg, w, prompts, args.steps)
    s = summary(r, prompts)
    if args.logits_out:
        np.save(args.logits_out, r["logits"])
    if args.json:
        print(json.dumps(s))
    else:
        print(f"{s['impl']}: {len(prompts)} sequence(s), prompts {args.prompts}, {args.steps} decode steps, "
              f"threads {args.threads}{', isa ' + args.isa if args.isa else ''}")
        for b, row in enumerate(s["tokens"]):
            print(f"  sequence {b}: {row}")
        print(f"  tokens sha256 {s['tokens_sha256']}; prefill {s['prefill_tokens_per_s']:.1f} tokens/s"
              + (f", decode {s['decode_tokens_per_s']:.2f} tokens/s" if args.steps else ""))
    return 0


def compare(kiln_logits, ref_logits, kiln_tokens, ref_tokens, tol):
    """Per step: max |kiln - ref| over the batch's logits, against tol * max(1, max |ref|)."""
    worst, bad = 0.0, []
    for step in range(ref_logits.shape[0]):
        err = float(np.abs(kiln_logits[step] - ref_logits[step]).max())
        scale = max(1.0, float(np.abs(ref_logits[step]).max()))
        worst = max(worst, err / scale)
        bound = tol * scale
        if not err <= bound:
            bad.append((step, err, bound))
    same = bool(np.array_equal(kiln_tokens, ref_tokens))
    return {"max_scaled_err": worst, "bad_steps": bad, "tokens_identical": same}


def cmd_check(args):
    """Kiln against the NumPy float64 model on the same weights and prompts: logits at every
    step within the tolerance, greedy tokens identical. The reference is fed Kiln's tokens
    (teacher forcing), so one early difference cannot hide later ones."""
    from kiln_model import KilnLlama
    from reference import Reference

    cfg = W.load_config(args.config)
    w = load_weights(args, cfg)
    prompts = make_prompts(cfg, args.prompts, args.prompt_seed)
    model = KilnLlama(cfg, w, weight_dtype=args.dtype, knobs=knobs_of(args), gemm_order=args.gemm_order)
    compiled = len(model.kernels)
    ref = Reference(cfg, w, backend="numpy-f64", weight_dtype=args.dtype, gemm_order=args.gemm_order)
    kl, rl = [model.prefill(prompts)], [ref.prefill(prompts)]
    kt, rt = [kl[-1].argmax(-1)], [rl[-1].argmax(-1)]
    for _ in range(args.steps):
        kl.append(model.decode(kt[-1]))
        rl.append(ref.decode(kt[-1]))
        kt.append(kl[-1].argmax(-1))
        rt.append(rl[-1].argmax(-1))
    res = compare(np.stack(kl), np.stack(rl), np.stack(kt, 1), np.stack(rt, 1), args.tolerance)
    res["kernels"], res["kernels_after"] = compiled, len(model.kernels)
    res["tokens_sha256"] = digest(np.stack(kt, 1))
    ok = not res["bad_steps"] and res["tokens_identical"] and compiled == res["kernels_after"]
    print(json.dumps({"passed": ok, **res}))
    return 0 if ok else 1


def cmd_save(args):
    cfg = W.load_config(args.config)
    w = W.generate(cfg, args.seed)
    if args.dtype == "bf16":
        w = {k: W.to_bf16_bits(v) for k, v in w.items()}
    W.write_safetensors(args.out, w, metadata={"format": "pt", "kiln_config": cfg["name"], "seed": args.seed})
    print(f"wrote {args.out}: {len(w)} tensors")
    return 0


def cmd_pair(args):
    """Kiln and PyTorch in one process on the same weights and prompt, measured in turns: the
    prefill `--rounds` times (the first of each round alternating), then every decode step of
    Kiln followed (or preceded, alternating) by the same step of PyTorch. Each turn gives a
    paired ratio (PyTorch's time / Kiln's); one JSON line."""
    from kiln_model import KilnLlama
    from reference import Reference

    cfg = W.load_config(args.config)
    w = load_weights(args, cfg)
    prompts = make_prompts(cfg, args.prompts, args.prompt_seed)
    t0 = time.perf_counter()
    models = {"kiln": KilnLlama(cfg, w, weight_dtype=args.dtype, knobs=knobs_of(args), gemm_order=args.gemm_order)}
    build = {"kiln": time.perf_counter() - t0}
    t0 = time.perf_counter()
    models["torch"] = Reference(cfg, w, backend=f"torch-{args.dtype}", weight_dtype=args.dtype, threads=args.threads)
    build["torch"] = time.perf_counter() - t0
    compiled = len(models["kiln"].kernels)
    torch_error = None
    try:  # PyTorch's bf16 matmul needs AVX-512 (oneDNN 2.6 in torch 1.13): elsewhere it refuses
        models["torch"].prefill([prompts[0][:1]])
    except RuntimeError as e:
        torch_error = f"PyTorch {args.dtype} does not run here: {e}"
        del models["torch"]
    names = list(models)

    def turn(fn, order):
        out = {}
        for name in (n for n in order if n in models):
            t0 = time.perf_counter()
            out[name] = (fn(models[name]), time.perf_counter() - t0)
        return out

    orders = (("kiln", "torch"), ("torch", "kiln"))
    prefill, logits = [], {}
    for r in range(args.rounds):
        models["kiln"].reset_times()
        res = turn(lambda m: m.prefill(prompts), orders[r % 2])
        prefill.append({k: v[1] for k, v in res.items()})
        logits = {k: v[0] for k, v in res.items()}
    breakdown = {"prefill": _breakdown(models["kiln"])}
    tokens = {k: [v.argmax(-1)] for k, v in logits.items()}
    decode = []
    for step in range(args.steps):
        res = {}
        for name in (n for n in orders[step % 2] if n in models):
            t0 = time.perf_counter()
            out = models[name].decode(tokens[name][-1])
            res[name] = time.perf_counter() - t0
            tokens[name].append(out.argmax(-1))
        decode.append(res)
    breakdown["decode"] = _breakdown(models["kiln"])
    if len(models["kiln"].kernels) != compiled:
        raise RuntimeError("a kernel was compiled after the model was built")

    def stats(xs):
        return {"median": float(np.median(xs)), "min": float(min(xs)), "max": float(max(xs))}

    n_prompt = sum(len(p) for p in prompts)
    B = len(prompts)
    out = {"dtype": args.dtype, "gemm_order": args.gemm_order, "threads": args.threads, "isa": args.isa or "native",
           "build_s": build,
           "kernels": compiled, "breakdown": breakdown, "torch_error": torch_error}
    for name in names:
        pre = [p[name] for p in prefill]
        out[name] = {"prefill_s": stats(pre), "prefill_tokens_per_s": n_prompt / float(np.median(pre)),
                     "tokens_sha256": digest(np.stack(tokens[name], 1)), "tokens": np.stack(tokens[name], 1).tolist()}
        if decode:
            dec = [d[name] for d in decode]
            out[name].update(decode_step_s=stats(dec), decode_tokens_per_s=B * len(dec) / sum(dec))
    if "torch" in names:
        out["paired_prefill"] = stats([p["torch"] / p["kiln"] for p in prefill])
        if decode:
            out["paired_decode"] = stats([d["torch"] / d["kiln"] for d in decode])
    print(json.dumps(out))
    return 0


def cmd_bench(args):
    """One process per (thread count, weights type) runs Kiln and PyTorch in turns (cmd_pair);
    the thread pools of PyTorch's OpenMP and BLAS are sized by the environment, as its
    set_num_threads alone leaves its GEMMs on every core (measured here). Then Kiln alone at
    every --isa: its tokens must be the same at every thread count and ISA or the run fails."""
    cfg = W.load_config(args.config)
    weights_file = args.weights
    if not weights_file:
        weights_file = os.path.join(args.workdir, f"{cfg['name']}-seed{args.seed}.safetensors")
        if not os.path.exists(weights_file):
            os.makedirs(args.workdir, exist_ok=True)
            print(f"writing {weights_file}", flush=True)
            W.write_safetensors(weights_file, W.generate(cfg, args.seed), metadata={"seed": args.seed})

    def child(command, variant, threads, extra=()):
        dtype, order = variant
        cmd = [sys.executable, os.path.abspath(__file__), command, "--config", args.config, "--weights", weights_file,
               "--prompts", ",".join(map(str, args.prompts)), "--prompt-seed", str(args.prompt_seed),
               "--steps", str(args.steps), "--dtype", dtype, "--gemm-order", order, "--threads", str(threads), *extra]
        env = dict(os.environ, OMP_NUM_THREADS=str(threads), OPENBLAS_NUM_THREADS=str(threads),
                   MKL_NUM_THREADS=str(threads))
        if command == "pair" and args.pair_isa == "avx2":
            # Both sides on AVX2 code: Kiln's isa knob; PyTorch's own kernels and the oneDNN
            # inside it limited by their documented switches.
            cmd += ["--isa", "avx2"]
            # (its f32 GEMMs are the system BLAS, OpenBLAS here: its Haswell kernels).
            env.update(ATEN_CPU_CAPABILITY="avx2", ONEDNN_MAX_CPU_ISA="AVX2", DNNL_MAX_CPU_ISA="AVX2",
                       OPENBLAS_CORETYPE="Haswell")
        print("$", " ".join(cmd[2:]), flush=True)
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if p.returncode:
            raise SystemExit(f"{command} failed ({p.returncode}):\n{p.stderr[-3000:]}")
        return json.loads(p.stdout.strip().splitlines()[-1])

    def label(variant):  # "bf16" or "bf16, bf16_dot"
        return variant[0] if variant[1] == "ascending" else f"{variant[0]}, {variant[1]}"

    pairs, digests = [], {}
    for threads in args.threads_list:
        for variant in args.variants:
            r = child("pair", variant, threads, ("--rounds", str(args.rounds)))
            pairs.append(r)
            digests[(label(variant), threads, "native")] = r["kiln"]["tokens_sha256"]
            t = r.get("torch", {})
            print(f"  kiln prefill {r['kiln']['prefill_tokens_per_s']:.1f} tok/s, torch "
                  f"{t.get('prefill_tokens_per_s', 0):.1f}; decode kiln {r['kiln'].get('decode_tokens_per_s', 0):.2f}"
                  f" tok/s, torch {t.get('decode_tokens_per_s', 0):.2f}{'; ' + r['torch_error'] if r['torch_error'] else ''}",
                  flush=True)
    for isa in args.isas:
        if not _isa_runs(isa):
            print(f"isa {isa}: not run (this CPU cannot run its code)", flush=True)
            continue
        for variant in args.variants:
            r = child("generate", variant, args.threads_list[-1], ("--isa", isa, "--json"))
            digests[(label(variant), args.threads_list[-1], isa)] = r["tokens_sha256"]
    reproducible = all(len({d for (v, _, _), d in digests.items() if v == label(variant)}) == 1
                       for variant in args.variants)

    def rng(s, scale=1.0, f="{:.2f}"):
        return f"{f.format(s['median'] * scale)} ({f.format(s['min'] * scale)}–{f.format(s['max'] * scale)})"

    lines = [f"Llama {cfg['name']} ({cfg['n_layers']} layers, d_model {cfg['d_model']}), prompt of "
             f"{'+'.join(map(str, args.prompts))} tokens, {args.steps} greedy decode steps; Kiln and PyTorch "
             f"{_torch_version()} eager in turns in one process"
             f"{', both on AVX2 code' if args.pair_isa == 'avx2' else ''}; tokens/s from median times; paired = PyTorch's "
             "time / Kiln's in the same turn, median (min–max) (above 1: Kiln is faster).", "",
             "| weights, Kiln's GEMM order | threads | prefill tok/s Kiln | PyTorch | paired | decode tok/s Kiln | PyTorch | paired | "
             "decode step ms Kiln | PyTorch |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in pairs:
        k, t = r["kiln"], r.get("torch")
        dec = r.get("paired_decode")
        if t is None:
            lines.append(f"| {label((r['dtype'], r['gemm_order']))} | {r['threads']} | {k['prefill_tokens_per_s']:.1f} | — | — | "
                         f"{k.get('decode_tokens_per_s', 0):.2f} | — | — | "
                         f"{rng(k['decode_step_s'], 1e3, '{:.0f}') if 'decode_step_s' in k else '—'} | — |")
            continue
        lines.append(
            f"| {label((r['dtype'], r['gemm_order']))} | {r['threads']} | {k['prefill_tokens_per_s']:.1f} | {t['prefill_tokens_per_s']:.1f} | "
            f"{rng(r['paired_prefill'])} | {k.get('decode_tokens_per_s', 0):.2f} | {t.get('decode_tokens_per_s', 0):.2f} | "
            f"{rng(dec) if dec else '—'} | {rng(k['decode_step_s'], 1e3, '{:.0f}') if dec else '—'} | "
            f"{rng(t['decode_step_s'], 1e3, '{:.0f}') if dec else '—'} |")
    lines += [f"- {label((r['dtype'], r['gemm_order']))}, {r['threads']} thread(s): {r['torch_error'].splitlines()[0]}"
              for r in pairs
              if r.get("torch_error")]
    lines += ["", "Kiln's time per kernel kind, seconds (share), last prefill round and all decode steps:", ""]
    for r in pairs:
        for phase, parts in r["breakdown"].items():
            if not parts:
                continue
            total = sum(v[0] for v in parts.values())
            ranked = sorted(parts.items(), key=lambda kv: -kv[1][0])
            lines.append(f"- {label((r['dtype'], r['gemm_order']))}, {r['threads']} thread(s), {phase}: " +
                         ", ".join(f"{name} {v[0]:.3g} ({100 * v[0] / total:.0f}%)" for name, v in ranked))
    lines += ["", "Kiln's tokens (sha256 of every output token): " + "; ".join(
        f"{v} threads={th} isa={isa} {d}" for (v, th, isa), d in digests.items()),
        f"Identical at every thread count and ISA (per weights type and order): {'yes' if reproducible else 'NO'}"]
    text = "\n".join(lines)
    print()
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            json.dump({"config": cfg, "prompts": args.prompts, "steps": args.steps, "pairs": pairs,
                       "digests": {" ".join(map(str, k)): v for k, v in digests.items()},
                       "reproducible": reproducible, "table": text}, f, indent=1)
        print(f"\nwrote {args.out}")
    return 0 if reproducible else 1


def _isa_runs(isa):
    """Whether this CPU runs Kiln's code for `isa` (a tiny kernel compiled and launched)."""
    import kiln

    try:
        kiln.library("softmax", shape=(1, 16), knobs={"isa": isa})(np.zeros((1, 16), np.float32))
        return True
    except kiln.KilnError:
        return False


def _torch_version():
    try:
        import torch

        return torch.__version__
    except ImportError:
        return "(not installed)"


def main(argv=None):
    ap = argparse.ArgumentParser(prog="run.py", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)

    def common(p, steps):
        p.add_argument("--config", required=True, help="configs/*.json")
        p.add_argument("--weights", help="a safetensors file (Hugging Face names); default: drawn from --seed")
        p.add_argument("--seed", type=int, default=0, help="weights' seed (default 0)")
        p.add_argument("--prompt-seed", type=int, default=1)
        p.add_argument("--steps", type=int, default=steps, help="decode steps after the prefill")
        p.add_argument("--dtype", choices=("f32", "bf16"), default="f32", help="weights' storage")
        p.add_argument("--threads", type=int, default=1)
        p.add_argument("--isa", choices=("avx2", "avx512"), help="Kiln's isa knob (default: the host's)")
        p.add_argument("--gemm-order", choices=("ascending", "bf16_dot", "bf16_pairs"), default="ascending",
                       help="Kiln's projections: K ascending in f32, the bf16 dot order (AMX tiles where "
                            "the host has them) or the bf16 pairs order (VDPBF16PS where the host has "
                            "AVX512-BF16); the bf16 orders round the activations to bf16")

    g = sub.add_parser("generate", help="greedy generation, tokens and tokens/s")
    common(g, 32)
    g.add_argument("--prompts", type=lengths_arg, default=[12, 5], help="prompt lengths, e.g. 128 or 12,5,30")
    g.add_argument("--impl", choices=("kiln", "torch"), default="kiln")
    g.add_argument("--json", action="store_true")
    g.add_argument("--logits-out", help="save every step's logits [steps+1, B, vocab] as .npy")
    c = sub.add_parser("check", help="Kiln against the NumPy float64 model")
    common(c, 32)
    c.add_argument("--prompts", type=lengths_arg, default=[12, 5, 30])
    c.add_argument("--tolerance", type=float, default=2e-4,
                   help="per step, max |kiln - ref| <= tol * max(1, max |ref|) (default 2e-4)")
    pr = sub.add_parser("pair", help="Kiln and PyTorch in turns in this process (what bench runs)")
    common(pr, 256)
    pr.add_argument("--prompts", type=lengths_arg, default=[128])
    pr.add_argument("--rounds", type=int, default=3, help="prefill rounds")
    s = sub.add_parser("save-weights", help="write drawn weights as safetensors")
    s.add_argument("--config", required=True)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--dtype", choices=("f32", "bf16"), default="f32")
    s.add_argument("--out", required=True)
    b = sub.add_parser("bench", help="Kiln against PyTorch eager, tokens/s, in one run")
    b.add_argument("--config", required=True)
    b.add_argument("--weights")
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--prompt-seed", type=int, default=1)
    b.add_argument("--prompts", type=lengths_arg, default=[128])
    b.add_argument("--steps", type=int, default=256)
    b.add_argument("--threads", dest="threads_list", type=lengths_arg, default=[1, 2])
    b.add_argument("--variants", type=variants_arg, default=variants_arg("f32,bf16,bf16:bf16_dot,bf16:bf16_pairs"),
                   help="weights[:GEMM order], comma separated (default f32,bf16,bf16:bf16_dot,bf16:bf16_pairs)")
    b.add_argument("--isas", type=lambda t: [x for x in t.split(",") if x], default=["avx2", "avx512"],
                   help="Kiln runs again with each isa (reproducibility); one this CPU cannot run is skipped, saying so")
    b.add_argument("--rounds", type=int, default=3, help="prefill rounds per pair")
    b.add_argument("--pair-isa", choices=("native", "avx2"), default="native",
                   help="avx2: Kiln and PyTorch both limited to AVX2 code in the pairs (as on a CPU without AVX-512)")
    b.add_argument("--workdir", default=os.path.join(HERE, "..", "..", "out", "llama"))
    b.add_argument("--out", help="write the runs and the table as JSON")
    args = ap.parse_args(argv)
    try:
        return {"generate": cmd_generate, "check": cmd_check, "pair": cmd_pair, "save-weights": cmd_save,
                "bench": cmd_bench}[args.cmd](args)
    except (W.ConfigError, W.SafetensorsError, ValueError) as e:
        print(f"run.py {args.cmd}: error: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())

"""The kinds of case the torch comparison knows (scripts/gpu/torch_peers.py), one class each.

A kind is a library kernel: its --shape fields and options (src/kernels/registry.cpp), its
views in parameter order (the output last), its FP64 reference (src/kernels/reference.cpp's
math, in torch.float64 on the tensors' device), the tolerance of the FP64 check, the torch
calls that compute the same thing in FP32, and its useful flops. An example file is checked as
the library request it is an instance of (`request_of_example`).
"""

import contextlib
import math
import os
import re

from peers_common import f32

U = 2.0 ** -24  # float32's unit roundoff
ATOL = 5e-5
RTOL = 5e-5
FLAG_OFF = {"false", "0", "off"}


class Skip(Exception):
    """A case this comparison does not model; the message says why."""


def flag(value):
    return value not in FLAG_OFF


AS_ISSUED = "as_issued/"  # the label's prefix of the SDPA call issue 31 names (sdpa_candidates)


def sdpa_choice(torch, q, k, v, group, call):
    """The backend torch's dispatcher picks for the call issue 31 names (torch._fused_sdp_choice,
    a private function: None where this torch lacks it or it refuses the arguments)."""
    try:
        from torch.nn.attention import SDPBackend
        code = torch._fused_sdp_choice(q, k, v, attn_mask=call.get("attn_mask"), dropout_p=0.0,
                                       is_causal=call.get("is_causal", False), scale=call.get("scale"),
                                       enable_gqa=group > 1)
        for name in ("ERROR", "MATH", "FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "OVERRIDEABLE"):
            member = getattr(SDPBackend, name, None)
            if member is not None and int(member) == int(code):
                return name.lower()
        return "code %s" % code
    except Exception:  # noqa: BLE001 - private API: absent or changed
        return None


def sdpa_candidates(torch, q, k, v, group, call):
    """([(label, context, fn)], facts): issue 31's call (AS_ISSUED), then every SDPA backend torch
    has with every way to give it grouped K/V heads (enable_gqa, or K/V repeated to the query
    heads before the timed call; one query head per KV head: mha); `call`: the keyword arguments
    of every call (scale, mask). facts: the backend torch picks for issue 31's call."""
    F = torch.nn.functional

    def sdpa(kk, vv, kwargs):
        return lambda: F.scaled_dot_product_attention(q, kk, vv, **call, **kwargs)

    variants = ([("enable_gqa", {"enable_gqa": True}, k, v),
                 ("repeat_kv", {}, k.repeat_interleave(group, dim=1), v.repeat_interleave(group, dim=1))]
                if group > 1 else [("mha", {}, k, v)])
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backends = [(name.lower(), (lambda b=getattr(SDPBackend, name): sdpa_kernel(b)))
                    for name in ["FLASH_ATTENTION", "EFFICIENT_ATTENTION", "CUDNN_ATTENTION", "MATH"]
                    if hasattr(SDPBackend, name)]
    except ImportError:
        backends = [("default", contextlib.nullcontext)]
    # Issue 31's call: SDPA with enable_gqa=True (mha: one query head per KV head) and torch's own
    # choice of backend, first, so that it is timed beside the fastest call (AS_ISSUED).
    label, kwargs, kk, vv = variants[0]
    candidates = [(AS_ISSUED + label, contextlib.nullcontext, sdpa(kk, vv, kwargs))]
    candidates += [(backend + "/" + label, ctx, sdpa(kk, vv, kwargs))
                   for backend, ctx in backends for label, kwargs, kk, vv in variants]
    return candidates, {"as_issued_backend": sdpa_choice(torch, q, k, v, group, call)}


class Kind:
    name = ""
    int_views = ()  # integer views (lengths, offsets): dumped as their int32 words
    fields = []     # --shape fields, in the registry's order
    neutral = ()    # options that change the schedule, never the math
    handled = ()    # options `params` reads
    defaults = {}   # options modelled only at their default: name -> the values that mean it
    call = ""       # the torch call, in words

    def params(self, s, options):
        return {}

    def views(self, s, p):
        """[(name, dims)] in parameter order, the output last."""
        raise NotImplementedError

    def reference(self, torch, x, s, p):
        raise NotImplementedError

    def tolerance(self, s, p):
        return {"rule": "|got - ref| <= atol + rtol |ref|", "atol": ATOL, "rtol": RTOL}

    def bound(self, torch, x, ref, s, p):
        """The tolerance per element, float64 like ref."""
        return ATOL + RTOL * ref.abs()

    def candidates(self, torch, x, s, p):
        """([(label, context factory, fn)], facts) on the FP32 inputs x."""
        raise NotImplementedError

    def flops(self, s, p):
        return None  # not counted: the kernel is bound by its bytes

    def finish(self, torch, x, s, p, out):
        """A torch candidate's output as the kernel's output view (outside the timed call)."""
        return out


def configure(kind, shape_text, options):
    """(shape {field: int}, params) of a request, or Skip naming what is not modelled."""
    try:
        dims = [int(v) for v in (shape_text or "").split(",")]
    except ValueError:
        dims = []
    if len(dims) != len(kind.fields):
        raise Skip("%s: --shape '%s' is not %s" % (kind.name, shape_text, ",".join(kind.fields)))
    for key, value in sorted(options.items()):
        if key in kind.neutral or key in kind.handled:
            continue
        if value not in kind.defaults.get(key, ()):
            raise Skip("%s --%s %s is not modelled by this comparison" % (kind.name, key, value))
    s = dict(zip(kind.fields, dims))
    try:
        return s, kind.params(s, options)
    except ValueError as e:  # a number that does not parse
        raise Skip("%s: %s" % (kind.name, e))


# ---- attention ----------------------------------------------------------------------------------


class Attention(Kind):
    name = "attention"
    fields = ["B", "Hq", "Hkv", "Q", "K", "D", "Dv"]
    neutral = ("block", "heads", "fma", "split", "merge-columns", "lanes", "qk", "arg")
    handled = ("mask", "scale", "kv-cache", "varlen", "page", "pages", "capacity")
    defaults = {"kv-dtype": {"f32"}}
    int_views = ("lens", "cu_seqlens")
    call = ("torch.nn.functional.scaled_dot_product_attention in FP32, the fastest backend that runs; GQA by "
            "enable_gqa or with K and V expanded before the timed call; beside it, timed in the same set, the "
            "call issue 31 names: enable_gqa=True and torch's own choice of backend")

    def params(self, s, options):
        mask = options.get("mask", "causal")  # the library's default mask is causal
        if mask not in ("none", "causal"):
            raise Skip("attention: mask '%s' is not modelled" % mask)
        if s["Hq"] % s["Hkv"] != 0:
            raise Skip("attention: Hq is not a multiple of Hkv")
        scale = f32(float(options["scale"])) if "scale" in options else f32(1.0 / math.sqrt(s["D"]))
        cache = options.get("kv-cache", "none")
        if cache not in ("none", "dense"):
            raise Skip("attention --kv-cache %s is not modelled by this comparison" % cache)
        varlen = flag(options.get("varlen", "false"))
        if varlen and cache != "dense":
            raise Skip("attention --varlen needs --kv-cache dense here")
        return {"mask": mask, "scale": scale, "scale_given": "scale" in options, "cache": cache == "dense",
                "varlen": varlen}

    def views(self, s, p):
        B, Hq, Hkv, Q, K, D, Dv = (s[f] for f in self.fields)
        if p.get("varlen"):
            return [("q", [Q, Hq, D]), ("k", [B, Hkv, K, D]), ("v", [B, Hkv, K, Dv]), ("lens", [B]),
                    ("cu_seqlens", [B + 1]), ("o", [Q, Hq, Dv])]
        if p.get("cache"):
            return [("q", [B, Hq, Q, D]), ("k", [B, Hkv, K, D]), ("v", [B, Hkv, K, Dv]), ("lens", [B]),
                    ("o", [B, Hq, Q, Dv])]
        return [("q", [B, Hq, Q, D]), ("k", [B, Hkv, K, D]), ("v", [B, Hkv, K, Dv]), ("o", [B, Hq, Q, Dv])]

    # ---- a KV cache (docs/kernels.md, "KV caches"): sequence b's keys are positions [0, lens[b]);
    # its n queries the positions lens[b] - n .. lens[b] - 1; query i sees key j iff j < lens[b]
    # and (causal) j <= i + lens[b] - n. Packed (varlen): sequence b's queries are rows
    # cu[b] .. cu[b+1] - 1 of q; a token of no sequence (offsets that decrease, before cu[0],
    # from cu[B] on) is zeros.

    @staticmethod
    def sequences(s, p, x):
        """[(b, first row of q, queries n)] of the cache cases."""
        lens = [int(v) for v in x["lens"].tolist()]
        if not p["varlen"]:
            return [(b, 0, s["Q"]) for b in range(s["B"])], lens
        cu = [int(v) for v in x["cu_seqlens"].tolist()]
        if any(cu[i] > cu[i + 1] for i in range(s["B"])):
            return [], lens
        return [(b, cu[b], cu[b + 1] - cu[b]) for b in range(s["B"])], lens

    def cache_reference(self, torch, x, s, p):
        q, k, v = x["q"], x["k"], x["v"]
        group = s["Hq"] // s["Hkv"]
        out = torch.zeros(*self.views(s, p)[-1][1], dtype=torch.float64, device=q.device)
        seqs, lens = self.sequences(s, p, x)
        for b, first, n in seqs:
            L = lens[b]
            if n <= 0:
                continue
            i = torch.arange(n, device=q.device).unsqueeze(1)
            j = torch.arange(L, device=q.device).unsqueeze(0)
            visible = (j <= i + (L - n)) if p["mask"] == "causal" else torch.ones(n, L, dtype=torch.bool,
                                                                                  device=q.device)
            for h in range(s["Hq"]):
                kv = h // group
                qh = q[first:first + n, h] if p["varlen"] else q[b, h]
                scores = (p["scale"] * (qh @ k[b, kv, :L].transpose(0, 1))).masked_fill(~visible, float("-inf"))
                row_max = scores.max(dim=1, keepdim=True).values if L > 0 else torch.full(
                    (n, 1), float("-inf"), dtype=torch.float64, device=q.device)
                has_key = torch.isfinite(row_max)
                w = torch.where(has_key, torch.exp(scores - torch.where(has_key, row_max, torch.zeros_like(row_max))),
                                torch.zeros_like(scores))
                total = w.sum(dim=1, keepdim=True)
                w = torch.where(total > 0, w / torch.where(total > 0, total, torch.ones_like(total)), w)
                o = w @ v[b, kv, :L]
                if p["varlen"]:
                    out[first:first + n, h] = o
                else:
                    out[b, h] = o
        return out

    def cache_candidates(self, torch, x, s, p):
        """One SDPA call over the batch padded to its longest sequence (queries and keys; the
        padding made before the timed call, the rows taken back after it), with a boolean mask
        per sequence (True = attend), GQA by enable_gqa or K and V expanded beforehand."""
        seqs, lens = self.sequences(s, p, x)
        B, Hq, D = s["B"], s["Hq"], s["D"]
        L = max([lens[b] for b, _, n in seqs if n > 0] + [1])
        n_max = max([n for _, _, n in seqs] + [1])
        if p["varlen"]:
            qp = torch.zeros(B, Hq, n_max, D, dtype=x["q"].dtype, device=x["q"].device)
            for b, first, n in seqs:
                if n > 0:
                    qp[b, :, :n] = x["q"][first:first + n].transpose(0, 1)
        else:
            qp = x["q"]
        i = torch.arange(qp.shape[2], device=qp.device).view(1, -1, 1)
        j = torch.arange(L, device=qp.device).view(1, 1, -1)
        n_b = torch.tensor([n if n > 0 else 0 for _, _, n in seqs] if p["varlen"] else [s["Q"]] * B,
                           device=qp.device).view(-1, 1, 1) if seqs else torch.zeros(B, 1, 1, device=qp.device)
        len_b = torch.tensor(lens, device=qp.device).view(-1, 1, 1)
        visible = j < len_b
        if p["mask"] == "causal":
            visible = visible & (j <= i + (len_b - n_b))
        mask = visible.unsqueeze(1)  # [B, 1, n, L]
        k, v = x["k"][:, :, :L].contiguous(), x["v"][:, :, :L].contiguous()
        candidates, facts = sdpa_candidates(torch, qp, k, v, Hq // s["Hkv"], {"attn_mask": mask, "scale": p["scale"]})
        self._rows = (seqs, visible.any(dim=2))  # [B, n]: rows with a visible key
        return candidates, {"mask_as": "bool_mask_padded", "padded_queries": int(qp.shape[2]), "padded_keys": L,
                            **facts}

    def finish(self, torch, x, s, p, out):
        if not p.get("cache"):
            return out
        seqs, has_key = self._rows
        out = torch.where(has_key.view(s["B"], 1, -1, 1), out, torch.zeros_like(out))  # SDPA: NaN there
        if not p["varlen"]:
            return out
        packed = torch.zeros(*self.views(s, p)[-1][1], dtype=out.dtype, device=out.device)
        for b, first, n in seqs:
            if n > 0:
                packed[first:first + n] = out[b, :, :n].transpose(0, 1)
        return packed

    def reference(self, torch, x, s, p):
        """GQA: head h reads KV head h // (Hq/Hkv); causal = bottom-right aligned: key j is
        visible to query i iff j <= i + K - Q; rows with no visible key give 0."""
        if p.get("cache"):
            return self.cache_reference(torch, x, s, p)
        q, k, v = x["q"], x["k"], x["v"]
        B, Hq, Hkv, Q = s["B"], s["Hq"], s["Hkv"], s["Q"]
        group = Hq // Hkv
        out = torch.zeros(B, Hq, Q, s["Dv"], dtype=torch.float64, device=q.device)
        visible = self.visible(torch, s, q.device) if p["mask"] == "causal" else None
        for b in range(B):  # one (batch, head) at a time bounds the score matrix's memory
            for h in range(Hq):
                kv = h // group
                scores = p["scale"] * (q[b, h] @ k[b, kv].transpose(0, 1))  # [Q, K]
                if visible is not None:
                    scores = scores.masked_fill(~visible, float("-inf"))
                row_max = scores.max(dim=1, keepdim=True).values
                has_key = torch.isfinite(row_max)
                w = torch.where(has_key, torch.exp(scores - torch.where(has_key, row_max, torch.zeros_like(row_max))),
                                torch.zeros_like(scores))
                total = w.sum(dim=1, keepdim=True)
                w = torch.where(total > 0, w / torch.where(total > 0, total, torch.ones_like(total)), w)
                out[b, h] = w @ v[b, kv]
        return out

    @staticmethod
    def visible(torch, s, device):
        i = torch.arange(s["Q"], device=device).unsqueeze(1)
        j = torch.arange(s["K"], device=device).unsqueeze(0)
        return j <= i + (s["K"] - s["Q"])

    def candidates(self, torch, x, s, p):
        """Every SDPA backend (flash, efficient, cudnn, math; or the default when torch lacks
        torch.nn.attention), with GQA done by SDPA itself (enable_gqa=True) and with K and V
        expanded to Hq heads beforehand (repeat_interleave outside the timed call)."""
        if p.get("cache"):
            return self.cache_candidates(torch, x, s, p)
        q, k, v = x["q"], x["k"], x["v"]
        group = s["Hq"] // s["Hkv"]
        if p["mask"] == "none":
            mask_args, mask_kind = {}, "none"
        elif s["Q"] == s["K"]:
            mask_args, mask_kind = {"is_causal": True}, "is_causal"
        else:  # bottom-right aligned: an explicit boolean mask (True = attend)
            mask_args, mask_kind = {"attn_mask": self.visible(torch, s, q.device)}, "bool_mask_bottom_right"
        candidates, facts = sdpa_candidates(torch, q, k, v, group, {"scale": p["scale"], **mask_args})
        return candidates, {"mask_as": mask_kind, **facts}

    def flops(self, s, p):
        """2 (D + Dv) per visible (query, key) pair and head (a cache: counted from the lengths
        at launch, `flops_of`)."""
        if p.get("cache"):
            return None
        Q, K = s["Q"], s["K"]
        pairs = Q * K if p["mask"] == "none" else sum(max(0, min(K, i + K - Q + 1)) for i in range(Q))
        return 2 * s["B"] * s["Hq"] * pairs * (s["D"] + s["Dv"])


# ---- gemm ---------------------------------------------------------------------------------------


class Gemm(Kind):
    name = "gemm"
    fields = ["M", "N", "K"]
    neutral = ("tile", "fma")
    handled = ("trans-b",)
    defaults = {"a-dtype": {"f32"}, "b-dtype": {"f32"}, "runtime-rows": FLAG_OFF}
    call = ("torch.matmul(a, b) in FP32 with TF32 off (torch.backends.cuda.matmul.allow_tf32 = False, "
            "torch.backends.cudnn.allow_tf32 = False); --trans-b: b.t() as a transposed view, no copy")

    def params(self, s, options):
        return {"trans_b": flag(options.get("trans-b", "false"))}

    def views(self, s, p):
        M, N, K = s["M"], s["N"], s["K"]
        return [("a", [M, K]), ("b", [N, K] if p["trans_b"] else [K, N]), ("c", [M, N])]

    @staticmethod
    def operands(x, p):
        return x["a"], x["b"].t() if p["trans_b"] else x["b"]

    def reference(self, torch, x, s, p):
        a, b = self.operands(x, p)
        return a @ b  # K = 0 gives zeros

    def tolerance(self, s, p):
        return {"rule": "|got - ref| <= 2 sqrt(K) u (|a| |b|)[i,j], u = 2^-24",
                "why": "an FP32 dot product of K terms errs by at most about K u sum|a||b| in the worst case, "
                       "and like sqrt(K) u sum|a||b| for inputs of random sign, whatever the summation order; "
                       "products of TF32-rounded inputs fail it for K up to a few thousand",
                "u": U, "factor": 2.0, "K": s["K"]}

    def bound(self, torch, x, ref, s, p):
        a, b = self.operands(x, p)
        return 2.0 * math.sqrt(s["K"]) * U * (a.abs() @ b.abs())

    def candidates(self, torch, x, s, p):
        a, b = self.operands(x, p)
        return [("torch.matmul", contextlib.nullcontext, lambda: torch.matmul(a, b))], {}

    def flops(self, s, p):
        return 2 * s["M"] * s["N"] * s["K"]


# ---- the row kernels ----------------------------------------------------------------------------


class Softmax(Kind):
    name = "softmax"
    fields = ["rows", "cols"]
    neutral = ("parts",)
    defaults = {"dtype": {"f32"}, "runtime-rows": FLAG_OFF}
    call = "torch.softmax(x, dim=-1) in FP32"

    def views(self, s, p):
        return [("x", [s["rows"], s["cols"]]), ("y", [s["rows"], s["cols"]])]

    def reference(self, torch, x, s, p):
        e = torch.exp(x["x"] - x["x"].max(dim=-1, keepdim=True).values)
        return e / e.sum(dim=-1, keepdim=True)

    def candidates(self, torch, x, s, p):
        return [("torch.softmax", contextlib.nullcontext, lambda: torch.softmax(x["x"], dim=-1))], {}


class RmsNorm(Kind):
    """No residual add: the library's rmsnorm is y = x / sqrt(mean(x^2) + eps) * w alone."""
    name = "rmsnorm"
    fields = ["rows", "cols"]
    handled = ("eps",)
    defaults = {"dtype": {"f32"}, "runtime-rows": FLAG_OFF}
    call = "eager: x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w in FP32 (several kernels)"

    def params(self, s, options):
        return {"eps": f32(float(options.get("eps", 1e-6)))}  # the kernel rounds eps to f32

    def views(self, s, p):
        return [("x", [s["rows"], s["cols"]]), ("w", [s["cols"]]), ("y", [s["rows"], s["cols"]])]

    def reference(self, torch, x, s, p):
        xs = x["x"]
        return xs * (1.0 / torch.sqrt((xs * xs).mean(dim=-1, keepdim=True) + p["eps"])) * x["w"]

    def candidates(self, torch, x, s, p):
        xs, w, eps = x["x"], x["w"], p["eps"]
        return [("eager_rsqrt", contextlib.nullcontext,
                 lambda: xs * torch.rsqrt(xs.pow(2).mean(-1, keepdim=True) + eps) * w)], {}


class LayerNorm(Kind):
    name = "layernorm"
    fields = ["rows", "cols"]
    handled = ("eps",)
    defaults = {"dtype": {"f32"}}
    call = "torch.nn.functional.layer_norm(x, (cols,), w, b, eps) in FP32"

    def params(self, s, options):
        return {"eps": f32(float(options.get("eps", 1e-5)))}  # the kernel rounds eps to f32

    def views(self, s, p):
        R, C = s["rows"], s["cols"]
        return [("x", [R, C]), ("w", [C]), ("b", [C]), ("y", [R, C])]

    def reference(self, torch, x, s, p):
        """Two-pass mean and variance (population variance, as the kernel)."""
        d = x["x"] - x["x"].mean(dim=-1, keepdim=True)
        var = (d * d).mean(dim=-1, keepdim=True)
        return d * (1.0 / torch.sqrt(var + p["eps"])) * x["w"] + x["b"]

    def candidates(self, torch, x, s, p):
        F = torch.nn.functional
        xs, w, b, eps = x["x"], x["w"], x["b"], p["eps"]
        return [("F.layer_norm", contextlib.nullcontext, lambda: F.layer_norm(xs, (s["cols"],), w, b, eps))], {}


# ---- element-wise -------------------------------------------------------------------------------


class Gelu(Kind):
    name = "gelu"
    fields = ["n"]
    handled = ("approx",)
    defaults = {"dtype": {"f32"}}
    call = "torch.nn.functional.gelu(x, approximate='none'|'tanh') in FP32"

    def params(self, s, options):
        approx = options.get("approx", "erf")
        if approx not in ("erf", "tanh"):
            raise Skip("gelu: --approx '%s' is not modelled" % approx)
        return {"approx": approx}

    def views(self, s, p):
        return [("x", [s["n"]]), ("y", [s["n"]])]

    def reference(self, torch, x, s, p):
        t = x["x"]
        if p["approx"] == "tanh":
            return 0.5 * t * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (t + 0.044715 * t * t * t)))
        return 0.5 * t * (1.0 + torch.erf(t / math.sqrt(2.0)))

    def candidates(self, torch, x, s, p):
        F = torch.nn.functional
        approx = "tanh" if p["approx"] == "tanh" else "none"
        return [("F.gelu", contextlib.nullcontext, lambda: F.gelu(x["x"], approximate=approx))], {}


class SwiGlu(Kind):
    name = "swiglu"
    fields = ["rows", "cols"]
    defaults = {"dtype": {"f32"}, "runtime-rows": FLAG_OFF}
    call = "torch.nn.functional.silu(gate) * up in FP32"

    def views(self, s, p):
        R, C = s["rows"], s["cols"]
        return [("gate", [R, C]), ("up", [R, C]), ("y", [R, C])]

    def reference(self, torch, x, s, p):
        return x["gate"] / (1.0 + torch.exp(-x["gate"])) * x["up"]

    def candidates(self, torch, x, s, p):
        F = torch.nn.functional
        return [("F.silu*up", contextlib.nullcontext, lambda: F.silu(x["gate"]) * x["up"])], {}


KINDS = {k.name: k for k in [Attention(), Gemm(), Softmax(), RmsNorm(), LayerNorm(), Gelu(), SwiGlu()]}


# ---- examples -----------------------------------------------------------------------------------


def request_of_example(repo, path):
    """(kernel, shape_text, options) of the library request an examples/ file is an instance of:
    the shape from the kernel's signature, the rest from facts its header comment states
    (checked, so an edited example is skipped rather than misread)."""
    name = os.path.basename(path)
    known = ["gemm.tile", "softmax.tile", "rmsnorm.tile", "elementwise.tile", "attention_decode.tile",
             "attention_prefill.tile"]
    if not path.startswith("examples/") or name not in known:
        raise Skip("file %s: no torch counterpart is derived for it (only examples/%s)" % (path, ", ".join(known)))
    try:
        with open(os.path.join(repo, path)) as f:
            text = f.read()
    except OSError as e:
        raise Skip("file %s: %s" % (path, e))
    header = "\n".join(line for line in text.splitlines() if line.startswith("#"))
    views = {m.group(1): [int(d) for d in m.group(2).split(",")]
             for m in re.finditer(r"%(\w+): view<f32>\[([0-9, ]+)\]", text)}

    def need(cond, what):
        if not cond:
            raise Skip("file %s: %s" % (path, what))

    def dims(view, rank):
        need(len(views.get(view, [])) == rank, "no view<f32> %s of rank %d in its signature" % (view, rank))
        return views[view]

    shape = lambda *d: ",".join(str(v) for v in d)  # noqa: E731
    if name == "gemm.tile":
        (M, K), (K2, N) = dims("a", 2), dims("b", 2)
        need(K2 == K and dims("c", 2) == [M, N], "a, b, c are not [M,K], [K,N], [M,N]")
        return "gemm", shape(M, N, K), {}
    if name == "softmax.tile":
        need("Row softmax" in header, "its header no longer says 'Row softmax'")
        return "softmax", shape(*dims("x", 2)), {}
    if name == "rmsnorm.tile":
        eps = re.search(r"eps = ([0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?)", header)
        need(eps, "its header states no 'eps = E'")
        return "rmsnorm", shape(*dims("x", 2)), {"eps": eps.group(1)}
    if name == "elementwise.tile":
        need("GELU (tanh form)" in header, "its header no longer says 'GELU (tanh form)'")
        return "gelu", shape(*dims("x", 1)), {"approx": "tanh"}
    (B, Hq, Q, D), (_, Hkv, K, _), Dv = dims("q", 4), dims("k", 4), dims("v", 4)[3]
    need(re.search(r"scale = 1/sqrt\(%d\)" % D, header), "its header does not state scale = 1/sqrt(%d)" % D)
    causal = "not causal" not in header and re.search(r"\bcausal\b", header) is not None
    need(causal or "not causal" in header, "its header says neither 'causal' nor 'not causal'")
    return "attention", shape(B, Hq, Hkv, Q, K, D, Dv), {"mask": "causal" if causal else "none"}

"""The same Llama model written once over an array library: NumPy in float64 (the reference
Kiln's logits are compared with) or PyTorch (float32 or bfloat16 eager: the speed peer).

Same weights (weights.py, Hugging Face layout), same computation as kiln_model.py, written
plainly: projections as x @ W^T, RMSNorm y = x / sqrt(mean(x^2) + eps) * w, rotate-half RoPE
with angles position * base^(-2j/head_dim) (computed in float64), causal attention with GQA
over a KV cache (scale 1/sqrt(head_dim) rounded to float32, Kiln's constant), SwiGLU.
"""

import numpy as np

import weights as W


class _NumPy:
    name = "numpy-f64"

    def __init__(self, bf16_activations=False):
        self.dtype = np.float64
        self.bf16_activations = bf16_activations

    def weight(self, w, transpose):  # kept as [in, out] for x @ w
        w = np.asarray(w, dtype=np.float64)
        return np.ascontiguousarray(w.T) if transpose else w

    def linear(self, x, w):
        if self.bf16_activations:  # the bf16 dot order's operands (weights are bf16 already)
            x = W.from_bf16_bits(W.to_bf16_bits(np.asarray(x, np.float32))).astype(np.float64)
        return x @ w

    def array(self, a):
        return np.asarray(a, dtype=np.float64)

    def zeros(self, shape):
        return np.zeros(shape, np.float64)

    def exp(self, x):
        return np.exp(x)

    def rsqrt(self, x):
        return 1.0 / np.sqrt(x)

    def perm(self, x, axes):
        return x.transpose(axes)

    def max_last(self, x):
        return x.max(-1, keepdims=True)

    def sum_last(self, x):
        return x.sum(-1, keepdims=True)

    def numpy(self, x):
        return np.asarray(x, dtype=np.float32) if x.dtype != np.float64 else x


class _Torch:
    def __init__(self, dtype, threads):
        import torch

        self.torch = torch
        self.dtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
        self.name = f"torch-{dtype}"
        if threads:
            torch.set_num_threads(threads)
        torch.set_grad_enabled(False)

    def weight(self, w, transpose):  # nn.Linear's layout [out, in], as F.linear takes it
        t = self.torch.from_numpy(np.ascontiguousarray(w, dtype=np.float32)).to(self.dtype)
        return t if transpose else t.T.contiguous()

    def linear(self, x, w):
        return self.torch.nn.functional.linear(x, w)

    def array(self, a):
        return self.torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32)).to(self.dtype)

    def zeros(self, shape):
        return self.torch.zeros(shape, dtype=self.dtype)

    def exp(self, x):
        return self.torch.exp(x)

    def rsqrt(self, x):
        return self.torch.rsqrt(x)

    def perm(self, x, axes):
        return x.permute(axes)

    def max_last(self, x):
        return x.amax(-1, keepdim=True)

    def sum_last(self, x):
        return x.sum(-1, keepdim=True)

    def numpy(self, x):
        return x.float().numpy()


class Reference:
    """`backend`: "numpy-f64", "torch-f32" or "torch-bf16". `weight_dtype` "bf16" rounds every
    weight Kiln stores as bfloat16 (kiln_model.py) to bfloat16 first, so both models see the
    same values; `gemm_order` "bf16_dot" or "bf16_pairs" rounds the projections' inputs too
    (numpy-f64)."""

    def __init__(self, cfg, weights, backend="numpy-f64", weight_dtype="f32", threads=None, gemm_order="ascending"):
        self.cfg = cfg
        # gemm_order "bf16_dot" or "bf16_pairs" (numpy-f64): each projection's activations rounded
        # to bf16 first, as Kiln's bf16 orders round them; the sums stay float64.
        self.xp = xp = (_NumPy(gemm_order in ("bf16_dot", "bf16_pairs")) if backend == "numpy-f64"
                        else _Torch(backend.split("-")[1], threads))

        def val(name):
            w = np.asarray(weights[name], dtype=np.float32)
            return W.from_bf16_bits(W.to_bf16_bits(w)) if weight_dtype == "bf16" and w.ndim == 2 else w

        self.embed = val("model.embed_tokens.weight")
        self.layers = []
        for i in range(cfg["n_layers"]):
            p = f"model.layers.{i}."
            lw = {k: xp.weight(val(p + n), True) for k, n in (
                ("wq", "self_attn.q_proj.weight"), ("wk", "self_attn.k_proj.weight"),
                ("wv", "self_attn.v_proj.weight"), ("wo", "self_attn.o_proj.weight"),
                ("wg", "mlp.gate_proj.weight"), ("wu", "mlp.up_proj.weight"), ("wd", "mlp.down_proj.weight"))}
            lw["attn_norm"] = xp.array(val(p + "input_layernorm.weight"))
            lw["mlp_norm"] = xp.array(val(p + "post_attention_layernorm.weight"))
            self.layers.append(lw)
        self.final_norm = xp.array(val("model.norm.weight"))
        self.lm_head = xp.weight(val("lm_head.weight"), True)
        hd = cfg["head_dim"]
        inv = cfg["rope_base"] ** (-2.0 * np.arange(hd // 2) / hd)
        ang = np.arange(cfg["max_seq"])[:, None] * inv[None, :]
        self.cos, self.sin = np.cos(ang), np.sin(ang)  # float64 [max_seq, hd/2]
        self.scale = float(np.float32(1.0 / np.sqrt(hd)))
        self.caches = []

    def _norm(self, x, w):
        xp = self.xp
        return x * xp.rsqrt(xp.sum_last(x * x) / x.shape[-1] + self.cfg["norm_eps"]) * w

    def _rope(self, x, positions):  # x [T, heads, hd]
        xp, half = self.xp, self.cfg["head_dim"] // 2
        c = xp.array(self.cos[positions])[:, None, :]
        s = xp.array(self.sin[positions])[:, None, :]
        x1, x2 = x[..., :half], x[..., half:]
        out = xp.zeros(x.shape)
        out[..., :half] = x1 * c - x2 * s
        out[..., half:] = x2 * c + x1 * s
        return out

    def _attend(self, q, k, v):  # q [n, H, hd]; k, v [L, KH, hd]; causal, bottom-right aligned
        xp, c = self.xp, self.cfg
        n, L, KH, hd = q.shape[0], k.shape[0], c["n_kv_heads"], c["head_dim"]
        g = c["n_heads"] // KH
        visible = np.arange(L)[None, :] <= np.arange(n)[:, None] + (L - n)
        mask = xp.array(np.where(visible, 0.0, -np.inf))
        qh = xp.perm(q.reshape(n, KH, g, hd), (1, 2, 0, 3))  # [KH, g, n, hd]
        s = (qh @ xp.perm(k, (1, 2, 0))[:, None]) * self.scale + mask  # [KH, g, n, L]
        p = xp.exp(s - xp.max_last(s))
        o = (p / xp.sum_last(p)) @ xp.perm(v, (1, 0, 2))[:, None]  # [KH, g, n, hd]
        return xp.perm(o, (2, 0, 1, 3)).reshape(n, KH * g, hd)

    def _forward(self, tokens, seq, positions):
        """The new tokens (of sequences `seq` at `positions`) through the model; the KV rows are
        appended to each sequence's cache. Returns the hidden states [T, d]."""
        xp, c = self.xp, self.cfg
        H, KH, hd = c["n_heads"], c["n_kv_heads"], c["head_dim"]
        h = xp.array(self.embed[tokens])
        for i, lw in enumerate(self.layers):
            x = self._norm(h, lw["attn_norm"])
            q = self._rope(xp.linear(x, lw["wq"]).reshape(-1, H, hd), positions)
            k = self._rope(xp.linear(x, lw["wk"]).reshape(-1, KH, hd), positions)
            v = xp.linear(x, lw["wv"]).reshape(-1, KH, hd)
            a = xp.zeros(q.shape)
            for b in np.unique(seq):
                rows = np.nonzero(seq == b)[0]
                kc, vc = self.caches[b][i]
                L = int(positions[rows[-1]]) + 1
                kc[int(positions[rows[0]]):L] = k[rows[0]:rows[-1] + 1]
                vc[int(positions[rows[0]]):L] = v[rows[0]:rows[-1] + 1]
                a[rows[0]:rows[-1] + 1] = self._attend(q[rows[0]:rows[-1] + 1], kc[:L], vc[:L])
            h = h + xp.linear(a.reshape(-1, H * hd), lw["wo"])
            x = self._norm(h, lw["mlp_norm"])
            g, u = xp.linear(x, lw["wg"]), xp.linear(x, lw["wu"])
            h = h + xp.linear(g / (1.0 + xp.exp(-g)) * u, lw["wd"])
        return h

    def _logits(self, h_last):
        return self.xp.numpy(self.xp.linear(self._norm(h_last, self.final_norm), self.lm_head))

    def prefill(self, prompts):
        c, xp = self.cfg, self.xp
        shape = (c["max_seq"], c["n_kv_heads"], c["head_dim"])
        self.caches = [[(xp.zeros(shape), xp.zeros(shape)) for _ in range(c["n_layers"])] for _ in prompts]
        self.lens = [len(p) for p in prompts]
        tokens = np.concatenate([np.asarray(p, dtype=np.int64) for p in prompts])
        seq = np.repeat(np.arange(len(prompts)), self.lens)
        positions = np.concatenate([np.arange(n) for n in self.lens])
        h = self._forward(tokens, seq, positions)
        return self._logits(h[list(np.cumsum(self.lens) - 1)])

    def decode(self, tokens):
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        positions = np.asarray(self.lens, dtype=np.int64)
        h = self._forward(tokens, np.arange(tokens.size), positions)
        self.lens = [n + 1 for n in self.lens]
        return self._logits(h)

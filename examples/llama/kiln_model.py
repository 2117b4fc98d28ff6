"""A Llama-architecture decoder on Kiln's library kernels.

Every kernel is compiled once, when the model is made, for the configuration's capacities;
the lengths of each step (tokens in the step, positions, the KV cache's lengths, the prompts'
lengths) come with each launch (docs/ir.md, "Runtime extents"). Two sets of kernels: the
prefill set for up to max_prefill_tokens packed tokens of several prompts of different
lengths (varlen), and the decode set for one token of each of up to max_batch sequences.

Per layer (Hugging Face Llama's computation, weights of weights.py):
    x   = rmsnorm(h, input_layernorm)                        rmsnorm  --runtime-rows
    q,k,v = x Wq^T, x Wk^T, x Wv^T                            gemm     --runtime-rows --tile [--b-dtype bf16]
    q,k = rope(q, positions), rope(k, positions)              rope     --positions --runtime-rows
    cache[seq, :, position] = k, v                            (NumPy: a scatter of the new rows)
    a   = attention(q, cache, lens, cu_seqlens)               attention --kv-cache dense --varlen (causal)
    h  += a Wo^T                                              gemm; the add in NumPy
    x   = rmsnorm(h, post_attention_layernorm)
    h  += swiglu(x Wgate^T, x Wup^T) Wdown^T                  gemm, swiglu --runtime-rows, gemm
then logits = rmsnorm(h[last token of each sequence], norm) Wlm^T. Hugging Face's [out, in]
weights are transposed once when the model is made (B as K x N: see _gemm for why; kept as
they are, N x K, for the bf16_dot order).

What runs in NumPy is the glue: embedding rows, the residual adds, the KV cache scatter and
the gathers of last tokens (a few thousand floats a token, beside megabytes of weights).
"""

import time

import numpy as np

import kiln
import weights as W


def bf16_dot_on_amx(knobs=None):
    """Whether Kiln runs bf16_dot GEMMs on AMX tiles here with these knobs (the planner's choice,
    read from a small probe kernel's report)."""
    probe = kiln.library("gemm", shape=(16, 16, 32), order="bf16_dot", knobs=dict(knobs or {}))
    return any(m.get("form") == "amx" for ph in probe.report["phases"]
               for m in ((ph.get("lanes") or {}).get("mma") or []))


class KilnLlama:
    """The model, its kernels and its KV cache. `weight_dtype`: "f32", or "bf16" (every
    projection's weights stored as bfloat16, read by the GEMMs as such; embeddings too; norms
    stay f32). `knobs`: planner knobs for every kernel ({"threads": 2, "isa": "avx2"})."""

    def __init__(self, cfg, weights, weight_dtype="f32", knobs=None, gemm_order="ascending"):
        if weight_dtype not in ("f32", "bf16"):
            raise ValueError(f"weight_dtype must be 'f32' or 'bf16', not {weight_dtype!r}")
        if gemm_order not in ("ascending", "bf16_dot", "bf16_pairs"):
            raise ValueError(f"gemm_order must be 'ascending', 'bf16_dot' or 'bf16_pairs', not {gemm_order!r}")
        W.check_weights(cfg, weights)
        self.cfg, self.weight_dtype, self.knobs = cfg, weight_dtype, dict(knobs or {})
        # "bf16_dot": every projection's GEMM in the bf16 dot order (docs/ir.md, MMA: activations
        # and weights rounded to bf16, AMX's TDPBF16PS arithmetic), on AMX tiles where the host
        # has them (docs/kernels.md, gemm); the same bits everywhere. "bf16_pairs": the bf16 pairs
        # order (AVX512-BF16's VDPBF16PS arithmetic, one instruction per pair where the CPU has
        # it, AMD Zen 4 and Intel since Cooper Lake), on the default order's tiles.
        self.gemm_order = gemm_order
        # Under bf16_dot and bf16_pairs the GEMMs' activations from rmsnorm, attention and swiglu are stored as
        # bf16 (their --out-dtype; the GEMMs' --a-dtype): the order rounds them to bf16 anyway
        # (and flushes subnormals, which it does to a bf16 view's too), so the values are the
        # same, and each GEMM program reads half the bytes and converts nothing. bf16 bits in
        # uint16 arrays.
        self.act16 = gemm_order in ("bf16_dot", "bf16_pairs")
        # bf16_dot's weights N x K on AMX tiles (an AMX program packs rows of K; decode reads
        # them straight from the weights), else K x N (the vector steps read B's rows along N,
        # where N x K would be gathered). The bits do not depend on it.
        self.b_nk = gemm_order == "bf16_dot" and self._has_amx()
        self.act = np.uint16 if self.act16 else np.float32  # the activations' arrays
        self.out16 = {"out_dtype": "bf16"} if self.act16 else {}  # rmsnorm's, attention's and swiglu's option
        self.kernels = {}  # request -> compiled kernel: each request compiled once
        self.times = {}  # kernel kind -> seconds spent in its launches
        self.calls = {}
        self._frozen = False
        c = cfg
        L, d, hd, H, KH, F, V = c["n_layers"], c["d_model"], c["head_dim"], c["n_heads"], c["n_kv_heads"], c["d_ff"], c["vocab"]

        def proj(name):  # HF's [out, in] -> the GEMM's B as K x N (rows of B along the outputs);
            # kept [out, in] (N x K, --trans-b) for bf16_dot on AMX (self.b_nk)
            w = np.asarray(weights[name], dtype=np.float32)
            w = np.ascontiguousarray(w if self.b_nk else w.T)
            return W.to_bf16_bits(w) if weight_dtype == "bf16" else w

        def vec(name):
            return np.ascontiguousarray(weights[name], dtype=np.float32)

        self.layers = []
        for i in range(L):
            p = f"model.layers.{i}."
            self.layers.append({
                "attn_norm": vec(p + "input_layernorm.weight"),
                "wq": proj(p + "self_attn.q_proj.weight"),
                "wk": proj(p + "self_attn.k_proj.weight"),
                "wv": proj(p + "self_attn.v_proj.weight"),
                "wo": proj(p + "self_attn.o_proj.weight"),
                "mlp_norm": vec(p + "post_attention_layernorm.weight"),
                "wg": proj(p + "mlp.gate_proj.weight"),
                "wu": proj(p + "mlp.up_proj.weight"),
                "wd": proj(p + "mlp.down_proj.weight"),
            })
        emb = np.asarray(weights["model.embed_tokens.weight"], dtype=np.float32)
        self.embed = W.to_bf16_bits(emb) if weight_dtype == "bf16" else np.ascontiguousarray(emb)
        self.final_norm = vec("model.norm.weight")
        self.lm_head = proj("lm_head.weight")

        B, S = c["max_batch"], c["max_seq"]
        final_norm = self._kernel("rmsnorm", (B, d), eps=c["norm_eps"], runtime_rows=True, **self.out16)
        self.k_cache = [np.zeros((B, KH, S, hd), np.float32) for _ in range(L)]
        self.v_cache = [np.zeros((B, KH, S, hd), np.float32) for _ in range(L)]
        self.lens = np.zeros(B, np.int32)
        self.active = 0  # sequences in the batch

        # The kernels of the two phases, and each phase's buffers (row capacity T).
        self.phases = {"prefill": self._phase(c["max_prefill_tokens"]), "decode": self._phase(B)}
        self.final = {
            "norm": final_norm,
            "lm": self._row_sets(B, lambda M: self._gemm(M, V, d, a16=self.act16)),
            "x": np.zeros((B, d), np.float32),
            "y": np.zeros((B, d), self.act),
            "logits": np.zeros((B, V), np.float32),
        }
        self._frozen = True  # from here on a new compile is a bug: runs only launch

    # --- kernels ---------------------------------------------------------------------------

    def _kernel(self, name, shape, **options):
        key = (name, tuple(shape), tuple(sorted(options.items())))
        if key not in self.kernels:
            if self._frozen:
                raise RuntimeError(f"kernel {key} requested after the model was built")
            self.kernels[key] = kiln.library(name, shape=shape, knobs=self.knobs, **options)
        return self.kernels[key]

    def _gemm(self, M, N, K, rows=None, a16=False):
        """x W^T with W stored [K, N], for up to M rows, in tiles of `rows` rows (prefill: the
        set _gemms picks by the step's tokens); the library's rule gives the columns and K steps
        for the order and this CPU (docs/kernels.md, gemm: 64 columns, K steps of 128; 128
        columns in the bf16 pairs order on VDPBF16PS from 128 rows and in the bf16 dot order on
        AMX), and decode's few rows (M <= 4) its strips of B read row after row. Any tile gives
        the same bits."""
        options = {"b_dtype": "bf16"} if self.weight_dtype == "bf16" else {}
        if rows and M > 4:
            options["tile"] = str(rows)
        if self.gemm_order != "ascending":
            options["order"] = self.gemm_order
            if a16:
                options["a_dtype"] = "bf16"
        if self.gemm_order == "bf16_dot":
            # B as N x K (HF's layout) on AMX: each program packs whole rows of B's K step
            # (contiguous, which the hardware prefetcher streams: 128 x 5632 x 2048 5.9 ms
            # against 7.9 with B as K x N, weights from DRAM), and decode's few rows take B's
            # rows to the tiles straight from the weights (docs/backend.md).
            options["trans_b"] = self.b_nk
        return self._kernel("gemm", (M, N, K), runtime_rows=True, **options)

    def _has_amx(self):
        if not hasattr(self, "_amx"):
            self._amx = bf16_dot_on_amx(self.knobs)
        return self._amx

    def _gemms(self, T):
        """The phase's projections for up to T rows: one set of kernels per row tile, each
        with its row capacity and the cost of a row relative to the others (prefill: 64 and
        128 rows, measured, above). Decode also has a set for one row (one sequence): a
        kernel of M = 1 reads each row of B whole, where M = T's strips of B cost about 1.2x
        per read of B (docs/llama.md)."""
        c = self.cfg
        d, hd, H, KH, F = c["d_model"], c["head_dim"], c["n_heads"], c["n_kv_heads"], c["d_ff"]

        def kernels(M, tm):
            a16 = self.act16  # from rmsnorm, attention and swiglu
            return {"q": self._gemm(M, H * hd, d, tm, a16), "kv": self._gemm(M, KH * hd, d, tm, a16),
                    "o": self._gemm(M, d, H * hd, tm, a16), "gate_up": self._gemm(M, F, d, tm, a16),
                    "down": self._gemm(M, d, F, tm, a16)}
        if T <= 4:
            return self._row_sets(T, lambda M: kernels(M, M))
        tiles = [(min(64, T), 1.1)] + ([(128, 1.0)] if T >= 128 else [])
        return [(tm, T, cost, kernels(T, tm)) for tm, cost in tiles]

    @staticmethod
    def _row_sets(T, make):
        """A decode step's sets for up to T rows (T <= 4): make(T), and make(1) for one sequence
        alone; as (row tile, row capacity, cost of a row, kernels) for _pick."""
        return ([(1, 1, 1.0, make(1))] if T > 1 else []) + [(T, T, 1.2 / T, make(T))]

    @staticmethod
    def _pick(gemms, T):
        """The set whose padded rows cost least for T rows, among those that hold T rows:
        ceil(T / tile) * tile * cost. Returns (kernels, their row capacity)."""
        fits = [g for g in gemms if g[1] >= T]
        g = min(fits, key=lambda g: -(-T // g[0]) * g[0] * g[2])
        return g[3], g[1]

    def _phase(self, T):
        c = self.cfg
        d, hd, H, KH, F = c["d_model"], c["head_dim"], c["n_heads"], c["n_kv_heads"], c["d_ff"]
        rope = dict(positions=c["max_seq"], base=c["rope_base"], runtime_rows=True)
        return {
            "T": T,
            "norm": self._kernel("rmsnorm", (T, d), eps=c["norm_eps"], runtime_rows=True, **self.out16),
            "gemms": self._gemms(T),
            "rope_q": self._kernel("rope", (T, H, hd), **rope),
            "rope_k": self._kernel("rope", (T, KH, hd), **rope),
            "attention": self._kernel("attention", (c["max_batch"], H, KH, T, c["max_seq"], hd, hd),
                                      kv_cache="dense", varlen=True, mask="causal", **self.out16),
            "swiglu": self._kernel("swiglu", (T, F), runtime_rows=True, **self.out16),
            # buffers
            "h": np.zeros((T, d), np.float32),
            "x": np.zeros((T, d), self.act),
            "q_": np.zeros((T, H, hd), np.float32),
            "k_": np.zeros((T, KH, hd), np.float32),
            "v_": np.zeros((T, KH, hd), np.float32),
            "qr": np.zeros((T, H, hd), np.float32),
            "kr": np.zeros((T, KH, hd), np.float32),
            "a": np.zeros((T, H, hd), self.act),
            "proj": np.zeros((T, d), np.float32),
            "g": np.zeros((T, F), np.float32),
            "u": np.zeros((T, F), np.float32),
            "s": np.zeros((T, F), self.act),
            "positions": np.zeros(T, np.int32),
            "cu": np.zeros(c["max_batch"] + 1, np.int32),
        }

    def _launch(self, kind, kernel, *args):
        t0 = time.perf_counter()
        kernel(*args)
        self.times[kind] = self.times.get(kind, 0.0) + time.perf_counter() - t0
        self.calls[kind] = self.calls.get(kind, 0) + 1

    # --- the model -------------------------------------------------------------------------

    def reset(self):
        """Empties the KV cache (the caches' contents past the lengths are never read)."""
        self.lens[:] = 0
        self.active = 0

    def prefill(self, prompts):
        """Starts a batch: `prompts` is a list of token lists (1 to max_batch of them, of
        different lengths). Returns the logits after each prompt's last token, [B, vocab]."""
        c = self.cfg
        if not 1 <= len(prompts) <= c["max_batch"]:
            raise ValueError(f"prefill: {len(prompts)} prompts; this model takes 1 to max_batch={c['max_batch']}")
        lengths = [len(p) for p in prompts]
        if min(lengths) < 1 or max(lengths) > c["max_seq"]:
            raise ValueError(f"prefill: prompt lengths {lengths} must be in [1, max_seq={c['max_seq']}]")
        if sum(lengths) > c["max_prefill_tokens"]:
            raise ValueError(f"prefill: {sum(lengths)} prompt tokens exceed max_prefill_tokens={c['max_prefill_tokens']}")
        self.reset()
        self.active = len(prompts)
        tokens = np.concatenate([np.asarray(p, dtype=np.int64) for p in prompts])
        seq = np.repeat(np.arange(len(prompts)), lengths)
        positions = np.concatenate([np.arange(n) for n in lengths])
        return self._step("prefill", tokens, seq, positions, np.asarray(lengths, np.int32))

    def decode(self, tokens):
        """One token for each sequence of the batch (in prefill's order); returns the logits
        after it, [B, vocab]."""
        tokens = np.asarray(tokens, dtype=np.int64).reshape(-1)
        B = self.active
        if B == 0:
            raise ValueError("decode: no batch; call prefill first")
        if tokens.size != B:
            raise ValueError(f"decode: {tokens.size} tokens for a batch of {B} sequences")
        if int(self.lens[:B].max()) >= self.cfg["max_seq"]:
            raise ValueError(f"decode: a sequence has reached max_seq={self.cfg['max_seq']}")
        positions = self.lens[:B].astype(np.int64)
        return self._step("decode", tokens, np.arange(B), positions, np.ones(B, np.int32))

    def _step(self, phase, tokens, seq, positions, new):
        c, P = self.cfg, self.phases[phase]
        T, B = tokens.size, self.active
        if tokens.min() < 0 or tokens.max() >= c["vocab"]:
            raise ValueError(f"{phase}: token ids must be in [0, vocab={c['vocab']})")
        h = P["h"]
        t0 = time.perf_counter()
        emb = self.embed[tokens]
        h[:T] = W.from_bf16_bits(emb) if self.weight_dtype == "bf16" else emb
        P["positions"][:] = 0
        P["positions"][:T] = positions
        cu = P["cu"]
        cu[0] = 0
        cu[1:B + 1] = np.cumsum(new)
        cu[B + 1:] = T
        lens_after = self.lens.copy()
        lens_after[:B] += new
        self._glue(t0)

        G, R = self._pick(P["gemms"], T)  # the GEMMs, and the rows of their views
        x, a, g, u, s, proj = (P[n].reshape(P["T"], -1)[:R] for n in ("x", "a", "g", "u", "s", "proj"))
        for i, lw in enumerate(self.layers):
            self._launch("rmsnorm", P["norm"], h, lw["attn_norm"], P["x"], T)
            for gemm, w, out in ((G["q"], lw["wq"], P["q_"]), (G["kv"], lw["wk"], P["k_"]), (G["kv"], lw["wv"], P["v_"])):
                self._launch("gemm qkv", gemm, x, w, out.reshape(P["T"], -1)[:R], T)
            self._launch("rope", P["rope_q"], P["q_"], P["qr"], P["positions"], T)
            self._launch("rope", P["rope_k"], P["k_"], P["kr"], P["positions"], T)
            t0 = time.perf_counter()
            # the new rows into the cache: token t of sequence seq[t] at positions[t]
            self.k_cache[i][seq, :, positions, :] = P["kr"][:T]
            self.v_cache[i][seq, :, positions, :] = P["v_"][:T]
            self._glue(t0)
            self._launch("attention", P["attention"], P["qr"], self.k_cache[i], self.v_cache[i], lens_after, cu, P["a"])
            self._launch("gemm o", G["o"], a, lw["wo"], proj, T)
            t0 = time.perf_counter()
            h[:T] += P["proj"][:T]
            self._glue(t0)
            self._launch("rmsnorm", P["norm"], h, lw["mlp_norm"], P["x"], T)
            self._launch("gemm mlp", G["gate_up"], x, lw["wg"], g, T)
            self._launch("gemm mlp", G["gate_up"], x, lw["wu"], u, T)
            self._launch("swiglu", P["swiglu"], P["g"], P["u"], P["s"], T)
            self._launch("gemm mlp", G["down"], s, lw["wd"], proj, T)
            t0 = time.perf_counter()
            h[:T] += P["proj"][:T]
            self._glue(t0)
        self.lens[:] = lens_after

        Fn = self.final
        t0 = time.perf_counter()
        Fn["x"][:B] = h[cu[1:B + 1] - 1]  # each sequence's last token
        self._glue(t0)
        self._launch("rmsnorm", Fn["norm"], Fn["x"], self.final_norm, Fn["y"], B)
        lm, R = self._pick(Fn["lm"], B)
        self._launch("gemm logits", lm, Fn["y"][:R], self.lm_head, Fn["logits"][:R], B)
        return Fn["logits"][:B].copy()

    def _glue(self, t0):
        self.times["numpy glue"] = self.times.get("numpy glue", 0.0) + time.perf_counter() - t0

    def reset_times(self):
        self.times, self.calls = {}, {}


def generate(model, prompts, steps):
    """Greedy generation: prefill, then `steps` decode steps. Returns (tokens [B, steps+1]
    (the first from the prefill's logits), the logits of every step [steps+1, B, vocab])."""
    logits = model.prefill(prompts)
    all_logits, out = [logits], [logits.argmax(-1)]
    for _ in range(steps):
        logits = model.decode(out[-1])
        all_logits.append(logits)
        out.append(logits.argmax(-1))
    return np.stack(out, 1), np.stack(all_logits)

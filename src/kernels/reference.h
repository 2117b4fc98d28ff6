// Independent FP64 references of the library kernels: plain C++ loops in double precision
// over the float inputs, sharing nothing with the IR, the DSL or the interpreter.
// Expects: spans sized as the kernel's views (row-major). Guarantees: the exact-in-double
// value of each kernel's definition (docs/kernels.md), with IEEE rules for NaN and ±inf
// written out where a kernel's definition has a choice (e.g. attention's masked keys enter
// the V sum with weight 0, so 0·NaN still gives NaN).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kernels/attention.h"
#include "kernels/gemm.h"

namespace kiln::kernels::reference {

// o[b,h,i,:] = sum_j w[i,j] v[b,h/(Hq/Hkv),j,:] over every key j in [0, K), with
// w[i,j] = exp(s[i,j] - M_i) / sum_j' exp(s[i,j'] - M_i) for visible keys, 0 for masked keys
// and 0 for every key of a row whose M_i is -inf (no visible key, or only -inf scores);
// s = scale * q.k, M_i = max over visible keys (NaN if any visible score is NaN).
// Causal with blocks (block_q, block_k > 0: the stacked-heads kernel): the V sum of row i runs
// over the keys of the KV blocks its query block visits, [0, min(K, block_k * ceil(max(0, q0 +
// block_q + K - Q) / block_k))) with q0 = block_q * floor(i / block_q), not over all of [0, K).
std::vector<double> attention(const AttentionShape& s, bool causal, double scale, std::span<const float> q,
                              std::span<const float> k, std::span<const float> v, int64_t block_q = 0,
                              int64_t block_k = 0);

// The same over a KV cache (options.kv_cache Dense or Paged; s.K is the capacity): for each
// sequence b, attention of its Q queries over its first lens[b] positions (rows of k[b], or of
// the pages block_table[b] names), as `attention` with K = lens[b]. Positions past the length
// do not exist (whatever the cache holds there). With options.varlen, q and o are packed
// [Q, Hq, *]: token t belongs to sequence b = #{i in 1..B : cu_seqlens[i] <= t} (none when
// b = B: a zero row), at position t - cu_seqlens[b] of its cu_seqlens[b+1] - cu_seqlens[b]
// queries.
std::vector<double> cachedAttention(const AttentionShape& s, const AttentionOptions& options, double scale,
                                    std::span<const float> q, std::span<const float> k, std::span<const float> v,
                                    std::span<const int64_t> lens, std::span<const int64_t> block_table,
                                    std::span<const int64_t> cu_seqlens = {});

// c[M,N] = a[M,K] . b (b is [K,N], or [N,K] with trans_b).
std::vector<double> gemm(const GemmShape& s, bool trans_b, std::span<const float> a, std::span<const float> b);
// (|A|·|B|)[i,j] in double: the scale of gemm's rounding-error bound.
std::vector<double> gemmAbs(const GemmShape& s, bool trans_b, std::span<const float> a, std::span<const float> b);

// y[r,:] = exp(x[r,:] - M) / sum(exp(x[r,:] - M)), M = the row max (NaN if any element is).
std::vector<double> softmax(int64_t rows, int64_t cols, std::span<const float> x);

// y[r,c] = x[r,c] * (1 / sqrt(mean_c x[r,:]^2 + eps)) * w[c].
std::vector<double> rmsnorm(int64_t rows, int64_t cols, double eps, std::span<const float> x, std::span<const float> w);

// y[r,c] = (x[r,c] - mean) * (1 / sqrt(var + eps)) * w[c] + b[c]; var = mean of (x - mean)^2.
std::vector<double> layernorm(int64_t rows, int64_t cols, double eps, std::span<const float> x,
                              std::span<const float> w, std::span<const float> b);

// y = gate / (1 + exp(-gate)) * up (SiLU(gate) * up), elementwise.
std::vector<double> swiglu(std::span<const float> gate, std::span<const float> up);

// Rotary embedding of x [tokens, heads, head_dim]; token t is at position t, pair j uses the
// angle t * base^(-2j/head_dim). neox pairs (j, j + head_dim/2); interleaved pairs (2j, 2j+1).
// y_first = x_first cos - x_second sin; y_second = x_second cos + x_first sin.
std::vector<double> rope(int64_t tokens, int64_t heads, int64_t head_dim, bool neox, double base,
                         std::span<const float> x, std::span<const int64_t> positions);

// GELU: erf form 0.5 x (1 + erf(x / sqrt 2)); tanh form 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
std::vector<double> gelu(bool tanh_form, std::span<const float> x);

}  // namespace kiln::kernels::reference

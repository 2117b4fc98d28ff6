// FP64 references: each kernel's definition written as the obvious loops in double.
#include "kernels/reference.h"

#include <cmath>
#include <limits>

namespace kiln::kernels::reference {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// max that propagates NaN (std::max does not).
double maxNaN(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return kNaN;
  return a > b ? a : b;
}
}  // namespace

std::vector<double> attention(const AttentionShape& s, bool causal, double scale, std::span<const float> q,
                              std::span<const float> k, std::span<const float> v, int64_t block_q, int64_t block_k) {
  std::vector<double> o(s.B * s.Hq * s.Q * s.Dv, 0.0);
  const int64_t group = s.Hq / s.Hkv;
  std::vector<double> score(s.K), w(s.K);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h) {
      const int64_t kv = (b * s.Hkv + h / group) * s.K;  // first key row of this KV head
      for (int64_t i = 0; i < s.Q; ++i) {
        const float* qi = &q[((b * s.Hq + h) * s.Q + i) * s.D];
        // Keys [0, visible) are visible: all of them, or (causal, bottom-right) j <= i + K - Q.
        const int64_t visible = causal ? std::max<int64_t>(0, std::min(s.K, i + s.K - s.Q + 1)) : s.K;
        double rowMax = -kInf;
        for (int64_t j = 0; j < visible; ++j) {
          const float* kj = &k[(kv + j) * s.D];
          double dot = 0;
          for (int64_t d = 0; d < s.D; ++d) dot += double(qi[d]) * double(kj[d]);
          score[j] = dot * scale;
          rowMax = maxNaN(rowMax, score[j]);
        }
        double sum = 0;
        for (int64_t j = 0; j < s.K; ++j) {
          w[j] = j < visible && rowMax != -kInf ? std::exp(score[j] - rowMax) : 0.0;
          sum += w[j];
        }
        for (int64_t j = 0; j < s.K; ++j)
          if (sum != 0.0) w[j] /= sum;
        // Every key (of the blocks the row's query block visits) enters the sum, a masked one
        // with weight 0 (so 0 * NaN = NaN).
        int64_t summed = s.K;
        if (causal && block_q > 0 && block_k > 0) {
          const int64_t seen = std::max<int64_t>(0, i / block_q * block_q + block_q + s.K - s.Q);
          summed = std::min(s.K, (seen + block_k - 1) / block_k * block_k);
        }
        double* oi = &o[((b * s.Hq + h) * s.Q + i) * s.Dv];
        for (int64_t j = 0; j < summed; ++j) {
          const float* vj = &v[(kv + j) * s.Dv];
          for (int64_t e = 0; e < s.Dv; ++e) oi[e] += w[j] * double(vj[e]);
        }
      }
    }
  return o;
}

std::vector<double> cachedAttention(const AttentionShape& s, const AttentionOptions& opt, double scale,
                                    std::span<const float> q, std::span<const float> k, std::span<const float> v,
                                    std::span<const int64_t> lens, std::span<const int64_t> table,
                                    std::span<const int64_t> cu) {
  const bool paged = opt.kv_cache == KvCache::Paged;
  const int64_t page = opt.page, maxPages = paged ? (s.K + page - 1) / page : 0;
  // Sequence b's first len positions, gathered as a [1, Hkv, len, width] cache.
  auto gather = [&](int64_t b, int64_t len, std::span<const float> x, int64_t width) {
    std::vector<float> out;
    for (int64_t h = 0; h < s.Hkv; ++h)
      for (int64_t j = 0; j < len; ++j) {
        const int64_t at =
            paged ? ((table[b * maxPages + j / page] * s.Hkv + h) * page + j % page) : ((b * s.Hkv + h) * s.K + j);
        out.insert(out.end(), x.begin() + at * width, x.begin() + (at + 1) * width);
      }
    return out;
  };
  if (!opt.varlen) {
    std::vector<double> o;
    for (int64_t b = 0; b < s.B; ++b) {
      const int64_t len = lens[b];
      const std::vector<float> kb = gather(b, len, k, s.D), vb = gather(b, len, v, s.Dv);
      const AttentionShape one{1, s.Hq, s.Hkv, s.Q, len, s.D, s.Dv};
      std::vector<double> ob =
          attention(one, opt.causal, scale, q.subspan(b * s.Hq * s.Q * s.D, s.Hq * s.Q * s.D), kb, vb);
      o.insert(o.end(), ob.begin(), ob.end());
    }
    return o;
  }
  // Packed queries, token by token: its sequence, its position there, that sequence's cache.
  // A token of no sequence (before cu[0], from cu[B] on, or of offsets that decrease) is zeros.
  std::vector<double> o(s.Q * s.Hq * s.Dv, 0.0);
  const int64_t group = s.Hq / s.Hkv;
  bool ordered = true;
  for (int64_t i = 0; i < s.B; ++i) ordered = ordered && cu[i] <= cu[i + 1];
  for (int64_t t = 0; t < s.Q && ordered; ++t) {
    int64_t b = 0;
    for (int64_t i = 1; i <= s.B; ++i) b += cu[i] <= t;
    if (b >= s.B || t < cu[b]) continue;
    const int64_t len = lens[b], nq = cu[b + 1] - cu[b], pos = t - cu[b];
    const std::vector<float> kb = gather(b, len, k, s.D), vb = gather(b, len, v, s.Dv);
    // Keys [0, visible) are visible: all len of them, or (causal) j <= pos + len - nq; the
    // other keys of the sequence enter with weight 0, as in `attention`.
    const int64_t visible = opt.causal ? std::max<int64_t>(0, std::min(len, pos + len - nq + 1)) : len;
    for (int64_t h = 0; h < s.Hq; ++h) {
      const int64_t kvh = h / group;
      const float* qi = &q[(t * s.Hq + h) * s.D];
      std::vector<double> score(len, 0.0), w(len, 0.0);
      double rowMax = -kInf;
      for (int64_t j = 0; j < visible; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < s.D; ++d) dot += double(qi[d]) * double(kb[(kvh * len + j) * s.D + d]);
        score[j] = dot * scale;
        rowMax = maxNaN(rowMax, score[j]);
      }
      double sum = 0;
      for (int64_t j = 0; j < len; ++j) {
        w[j] = j < visible && rowMax != -kInf ? std::exp(score[j] - rowMax) : 0.0;
        sum += w[j];
      }
      double* oi = &o[(t * s.Hq + h) * s.Dv];
      for (int64_t j = 0; j < len; ++j) {
        const double wj = sum != 0.0 ? w[j] / sum : w[j];
        for (int64_t e = 0; e < s.Dv; ++e) oi[e] += wj * double(vb[(kvh * len + j) * s.Dv + e]);
      }
    }
  }
  return o;
}

std::vector<double> gemmAbs(const GemmShape& s, bool trans_b, std::span<const float> a, std::span<const float> b) {
  std::vector<float> absA(a.size()), absB(b.size());
  for (size_t i = 0; i < a.size(); ++i) absA[i] = std::fabs(a[i]);
  for (size_t i = 0; i < b.size(); ++i) absB[i] = std::fabs(b[i]);
  return gemm(s, trans_b, absA, absB);
}

std::vector<double> gemm(const GemmShape& s, bool trans_b, std::span<const float> a, std::span<const float> b) {
  std::vector<double> c(s.M * s.N, 0.0);
  if (trans_b) {
    for (int64_t i = 0; i < s.M; ++i)
      for (int64_t j = 0; j < s.N; ++j) {
        double acc = 0;
        for (int64_t kk = 0; kk < s.K; ++kk) acc += double(a[i * s.K + kk]) * double(b[j * s.K + kk]);
        c[i * s.N + j] = acc;
      }
    return c;
  }
  // Row i of C accumulates the rows of B scaled by a[i, kk], kk ascending: each element's sum
  // in the same order as a dot product, reading B contiguously (4096^3: seconds, not minutes).
  for (int64_t i = 0; i < s.M; ++i) {
    double* ci = &c[i * s.N];
    for (int64_t kk = 0; kk < s.K; ++kk) {
      const double aik = a[i * s.K + kk];
      const float* bk = &b[kk * s.N];
      for (int64_t j = 0; j < s.N; ++j) ci[j] += aik * double(bk[j]);
    }
  }
  return c;
}

std::vector<double> softmax(int64_t rows, int64_t cols, std::span<const float> x) {
  std::vector<double> y(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x[r * cols];
    double* yr = &y[r * cols];
    double m = -kInf, sum = 0;
    for (int64_t c = 0; c < cols; ++c) m = maxNaN(m, xr[c]);
    for (int64_t c = 0; c < cols; ++c) sum += yr[c] = std::exp(double(xr[c]) - m);
    for (int64_t c = 0; c < cols; ++c) yr[c] /= sum;
  }
  return y;
}

std::vector<double> rmsnorm(int64_t rows, int64_t cols, double eps, std::span<const float> x,
                            std::span<const float> w) {
  std::vector<double> y(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x[r * cols];
    double ss = 0;
    for (int64_t c = 0; c < cols; ++c) ss += double(xr[c]) * double(xr[c]);
    const double inv = 1.0 / std::sqrt(ss / double(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = double(xr[c]) * inv * double(w[c]);
  }
  return y;
}

std::vector<double> layernorm(int64_t rows, int64_t cols, double eps, std::span<const float> x,
                              std::span<const float> w, std::span<const float> b) {
  std::vector<double> y(rows * cols);
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = &x[r * cols];
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) mean += xr[c];
    mean /= double(cols);
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - mean) * (xr[c] - mean);
    const double inv = 1.0 / std::sqrt(var / double(cols) + eps);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = (xr[c] - mean) * inv * double(w[c]) + double(b[c]);
  }
  return y;
}

std::vector<double> swiglu(std::span<const float> gate, std::span<const float> up) {
  std::vector<double> y(gate.size());
  for (size_t i = 0; i < gate.size(); ++i) y[i] = double(gate[i]) / (1.0 + std::exp(-double(gate[i]))) * up[i];
  return y;
}

std::vector<double> rope(int64_t tokens, int64_t heads, int64_t head_dim, bool neox, double base,
                         std::span<const float> x, std::span<const int64_t> positions) {
  std::vector<double> y(tokens * heads * head_dim);
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t j = 0; j < half; ++j) {
      const double angle = double(positions[t]) * std::pow(base, -2.0 * double(j) / double(head_dim));
      const double c = std::cos(angle), s = std::sin(angle);
      const int64_t first = neox ? j : 2 * j, second = neox ? j + half : 2 * j + 1;
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t row = (t * heads + h) * head_dim;
        const double x1 = x[row + first], x2 = x[row + second];
        y[row + first] = x1 * c - x2 * s;
        y[row + second] = x2 * c + x1 * s;
      }
    }
  return y;
}

std::vector<double> gelu(bool tanh_form, std::span<const float> x) {
  std::vector<double> y(x.size());
  const double kSqrt2OverPi = std::sqrt(2.0 / M_PI);
  for (size_t i = 0; i < x.size(); ++i) {
    const double t = x[i];
    y[i] = tanh_form ? 0.5 * t * (1.0 + std::tanh(kSqrt2OverPi * (t + 0.044715 * t * t * t)))
                     : 0.5 * t * (1.0 + std::erf(t / std::sqrt(2.0)));
  }
  return y;
}

}  // namespace kiln::kernels::reference

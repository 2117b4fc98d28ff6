// The DSL attention and GEMM kernels, interpreted in f64, against plain C++ double-precision
// references that share nothing with the IR: dense attention (full score matrix, subtract the
// row max, exp, normalise) and a triple-loop GEMM. Shapes cover ragged blocks, GQA ratios
// 1, 4 and 8, causal and not, Q > K causal (rows with no valid key give zeros) and K = 0.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "host/data.h"
#include "interp/interp.h"
#include "ir/ir.h"
#include "kernels/attention.h"
#include "kernels/gemm.h"
#include "kiln/dsl.h"

namespace kiln::kernels {
namespace {

struct Evaluated {
  std::vector<host::ParamData> inputs;  // as generated (outputs zero)
  interp::F64Views f64;                 // f64-mode result of every view
  std::vector<host::ParamData> strict;  // strict-f32 result
};

Evaluated evaluate(const dsl::BuildResult& r, uint64_t seed) {
  Evaluated run;
  EXPECT_TRUE(r) << r.message();
  if (!r) return run;
  EXPECT_FALSE(host::makeInputs(*r.kernel, seed, {}, run.inputs));
  std::vector<host::ParamData> p = run.inputs;
  auto err = interp::evaluate(*r.kernel, p, {interp::Mode::F64}, &run.f64);
  EXPECT_FALSE(err) << *err;
  run.strict = run.inputs;
  err = interp::evaluate(*r.kernel, run.strict, {interp::Mode::StrictF32});
  EXPECT_FALSE(err) << *err;
  return run;
}

// Dense reference: o[b,h,i,:] = sum_j softmax_j(scale * q.k_j) v_j over the visible keys j.
std::vector<double> denseAttention(const AttentionShape& s, bool causal, double scale, const std::vector<float>& q,
                                   const std::vector<float>& k, const std::vector<float>& v) {
  std::vector<double> o(s.B * s.Hq * s.Q * s.Dv, 0.0);
  const int64_t group = s.Hq / s.Hkv;
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t h = 0; h < s.Hq; ++h) {
      const int64_t kvh = h / group;
      for (int64_t i = 0; i < s.Q; ++i) {
        const float* qi = &q[((b * s.Hq + h) * s.Q + i) * s.D];
        std::vector<double> score(s.K, -INFINITY);
        for (int64_t j = 0; j < s.K; ++j) {
          if (causal && j > i + s.K - s.Q) continue;
          const float* kj = &k[((b * s.Hkv + kvh) * s.K + j) * s.D];
          double dot = 0;
          for (int64_t d = 0; d < s.D; ++d) dot += double(qi[d]) * double(kj[d]);
          score[j] = dot * scale;
        }
        const double rowMax = s.K ? *std::max_element(score.begin(), score.end()) : -INFINITY;
        if (rowMax == -INFINITY) continue;  // no visible key: zeros
        double sum = 0;
        std::vector<double> p(s.K);
        for (int64_t j = 0; j < s.K; ++j) sum += p[j] = std::exp(score[j] - rowMax);
        double* oi = &o[((b * s.Hq + h) * s.Q + i) * s.Dv];
        for (int64_t j = 0; j < s.K; ++j)
          for (int64_t e = 0; e < s.Dv; ++e) oi[e] += p[j] / sum * double(v[((b * s.Hkv + kvh) * s.K + j) * s.Dv + e]);
      }
    }
  return o;
}

AttentionOptions blocks(int64_t bq, int64_t bk, bool causal, std::optional<double> scale = std::nullopt) {
  AttentionOptions o;
  o.block_q = bq;
  o.block_k = bk;
  o.causal = causal;
  o.scale = scale;
  return o;
}

struct Case {
  std::string name;
  AttentionShape shape;
  AttentionOptions options;
};

class AttentionReference : public testing::TestWithParam<Case> {};

TEST_P(AttentionReference, F64MatchesDenseSoftmax) {
  const Case& c = GetParam();
  const AttentionShape& s = c.shape;
  dsl::BuildResult r = attention(s, c.options);
  ASSERT_TRUE(r) << r.message();
  Evaluated run = evaluate(r, 42);
  ASSERT_EQ(run.f64.size(), 4u);
  const double scale = attentionScale(s, c.options);
  std::vector<double> want =
      denseAttention(s, c.options.causal, scale, run.inputs[0].data, run.inputs[1].data, run.inputs[2].data);
  const std::vector<double>& got = run.f64[3];
  ASSERT_EQ(got.size(), want.size());
  int64_t zeros = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    ASSERT_TRUE(std::isfinite(got[i])) << "element " << i;
    EXPECT_LE(std::abs(got[i] - want[i]), 1e-9 * std::max(1.0, std::abs(want[i])))
        << "element " << i << ": got " << got[i] << ", want " << want[i];
    // strict f32 agrees with the oracle within its tolerance (DESIGN.md, Evidence).
    EXPECT_LE(std::abs(run.strict[3].data[i] - want[i]), 5e-5 + 5e-5 * std::abs(want[i])) << "strict, element " << i;
    zeros += want[i] == 0.0;
  }
  if (c.options.causal && s.Q > s.K) {
    EXPECT_GT(zeros, 0) << "the case should have rows with no visible key";
  }
}

std::string caseName(const testing::TestParamInfo<Case>& info) {
  return info.param.name;
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionReference,
                         testing::Values(
                             // MHA (ratio 1), K not a multiple of BK, BQ not dividing Q.
                             Case{"mha_ragged", {1, 2, 2, 5, 37, 8, 6}, blocks(2, 16, false)},
                             Case{"mha_ragged_causal", {2, 3, 3, 7, 23, 5, 4}, blocks(3, 8, true)},
                             // GQA ratio 4, causal, ragged everywhere.
                             Case{"gqa4_causal", {2, 8, 2, 7, 33, 16, 8}, blocks(4, 8, true)},
                             // GQA ratio 8 (MQA with 8 heads), decode.
                             Case{"gqa8_decode", {1, 8, 1, 1, 67, 80, 96}, blocks(1, 16, false)},
                             Case{"gqa8_causal", {1, 16, 2, 6, 19, 8, 8}, blocks(4, 5, true)},
                             // The seed's prefill shape, block 4x16, causal.
                             Case{"prefill", {1, 4, 2, 32, 65, 32, 32}, blocks(4, 16, true)},
                             // Q > K, causal: the first Q - K query rows see no key and output zeros.
                             Case{"q_gt_k_causal", {1, 2, 1, 9, 4, 4, 4}, blocks(4, 2, true)},
                             // K = 0: no key at all.
                             Case{"k0", {1, 2, 1, 3, 0, 4, 4}, blocks(2, 4, false)},
                             // An explicit scale, and a block larger than the whole sequence.
                             Case{"scale_big_blocks", {1, 4, 2, 3, 10, 6, 5}, blocks(8, 32, false, 0.3)}),
                         caseName);

// Triple-loop reference: c = a . b, b stored [K, N] or (trans_b) [N, K].
std::vector<double> denseGemm(const GemmShape& s, bool transB, const std::vector<float>& a,
                              const std::vector<float>& b) {
  std::vector<double> c(s.M * s.N, 0.0);
  for (int64_t i = 0; i < s.M; ++i)
    for (int64_t j = 0; j < s.N; ++j) {
      double acc = 0;
      for (int64_t k = 0; k < s.K; ++k)
        acc += double(a[i * s.K + k]) * double(transB ? b[j * s.K + k] : b[k * s.N + j]);
      c[i * s.N + j] = acc;
    }
  return c;
}

TEST(GemmReference, RaggedShapesBothLayouts) {
  struct G {
    GemmShape shape;
    GemmTiles tiles;
  };
  for (const G& g : {G{{13, 10, 21}, {4, 8, 8}}, G{{37, 20, 45}, {16, 8, 16}}, G{{5, 7, 3}, {8, 8, 16}},
                     G{{16, 16, 16}, {16, 16, 16}}, G{{3, 4, 0}, {2, 2, 2}}})
    for (bool transB : {false, true}) {
      SCOPED_TRACE(testing::Message() << "M=" << g.shape.M << " N=" << g.shape.N << " K=" << g.shape.K
                                      << " trans_b=" << transB);
      dsl::BuildResult r = gemm(g.shape, g.tiles, transB);
      ASSERT_TRUE(r) << r.message();
      Evaluated run = evaluate(r, 3);
      ASSERT_EQ(run.f64.size(), 3u);
      std::vector<double> want = denseGemm(g.shape, transB, run.inputs[0].data, run.inputs[1].data);
      ASSERT_EQ(run.f64[2].size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        EXPECT_LE(std::abs(run.f64[2][i] - want[i]), 1e-12 * std::max(1.0, std::abs(want[i]))) << i;
        EXPECT_LE(std::abs(run.strict[2].data[i] - want[i]), 5e-5 + 5e-5 * std::abs(want[i])) << "strict " << i;
      }
    }
}

}  // namespace
}  // namespace kiln::kernels

// Attention in the DSL. The loop over KV blocks keeps a running row max m, row sum l and
// output accumulator acc (online softmax); see attention.h for the contract.
#include "kernels/attention.h"

#include <cmath>
#include <string>

namespace kiln::kernels {

using namespace kiln::dsl;

float attentionScale(const AttentionShape& s, const AttentionOptions& opt) {
  return static_cast<float>(opt.scale.value_or(1.0 / std::sqrt(static_cast<double>(s.D))));
}

namespace {

// One program per (batch, query head, query block): the seed's kernel.
BuildResult separateHeads(KernelBuilder& kb, const AttentionShape& s, const AttentionOptions& opt, MmaFlags flags) {
  const int64_t BQ = opt.block_q, BK = opt.block_k;
  const int64_t group = s.Hq / s.Hkv, nQB = (s.Q + BQ - 1) / BQ, nKB = (s.K + BK - 1) / BK;
  const std::vector<Dim> mn = {{"m", BQ}, {"n", BK}};

  View q = kb.view("q", {s.B, s.Hq, s.Q, s.D});
  View k = kb.view("k", {s.B, s.Hkv, s.K, s.D});
  View v = kb.view("v", {s.B, s.Hkv, s.K, s.Dv});
  View o = kb.view("o", {s.B, s.Hq, s.Q, s.Dv});

  kb.parallel({{"b", s.B}, {"h", s.Hq}, {"qb", nQB}}, [&](Idx b, Idx h, Idx qb) {
    Idx kvh = (h / group).as("kvh");
    Idx q0 = (qb * BQ).as("q0");
    Tile qt = load(q, {b, h, q0, 0}, {_, _, {"m", BQ}, {"d", s.D}}).as("qt");
    // Query row i sees key j iff j < K and (causal) j <= i + K - Q, i.e. j < min(K, i + K - Q + 1).
    Tile limit =
        (opt.causal ? min(kb.iota({{"m", BQ}}, "m") + (q0 + (s.K - s.Q + 1)), s.K) : kb.index(s.K)).as("limit");

    Carry m0{"m", kb.full({{"m", BQ}}, -inf)}, l0{"l", kb.zeros({{"m", BQ}})};
    Carry acc0{"acc", kb.zeros({{"m", BQ}, {"dv", s.Dv}})};
    auto [m, l, acc] = kb.serial("kb", 0, nKB, {m0, l0, acc0}, [&](Idx j, Tile mPrev, Tile lPrev, Tile accPrev) {
      Idx k0 = (j * BK).as("k0");
      Tile kt = load(k, {b, kvh, k0, 0}, {_, _, {"n", BK}, {"d", s.D}}).as("kt");
      Tile vt = load(v, {b, kvh, k0, 0}, {_, _, {"n", BK}, {"dv", s.Dv}}).as("vt");
      Tile qk = mma(qt, kt, kb.zeros(mn), {"d"}, flags).as("qk");
      Tile scores = (qk * attentionScale(s, opt)).as("scores");
      Tile valid = lt((kb.iota(mn, "n") + k0).as("kidx"), limit).as("valid");
      scores = select(valid, scores, -inf).as("masked");

      Tile mNew = max(mPrev, reduceMax(scores, {"n"}, -inf).as("row_max")).as("m_new");
      // A row with no valid key so far has m = -inf; exp(s - 0) keeps it at p = 0, never NaN.
      Tile mSafe = select(eq(mNew, -inf), 0.0, mNew).as("m_safe");
      Tile p = exp(scores - mSafe).as("p");
      Tile alpha = exp(mPrev - mSafe).as("alpha");
      Tile lNew = (lPrev * alpha + reduceSum(p, {"n"}, 0.0).as("row_sum")).as("l_new");
      Tile accNew = mma(p, vt, accPrev * alpha, {"n"}, flags).as("acc_new");
      return Tiles{mNew, lNew, accNew};
    });

    // l == 0: no valid key for the row (acc is 0 too); output zeros instead of 0/0.
    Tile out = (acc / select(eq(l, 0.0), 1.0, l).as("l_safe")).as("out");
    store(out, o, {b, h, q0, 0}, {_, _, {"m", BQ}, {"dv", s.Dv}});
  });
  return kb.finish();
}

}  // namespace

BuildResult attention(const AttentionShape& s, const AttentionOptions& opt) {
  KernelBuilder kb("attention");
  const int64_t BQ = opt.block_q, BK = opt.block_k;
  if (s.B < 1 || s.Hq < 1 || s.Hkv < 1 || s.Q < 1 || s.K < 0 || s.D < 1 || s.Dv < 1 || BQ < 1 || BK < 1)
    kb.error("bad-shape", "attention needs B, Hq, Hkv, Q, D, Dv, block_q, block_k >= 1 and K >= 0");
  else if (s.Hq % s.Hkv != 0)
    kb.error("bad-shape", "attention needs Hq to be a multiple of Hkv (got Hq=" + std::to_string(s.Hq) +
                              ", Hkv=" + std::to_string(s.Hkv) + ")");
  if (kb.hasErrors()) return kb.finish();
  const int64_t group = s.Hq / s.Hkv, nQB = (s.Q + BQ - 1) / BQ, nKB = (s.K + BK - 1) / BK;
  const MmaFlags flags = opt.fused ? fusedMma : MmaFlags{};
  if (!opt.stack_heads) return separateHeads(kb, s, opt, flags);

  // Rows of one program: the G query heads of one KV head (g) x the block's queries (m). Row
  // max and sum use the 16-partition tree (docs/ir.md, Reductions): lane j of a 16-wide vector
  // (two 8-wide ones) holds partition j, on any ISA.
  const int64_t G = group;
  View q = kb.view("q", {s.B, s.Hq, s.Q, s.D});
  View k = kb.view("k", {s.B, s.Hkv, s.K, s.D});
  View v = kb.view("v", {s.B, s.Hkv, s.K, s.Dv});
  View o = kb.view("o", {s.B, s.Hq, s.Q, s.Dv});
  const std::vector<Dim> gm = {{"g", G}, {"m", BQ}}, gmn = {{"g", G}, {"m", BQ}, {"n", BK}};

  kb.parallel({{"b", s.B}, {"kvh", s.Hkv}, {"qb", nQB}}, [&](Idx b, Idx kvh, Idx qb) {
    Idx h0 = (kvh * G).as("h0");
    Idx q0 = (qb * BQ).as("q0");
    Tile qt = load(q, {b, h0, q0, 0}, {_, {"g", G}, {"m", BQ}, {"d", s.D}}).as("qt");
    // Query row i sees key j iff j < K and (causal) j <= i + K - Q, i.e. j < min(K, i + K - Q + 1).
    Tile limit =
        (opt.causal ? min(kb.iota({{"m", BQ}}, "m") + (q0 + (s.K - s.Q + 1)), s.K) : kb.index(s.K)).as("limit");

    Carry m0{"m", kb.full(gm, -inf)}, l0{"l", kb.zeros(gm)};
    Carry acc0{"acc", kb.zeros({{"g", G}, {"m", BQ}, {"dv", s.Dv}})};
    auto [m, l, acc] = kb.serial("kb", 0, nKB, {m0, l0, acc0}, [&](Idx j, Tile mPrev, Tile lPrev, Tile accPrev) {
      Idx k0 = (j * BK).as("k0");
      Tile kt = load(k, {b, kvh, k0, 0}, {_, _, {"n", BK}, {"d", s.D}}).as("kt");
      Tile vt = load(v, {b, kvh, k0, 0}, {_, _, {"n", BK}, {"dv", s.Dv}}).as("vt");
      Tile qk = mma(qt, kt, kb.zeros(gmn), {"d"}, flags).as("qk");
      Tile scores = (qk * attentionScale(s, opt)).as("scores");
      Tile valid = lt((kb.iota(gmn, "n") + k0).as("kidx"), limit).as("valid");
      scores = select(valid, scores, -inf).as("masked");

      Tile mNew = max(mPrev, reduceMax(scores, {"n"}, -inf, unorderedTree(16)).as("row_max")).as("m_new");
      // A row with no valid key so far has m = -inf; exp(s - 0) keeps it at p = 0, never NaN.
      Tile mSafe = select(eq(mNew, -inf), 0.0, mNew).as("m_safe");
      Tile p = exp(scores - mSafe).as("p");
      Tile alpha = exp(mPrev - mSafe).as("alpha");
      Tile lNew = (lPrev * alpha + reduceSum(p, {"n"}, 0.0, unorderedTree(16)).as("row_sum")).as("l_new");
      Tile accNew = mma(p, vt, accPrev * alpha, {"n"}, flags).as("acc_new");
      return Tiles{mNew, lNew, accNew};
    });

    // l == 0: no valid key for the row (acc is 0 too); output zeros instead of 0/0.
    Tile out = (acc / select(eq(l, 0.0), 1.0, l).as("l_safe")).as("out");
    store(out, o, {b, h0, q0, 0}, {_, {"g", G}, {"m", BQ}, {"dv", s.Dv}});
  });
  return kb.finish();
}

}  // namespace kiln::kernels

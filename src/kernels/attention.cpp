// Attention in the DSL. The loop over KV blocks keeps a running row max m, row sum l and
// output accumulator acc (online softmax); see attention.h for the contract.
#include "kernels/attention.h"

#include <array>
#include <cmath>
#include <string>
#include <utility>

namespace kiln::kernels {

using namespace kiln::dsl;

float attentionScale(const AttentionShape& s, const AttentionOptions& opt) {
  return static_cast<float>(opt.scale.value_or(1.0 / std::sqrt(static_cast<double>(s.D))));
}

namespace {

// The q.k^T mma's flags: the kernel's, in the partitioned order when asked.
MmaFlags qkFlags(MmaFlags flags, const AttentionOptions& opt) {
  flags.partitions = opt.qk_partitions;
  return flags;
}

// One program per (batch, query head, query block): the seed's kernel.
BuildResult separateHeads(KernelBuilder& kb, const AttentionShape& s, const AttentionOptions& opt, MmaFlags flags) {
  const int64_t BQ = opt.block_q, BK = opt.block_k;
  const int64_t group = s.Hq / s.Hkv, nQB = (s.Q + BQ - 1) / BQ, nKB = (s.K + BK - 1) / BK;
  const std::vector<Dim> mn = {{"m", BQ}, {"n", BK}};

  View q = kb.view("q", {s.B, s.Hq, s.Q, s.D});
  View k = kb.view("k", {s.B, s.Hkv, s.K, s.D}, opt.kv_elem);
  View v = kb.view("v", {s.B, s.Hkv, s.K, s.Dv}, opt.kv_elem);
  View o = kb.view("o", {s.B, s.Hq, s.Q, s.Dv}, opt.out_elem);

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
      Tile qk = mma(qt, kt, kb.zeros(mn), {"d"}, qkFlags(flags, opt)).as("qk");
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

// The online-softmax update of stacked heads for one KV block of (masked) `scores` and V tile
// `vt`: the new row max m, row sum l and unnormalised accumulator; row max and sum in the
// 16-partition tree.
Tiles stackedUpdate(const Tile& scores, const Tile& vt, const Tile& mPrev, const Tile& lPrev, const Tile& accPrev,
                    MmaFlags flags) {
  Tile mNew = max(mPrev, reduceMax(scores, {"n"}, -inf, unorderedTree(16)).as("row_max")).as("m_new");
  // A row with no valid key so far has m = -inf; exp(s - 0) keeps it at p = 0, never NaN.
  Tile mSafe = select(eq(mNew, -inf), 0.0, mNew).as("m_safe");
  Tile p = exp(scores - mSafe).as("p");
  Tile alpha = exp(mPrev - mSafe).as("alpha");
  Tile lNew = (lPrev * alpha + reduceSum(p, {"n"}, 0.0, unorderedTree(16)).as("row_sum")).as("l_new");
  Tile accNew = mma(p, vt, accPrev * alpha, {"n"}, flags).as("acc_new");
  return Tiles{mNew, lNew, accNew};
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
  else if (opt.kv_cache != KvCache::None && !opt.stack_heads)
    kb.error("bad-options", "attention over a KV cache needs stacked heads");
  else if (opt.varlen && (opt.kv_cache == KvCache::None || opt.split_blocks != 0 || opt.queries_in_lanes))
    kb.error("bad-options", "packed (varlen) queries need a KV cache, no split and the keys in the lanes");
  else if (opt.bf16_pairs && opt.qk_partitions != 0)
    kb.error("bad-options", "attention: the bf16 pairs order and partitions(P) are two orders of q.k^T; choose one");
  else if (opt.kv_cache == KvCache::Paged && (opt.page < 1 || opt.pages < 1 || opt.page % BK != 0))
    kb.error("bad-options", "a paged KV cache needs page >= 1 positions, a multiple of block_k (" + std::to_string(BK) +
                                "), and pages >= 1 (got page " + std::to_string(opt.page) + ", pages " +
                                std::to_string(opt.pages) + ")");
  if (kb.hasErrors()) return kb.finish();
  const int64_t group = s.Hq / s.Hkv, nQB = (s.Q + BQ - 1) / BQ, nKB = (s.K + BK - 1) / BK;
  const MmaFlags flags = opt.bf16_pairs ? MmaFlags{.bf16_pairs = true} : opt.fused ? fusedMma : MmaFlags{};
  if (!opt.stack_heads) return separateHeads(kb, s, opt, flags);

  // Rows of one program: the G query heads of one KV head (g) x the block's queries (m). Row
  // max and sum use the 16-partition tree (docs/ir.md, Reductions): lane j of a 16-wide vector
  // (two 8-wide ones) holds partition j, on any ISA.
  const int64_t G = group;
  // A KV cache (docs/kernels.md, "KV caches"): K holds the capacity, lens the lengths.
  const bool cache = opt.kv_cache != KvCache::None, paged = opt.kv_cache == KvCache::Paged;
  const int64_t PG = opt.page, maxPages = paged ? (s.K + PG - 1) / PG : 0;
  const bool varlen = opt.varlen;  // packed queries: Q is their total capacity T
  View q = varlen ? kb.view("q", {s.Q, s.Hq, s.D}) : kb.view("q", {s.B, s.Hq, s.Q, s.D});
  const FloatElem kvElem = opt.kv_elem;
  View k = paged ? kb.view("k", {opt.pages, s.Hkv, PG, s.D}, kvElem) : kb.view("k", {s.B, s.Hkv, s.K, s.D}, kvElem);
  View v = paged ? kb.view("v", {opt.pages, s.Hkv, PG, s.Dv}, kvElem) : kb.view("v", {s.B, s.Hkv, s.K, s.Dv}, kvElem);
  View lens, table;
  if (cache) lens = kb.intView("lens", {s.B}, IntElem::I32, Range{0, s.K});
  if (paged) table = kb.intView("block_table", {s.B, maxPages}, IntElem::I32, Range{0, opt.pages - 1});
  View cu;
  if (varlen) cu = kb.intView("cu_seqlens", {s.B + 1}, IntElem::I32, Range{0, s.Q, true});
  View o = varlen ? kb.view("o", {s.Q, s.Hq, s.Dv}, opt.out_elem) : kb.view("o", {s.B, s.Hq, s.Q, s.Dv}, opt.out_elem);
  // Score and accumulator dims: the last one lies along the vector lanes (keys n, or queries m).
  // Packed queries are read as [m, g, d] (token, then head: the layout of q): their rows are
  // (m, g), so that the q.k^T mma's rows are its operand's, as the GPU block form requires
  // (the arithmetic of each row is the same in either order).
  const bool qLanes = opt.queries_in_lanes;
  const std::vector<Dim> gm = varlen ? std::vector<Dim>{{"m", BQ}, {"g", G}} : std::vector<Dim>{{"g", G}, {"m", BQ}};
  const std::vector<Dim> gmn = qLanes   ? std::vector<Dim>{{"g", G}, {"n", BK}, {"m", BQ}}
                               : varlen ? std::vector<Dim>{{"m", BQ}, {"g", G}, {"n", BK}}
                                        : std::vector<Dim>{{"g", G}, {"m", BQ}, {"n", BK}};
  const std::vector<Dim> gmdv = qLanes   ? std::vector<Dim>{{"g", G}, {"dv", s.Dv}, {"m", BQ}}
                                : varlen ? std::vector<Dim>{{"m", BQ}, {"g", G}, {"dv", s.Dv}}
                                         : std::vector<Dim>{{"g", G}, {"m", BQ}, {"dv", s.Dv}};

  // The online softmax over KV blocks [lo, hi) of one program: its m, l and unnormalised acc.
  // Causal: the blocks past the last key the program's last row sees are left out (every score
  // there is masked: with finite V such a block changes nothing, it only costs a full block).
  auto kvLoop = [&](Idx b, Idx kvh, Idx h0, Idx q0, IdxArg lo, IdxArg hi) {
    Tile qt = load(q, {b, h0, q0, 0}, {_, {"g", G}, {"m", BQ}, {"d", s.D}}).as("qt");
    // Query row i sees key j iff j < K and (causal) j <= i + K - Q, i.e. j < min(K, i + K - Q + 1).
    Tile limit =
        (opt.causal ? min(kb.iota({{"m", BQ}}, "m") + (q0 + (s.K - s.Q + 1)), s.K) : kb.index(s.K)).as("limit");
    if (opt.causal) {
      // Row q0 + BQ - 1 sees keys [0, q0 + BQ + K - Q): that many blocks, at least none.
      Idx seen = maxIndex((q0 + (BQ + s.K - s.Q)).as("seen"), 0);
      Idx visible = ((seen + (BK - 1)) / BK).as("visible");
      hi = hi.is_constant ? minIndex(visible, hi.constant) : minIndex(visible, hi.idx);
    }

    Carry m0{"m", kb.full(gm, -inf)}, l0{"l", kb.zeros(gm)};
    Carry acc0{"acc", kb.zeros(gmdv)};
    return kb.serial("kb", lo, hi, {m0, l0, acc0}, [&](Idx j, Tile mPrev, Tile lPrev, Tile accPrev) {
      Idx k0 = (j * BK).as("k0");
      Tile kt = load(k, {b, kvh, k0, 0}, {_, _, {"n", BK}, {"d", s.D}}).as("kt");
      Tile vt = load(v, {b, kvh, k0, 0}, {_, _, {"n", BK}, {"dv", s.Dv}}).as("vt");
      Tile qk = mma(qt, kt, kb.zeros(gmn), {"d"}, qkFlags(flags, opt)).as("qk");
      Tile scores = (qk * attentionScale(s, opt)).as("scores");
      Tile valid = lt((kb.iota(gmn, "n") + k0).as("kidx"), limit).as("valid");
      scores = select(valid, scores, -inf).as("masked");
      return stackedUpdate(scores, vt, mPrev, lPrev, accPrev, flags);
    });
  };

  // Over a KV cache: sequence b's keys are positions [0, len) (of its dense rows, or of the
  // pages its block table names), its Q queries the positions len - Q .. len - 1. A masked
  // block masks the scores and zeroes the V rows past len (the cache's memory there is not
  // the kernel's to trust: 0 * NaN would be NaN). Blocks [lo, hi) of ceil(len / BK), a chunk.
  // qt: the program's queries [g, m, d] (any order), the first at position q0 + len - 1 -
  // shift of its sequence (shift = len - (queries of the sequence - 1)).
  auto cacheLoopOf = [&](Idx b, Idx kvh, Tile qt, Idx q0, Idx len, Idx shift, Idx lo, Idx hi) {
    // Query row i sees key j iff j < len and (causal) j <= i + len - Q.
    Tile limit = (opt.causal ? min(kb.iota({{"m", BQ}}, "m") + (q0 + shift), len) : Tile(len)).as("limit");
    auto kvTiles = [&](Idx k0) {
      Idx row = b, at = k0;  // K/V row block: (batch, position) or (page, offset)
      if (paged) {
        Idx pi = (k0 / PG).as("page_index");
        row = extractIndex(load(table, {b, pi}, {_, {"one", 1}}).as("page_t"), {0}).as("page");
        at = (k0 - pi * PG).as("offset");
      }
      Tile kt = load(k, {row, kvh, at, 0}, {_, _, {"n", BK}, {"d", s.D}}).as("kt");
      Tile vt = load(v, {row, kvh, at, 0}, {_, _, {"n", BK}, {"dv", s.Dv}}).as("vt");
      return std::pair{kt, vt};
    };
    auto scoresOf = [&](const Tile& kt) {
      Tile qk = mma(qt, kt, kb.zeros(gmn), {"d"}, qkFlags(flags, opt)).as("qk");
      return (qk * attentionScale(s, opt)).as("scores");
    };
    auto maskedStep = [&](Idx j, Tile mPrev, Tile lPrev, Tile accPrev) {
      Idx k0 = (j * BK).as("k0");
      auto [kt, vt] = kvTiles(k0);
      Tile inCache = lt((kb.iota({{"n", BK}, {"dv", s.Dv}}, "n") + k0).as("vidx"), len).as("in_cache");
      vt = select(inCache, vt, 0.0).as("vt_masked");
      Tile valid = lt((kb.iota(gmn, "n") + k0).as("kidx"), limit).as("valid");
      Tile scores = select(valid, scoresOf(kt), -inf).as("masked");
      return stackedUpdate(scores, vt, mPrev, lPrev, accPrev, flags);
    };
    Carry m0{"m", kb.full(gm, -inf)}, l0{"l", kb.zeros(gm)};
    Carry acc0{"acc", kb.zeros(gmdv)};
    // Few rows (decode): the mask would cost as much as the block, so the blocks every row
    // sees run without one. Many rows: one masked loop (the mask is cheap beside them, and one
    // loop's panels fit where two would not).
    if (G * BQ >= 16) return kb.serial("kb", lo, hi, {m0, l0, acc0}, maskedStep);
    Idx seen = opt.causal ? minIndex(len, q0 + shift) : len;  // keys the program's first row sees
    Idx full = maxIndex(seen / BK, 0).as("full");
    auto [m1, l1, acc1] =
        kb.serial("kb", lo, minIndex(hi, full), {m0, l0, acc0}, [&](Idx j, Tile mPrev, Tile lPrev, Tile accPrev) {
          auto [kt, vt] = kvTiles((j * BK).as("k0"));
          return stackedUpdate(scoresOf(kt), vt, mPrev, lPrev, accPrev, flags);
        });
    Carry m1c{"m", m1}, l1c{"l", l1}, acc1c{"acc", acc1};
    return kb.serial("kb_tail", maxIndex(lo, full), hi, {m1c, l1c, acc1c}, maskedStep);
  };
  auto cacheLoop = [&](Idx b, Idx kvh, Idx h0, Idx q0, Idx len, Idx lo, Idx hi) {
    Tile qt = load(q, {b, h0, q0, 0}, {_, {"g", G}, {"m", BQ}, {"d", s.D}}).as("qt");
    return cacheLoopOf(b, kvh, qt, q0, len, (len - (s.Q - 1)).as("shift"), lo, hi);
  };
  auto lengthOf = [&](Idx b) { return extractIndex(load(lens, {b}, {{"one", 1}}).as("len_t"), {0}).as("len"); };
  auto blocksOf = [&](Idx len) { return ((len + (BK - 1)) / BK).as("blocks"); };

  // l == 0: no valid key for the row (acc is 0 too); output zeros instead of 0/0.
  auto normalise = [&](Tile l, Tile acc) { return (acc / select(eq(l, 0.0), 1.0, l).as("l_safe")).as("out"); };

  if (varlen) {
    // Packed queries (FlashAttention's varlen): sequence b's queries are rows cu[b] .. cu[b+1]-1
    // of q, at the ends of its cache. Token t belongs to sequence b = #{i in 1..B : cu[i] <= t}
    // at position t - cu[b]. A token before cu[0] or from cu[B] on belongs to none, and offsets
    // that are not nondecreasing make a batch of no sequence: their rows are zeros.
    auto cuAt = [&](Idx i) { return extractIndex(load(cu, {i}, {{"one", 1}}).as("cu_t"), {0}); };
    auto endsOf = [&] { return load(cu, {1}, {{"s", s.B}}).as("cu_ends"); };
    auto orderedOf = [&] {  // 1: nondecreasing offsets, else 0
      Tile begins = load(cu, {0}, {{"s", s.B}}).as("cu_begins");
      Tile descent = select(lt(endsOf(), begins), kb.index(1), kb.index(0)).as("descent");
      Idx descents = extractIndex(reduceSum(descent, {"s"}, kb.index(0)).as("descents_t"), {}).as("descents");
      return (1 - minIndex(descents, 1)).as("ordered");
    };
    auto sequenceOf = [&](Idx t) {
      Tile before = select(le(endsOf(), Tile(t)), kb.index(1), kb.index(0)).as("ended");
      return extractIndex(reduceSum(before, {"s"}, kb.index(0)).as("seq_t"), {}).as("seq");
    };
    if (BQ == 1) {
      // One program per (query token t, KV head), its rows the group's query heads.
      kb.parallel({{"t", s.Q}, {"kvh", s.Hkv}}, [&](Idx t, Idx kvh) {
        Idx h0 = (kvh * G).as("h0");
        Idx b = sequenceOf(t);
        Idx start = cuAt(b).as("start");
        Idx stop = cuAt((b + 1).as("next")).as("stop");
        Idx i = (t - start).as("pos");
        // The token's keys: its sequence's len, none for a token of no sequence.
        Idx member =
            (orderedOf() * minIndex(maxIndex(i + 1, 0), 1) * minIndex(maxIndex((stop - start) - i, 0), 1)).as("member");
        Idx len = (lengthOf(b) * member).as("len_in");
        Tile qt = load(q, {t, h0, 0}, {{"m", 1}, {"g", G}, {"d", s.D}}).as("qt");
        auto [m, l, acc] =
            cacheLoopOf(b, kvh, qt, i, len, (len - ((stop - start) - 1)).as("shift"), kb.index(0), blocksOf(len));
        store(normalise(l, acc), o, {t, h0, 0}, {{"m", 1}, {"g", G}, {"dv", s.Dv}});
      });
      return kb.finish();
    }
    // Blocks of BQ queries of one sequence (the GPU's default: a block's K/V tiles serve BQ
    // tokens): phase 0, one program per (sequence b, block qb of its queries, KV head), stores
    // its rows in a workspace by (sequence, position); phase 1 copies each token's row to o (a
    // block's rows past its sequence are never read). Row for row the same arithmetic as one
    // token per program: the same bits.
    const int64_t nQB = (s.Q + BQ - 1) / BQ;
    View rowsWs = kb.workspace("seq_rows", {s.B, s.Q, s.Hq, s.Dv});
    kb.parallel({{"b", s.B}, {"qb", nQB}, {"kvh", s.Hkv}}, [&](Idx b, Idx qb, Idx kvh) {
      Idx h0 = (kvh * G).as("h0");
      Idx q0 = (qb * BQ).as("q0");
      Idx start = cuAt(b).as("start");
      Idx nq = (cuAt((b + 1).as("next")) - start).as("nq");
      // A block holding none of the sequence's queries (or of no sequence) reads no key.
      Idx active = (orderedOf() * minIndex(maxIndex(nq - q0, 0), 1)).as("active");
      Idx len = (lengthOf(b) * active).as("len_in");
      Idx shift = (len - (nq - 1)).as("shift");
      Tile qt = load(q, {(start + q0).as("t0"), h0, 0}, {{"m", BQ}, {"g", G}, {"d", s.D}}).as("qt");
      Idx hi = blocksOf(len);
      if (opt.causal) {  // past the block of the last key its last row sees, every score is masked
        Idx seen = maxIndex((q0 + shift + (BQ - 1)).as("seen"), 0);
        hi = minIndex(hi, ((seen + (BK - 1)) / BK).as("visible"));
      }
      auto [m, l, acc] = cacheLoopOf(b, kvh, qt, q0, len, shift, kb.index(0), hi);
      store(normalise(l, acc), rowsWs, {b, q0, h0, 0}, {_, {"m", BQ}, {"g", G}, {"dv", s.Dv}});
    });
    kb.parallel({{"t", s.Q}}, [&](Idx t) {
      Idx b = sequenceOf(t);
      // No sequence: a row outside the workspace (it reads zeros).
      Idx row = (b + (1 - orderedOf()) * (s.B + 1)).as("row_seq");
      Idx pos = (t - cuAt(b)).as("pos");
      Tile x = load(rowsWs, {row, pos, 0, 0}, {_, _, {"h", s.Hq}, {"dv", s.Dv}}).as("row");
      store(x, o, {t, 0, 0}, {_, {"h", s.Hq}, {"dv", s.Dv}});
    });
    return kb.finish();
  }

  const int64_t CB = opt.split_blocks;  // KV blocks per chunk (0: no split)
  if (CB < 1 || CB >= nKB) {
    kb.parallel({{"b", s.B}, {"kvh", s.Hkv}, {"qb", nQB}}, [&](Idx b, Idx kvh, Idx qb) {
      Idx h0 = (kvh * G).as("h0");
      Idx q0 = (qb * BQ).as("q0");
      if (cache) {
        Idx len = lengthOf(b);
        auto [m, l, acc] = cacheLoop(b, kvh, h0, q0, len, kb.index(0), blocksOf(len));
        store(normalise(l, acc), o, {b, h0, q0, 0}, {_, {"g", G}, {"m", BQ}, {"dv", s.Dv}});
        return;
      }
      auto [m, l, acc] = kvLoop(b, kvh, h0, q0, 0, nKB);
      store(normalise(l, acc), o, {b, h0, q0, 0}, {_, {"g", G}, {"m", BQ}, {"dv", s.Dv}});
    });
    return kb.finish();
  }

  // Split KV: phase 1, one program per (b, kvh, qb, chunk of CB blocks) stores its partial
  // (m, l, unnormalised acc) in workspaces; phase 2 merges the chunks in ascending order.
  const int64_t C = (nKB + CB - 1) / CB, P = s.B * s.Hkv * nQB;
  View pm = kb.workspace("part_m", {P, C, G, BQ});
  View pl = kb.workspace("part_l", {P, C, G, BQ});
  View pacc = kb.workspace("part_acc", {P, C, G, BQ, s.Dv});
  auto prog = [&](Idx b, Idx kvh, Idx qb) { return ((b * s.Hkv + kvh) * nQB + qb).as("prog"); };
  kb.parallel({{"b", s.B}, {"kvh", s.Hkv}, {"qb", nQB}, {"c", C}}, [&](Idx b, Idx kvh, Idx qb, Idx c) {
    // Chunk c walks blocks [c*CB, c*CB + CB), the last one [c*CB, nKB): (c+1)/C is 1 only there.
    Idx h0 = (kvh * G).as("h0");
    Idx q0 = (qb * BQ).as("q0");
    Idx lo = (c * CB).as("lo");
    Tiles part;
    if (cache) {
      // Chunks are of the capacity; one past this launch's length has no block (the merge's
      // identity: m = -inf, l = acc = 0).
      Idx len = lengthOf(b);
      auto r = cacheLoop(b, kvh, h0, q0, len, lo, minIndex(lo + CB, blocksOf(len)).as("hi"));
      part.assign(r.begin(), r.end());
    } else {
      Idx hi = ((lo + CB) - ((c + 1) / C) * (C * CB - nKB)).as("hi");
      auto r = kvLoop(b, kvh, h0, q0, lo, hi);
      part.assign(r.begin(), r.end());
    }
    const Tile &m = part[0], &l = part[1], &acc = part[2];
    Idx pi = prog(b, kvh, qb);
    store(m, pm, {pi, c, 0, 0}, {_, _, {"g", G}, {"m", BQ}});
    store(l, pl, {pi, c, 0, 0}, {_, _, {"g", G}, {"m", BQ}});
    store(acc, pacc, {pi, c, 0, 0, 0}, {_, _, {"g", G}, {"m", BQ}, {"dv", s.Dv}});
  });
  // The merge: one program per (b, kvh, qb) and chunk of MC value columns (a ragged last one
  // masked).
  const int64_t MC = opt.merge_columns > 0 && opt.merge_columns < s.Dv ? opt.merge_columns : s.Dv;
  const int64_t nDC = (s.Dv + MC - 1) / MC;
  auto merge = [&](Idx b, Idx kvh, Idx qb, IdxArg d0) {
    Idx pi = prog(b, kvh, qb);
    const std::vector<Dim> merged = {{"g", G}, {"m", BQ}, {"dv", MC}};  // as the partials are loaded
    Carry m0{"m", kb.full(gm, -inf)}, l0{"l", kb.zeros(gm)}, acc0{"acc", kb.zeros(merged)};
    // m = max(m_a, m_b), alpha = e^(m_a - m), beta = e^(m_b - m), l = alpha l_a + beta l_b,
    // acc = alpha acc_a + beta acc_b; a chunk (or a row so far) with no valid key has m = -inf
    // and l = acc = 0, and m_safe keeps its factor at e^(-inf) = 0, never NaN.
    auto [m, l, acc] = kb.serial("c", 0, C, {m0, l0, acc0}, [&](Idx c, Tile mA, Tile lA, Tile accA) {
      Tile mB = load(pm, {pi, c, 0, 0}, {_, _, {"g", G}, {"m", BQ}}).as("m_chunk");
      Tile lB = load(pl, {pi, c, 0, 0}, {_, _, {"g", G}, {"m", BQ}}).as("l_chunk");
      Tile accB = load(pacc, {pi, c, 0, 0, d0}, {_, _, {"g", G}, {"m", BQ}, {"dv", MC}}).as("acc_chunk");
      Tile mNew = max(mA, mB).as("m_new");
      Tile mSafe = select(eq(mNew, -inf), 0.0, mNew).as("m_safe");
      Tile alpha = exp(mA - mSafe).as("alpha");
      Tile beta = exp(mB - mSafe).as("beta");
      Tile lNew = (lA * alpha + lB * beta).as("l_new");
      Tile accNew = (accA * alpha + accB * beta).as("acc_new");
      return Tiles{mNew, lNew, accNew};
    });
    (void)m;
    store(normalise(l, acc), o, {b, (kvh * G).as("h0"), (qb * BQ).as("q0"), d0}, {_, {"g", G}, {"m", BQ}, {"dv", MC}});
  };
  if (nDC == 1)
    kb.parallel({{"b", s.B}, {"kvh", s.Hkv}, {"qb", nQB}}, [&](Idx b, Idx kvh, Idx qb) { merge(b, kvh, qb, 0); });
  else
    kb.parallel({{"b", s.B}, {"kvh", s.Hkv}, {"qb", nQB}, {"dc", nDC}},
                [&](Idx b, Idx kvh, Idx qb, Idx dc) { merge(b, kvh, qb, (dc * MC).as("d0")); });
  return kb.finish();
}

}  // namespace kiln::kernels

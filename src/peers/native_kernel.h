// The hand-written attention, written once over vector-traits types and compiled twice:
// native_avx512.cpp (16 lanes of __m512; 8 lanes of __m256 for one decode case) and
// native_avx2.cpp (8 lanes of __m256). Only those files include this header, with traits
// defined in their anonymous namespace, so every instantiation has internal linkage and is
// compiled for its own ISA. No standard library templates here: an out-of-line copy compiled
// with AVX-512 could be picked by the linker for a caller on an AVX2-only machine.
//
// Work is split by KV head (GQA-aware: the query heads of one KV head are stacked as rows,
// row r = query i * G + head g, so one pass over K/V serves all of them). Two strategies:
// - lanes (many rows: prefill, large GQA groups): a panel of up to kMaxRV x L rows is held
//   in vector lanes; Q is transposed once per panel (scale folded in), scores are
//   broadcast(k[j][d]) x qT[d][rows] FMAs, and the online softmax (max, exp, sum, rescale) is
//   purely vertical: no horizontal reductions at all. The output accumulator is kept
//   transposed, accT[dv][rows], and transposed back once at the end.
// - dot (few rows: decode): rows in tiles of kDotRows; scores are dot products along D
//   (contiguous in q and k), four at a time summed by horizontal adds; P.V accumulates
//   broadcast(p) x v[j][dv..] into rows x up to 6 vectors of registers. When K/V exceed half
//   the L3, K/V rows 64 keys ahead are prefetched into L2 (from L3 that only costs time).
// Both read each K/V block once per panel (resp. once per KV head) and keep it in L1 while
// every row of the panel uses it. K and V are f32 or 16-bit (Attention<V, KvStorage>): a 16-bit
// element is widened to f32 exactly where it is loaded (bf16: its bits at the top of a float;
// f16: the hardware's conversion), so the arithmetic is the f32 kernel's on the same values.
#pragma once

#include <cmath>
#include <cstdint>

#include "peers/native.h"

namespace kiln::peers::native_detail {

// How one call splits into work items (plain data, the same in every instantiation).
struct Split {
  int64_t group = 1, rows = 1;    // rows per KV head = group * Q
  bool lanes = false;             // lanes strategy (else dot)
  int64_t panel = 1, panels = 1;  // rows per work item, items per KV head
};

// The element type of K and V as stored.
template <KvStorage S>
struct KvElemOf {
  using E = uint16_t;
};
template <>
struct KvElemOf<KvStorage::F32> {
  using E = float;
};

template <class V, KvStorage S = KvStorage::F32>
struct Attention {
  using T = typename V::T;
  using E = typename KvElemOf<S>::E;
  static constexpr int L = V::L;
  static constexpr int kLaneBlock = 64;                  // keys per block, lanes strategy
  static constexpr int kDotBlock = 64;                   // keys per block, dot strategy
  static constexpr int kPrefetchKeys = 64;               // dot strategy: how far ahead to prefetch K/V rows
  static constexpr int64_t kLineElems = 64 / sizeof(E);  // K/V elements per 64-byte cache line
  static_assert(kLaneBlock % V::kLaneKeys == 0 && kDotBlock % 8 == 0 && kDotBlock % L == 0);

  static int64_t lo(int64_t a, int64_t b) { return a < b ? a : b; }
  static int64_t hi(int64_t a, int64_t b) { return a > b ? a : b; }
  static int64_t roundUp(int64_t a, int64_t m) { return (a + m - 1) / m * m; }
  static int64_t visible(const AttentionArgs& a, int64_t i) {
    return a.causal ? lo(a.K, hi(0, i + a.K - a.Q + 1)) : a.K;
  }

  // exp on every lane: degree-7 Taylor polynomial on r = x - n ln2, |r| <= ln2/2 (error
  // below 1 ulp-ish, far inside the oracle's tolerance), times 2^n built in the exponent
  // bits. x < -87 (including -inf) gives exactly 0.
  static T vexp(T x) {
    const T floor = V::set1(-87.0f);
    T xc = V::min(V::max(x, floor), V::set1(88.0f));
    T n = V::roundNearest(V::mul(xc, V::set1(1.44269504088896341f)));
    T r = V::fnmadd(n, V::set1(0.693359375f), xc);
    r = V::fnmadd(n, V::set1(-2.12194440e-4f), r);
    T p = V::set1(1.0f / 5040.0f);
    p = V::fma(p, r, V::set1(1.0f / 720.0f));
    p = V::fma(p, r, V::set1(1.0f / 120.0f));
    p = V::fma(p, r, V::set1(1.0f / 24.0f));
    p = V::fma(p, r, V::set1(1.0f / 6.0f));
    p = V::fma(p, r, V::set1(0.5f));
    p = V::fma(p, r, V::set1(1.0f));
    p = V::fma(p, r, V::set1(1.0f));
    return V::zeroWhereLess(x, floor, V::mul(p, V::pow2i(n)));
  }
  static float sexp(float x) { return V::first(vexp(V::set1(x))); }

  // ---- K/V elements as f32 ----------------------------------------------------------------
  static const E* kData(const AttentionArgs& a) {
    if constexpr (S == KvStorage::F32)
      return a.k;
    else
      return a.k16;
  }
  static const E* vData(const AttentionArgs& a) {
    if constexpr (S == KvStorage::F32)
      return a.v;
    else
      return a.v16;
  }
  static T loadKv(const E* p) {
    if constexpr (S == KvStorage::F32)
      return V::load(p);
    else if constexpr (S == KvStorage::BF16)
      return V::loadBf16(p);
    else
      return V::loadF16(p);
  }
  static T loadKvFirst(const E* p, int64_t n) {
    if constexpr (S == KvStorage::F32)
      return V::loadFirst(p, n);
    else if constexpr (S == KvStorage::BF16)
      return V::loadFirstBf16(p, n);
    else
      return V::loadFirstF16(p, n);
  }
  static T setKv(E x) {
    if constexpr (S == KvStorage::F32)
      return V::set1(x);
    else if constexpr (S == KvStorage::BF16)
      return V::set1Bf16(x);
    else
      return V::set1F16(x);
  }

  // ---- work split -------------------------------------------------------------------------
  static Split split(const AttentionArgs& a) {
    Split s;
    s.group = a.Hq / a.Hkv;
    s.rows = s.group * a.Q;
    s.lanes = 4 * s.rows >= 3 * L;  // fewer rows would leave most lanes idle
    s.panel = s.lanes ? int64_t{V::kMaxRV} * L : s.rows;
    s.panels = (s.rows + s.panel - 1) / s.panel;
    return s;
  }
  static int64_t lanesScratchFloats(const AttentionArgs& a, const Split& s) {
    return s.panel * (a.D + kLaneBlock + a.Dv + 4) + 64;
  }
  static int64_t dotScratchFloats(const AttentionArgs& a, const Split& s) {
    return roundUp(s.rows, V::kDotRows) * (kDotBlock + roundUp(a.Dv, L) + 4) + 64;
  }
  // The row of q (and o) for panel row r of KV head kvh: query i = r / G of head kvh*G + r % G.
  static int64_t rowIndex(const AttentionArgs& a, const Split& s, int64_t b, int64_t kvh, int64_t r) {
    const int64_t i = r / s.group, g = r % s.group;
    return ((b * a.Hq + kvh * s.group + g) * a.Q + i);
  }

  static void lanesItem(const AttentionArgs& a, const Split& s, int64_t it, float* scratch) {
    const int64_t panel = it % s.panels, bk = it / s.panels, b = bk / a.Hkv, kvh = bk % a.Hkv;
    const int64_t r0 = panel * s.panel, n = lo(s.panel, s.rows - r0);
    if (n <= L) return lanesPanel<1>(a, s, b, kvh, r0, n, scratch);
    if constexpr (V::kMaxRV >= 2)
      if (n <= 2 * L) return lanesPanel < 2 < V::kMaxRV ? 2 : V::kMaxRV > (a, s, b, kvh, r0, n, scratch);
    return lanesPanel<V::kMaxRV>(a, s, b, kvh, r0, n, scratch);
  }

  // ---- lanes strategy ---------------------------------------------------------------------
  template <int RV>
  static void lanesPanel(const AttentionArgs& a, const Split& s, int64_t b, int64_t kvh, int64_t r0, int64_t nrows,
                         float* scratch) {
    constexpr int P = RV * L, KS = V::kLaneKeys, DC = V::kLaneDv, BK = kLaneBlock;
    const int64_t D = a.D, Dv = a.Dv, K = a.K;
    float* qT = scratch;                               // [D][P], scaled
    float* sT = qT + D * P;                            // [BK][P]: scores, then probabilities
    float* accT = sT + BK * P;                         // [Dv][P]
    float* m = accT + Dv * P;                          // [P]
    float* l = m + P;                                  // [P]
    int32_t* lim = reinterpret_cast<int32_t*>(l + P);  // [P]: visible keys per row

    int64_t kmax = 0, kmin = K;
    for (int64_t p = 0; p < P; ++p) {
      if (p < nrows) {
        const int64_t row = rowIndex(a, s, b, kvh, r0 + p);
        const float* q = a.q + row * D;
        for (int64_t d = 0; d < D; ++d) qT[d * P + p] = q[d] * a.scale;
        const int64_t n = visible(a, (r0 + p) / s.group);
        lim[p] = static_cast<int32_t>(n);
        kmax = hi(kmax, n);
        kmin = lo(kmin, n);
      } else {  // padding lanes: finite junk, never stored
        for (int64_t d = 0; d < D; ++d) qT[d * P + p] = 0.0f;
        lim[p] = 0;
      }
    }
    for (int rv = 0; rv < RV; ++rv) {
      V::store(m + rv * L, V::set1(-INFINITY));
      V::store(l + rv * L, V::zero());
    }
    for (int64_t e = 0; e < Dv * P; e += L) V::store(accT + e, V::zero());

    const E* kh = kData(a) + (b * a.Hkv + kvh) * K * D;
    const E* vh = vData(a) + (b * a.Hkv + kvh) * K * Dv;
    for (int64_t j0 = 0; j0 < kmax; j0 += BK) {
      const int64_t jn = lo(BK, kmax - j0);
      // Scores sT[j][p] = sum_d k[j][d] * qT[d][p]: KS keys x RV vectors of rows per step.
      for (int64_t jj = 0; jj < jn; jj += KS) {
        const E* kp[KS];
        for (int t = 0; t < KS; ++t) kp[t] = kh + lo(j0 + jj + t, K - 1) * D;
        T acc[KS][RV];
        for (int t = 0; t < KS; ++t)
          for (int rv = 0; rv < RV; ++rv) acc[t][rv] = V::zero();
        for (int64_t d = 0; d < D; ++d) {
          T qv[RV];
          for (int rv = 0; rv < RV; ++rv) qv[rv] = V::load(qT + d * P + rv * L);
          for (int t = 0; t < KS; ++t) {
            const T kb = setKv(kp[t][d]);
            for (int rv = 0; rv < RV; ++rv) acc[t][rv] = V::fma(kb, qv[rv], acc[t][rv]);
          }
        }
        for (int t = 0; t < KS; ++t)
          for (int rv = 0; rv < RV; ++rv) V::store(sT + (jj + t) * P + rv * L, acc[t][rv]);
      }
      // Online softmax, one lane per row: mask, block max, rescale factor, probabilities.
      const bool masked = j0 + jn > kmin;
      T bmax[RV], alpha[RV], msafe[RV], sum[RV];
      for (int rv = 0; rv < RV; ++rv) bmax[rv] = V::set1(-INFINITY);
      for (int64_t j = 0; j < jn; ++j)
        for (int rv = 0; rv < RV; ++rv) {
          T x = V::load(sT + j * P + rv * L);
          if (masked) {
            x = V::keepIfBelow(j0 + j, lim + rv * L, x, V::set1(-INFINITY));
            V::store(sT + j * P + rv * L, x);
          }
          bmax[rv] = V::max(bmax[rv], x);
        }
      for (int rv = 0; rv < RV; ++rv) {
        const T mold = V::load(m + rv * L), mnew = V::max(mold, bmax[rv]);
        msafe[rv] = V::negInfToZero(mnew);  // no visible key yet: p = exp(-inf) = 0, never NaN
        alpha[rv] = vexp(V::sub(mold, msafe[rv]));
        V::store(m + rv * L, mnew);
        sum[rv] = V::zero();
      }
      for (int64_t j = 0; j < jn; ++j)
        for (int rv = 0; rv < RV; ++rv) {
          const T p = vexp(V::sub(V::load(sT + j * P + rv * L), msafe[rv]));
          V::store(sT + j * P + rv * L, p);
          sum[rv] = V::add(sum[rv], p);
        }
      for (int rv = 0; rv < RV; ++rv) V::store(l + rv * L, V::fma(V::load(l + rv * L), alpha[rv], sum[rv]));
      // accT[dv][p] = alpha[p] * accT[dv][p] + sum_j v[j][dv] * p[j][p]: DC columns x RV per step.
      for (int64_t dv0 = 0; dv0 < Dv; dv0 += DC) {
        int64_t col[DC];  // past Dv: repeat the last column (same result stored twice)
        for (int c = 0; c < DC; ++c) col[c] = lo(dv0 + c, Dv - 1);
        T acc[DC][RV];
        for (int c = 0; c < DC; ++c)
          for (int rv = 0; rv < RV; ++rv) acc[c][rv] = V::mul(V::load(accT + col[c] * P + rv * L), alpha[rv]);
        for (int64_t j = 0; j < jn; ++j) {
          const E* vr = vh + (j0 + j) * Dv;
          T pv[RV];
          for (int rv = 0; rv < RV; ++rv) pv[rv] = V::load(sT + j * P + rv * L);
          for (int c = 0; c < DC; ++c) {
            const T vb = setKv(vr[col[c]]);
            for (int rv = 0; rv < RV; ++rv) acc[c][rv] = V::fma(vb, pv[rv], acc[c][rv]);
          }
        }
        for (int c = 0; c < DC; ++c)
          for (int rv = 0; rv < RV; ++rv) V::store(accT + col[c] * P + rv * L, acc[c][rv]);
      }
    }
    for (int64_t p = 0; p < nrows; ++p) {
      float* o = a.o + rowIndex(a, s, b, kvh, r0 + p) * Dv;
      const float lp = l[p];
      for (int64_t dv = 0; dv < Dv; ++dv) o[dv] = lp > 0.0f ? accT[dv * P + p] / lp : 0.0f;
    }
  }

  // ---- dot strategy -----------------------------------------------------------------------
  struct DotState {
    const float* q[V::kDotRows];
    float* acc[V::kDotRows];  // [roundUp(Dv, L)]
    float* m;
    float* l;
    const int64_t* lim;
    float* s;  // [kDotRows][kDotBlock]
    bool prefetch;
  };

  static void dotHead(const AttentionArgs& a, const Split& sp, int64_t b, int64_t kvh, float* scratch) {
    constexpr int R = V::kDotRows;
    const int64_t rows = sp.rows, rowsPad = roundUp(rows, R), DvPad = roundUp(a.Dv, L);
    float* s = scratch;                                      // [R][kDotBlock]
    float* acc = s + R * kDotBlock;                          // [rowsPad][DvPad]
    float* m = acc + rowsPad * DvPad;                        // [rowsPad]
    float* l = m + rowsPad;                                  // [rowsPad]
    int64_t* lim = reinterpret_cast<int64_t*>(l + rowsPad);  // [rowsPad]
    int64_t kmax = 0;
    for (int64_t r = 0; r < rowsPad; ++r) {
      m[r] = -INFINITY;
      l[r] = 0.0f;
      lim[r] = r < rows ? visible(a, r / sp.group) : 0;
      kmax = hi(kmax, lim[r]);
    }
    for (int64_t e = 0; e < rowsPad * DvPad; e += L) V::store(acc + e, V::zero());
    const E* kh = kData(a) + (b * a.Hkv + kvh) * a.K * a.D;
    const E* vh = vData(a) + (b * a.Hkv + kvh) * a.K * a.Dv;
    for (int64_t j0 = 0; j0 < kmax; j0 += kDotBlock) {
      const int64_t jn = lo(kDotBlock, kmax - j0);
      for (int64_t r0 = 0; r0 < rows; r0 += R) {
        DotState st;
        for (int r = 0; r < R; ++r) {
          st.q[r] = a.q + rowIndex(a, sp, b, kvh, lo(r0 + r, rows - 1)) * a.D;
          st.acc[r] = acc + (r0 + r) * DvPad;
        }
        st.m = m + r0;
        st.l = l + r0;
        st.lim = lim + r0;
        st.s = s;
        st.prefetch = r0 == 0 && a.prefetch;
        switch (lo(R, rows - r0)) {
          case 1: dotTile<1>(a, st, kh, vh, j0, jn); break;
          case 2: dotTile<2>(a, st, kh, vh, j0, jn); break;
          case 3: dotTile<(R >= 3 ? 3 : R)>(a, st, kh, vh, j0, jn); break;
          default: dotTile<R>(a, st, kh, vh, j0, jn); break;
        }
      }
    }
    for (int64_t r = 0; r < rows; ++r) {
      float* o = a.o + rowIndex(a, sp, b, kvh, r) * a.Dv;
      const float lr = l[r];
      for (int64_t dv = 0; dv < a.Dv; ++dv) o[dv] = lr > 0.0f ? acc[r * DvPad + dv] / lr : 0.0f;
    }
  }

  template <int R>
  static void dotTile(const AttentionArgs& a, const DotState& st, const E* kh, const E* vh, int64_t j0, int64_t jn) {
    constexpr int KS = V::dotKeys(R);
    const int64_t D = a.D, Dv = a.Dv, K = a.K;
    // Scores: R rows x KS keys of dot products over D, four reduced at a time.
    for (int64_t jj = 0; jj < jn; jj += KS) {
      const E* kp[KS];
      for (int t = 0; t < KS; ++t) kp[t] = kh + lo(j0 + jj + t, K - 1) * D;
      if (st.prefetch) {  // K and V rows kPrefetchKeys ahead into L2, once per KV head (first row tile)
        const int64_t ahead = lo(j0 + jj + kPrefetchKeys, K - 1);
        for (int t = 0; t < KS && ahead + t < K; ++t) {
          for (int64_t e = 0; e < D; e += kLineElems) V::prefetch(kh + (ahead + t) * D + e);
          for (int64_t e = 0; e < Dv; e += kLineElems) V::prefetch(vh + (ahead + t) * Dv + e);
        }
      }
      T acc[R][KS];
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < KS; ++t) acc[r][t] = V::zero();
      int64_t d = 0;
      for (; d + L <= D; d += L) {
        T kv[KS];
        for (int t = 0; t < KS; ++t) kv[t] = loadKv(kp[t] + d);
        for (int r = 0; r < R; ++r) {
          const T qv = V::load(st.q[r] + d);
          for (int t = 0; t < KS; ++t) acc[r][t] = V::fma(qv, kv[t], acc[r][t]);
        }
      }
      if (d < D) {
        T kv[KS];
        for (int t = 0; t < KS; ++t) kv[t] = loadKvFirst(kp[t] + d, D - d);
        for (int r = 0; r < R; ++r) {
          const T qv = V::loadFirst(st.q[r] + d, D - d);
          for (int t = 0; t < KS; ++t) acc[r][t] = V::fma(qv, kv[t], acc[r][t]);
        }
      }
      for (int r = 0; r < R; ++r)
        for (int t = 0; t < KS; t += 4)
          V::hsum4(acc[r][t], acc[r][t + 1], acc[r][t + 2], acc[r][t + 3], st.s + r * kDotBlock + jj + t);
    }
    // Online softmax per row over the block's visible keys; p = 0 for the others.
    float alpha[R];
    const T scale = V::set1(a.scale);
    for (int r = 0; r < R; ++r) {
      float* sr = st.s + r * kDotBlock;
      const int64_t n = lo(jn, hi(0, st.lim[r] - j0));
      T bm = V::set1(-INFINITY);
      for (int64_t j = 0; j < n; j += L)
        bm = V::max(bm, V::firstOr(V::mul(V::load(sr + j), scale), n - j, V::set1(-INFINITY)));
      const float mold = st.m[r], mnew = mold > V::reduceMax(bm) ? mold : V::reduceMax(bm);
      const float msafe = mnew == -INFINITY ? 0.0f : mnew;
      alpha[r] = sexp(mold - msafe);
      st.m[r] = mnew;
      T sum = V::zero();
      for (int64_t j = 0; j < jn; j += L) {
        const T p = V::firstOr(vexp(V::sub(V::mul(V::load(sr + j), scale), V::set1(msafe))), n - j, V::zero());
        V::store(sr + j, p);
        sum = V::add(sum, p);
      }
      st.l[r] = st.l[r] * alpha[r] + V::reduceAdd(sum);
    }
    // acc[r][dv] = alpha[r] * acc[r][dv] + sum_j p[r][j] * v[j][dv]: R rows x C vectors per
    // step, the vectors of Dv split into as few equal chunks of at most dotDv(R) as possible.
    const int64_t nvec = (Dv + L - 1) / L, chunks = (nvec + V::dotDv(R) - 1) / V::dotDv(R);
    const int64_t per = (nvec + chunks - 1) / chunks;
    for (int64_t v0 = 0; v0 < nvec; v0 += per) {
      const int64_t n = lo(per, nvec - v0);
      dotPVChunk<R>(n, (v0 + n) * L <= Dv, a, st, vh, j0, jn, alpha, v0 * L);
    }
  }

  // dotPV<R, n, full> for a run-time n in 1..dotDv(R).
  template <int R, int C = 1>
  static void dotPVChunk(int64_t n, bool full, const AttentionArgs& a, const DotState& st, const E* vh, int64_t j0,
                         int64_t jn, const float* alpha, int64_t dv0) {
    if constexpr (C < V::dotDv(R))
      if (n > C) return dotPVChunk<R, C + 1>(n, full, a, st, vh, j0, jn, alpha, dv0);
    if (full)
      dotPV<R, C, true>(a, st, vh, j0, jn, alpha, dv0);
    else
      dotPV<R, C, false>(a, st, vh, j0, jn, alpha, dv0);
  }

  template <int R, int C, bool Full>
  static void dotPV(const AttentionArgs& a, const DotState& st, const E* vh, int64_t j0, int64_t jn, const float* alpha,
                    int64_t dv0) {
    const int64_t Dv = a.Dv;
    int64_t left[C];
    for (int c = 0; c < C; ++c) left[c] = Dv - dv0 - c * L;
    T acc[R][C];
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = V::mul(V::load(st.acc[r] + dv0 + c * L), V::set1(alpha[r]));
    for (int64_t j = 0; j < jn; ++j) {
      const E* vr = vh + (j0 + j) * Dv + dv0;
      T vv[C];
      for (int c = 0; c < C; ++c) vv[c] = Full ? loadKv(vr + c * L) : loadKvFirst(vr + c * L, left[c]);
      for (int r = 0; r < R; ++r) {
        const T pb = V::set1(st.s[r * kDotBlock + j]);
        for (int c = 0; c < C; ++c) acc[r][c] = V::fma(pb, vv[c], acc[r][c]);
      }
    }
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) V::store(st.acc[r] + dv0 + c * L, acc[r][c]);
  }

  // ---- helpers for the other peers and the machine probes ---------------------------------
  static void softmaxRows(float* s, int64_t rows, int64_t cols, int64_t ld, const int64_t* limits) {
    for (int64_t r = 0; r < rows; ++r) {
      float* sr = s + r * ld;
      const int64_t n = limits ? lo(cols, hi(0, limits[r])) : cols;
      T bm = V::set1(-INFINITY);
      for (int64_t j = 0; j < n; j += L) bm = V::max(bm, V::firstOr(V::loadFirst(sr + j, n - j), n - j, bm));
      const float mx = V::reduceMax(bm);
      T sum = V::zero();
      int64_t j = 0;
      for (; j + L <= n; j += L) {
        const T p = vexp(V::sub(V::load(sr + j), V::set1(mx)));
        V::store(sr + j, p);
        sum = V::add(sum, p);
      }
      float tail = 0.0f;
      for (; j < n; ++j) {
        sr[j] = sexp(sr[j] - mx);
        tail += sr[j];
      }
      const float total = V::reduceAdd(sum) + tail;
      const T inv = V::set1(n > 0 ? 1.0f / total : 0.0f);
      j = 0;
      for (; j + L <= n; j += L) V::store(sr + j, V::mul(V::load(sr + j), inv));
      for (; j < n; ++j) sr[j] *= V::first(inv);
      for (j = n; j < cols; ++j) sr[j] = 0.0f;
    }
  }

  static double fmaPeak(int64_t iterations) {
    T acc[kFmaAccumulators];
    for (int i = 0; i < kFmaAccumulators; ++i) acc[i] = V::set1(1.0f + 0.001f * static_cast<float>(i));
    const T x = V::set1(0.999999f), y = V::set1(1e-7f);
    for (int64_t it = 0; it < iterations; ++it)
      for (int i = 0; i < kFmaAccumulators; ++i) acc[i] = V::fma(acc[i], x, y);
    T total = acc[0];
    for (int i = 1; i < kFmaAccumulators; ++i) total = V::add(total, acc[i]);
    V::keep(total);  // an empty asm that "uses" the result: the loop cannot be dropped
    return 2.0 * L * kFmaAccumulators * static_cast<double>(iterations);
  }

  static float readSum(const float* data, int64_t n) {
    T acc[8];
    for (int i = 0; i < 8; ++i) acc[i] = V::zero();
    for (int64_t e = 0; e + 8 * L <= n; e += 8 * L)
      for (int i = 0; i < 8; ++i) acc[i] = V::add(acc[i], V::load(data + e + i * L));
    for (int i = 1; i < 8; ++i) acc[0] = V::add(acc[0], acc[i]);
    return V::reduceAdd(acc[0]);
  }
};

// One ISA's table: everything on V, except the dot strategy on VN (narrower vectors) when a
// KV head has 3 rows (decode with a GQA group of 3): measured faster there, slower elsewhere.
template <class V, class VN>
struct Kernels {
  static bool narrow(const Split& s) { return !s.lanes && s.rows == 3; }
  static int64_t items(const AttentionArgs& a) { return a.B * a.Hkv * Attention<V>::split(a).panels; }
  static int64_t scratchFloats(const AttentionArgs& a) {
    const Split s = Attention<V>::split(a);
    return s.lanes     ? Attention<V>::lanesScratchFloats(a, s)
           : narrow(s) ? Attention<VN>::dotScratchFloats(a, s)
                       : Attention<V>::dotScratchFloats(a, s);
  }
  template <KvStorage S>
  static void itemOf(const AttentionArgs& a, int64_t it, float* scratch) {
    const Split s = Attention<V>::split(a);
    if (s.lanes) return Attention<V, S>::lanesItem(a, s, it, scratch);
    if (narrow(s)) return Attention<VN, S>::dotHead(a, s, it / a.Hkv, it % a.Hkv, scratch);
    Attention<V, S>::dotHead(a, s, it / a.Hkv, it % a.Hkv, scratch);
  }
  static void item(const AttentionArgs& a, int64_t it, float* scratch) {
    switch (a.kv) {
      case KvStorage::BF16: return itemOf<KvStorage::BF16>(a, it, scratch);
      case KvStorage::F16: return itemOf<KvStorage::F16>(a, it, scratch);
      default: return itemOf<KvStorage::F32>(a, it, scratch);
    }
  }
  static constexpr IsaKernels table(const char* name) {
    return IsaKernels{name,
                      V::L,
                      &items,
                      &scratchFloats,
                      &item,
                      &Attention<V>::softmaxRows,
                      &Attention<V>::fmaPeak,
                      &Attention<V>::readSum};
  }
};

}  // namespace kiln::peers::native_detail

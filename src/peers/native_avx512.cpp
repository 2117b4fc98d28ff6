// The hand-written attention for AVX-512 (F, BW, VL, DQ): 16 f32 lanes, 32 vector registers.
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma (CMakeLists.txt); called
// only after native.cpp checked the CPU.
#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "peers/native.h"

namespace kiln::peers {
namespace {

struct V512 {
  using T = __m512;
  static constexpr int L = 16;
  static constexpr int kMaxRV = 3;     // lanes strategy: up to 48 rows per panel
  static constexpr int kLaneKeys = 8;  // scores: 8 keys x 3 row vectors = 24 accumulators
  static constexpr int kLaneDv = 8;    // P.V: 8 columns x 3 row vectors
  static constexpr int kDotRows = 4;   // dot strategy: rows per tile
  static constexpr int kDotDv = 6;     // P.V: up to 4 rows x 6 vectors of Dv
  static constexpr int dotKeys(int rows) { return rows <= 2 ? 8 : 4; }

  static __mmask16 firstMask(int64_t n) {
    return n >= 16 ? __mmask16(0xFFFF) : n <= 0 ? __mmask16(0) : __mmask16((1u << n) - 1);
  }
  static T zero() { return _mm512_setzero_ps(); }
  static T set1(float x) { return _mm512_set1_ps(x); }
  static T load(const float* p) { return _mm512_loadu_ps(p); }
  static T loadFirst(const float* p, int64_t n) { return _mm512_maskz_loadu_ps(firstMask(n), p); }
  static void store(float* p, T x) { _mm512_storeu_ps(p, x); }
  static T fma(T a, T b, T c) { return _mm512_fmadd_ps(a, b, c); }
  static T fnmadd(T a, T b, T c) { return _mm512_fnmadd_ps(a, b, c); }
  static T add(T a, T b) { return _mm512_add_ps(a, b); }
  static T sub(T a, T b) { return _mm512_sub_ps(a, b); }
  static T mul(T a, T b) { return _mm512_mul_ps(a, b); }
  static T max(T a, T b) { return _mm512_max_ps(a, b); }
  static T min(T a, T b) { return _mm512_min_ps(a, b); }
  static T roundNearest(T x) { return _mm512_roundscale_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
  static T pow2i(T n) {
    const __m512i e = _mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127));
    return _mm512_castsi512_ps(_mm512_slli_epi32(e, 23));
  }
  static T zeroWhereLess(T x, T bound, T v) { return _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(x, bound, _CMP_GE_OQ), v); }
  static T negInfToZero(T x) {
    return _mm512_mask_blend_ps(_mm512_cmp_ps_mask(x, set1(-INFINITY), _CMP_EQ_OQ), x, zero());
  }
  static T keepIfBelow(int64_t j, const int32_t* limit, T x, T fill) {
    const __mmask16 k = _mm512_cmpgt_epi32_mask(_mm512_loadu_si512(limit), _mm512_set1_epi32(static_cast<int>(j)));
    return _mm512_mask_blend_ps(k, fill, x);
  }
  static T firstOr(T x, int64_t n, T fill) { return _mm512_mask_blend_ps(firstMask(n), fill, x); }
  static float reduceMax(T x) { return _mm512_reduce_max_ps(x); }
  static float reduceAdd(T x) { return _mm512_reduce_add_ps(x); }
  static void prefetch(const float* p) { _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T1); }
  static float first(T x) { return _mm512_cvtss_f32(x); }
  static void hsum4(T a, T b, T c, T d, float* out) {
    auto fold = [](T x) { return _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1)); };
    const __m256 ab = _mm256_hadd_ps(fold(a), fold(b)), cd = _mm256_hadd_ps(fold(c), fold(d));
    const __m256 abcd = _mm256_hadd_ps(ab, cd);
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
  // x[0..16): out[r][t] = sum of the lanes of x[4 r + t] (R = 4 rows of 4), by a transposing
  // tree: each level adds pairs of vectors after moving halves, then quarters, then lanes, so
  // that 45 shuffles and adds give all 16 sums (four hsum4 take 56).
  static constexpr int kReduceAll = 16;
  template <int R>
  static void reduceAll(const T* x, float* const* out) {
    auto halves = [](T a, T b) {  // [a.lo + a.hi | b.lo + b.hi] (256-bit halves)
      return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x44), _mm512_shuffle_f32x4(a, b, 0xEE));
    };
    auto quarters = [](T a, T b) {  // quarters: a0+a1, a2+a3, b0+b1, b2+b3 (128-bit quarters)
      return _mm512_add_ps(_mm512_shuffle_f32x4(a, b, 0x88), _mm512_shuffle_f32x4(a, b, 0xDD));
    };
    auto pairs = [](T a, T b) {  // in each quarter: a0+a1, a2+a3, b0+b1, b2+b3
      return _mm512_add_ps(_mm512_shuffle_ps(a, b, 0x88), _mm512_shuffle_ps(a, b, 0xDD));
    };
    T h[8], q[4], p[2];
    for (int i = 0; i < 8; ++i) h[i] = halves(x[2 * i], x[2 * i + 1]);    // h[i]: x[2i] | x[2i+1]
    for (int i = 0; i < 4; ++i) q[i] = quarters(h[2 * i], h[2 * i + 1]);  // q[i]: x[4i .. 4i+3]
    // Quarter k of q[i] holds 4 partial sums of x[4i + k]; pairing q[0],q[1] and q[2],q[3]
    // twice leaves, in quarter k, the sums of x[k], x[4+k], x[8+k], x[12+k].
    p[0] = pairs(q[0], q[1]);
    p[1] = pairs(q[2], q[3]);
    const T all = pairs(p[0], p[1]);  // quarter k: sums of x[k], x[4+k], x[8+k], x[12+k]
    // Row r = x[4r .. 4r+3] is lane r of every quarter: transpose the 4x4 of quarters x lanes.
    alignas(64) float tmp[16];
    _mm512_store_ps(tmp, all);
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < 4; ++t) out[r][t] = tmp[4 * t + r];
  }
  static void keep(T& x) { asm volatile("" : "+v"(x)); }
};

}  // namespace
}  // namespace kiln::peers

#include "peers/native_kernel.h"

namespace kiln::peers::native_detail {

const IsaKernels* avx512Table() {
  static constexpr IsaKernels table = Attention<V512>::table("avx512");
  return &table;
}

}  // namespace kiln::peers::native_detail

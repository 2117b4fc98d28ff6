// 8 f32 lanes of __m256: the vector traits of the hand-written attention's AVX2 build, and of
// its AVX-512 build's dot strategy for 3 rows per KV head (measured faster there on Zen 4).
// Included only by native_avx2.cpp and native_avx512.cpp: the anonymous namespace gives each
// its own copy, compiled for its ISA (see native_kernel.h); with AVX-512VL there are 32 vector
// registers instead of 16, and the tiles grow to use them.
#pragma once

#include <immintrin.h>

#include <cmath>
#include <cstdint>

namespace kiln::peers {
namespace {

struct V256 {
  using T = __m256;
  static constexpr int L = 8;
#ifdef __AVX512VL__
  static constexpr int kRegs = 32;
#else
  static constexpr int kRegs = 16;
#endif
  static constexpr int kMaxRV = 2;                      // lanes strategy: up to 16 rows per panel
  static constexpr int kLaneKeys = 4;                   // scores: 4 keys x 2 row vectors
  static constexpr int kLaneDv = 4;                     // P.V: 4 columns x 2 row vectors
  static constexpr int kDotRows = kRegs == 32 ? 4 : 2;  // dot strategy: rows per tile
  // P.V: rows x C accumulators, C vectors of v and a broadcast of p, with room to spare.
  static constexpr int dotDv(int rows) {
    return (kRegs - 4) / (rows + 1) < 6 ? (kRegs - 4) / (rows + 1) : 6;
  }
  // Scores: rows x keys accumulators, plus the keys' vectors and one of q, within the registers.
  static constexpr int dotKeys(int rows) {
    return rows <= 2 && kRegs == 32 ? 8 : 4;
  }

  static __m256i firstMask(int64_t n) {
    const int c = n <= 0 ? 0 : n >= 8 ? 8 : static_cast<int>(n);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
  }
  static T zero() {
    return _mm256_setzero_ps();
  }
  static T set1(float x) {
    return _mm256_set1_ps(x);
  }
  static T load(const float* p) {
    return _mm256_loadu_ps(p);
  }
  static T loadFirst(const float* p, int64_t n) {
    return _mm256_maskload_ps(p, firstMask(n));
  }
  static void store(float* p, T x) {
    _mm256_storeu_ps(p, x);
  }
  static T fma(T a, T b, T c) {
    return _mm256_fmadd_ps(a, b, c);
  }
  static T fnmadd(T a, T b, T c) {
    return _mm256_fnmadd_ps(a, b, c);
  }
  static T add(T a, T b) {
    return _mm256_add_ps(a, b);
  }
  static T sub(T a, T b) {
    return _mm256_sub_ps(a, b);
  }
  static T mul(T a, T b) {
    return _mm256_mul_ps(a, b);
  }
  static T max(T a, T b) {
    return _mm256_max_ps(a, b);
  }
  static T min(T a, T b) {
    return _mm256_min_ps(a, b);
  }
  static T roundNearest(T x) {
    return _mm256_round_ps(x, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  }
  static T pow2i(T n) {
    const __m256i e = _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127));
    return _mm256_castsi256_ps(_mm256_slli_epi32(e, 23));
  }
  static T zeroWhereLess(T x, T bound, T v) {
    return _mm256_and_ps(_mm256_cmp_ps(x, bound, _CMP_GE_OQ), v);
  }
  static T negInfToZero(T x) {
    return _mm256_andnot_ps(_mm256_cmp_ps(x, set1(-INFINITY), _CMP_EQ_OQ), x);
  }
  static T keepIfBelow(int64_t j, const int32_t* limit, T x, T fill) {
    const __m256i lim = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(limit));
    const __m256i k = _mm256_cmpgt_epi32(lim, _mm256_set1_epi32(static_cast<int>(j)));
    return _mm256_blendv_ps(fill, x, _mm256_castsi256_ps(k));
  }
  static T firstOr(T x, int64_t n, T fill) {
    return _mm256_blendv_ps(fill, x, _mm256_castsi256_ps(firstMask(n)));
  }
  static float reduceMax(T x) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
  }
  static float reduceAdd(T x) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(x), _mm256_extractf128_ps(x, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
  }
  static float first(T x) {
    return _mm256_cvtss_f32(x);
  }
  static void hsum4(T a, T b, T c, T d, float* out) {
    const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
  // 16-bit K/V: 8 elements widened to f32 exactly (bf16: bits << 16; f16: F16C's vcvtph2ps).
  static __m128i halves(const uint16_t* p) {
    return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
  }
  static __m128i firstHalves(const uint16_t* p, int64_t n) {
#if defined(__AVX512VL__) && defined(__AVX512BW__)
    const int c = n <= 0 ? 0 : n >= 8 ? 8 : static_cast<int>(n);
    return _mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << c) - 1), p);
#else
    alignas(16) uint16_t t[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < n && i < 8; ++i) t[i] = p[i];
    return _mm_load_si128(reinterpret_cast<const __m128i*>(t));
#endif
  }
  static T fromBf16(__m128i h) {
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
  }
  static T loadBf16(const uint16_t* p) {
    return fromBf16(halves(p));
  }
  static T loadFirstBf16(const uint16_t* p, int64_t n) {
    return fromBf16(firstHalves(p, n));
  }
  static T loadF16(const uint16_t* p) {
    return _mm256_cvtph_ps(halves(p));
  }
  static T loadFirstF16(const uint16_t* p, int64_t n) {
    return _mm256_cvtph_ps(firstHalves(p, n));
  }
  static T set1Bf16(uint16_t x) {
    return _mm256_castsi256_ps(_mm256_set1_epi32(static_cast<int>(uint32_t{x} << 16)));
  }
  static T set1F16(uint16_t x) {
    return _mm256_cvtph_ps(_mm_set1_epi16(static_cast<short>(x)));
  }
  static void prefetch(const void* p) {
    _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
  }
  static void keep(T& x) {
    asm volatile("" : "+x"(x));
  }
};

}  // namespace
}  // namespace kiln::peers

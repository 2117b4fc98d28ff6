// The hand-written attention for AVX-512 (F, BW, VL, DQ): 16 f32 lanes of __m512, and for
// the dot strategy with 3 rows per tile, 8-lane __m256 with AVX-512's 32 registers
// (native_v256.h): measured faster there on Zen 4, slower for 1, 2 or 4 rows.
// Compiled with -mavx512f -mavx512bw -mavx512vl -mavx512dq -mfma -mf16c (CMakeLists.txt);
// called only after native.cpp checked the CPU.
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
  static constexpr int dotKeys(int rows) { return rows <= 2 ? 8 : 4; }
  static constexpr int dotDv(int) { return 6; }  // P.V: up to 4 rows x 6 vectors of Dv

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
  static float first(T x) { return _mm512_cvtss_f32(x); }
  static void hsum4(T a, T b, T c, T d, float* out) {
    auto fold = [](T x) { return _mm256_add_ps(_mm512_castps512_ps256(x), _mm512_extractf32x8_ps(x, 1)); };
    const __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(fold(a), fold(b)), _mm256_hadd_ps(fold(c), fold(d)));
    _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1)));
  }
  // 16-bit K/V: 16 elements widened to f32 exactly (bf16: bits << 16; f16: vcvtph2ps).
  static __m256i halves(const uint16_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
  static __m256i firstHalves(const uint16_t* p, int64_t n) { return _mm256_maskz_loadu_epi16(firstMask(n), p); }
  static T fromBf16(__m256i h) { return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16)); }
  static T loadBf16(const uint16_t* p) { return fromBf16(halves(p)); }
  static T loadFirstBf16(const uint16_t* p, int64_t n) { return fromBf16(firstHalves(p, n)); }
  static T loadF16(const uint16_t* p) { return _mm512_cvtph_ps(halves(p)); }
  static T loadFirstF16(const uint16_t* p, int64_t n) { return _mm512_cvtph_ps(firstHalves(p, n)); }
  static T set1Bf16(uint16_t x) { return _mm512_castsi512_ps(_mm512_set1_epi32(static_cast<int>(uint32_t{x} << 16))); }
  static T set1F16(uint16_t x) { return _mm512_cvtph_ps(_mm256_set1_epi16(static_cast<short>(x))); }
  static void prefetch(const void* p) { _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1); }
  static void keep(T& x) { asm volatile("" : "+v"(x)); }
};

}  // namespace
}  // namespace kiln::peers

#include "peers/native_v256.h"

#include "peers/native_kernel.h"

namespace kiln::peers::native_detail {

const IsaKernels* avx512Table() {
  static constexpr IsaKernels table = Kernels<V512, V256>::table("avx512");
  return &table;
}

}  // namespace kiln::peers::native_detail

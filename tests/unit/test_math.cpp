// Kiln's f32 math algorithms: special values, and accuracy against double precision over a
// strided sample of every float bit pattern (docs/math.md has the exhaustive numbers).
#include "math/kmath.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln::math {
namespace {

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

bool sameBits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

// Position of a float on a line where adjacent floats differ by 1 (-0 and +0 coincide).
int64_t ordinal(float f) {
  int32_t i = std::bit_cast<int32_t>(f);
  return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : i;
}

struct Accuracy {
  int64_t max_ulp = 0;  // distance in floats from the double reference rounded to float
  float worst_x = 0;
  int64_t class_mismatches = 0;  // NaN / inf where the reference is not, or the other way
};

// Every `stride`-th bit pattern (plus offset), all 2^32 patterns covered in [0, 2^32).
template <class Fn, class Ref>
Accuracy measure(Fn fn, Ref ref, uint64_t stride, uint64_t offset) {
  Accuracy a;
  for (uint64_t u = offset; u < (uint64_t{1} << 32); u += stride) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(u));
    const float got = fn(x);
    const float want = static_cast<float>(ref(static_cast<double>(x)));
    if (std::isnan(want) || std::isnan(got) || std::isinf(want) || std::isinf(got)) {
      if (!(sameBits(got, want) || (std::isnan(got) && std::isnan(want)))) ++a.class_mismatches;
      continue;
    }
    const int64_t d = std::llabs(ordinal(got) - ordinal(want));
    if (d > a.max_ulp) {
      a.max_ulp = d;
      a.worst_x = x;
    }
  }
  return a;
}

// ~4.3 million points per function: a few hundred milliseconds.
constexpr uint64_t kStride = 997;

TEST(KilnMath, ExpAccuracy) {
  Accuracy a = measure([](float x) { return exp(x); }, [](double x) { return std::exp(x); }, kStride, 0);
  EXPECT_EQ(a.class_mismatches, 0);
  EXPECT_LE(a.max_ulp, 1) << "at x = " << std::hexfloat << a.worst_x;
}

TEST(KilnMath, LogAccuracy) {
  Accuracy a = measure([](float x) { return log(x); }, [](double x) { return std::log(x); }, kStride, 1);
  EXPECT_EQ(a.class_mismatches, 0);
  EXPECT_LE(a.max_ulp, 1) << "at x = " << std::hexfloat << a.worst_x;
}

TEST(KilnMath, TanhAccuracy) {
  Accuracy a = measure([](float x) { return tanh(x); }, [](double x) { return std::tanh(x); }, kStride, 2);
  EXPECT_EQ(a.class_mismatches, 0);
  EXPECT_LE(a.max_ulp, 1) << "at x = " << std::hexfloat << a.worst_x;
}

TEST(KilnMath, ErfAccuracy) {
  Accuracy a = measure([](float x) { return erf(x); }, [](double x) { return std::erf(x); }, kStride, 3);
  EXPECT_EQ(a.class_mismatches, 0);
  EXPECT_LE(a.max_ulp, 1) << "at x = " << std::hexfloat << a.worst_x;
}

// Dense sweep of the ranges where the algorithms switch paths or scale results.
TEST(KilnMath, DenseNearBranchPoints) {
  struct Span {
    float lo, hi;
  };
  auto sweep = [](auto fn, auto ref, Span s) {
    int64_t worst = 0;
    for (float x = s.lo; x <= s.hi; x = std::nextafter(x, kInf)) {
      const float got = fn(x), want = static_cast<float>(ref(static_cast<double>(x)));
      if (std::isinf(want) || want == 0) {
        EXPECT_TRUE(sameBits(got, want)) << std::hexfloat << x;
        continue;
      }
      worst = std::max<int64_t>(worst, std::llabs(ordinal(got) - ordinal(want)));
    }
    return worst;
  };
  auto kexp = [](float x) { return exp(x); };
  auto dexp = [](double x) { return std::exp(x); };
  EXPECT_LE(sweep(kexp, dexp, {88.6f, 88.8f}), 1);     // overflow threshold
  EXPECT_LE(sweep(kexp, dexp, {-104.5f, -87.0f}), 1);  // subnormal results
  auto ktanh = [](float x) { return tanh(x); };
  auto dtanh = [](double x) { return std::tanh(x); };
  EXPECT_LE(sweep(ktanh, dtanh, {0.55f, 0.58f}), 1);  // polynomial / exp switch
  EXPECT_LE(sweep(ktanh, dtanh, {8.9f, 9.2f}), 1);    // saturation
  auto kerf = [](float x) { return erf(x); };
  auto derf = [](double x) { return std::erf(x); };
  EXPECT_LE(sweep(kerf, derf, {0.99f, 1.01f}), 1);  // polynomial / tail switch
  EXPECT_LE(sweep(kerf, derf, {3.9f, 4.1f}), 1);    // saturation
  auto klog = [](float x) { return log(x); };
  auto dlog = [](double x) { return std::log(x); };
  EXPECT_LE(sweep(klog, dlog, {1.40f, 1.43f}), 1);  // mantissa fold at sqrt(2)
  EXPECT_LE(sweep(klog, dlog, {0.70f, 0.72f}), 1);
  EXPECT_LE(sweep(klog, dlog, {0x1.fp-127f, 0x1.1p-126f}), 1);  // subnormal / normal
}

TEST(KilnMath, ExpSpecialValues) {
  EXPECT_TRUE(std::isnan(exp(kNaN)));
  EXPECT_TRUE(sameBits(exp(-kInf), 0.0f));
  EXPECT_TRUE(sameBits(exp(kInf), kInf));
  EXPECT_TRUE(sameBits(exp(89.0f), kInf));
  EXPECT_TRUE(sameBits(exp(1e30f), kInf));
  EXPECT_TRUE(sameBits(exp(-1e30f), 0.0f));
  EXPECT_TRUE(sameBits(exp(-105.0f), 0.0f));
  EXPECT_EQ(exp(0.0f), 1.0f);
  EXPECT_EQ(exp(-0.0f), 1.0f);
  EXPECT_GT(exp(-103.0f), 0.0f);  // subnormal, not flushed
  EXPECT_LT(exp(-103.0f), 0x1p-126f);
  EXPECT_EQ(exp(88.72283f), 0x1.ffff08p+127f);  // near the largest finite result
}

TEST(KilnMath, LogSpecialValues) {
  EXPECT_TRUE(std::isnan(log(kNaN)));
  EXPECT_TRUE(std::isnan(log(-1.0f)));
  EXPECT_TRUE(std::isnan(log(-kInf)));
  EXPECT_TRUE(std::isnan(log(-0x1p-149f)));
  EXPECT_TRUE(sameBits(log(0.0f), -kInf));
  EXPECT_TRUE(sameBits(log(-0.0f), -kInf));
  EXPECT_TRUE(sameBits(log(kInf), kInf));
  EXPECT_TRUE(sameBits(log(1.0f), 0.0f));
  EXPECT_EQ(log(0x1p-149f), static_cast<float>(std::log(0x1p-149)));  // smallest subnormal
  EXPECT_EQ(log(std::numeric_limits<float>::max()), static_cast<float>(std::log(double{FLT_MAX})));
}

TEST(KilnMath, TanhSpecialValues) {
  EXPECT_TRUE(std::isnan(tanh(kNaN)));
  EXPECT_TRUE(sameBits(tanh(kInf), 1.0f));
  EXPECT_TRUE(sameBits(tanh(-kInf), -1.0f));
  EXPECT_TRUE(sameBits(tanh(0.0f), 0.0f));
  EXPECT_TRUE(sameBits(tanh(-0.0f), -0.0f));
  EXPECT_TRUE(sameBits(tanh(10.0f), 1.0f));
  EXPECT_TRUE(sameBits(tanh(-100.0f), -1.0f));
  EXPECT_TRUE(sameBits(tanh(0x1p-149f), 0x1p-149f));
  EXPECT_TRUE(sameBits(tanh(-0x1p-140f), -0x1p-140f));
}

TEST(KilnMath, ErfSpecialValues) {
  EXPECT_TRUE(std::isnan(erf(kNaN)));
  EXPECT_TRUE(sameBits(erf(kInf), 1.0f));
  EXPECT_TRUE(sameBits(erf(-kInf), -1.0f));
  EXPECT_TRUE(sameBits(erf(0.0f), 0.0f));
  EXPECT_TRUE(sameBits(erf(-0.0f), -0.0f));
  EXPECT_TRUE(sameBits(erf(5.0f), 1.0f));
  EXPECT_TRUE(sameBits(erf(-3.9375f), -1.0f));
  EXPECT_EQ(erf(0x1p-140f), static_cast<float>(std::erf(0x1p-140)));
}

// Pins the exact operation sequence: any change to an algorithm or a constant changes this
// digest, and then docs/math.md, kmath_constants.h and the code generator must change with it.
TEST(KilnMath, ResultsArePinned) {
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the result bits
  auto add = [&](float v) {
    uint32_t b = std::isnan(v) ? 0x7fc00000u : std::bit_cast<uint32_t>(v);
    for (int i = 0; i < 4; ++i) {
      h ^= (b >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  for (uint64_t u = 0; u < (uint64_t{1} << 32); u += 65537) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(u));
    add(exp(x));
    add(log(x));
    add(tanh(x));
    add(erf(x));
  }
  EXPECT_EQ(h, 0xd3dd5a4d298f088eull);
}

}  // namespace
}  // namespace kiln::math

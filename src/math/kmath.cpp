// Kiln's f32 math algorithms: each function is the pseudo-code of kmath_constants.h, one
// statement per line of it. Selects are written as conditional expressions on values that
// are all computed first, so the code mirrors the vectorised realization.
#include "math/kmath.h"

#include <bit>
#include <cstdint>

#include "math/kmath_constants.h"

namespace kiln::math {
namespace {

inline uint32_t bits(float x) {
  return std::bit_cast<uint32_t>(x);
}
inline float fromBits(uint32_t u) {
  return std::bit_cast<float>(u);
}
inline float sel(bool c, float a, float b) {
  return c ? a : b;
}
inline int32_t sel(bool c, int32_t a, int32_t b) {
  return c ? a : b;
}

}  // namespace

float exp(float x) {
  const bool in = x > kExpMinInput;
  float xc = sel(in, x, 0.0f);
  xc = sel(xc < kExpMaxInput, xc, kExpMaxInput);
  float z = xc * kExpLog2e;
  float t = z + kExpRoundMagic;
  float kf = t - kExpRoundMagic;
  float h = kf * kExpLn2Hi;
  float r = xc - h;
  float l = kf * kExpLn2Lo;
  r = r - l;
  float q = kExpC6 * r;
  q = q + kExpC5;
  q = q * r;
  q = q + kExpC4;
  q = q * r;
  q = q + kExpC3;
  q = q * r;
  q = q + kExpC2;
  float r2 = r * r;
  float u = r2 * q;
  u = r + u;
  float p = 1.0f + u;
  int32_t k = static_cast<int32_t>(kf);
  int32_t k1 = k >> 1;
  int32_t k2 = k - k1;
  float s1 = fromBits(static_cast<uint32_t>(k1 + kExpBias) << 23);
  float s2 = fromBits(static_cast<uint32_t>(k2 + kExpBias) << 23);
  float y = p * s1;
  y = y * s2;
  y = sel(in, y, 0.0f);
  y = sel(x != x, x, y);
  return y;
}

float log(float x) {
  bool c = x < kLogMinNormal;
  float xs = x * kLogSubnormalScale;
  xs = sel(c, xs, x);
  int32_t ea = sel(c, kLogSubnormalExpAdjust, 0);
  uint32_t b = bits(xs);
  int32_t e = static_cast<int32_t>((b >> 23) & 0xffu) - kExpBias;
  float m = fromBits((b & kLogMantissaMask) | kLogOneBits);
  bool g = m > kLogSqrt2;
  float mh = m * 0.5f;
  m = sel(g, mh, m);
  e = sel(g, e + 1, e);
  e = e + ea;
  float ef = static_cast<float>(e);
  float f = m - 1.0f;
  float d = 2.0f + f;
  float s = f / d;
  float z = s * s;
  float R = kLogC3 * z;
  R = R + kLogC2;
  R = R * z;
  R = R + kLogC1;
  R = R * z;
  float ff = f * f;
  float hf = 0.5f * ff;
  float y = hf + R;
  y = s * y;
  float l = ef * kLogLn2Lo;
  y = y + l;
  y = hf - y;
  y = f - y;
  float h = ef * kLogLn2Hi;
  y = h + y;
  const float inf = fromBits(0x7f800000u);
  y = sel(x == inf, inf, y);
  y = sel(x == 0.0f, -inf, y);
  y = sel(x < 0.0f, fromBits(kQuietNaNBits), y);
  y = sel(x != x, x, y);
  return y;
}

float tanh(float x) {
  uint32_t b = bits(x);
  uint32_t sg = b & kSignMask;
  float a = fromBits(b & kAbsMask);
  float z = a * a;
  float P = kTanhC4 * z;
  P = P + kTanhC3;
  P = P * z;
  P = P + kTanhC2;
  P = P * z;
  P = P + kTanhC1;
  P = P * z;
  P = P + kTanhC0;
  float u = z * P;
  u = a * u;
  float ys = a + u;
  float a2 = a + a;
  float E = kiln::math::exp(a2);
  float d = E + 1.0f;
  float q = 2.0f / d;
  float yb = 1.0f - q;
  float y = sel(a < kTanhSmall, ys, yb);
  return fromBits(bits(y) | sg);
}

float erf(float x) {
  uint32_t b = bits(x);
  uint32_t sg = b & kSignMask;
  float a = fromBits(b & kAbsMask);
  float z = a * a;
  float P = kErfP6 * z;
  P = P + kErfP5;
  P = P * z;
  P = P + kErfP4;
  P = P * z;
  P = P + kErfP3;
  P = P * z;
  P = P + kErfP2;
  P = P * z;
  P = P + kErfP1;
  P = P * z;
  P = P + kErfP0;
  float u = a * P;
  float ys = a + u;
  float ac = sel(a > kErfClamp, kErfClamp, a);
  float t = ac - kErfCenter;
  float Q = kErfQ8 * t;
  Q = Q + kErfQ7;
  Q = Q * t;
  Q = Q + kErfQ6;
  Q = Q * t;
  Q = Q + kErfQ5;
  Q = Q * t;
  Q = Q + kErfQ4;
  Q = Q * t;
  Q = Q + kErfQ3;
  Q = Q * t;
  Q = Q + kErfQ2;
  Q = Q * t;
  Q = Q + kErfQ1;
  Q = Q * t;
  Q = Q + kErfQ0;
  float w = ac * ac;
  w = -w;
  float E = kiln::math::exp(w);
  float v = E * Q;
  float yb = 1.0f - v;
  float y = sel(a < 1.0f, ys, yb);
  y = sel(a >= kErfOne, 1.0f, y);
  return fromBits(bits(y) | sg);
}

}  // namespace kiln::math

// The constants and the exact operation sequences of Kiln's f32 exp, log, tanh, erf.
// Both realizations (kiln::math in kmath.cpp, used by the strict-FP32 interpreter, and the code
// generator's vectorised LLVM IR) follow the pseudo-code below one IEEE operation per line, so
// that their results agree bit for bit. Rules of the pseudo-code:
//   - every arithmetic line is one f32 operation, rounded to nearest even; no FMA, no
//     reassociation, no reciprocal tricks;
//   - `c ? a : b` is a lane select: both sides are computed for every lane, the comparison is
//     an ordered f32 comparison (false when an operand is NaN);
//   - bits(x) / float(u) are bit casts between f32 and u32; integer lines are 32-bit two's
//     complement (`>>` on i32 is arithmetic), `i2f` is an exact signed i32 -> f32 conversion,
//     `f2i` converts an integral f32 to i32 (never applied to NaN or out-of-range values);
//   - `kiln_exp(v)` is the exp sequence below, inlined.
// Coefficients were fitted by tools/mathfit (weighted minimax, long double, coefficients rounded
// to float one at a time). Measured accuracy: docs/math.md.
#pragma once

#include <cstdint>

namespace kiln::math {

// ---------------------------------------------------------------------------------------------
// exp(x). Range reduction x = k ln2 + r, |r| <= ln2/2 (a hair more: k comes from the rounded
// x*log2e), e^r by a degree-6 polynomial, scaling by 2^k in two exact-exponent steps so that
// subnormal results get a single rounding and large k overflows to inf.
//   in = x > kExpMinInput                          // false for x <= -104, -inf and NaN
//   xc = in ? x : 0.0f                              // there the result is +0 (NaN: fixed at the
//   xc = (xc < kExpMaxInput) ? xc : kExpMaxInput    //   end); 0 keeps every step normal

//   z  = xc * kExpLog2e
//   t  = z + kExpRoundMagic                         // round to nearest integer ...
//   kf = t - kExpRoundMagic                         // ... kf in [-150, 130]
//   h  = kf * kExpLn2Hi                             // exact (kExpLn2Hi has 15 significant bits)
//   r  = xc - h                                     // exact (Sterbenz)
//   l  = kf * kExpLn2Lo
//   r  = r - l
//   q  = kExpC6 * r
//   q  = q + kExpC5
//   q  = q * r
//   q  = q + kExpC4
//   q  = q * r
//   q  = q + kExpC3
//   q  = q * r
//   q  = q + kExpC2
//   r2 = r * r
//   u  = r2 * q
//   u  = r + u
//   p  = 1.0f + u                                   // p ~ e^r in [0.7, 1.42]
//   k  = f2i(kf)                                    // i32
//   k1 = k >> 1                                     // floor(k / 2)
//   k2 = k - k1
//   s1 = float((k1 + 127) << 23)                    // 2^k1, k1 in [-75, 65]: normal
//   s2 = float((k2 + 127) << 23)                    // 2^k2
//   y  = p * s1                                     // exact
//   y  = y * s2                                     // the only rounding of the scaling
//   y  = in ? y : 0.0f                              // e^x < 2^-150 for x <= -104: rounds to +0
//   y  = (x != x) ? x : y                           // NaN in -> NaN out
// (Until 2026-12-04 the sequence clamped x <= -104 to -104 and computed 2^-150 * 0.97, which
// rounds to the same +0; but that underflowing multiply costs a microcode assist per vector
// on Intel cores, and masked attention scores are -inf in every causal diagonal block.)
// Results: exp(-inf) = +0, exp(+inf) = +inf, exp(x > 88.72...) = +inf, exp(+-0) = 1.
inline constexpr float kExpMinInput = -104.0f;       // e^-104 < 2^-150: rounds to +0
inline constexpr float kExpMaxInput = 90.0f;         // e^90 > FLT_MAX: overflows to +inf
inline constexpr float kExpLog2e = 0x1.715476p+0f;   // 1/ln 2 rounded to float
inline constexpr float kExpRoundMagic = 0x1.8p+23f;  // 1.5 * 2^23
inline constexpr float kExpLn2Hi = 0x1.62e4p-1f;     // ln 2, high 15 bits
inline constexpr float kExpLn2Lo = 0x1.7f7d1cp-20f;  // ln 2 - kExpLn2Hi, rounded
inline constexpr float kExpC2 = 0x1.fffffcp-2f;      // ~ 1/2
inline constexpr float kExpC3 = 0x1.555492p-3f;      // ~ 1/6
inline constexpr float kExpC4 = 0x1.5558aep-5f;      // ~ 1/24
inline constexpr float kExpC5 = 0x1.12397cp-7f;      // ~ 1/120
inline constexpr float kExpC6 = 0x1.6a4e66p-10f;     // ~ 1/720
inline constexpr int32_t kExpBias = 127;

// ---------------------------------------------------------------------------------------------
// log(x). x = 2^e m, m in (sqrt(1/2), sqrt(2)], f = m - 1 (exact), s = f / (2 + f);
// log(1 + f) = f - (hf - s (hf + R(s^2))) with hf = f^2 / 2 and R(z) ~ 2z/3 + 2z^2/5 + 2z^3/7,
// then + e ln2 in two parts (hi part exact).
//   c  = x < kLogMinNormal                          // subnormal (or <= 0, fixed at the end)
//   xs = x * kLogSubnormalScale                     // exact for subnormal x
//   xs = c ? xs : x
//   ea = c ? -23 : 0                                // i32
//   b  = bits(xs)
//   e  = ((b >> 23) & 0xff) - 127                   // u32 shift, i32 result
//   m  = float((b & 0x007fffff) | 0x3f800000)       // m in [1, 2)
//   g  = m > kLogSqrt2
//   mh = m * 0.5f                                   // exact
//   m  = g ? mh : m
//   e  = g ? e + 1 : e
//   e  = e + ea
//   ef = i2f(e)
//   f  = m - 1.0f                                   // exact
//   d  = 2.0f + f
//   s  = f / d
//   z  = s * s
//   R  = kLogC3 * z
//   R  = R + kLogC2
//   R  = R * z
//   R  = R + kLogC1
//   R  = R * z
//   ff = f * f
//   hf = 0.5f * ff                                  // exact
//   y  = hf + R
//   y  = s * y
//   l  = ef * kLogLn2Lo
//   y  = y + l
//   y  = hf - y
//   y  = f - y
//   h  = ef * kLogLn2Hi                             // exact
//   y  = h + y
//   y  = (x == +inf) ? +inf : y
//   y  = (x == 0) ? -inf : y                        // +0 and -0
//   y  = (x < 0) ? NaN : y                          // quiet NaN 0x7fc00000
//   y  = (x != x) ? x : y
// Results: log(1) = +0, log(+-0) = -inf, log(x < 0) = NaN, log(+inf) = +inf.
inline constexpr float kLogMinNormal = 0x1p-126f;
inline constexpr float kLogSubnormalScale = 0x1p+23f;
inline constexpr int32_t kLogSubnormalExpAdjust = -23;
inline constexpr float kLogSqrt2 = 0x1.6a09e6p+0f;  // sqrt(2) rounded down
inline constexpr uint32_t kLogMantissaMask = 0x007fffffu;
inline constexpr uint32_t kLogOneBits = 0x3f800000u;
inline constexpr float kLogLn2Hi = 0x1.62e4p-1f;  // same split as exp
inline constexpr float kLogLn2Lo = 0x1.7f7d1cp-20f;
inline constexpr float kLogC1 = 0x1.55557ap-1f;  // ~ 2/3
inline constexpr float kLogC2 = 0x1.995ed4p-2f;  // ~ 2/5
inline constexpr float kLogC3 = 0x1.31e0dap-2f;  // ~ 2/7
inline constexpr uint32_t kQuietNaNBits = 0x7fc00000u;

// ---------------------------------------------------------------------------------------------
// tanh(x). a = |x|. For a < kTanhSmall: tanh(a) = a + a (z P(z)), z = a^2, P of degree 4.
// Otherwise tanh(a) = 1 - 2 / (e^(2a) + 1) with kiln_exp (saturates to 1 for a > ~9.01: the
// quotient drops below half an ulp of 1, and e^(2a) = inf gives exactly 1). Sign copied back.
//   b  = bits(x)
//   sg = b & 0x80000000
//   a  = float(b & 0x7fffffff)
//   z  = a * a
//   P  = kTanhC4 * z
//   P  = P + kTanhC3
//   P  = P * z
//   P  = P + kTanhC2
//   P  = P * z
//   P  = P + kTanhC1
//   P  = P * z
//   P  = P + kTanhC0
//   u  = z * P
//   u  = a * u
//   ys = a + u
//   a2 = a + a
//   E  = kiln_exp(a2)
//   d  = E + 1.0f
//   q  = 2.0f / d
//   yb = 1.0f - q
//   y  = (a < kTanhSmall) ? ys : yb                 // NaN -> yb (NaN)
//   y  = float(bits(y) | sg)
// Results: tanh(+-0) = +-0, tanh(+-inf) = +-1, NaN -> NaN.
inline constexpr float kTanhSmall = 0.5625f;
inline constexpr float kTanhC0 = -0x1.555548p-2f;  // ~ -1/3
inline constexpr float kTanhC1 = 0x1.110c5ep-3f;   // ~ 2/15
inline constexpr float kTanhC2 = -0x1.b905c4p-5f;  // ~ -17/315
inline constexpr float kTanhC3 = 0x1.5811f6p-6f;
inline constexpr float kTanhC4 = -0x1.9454fp-8f;
inline constexpr uint32_t kSignMask = 0x80000000u;
inline constexpr uint32_t kAbsMask = 0x7fffffffu;

// ---------------------------------------------------------------------------------------------
// erf(x). a = |x|. For a < 1: erf(a) = a + a P(z), z = a^2, P of degree 6 (P(0) ~ 2/sqrt(pi) - 1).
// For 1 <= a < kErfOne: erf(a) = 1 - kiln_exp(-a^2) Q(a - 2.5), Q of degree 8 approximating
// e^(a^2) erfc(a) on [1, 4]. For a >= kErfOne (erf rounds to 1): 1. Sign copied back.
//   b  = bits(x)
//   sg = b & 0x80000000
//   a  = float(b & 0x7fffffff)
//   z  = a * a
//   P  = kErfP6 * z
//   P  = P + kErfP5
//   P  = P * z
//   P  = P + kErfP4
//   P  = P * z
//   P  = P + kErfP3
//   P  = P * z
//   P  = P + kErfP2
//   P  = P * z
//   P  = P + kErfP1
//   P  = P * z
//   P  = P + kErfP0
//   u  = a * P
//   ys = a + u
//   ac = (a > kErfClamp) ? kErfClamp : a            // NaN stays NaN
//   t  = ac - kErfCenter                            // exact for ac in [1, 4]
//   Q  = kErfQ8 * t
//   Q  = Q + kErfQ7
//   Q  = Q * t
//   Q  = Q + kErfQ6
//   Q  = Q * t
//   Q  = Q + kErfQ5
//   Q  = Q * t
//   Q  = Q + kErfQ4
//   Q  = Q * t
//   Q  = Q + kErfQ3
//   Q  = Q * t
//   Q  = Q + kErfQ2
//   Q  = Q * t
//   Q  = Q + kErfQ1
//   Q  = Q * t
//   Q  = Q + kErfQ0
//   w  = ac * ac
//   w  = -w                                         // sign flip (exact)
//   E  = kiln_exp(w)
//   v  = E * Q
//   yb = 1.0f - v
//   y  = (a < 1.0f) ? ys : yb                       // NaN -> yb (NaN)
//   y  = (a >= kErfOne) ? 1.0f : y
//   y  = float(bits(y) | sg)
// Results: erf(+-0) = +-0, erf(+-inf) = +-1, NaN -> NaN.
inline constexpr float kErfOne = 3.9375f;  // erf(a) rounds to 1 from here on (erfc < 2^-25)
inline constexpr float kErfClamp = 4.0f;
inline constexpr float kErfCenter = 2.5f;
inline constexpr float kErfP0 = 0x1.06eba8p-3f;  // ~ 2/sqrt(pi) - 1
inline constexpr float kErfP1 = -0x1.81273ep-2f;
inline constexpr float kErfP2 = 0x1.ce2ce6p-4f;
inline constexpr float kErfP3 = -0x1.b7f71ap-6f;
inline constexpr float kErfP4 = 0x1.53f224p-8f;
inline constexpr float kErfP5 = -0x1.a3515ep-11f;
inline constexpr float kErfP6 = 0x1.4771fcp-14f;
inline constexpr float kErfQ0 = 0x1.afbbe6p-3f;  // ~ e^6.25 erfc(2.5)
inline constexpr float kErfQ1 = -0x1.30816ep-4f;
inline constexpr float kErfQ2 = 0x1.98337ep-6f;
inline constexpr float kErfQ3 = -0x1.0a7a7ep-7f;
inline constexpr float kErfQ4 = 0x1.2dca4ep-9f;
inline constexpr float kErfQ5 = -0x1.5a9d5cp-11f;
inline constexpr float kErfQ6 = 0x1.1cde88p-11f;
inline constexpr float kErfQ7 = 0x1.d805dep-13f;
inline constexpr float kErfQ8 = 0x1.c02546p-14f;

}  // namespace kiln::math

// The 16-bit storage types of views (docs/ir.md, "16-bit views"), exactly: what a load from a
// view<f16> / view<bf16> gives as f32, and what a store of an f32 puts in memory. Integer
// arithmetic only (no host float conversion, no rounding mode, no FTZ/DAZ), so the interpreter's
// results do not depend on the machine it runs on. Used by the interpreter, the host data and
// the launch packing; compiled code uses its own sequences (codegen shares no code with this) or
// hardware instructions where tests/unit/test_heavy_storage.cpp shows them identical on every
// input (all 2^16 and 2^32 bit patterns).
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace kiln::host {

inline uint32_t bitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

inline float floatOf(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// IEEE binary16 -> f32, exact. A NaN keeps its sign and payload and is made quiet (bit 9 of the
// half becomes bit 22 of the float and is set), as x86's F16C `vcvtph2ps` does.
inline float f16ToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1Fu;
  const uint32_t man = h & 0x3FFu;
  if (exp == 0x1F) return floatOf(sign | 0x7F800000u | (man << 13) | (man ? 0x00400000u : 0u));
  if (exp != 0) return floatOf(sign | ((exp + 112u) << 23) | (man << 13));
  if (man == 0) return floatOf(sign);
  // A subnormal half, man * 2^-24: normalize (exact in f32).
  uint32_t e = 113, m = man;
  while ((m & 0x400u) == 0) {
    m <<= 1;
    --e;
  }
  return floatOf(sign | (e << 23) | ((m & 0x3FFu) << 13));
}

// f32 -> IEEE binary16, round to nearest even. Overflow (|x| >= 65520) gives ±inf; results
// below 2^-14 are subnormal halves (not flushed), below 2^-25 (and 2^-25 itself, a tie to even)
// ±0; f32 subnormal inputs round like any other value (to ±0). A NaN keeps its sign and the top
// 10 bits of its payload and is made quiet (0x7E00 set), as F16C's `vcvtps2ph` does.
inline uint16_t f32ToF16(float f) {
  const uint32_t u = bitsOf(f);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u | ((a >> 13) & 0x3FFu));
  if (a >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // 65520 and up, inf
  const uint32_t e = a >> 23;
  uint32_t q, rem, half;
  if (e >= 113) {  // a normal half: exponent e - 112 in 1..30
    q = ((e - 112) << 10) | ((a & 0x7FFFFFu) >> 13);
    rem = a & 0x1FFFu;
    half = 0x1000u;
  } else {  // a subnormal half (or zero): units of 2^-24, M * 2^(e - 150) = M >> (126 - e)
    const uint32_t shift = 126 - (e == 0 ? 1 : e);
    const uint32_t m = (a & 0x7FFFFFu) | (e == 0 ? 0u : 0x800000u);
    if (shift > 24) return sign;  // below 2^-25: rounds to zero
    q = m >> shift;
    rem = m & ((1u << shift) - 1);
    half = 1u << (shift - 1);
  }
  if (rem > half || (rem == half && (q & 1u))) ++q;  // a carry into the exponent is right
  return static_cast<uint16_t>(sign | q);
}

// bfloat16 -> f32, exact: the 16 bits are the float's top half (a NaN stays as it is).
inline float bf16ToF32(uint16_t b) {
  return floatOf(static_cast<uint32_t>(b) << 16);
}

// f32 -> bfloat16, round to nearest even on the bits (subnormals kept, not flushed; overflow
// gives ±inf). A NaN keeps its sign and top payload bits and is made quiet (0x0040 set).
inline uint16_t f32ToBf16(float f) {
  const uint32_t u = bitsOf(f);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((u >> 16) | 0x0040u);
  return static_cast<uint16_t>((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

// x rounded to a view's element type and back: itself for f32 views, else the f16 / bf16 value
// a store leaves (exact in f32).
inline float roundToStorage(ir::Elem view_elem, float x) {
  if (view_elem == ir::Elem::F16) return f16ToF32(f32ToF16(x));
  if (view_elem == ir::Elem::BF16) return bf16ToF32(f32ToBf16(x));
  return x;
}

// A 16-bit view's elements (f32 values of its type) as its memory holds them (uint16_t bits,
// native byte order), and back. An element that is not a value of the type is an error
// naming it (it would be rounded: the caller's data would silently change).
inline std::optional<std::string> halfBytes(const std::vector<float>& values, bool bf16, std::string& out) {
  out.resize(values.size() * 2);
  for (size_t i = 0; i < values.size(); ++i) {
    const float x = values[i];
    // A bfloat16 NaN's float (its bits on top, the rest zero) is that NaN exactly, signaling ones
    // included: its bits are kept (f32ToBf16 would make it quiet).
    const bool bf16Nan = bf16 && x != x && (bitsOf(x) & 0xFFFFu) == 0;
    const uint16_t h = bf16Nan ? static_cast<uint16_t>(bitsOf(x) >> 16) : bf16 ? f32ToBf16(x) : f32ToF16(x);
    if (x == x && bitsOf(bf16 ? bf16ToF32(h) : f16ToF32(h)) != bitsOf(x))
      return "element " + std::to_string(i) + " = " + std::to_string(x) + " is not a value of " +
             (bf16 ? "bf16" : "f16");
    std::memcpy(out.data() + 2 * i, &h, 2);
  }
  return std::nullopt;
}

inline void halvesFromBytes(const void* bytes, size_t size, bool bf16, std::vector<float>& out) {
  out.resize(size / 2);
  const auto* b = static_cast<const unsigned char*>(bytes);
  for (size_t i = 0; i < out.size(); ++i) {
    uint16_t h;
    std::memcpy(&h, b + 2 * i, 2);
    out[i] = bf16 ? bf16ToF32(h) : f16ToF32(h);
  }
}

}  // namespace kiln::host

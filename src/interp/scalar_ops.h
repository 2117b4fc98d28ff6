// Element semantics of TileIR (docs/ir.md, "Arithmetic") for the interpreter: i64 wrapping
// and division, NaN-propagating max/min ordering -0 < +0, saturating casts. F is the f32
// representation of the mode: float (strict-FP32) or double (FP64).
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

namespace kiln::interp::detail {

inline int64_t addWrap(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t subWrap(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t mulWrap(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}
inline int64_t negWrap(int64_t a) {
  return static_cast<int64_t>(uint64_t{0} - static_cast<uint64_t>(a));
}
inline int64_t absWrap(int64_t a) {
  return a < 0 ? negWrap(a) : a;
}
// Truncating division; x / 0 = 0; INT64_MIN / -1 wraps to INT64_MIN.
inline int64_t divI64(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1) return negWrap(a);
  return a / b;
}

template <class F>
F maxNaN(F a, F b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return std::signbit(a) ? b : a;  // max(-0, +0) = +0
  return a > b ? a : b;
}

template <class F>
F minNaN(F a, F b) {
  if (a != a) return a;
  if (b != b) return b;
  if (a == b) return std::signbit(a) ? a : b;  // min(-0, +0) = -0
  return a < b ? a : b;
}

// f32 -> i64: truncate toward zero, saturate, NaN -> 0.
template <class F>
int64_t castToI64(F x) {
  if (x != x) return 0;
  if (x >= static_cast<F>(9223372036854775808.0)) return std::numeric_limits<int64_t>::max();
  if (x < static_cast<F>(-9223372036854775808.0)) return std::numeric_limits<int64_t>::min();
  return static_cast<int64_t>(x);
}

// Reduction combiners; i64 add/mul wrap.
struct CombineAdd {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, int64_t>)
      return addWrap(a, b);
    else
      return a + b;
  }
};
struct CombineMul {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, int64_t>)
      return mulWrap(a, b);
    else
      return a * b;
  }
};
struct CombineMax {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, int64_t>)
      return a > b ? a : b;
    else
      return maxNaN(a, b);
  }
};
struct CombineMin {
  template <class T>
  T operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, int64_t>)
      return a < b ? a : b;
    else
      return minNaN(a, b);
  }
};

}  // namespace kiln::interp::detail

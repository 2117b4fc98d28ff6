// Rotary position embedding written in the DSL, on x [tokens, heads, head_dim]:
// token t is at position t (or positions[t], below); pair j (0 <= j < head_dim/2) is rotated by the angle
// t * base^(-2j/head_dim). neox pairs elements (j, j + head_dim/2), interleaved (2j, 2j+1):
//   y_first = x_first cos - x_second sin,  y_second = x_second cos + x_first sin.
// The IR has no sin/cos: for each pair (unrolled when the kernel is built) the angle in
// cycles, t * f_j / 2pi, is reduced modulo 1 exactly (the constant is split into pieces whose
// products with any position are exact in f32), then sin/cos come from a quadrant and Taylor
// polynomials on [-pi/4, pi/4]; the error stays below 1e-5 up to kMaxRopeTokens positions.
// Expects: tokens 1..kMaxRopeTokens, heads >= 1, head_dim even >= 2, base > 1.
// Guarantees: a verified kernel with views x, y [tokens, heads, head_dim], or diagnostics.
// One program per token; the heads of a pair are one tile.
#pragma once

#include <cstdint>

#include "kiln/dsl.h"

namespace kiln::kernels {

inline constexpr int64_t kMaxRopeTokens = int64_t(1) << 20;

// positions > 0: token t's position is positions[t] of a view `positions: view<i32>[tokens] in
// [0, positions - 1]` after y (the split of the angle is exact up to that many positions);
// runtime_rows: the token count comes with each launch, `rows: i64 in [0, tokens]` last.
// io: the storage of x and y (f32, or 16-bit: docs/ir.md, "16-bit views").
dsl::BuildResult rope(int64_t tokens, int64_t heads, int64_t head_dim, bool neox = true, double base = 10000.0,
                      int64_t positions = 0, bool runtime_rows = false, dsl::FloatElem io = dsl::FloatElem::F32);

}  // namespace kiln::kernels

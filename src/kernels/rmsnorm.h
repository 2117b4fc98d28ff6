// RMSNorm written in the DSL: y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c].
// Expects: rows, cols, block_rows >= 1 (a whole row fits one tile); eps is baked in as an f32.
// Guarantees: a verified kernel with views x [rows, cols], w [cols], y [rows, cols], or
// diagnostics. One program per block of rows; the sum of squares is an ordered reduction.
#pragma once

#include <cstdint>

#include "kiln/dsl.h"

namespace kiln::kernels {

dsl::BuildResult rmsnorm(int64_t rows, int64_t cols, double eps = 1e-6, int64_t block_rows = 4);

}  // namespace kiln::kernels

// LayerNorm written in the DSL:
//   y[r, c] = (x[r, c] - mean_r) * rsqrt(var_r + eps) * w[c] + b[c],
//   mean_r = sum_c x[r, c] / cols, var_r = sum_c (x[r, c] - mean_r)^2 / cols (two passes).
// Expects: rows, cols, chunk >= 1; eps is baked in as an f32.
// Guarantees: a verified kernel with views x [rows, cols], w [cols], b [cols], y [rows, cols],
// or diagnostics. One program per row; three loops over column chunks of min(cols, chunk)
// (sum, squared deviations, output); padding columns are kept out of both sums.
#pragma once

#include <cstdint>

#include "kiln/dsl.h"

namespace kiln::kernels {

// io: the storage of the input and output views (f32, or 16-bit: docs/ir.md, "16-bit views").
// per_column: with several chunks, the sums run per column position of the chunk (element-wise)
// and are reduced over the chunk once after each loop, in `order` (for GPUs: no reduction, so
// no barrier, per trip).
dsl::BuildResult layernorm(int64_t rows, int64_t cols, double eps = 1e-5, int64_t chunk = 1024,
                           dsl::FloatElem io = dsl::FloatElem::F32, dsl::ReduceOrder order = dsl::ordered,
                           bool per_column = false);

}  // namespace kiln::kernels

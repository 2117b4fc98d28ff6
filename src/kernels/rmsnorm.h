// RMSNorm written in the DSL: y[r, c] = x[r, c] / sqrt(mean_c(x[r, :]^2) + eps) * w[c].
// Expects: rows, cols, block_rows, chunk >= 1; eps is baked in as an f32.
// Guarantees: a verified kernel with views x [rows, cols], w [cols], y [rows, cols], or
// diagnostics. One program per block of rows; the sum of squares is an ordered reduction.
// When cols > chunk, a loop over column chunks accumulates the sum of squares and a second
// loop writes the result chunk by chunk.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>

#include "kiln/dsl.h"

namespace kiln::kernels {

// runtime_rows: the row count comes with each launch, `rows: i64 in [0, rows]` after y (rows
// past it are not written). io: the storage of the input and output views (f32, or 16-bit: docs/ir.md, "16-bit views");
// out, where given, the output's alone.
dsl::BuildResult rmsnorm(int64_t rows, int64_t cols, double eps = 1e-6, int64_t block_rows = 4,
                         int64_t chunk = std::numeric_limits<int64_t>::max(), bool runtime_rows = false,
                         dsl::FloatElem io = dsl::FloatElem::F32, dsl::ReduceOrder order = dsl::ordered,
                         std::optional<dsl::FloatElem> out = std::nullopt);

}  // namespace kiln::kernels

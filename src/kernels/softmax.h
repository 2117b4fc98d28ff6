// Row softmax written in the DSL: y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)).
// Expects: rows, cols, block_rows >= 1 (a whole row fits one tile).
// Guarantees: a verified kernel with views x [rows, cols], y [rows, cols], or diagnostics. One
// program per block of rows; reductions are ordered.
#pragma once

#include <cstdint>

#include "kiln/dsl.h"

namespace kiln::kernels {

dsl::BuildResult softmax(int64_t rows, int64_t cols, int64_t block_rows = 4);

}  // namespace kiln::kernels

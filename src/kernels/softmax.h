// Row softmax written in the DSL: y[r, :] = exp(x[r, :] - max) / sum(exp(x[r, :] - max)).
// Expects: rows, cols, block_rows, chunk >= 1. Guarantees: a verified kernel with views
// x [rows, cols], y [rows, cols], or diagnostics. One program per block of rows; reductions
// are ordered. When a row fits one chunk (cols <= chunk) it is one tile; otherwise a first
// loop over column chunks carries the running max and sum (online softmax, padding reads
// -inf) and a second loop writes exp(x - max) / sum chunk by chunk.
#pragma once

#include <cstdint>
#include <limits>

#include "kiln/dsl.h"

namespace kiln::kernels {

// runtime_rows: the row count comes with each launch, `rows: i64 in [0, rows]` after y (rows
// past it are not written).
// io: the storage of the input and output views (f32, or 16-bit: docs/ir.md, "16-bit views").
// per_column: with several chunks, the first loop keeps a running max and sum per column
// position of the chunk (element-wise: no reduction inside the loop) and reduces them over the
// chunk once after it, in `order` — a different order of the same math, for GPUs, where a
// reduction per trip is a barrier per trip.
// width (a row of one chunk, cols <= chunk): the row is read as a tile of max(cols, width)
// columns, -inf past the end (they change neither the max nor the sum: the same bits as a tile of
// cols), so that a GPU block spreads it over a power of two of threads.
// parts > 1 (static rows, at least two chunks): each row in up to `parts` parts of whole chunks,
// a program per (row block, part) in two phases — the parts' max and sum (per column, as
// above), then each program merges its rows' partials in `order` and writes its part — so a few
// long rows fill many programs (a GPU's SMs). Another IR of the same math, its own bits.
// three_passes (rows of several chunks, not in parts): the first loop keeps only the max, a
// second sums exp(x - max) against the row's max, a third writes: two exps an element where the
// running sum's rescaling takes a third, for one more read of the row. Its own bits.
dsl::BuildResult softmax(int64_t rows, int64_t cols, int64_t block_rows = 4,
                         int64_t chunk = std::numeric_limits<int64_t>::max(), bool runtime_rows = false,
                         dsl::FloatElem io = dsl::FloatElem::F32, dsl::ReduceOrder order = dsl::ordered,
                         bool per_column = false, int64_t parts = 0, int64_t width = 0, bool three_passes = false);

}  // namespace kiln::kernels

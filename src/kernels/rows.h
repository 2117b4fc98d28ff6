// The row domain of the row kernels (softmax, rmsnorm, rope): blocks of block_rows rows, a
// static count, or (runtime_rows) ceil(rows / block_rows) of a parameter `rows: i64 in [0,
// max_rows]` declared here, so one compiled kernel serves every row count up to the maximum.
#pragma once

#include <cstdint>

#include "kiln/dsl.h"

namespace kiln::kernels {

inline dsl::Dim rowBlocks(dsl::KernelBuilder& kb, int64_t max_rows, int64_t block_rows, bool runtime_rows) {
  if (!runtime_rows) return {"p", (max_rows + block_rows - 1) / block_rows};
  return kb.runtimeAxis("p", kb.scalarI64("rows", dsl::Range{0, max_rows}), block_rows);
}

}  // namespace kiln::kernels

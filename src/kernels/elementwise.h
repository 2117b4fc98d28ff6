// Elementwise kernels written in the DSL.
//   gelu, tanh form: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
//   gelu, erf form:  y = 0.5 x (1 + erf(x / sqrt(2)))
//   swiglu:          y = gate / (1 + exp(-gate)) * up   (SiLU(gate) * up)
// Expects: extents >= 1, block >= 1. Guarantees: a verified kernel, or diagnostics. gelu has
// views x [n], y [n], one program per block of `block` elements; swiglu has views
// gate, up, y [rows, cols], one program per (row, block of columns). Ragged tails are guarded.
#pragma once

#include <cstdint>
#include <optional>

#include "kiln/dsl.h"

namespace kiln::kernels {

enum class GeluForm { Tanh, Erf };

// io: the storage of every view (f32, or 16-bit: docs/ir.md, "16-bit views").
dsl::BuildResult gelu(int64_t n, int64_t block = 64, GeluForm form = GeluForm::Tanh,
                      dsl::FloatElem io = dsl::FloatElem::F32);

// runtime_rows: the row count comes with each launch, `rows: i64 in [0, rows]` after y (rows
// past it are not written). io: the storage of every view; out, where given, y's alone.
dsl::BuildResult swiglu(int64_t rows, int64_t cols, int64_t block = 64, bool runtime_rows = false,
                        dsl::FloatElem io = dsl::FloatElem::F32, std::optional<dsl::FloatElem> out = std::nullopt);

}  // namespace kiln::kernels

// Elementwise GELU (tanh form) written in the DSL:
//   y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))
// Expects: n >= 1, block >= 1. Guarantees: a verified kernel with views x [n], y [n], or
// diagnostics. One program per block of `block` elements; the ragged tail is guarded.
#pragma once

#include <cstdint>

#include "kiln/dsl.h"

namespace kiln::kernels {

dsl::BuildResult gelu(int64_t n, int64_t block = 64);

}  // namespace kiln::kernels

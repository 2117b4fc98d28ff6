// Printer: Kernel -> canonical text (docs/ir.md). parse(print(k)) prints identically.
#pragma once

#include <string>

#include "ir/ir.h"

namespace kiln::ir {

std::string print(const Kernel& kernel);

// Canonical spelling of an f32 literal: the shortest text that reads back to the same float
// ("inf", "-inf", "nan" included).
std::string formatF32(double value);

}  // namespace kiln::ir

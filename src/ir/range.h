// The stated-range rule of integer parameters (docs/ir.md, "Stated ranges"), header-only so
// that the runtime's argument checks and the interpreter's state it in the same words without
// the runtime linking the IR.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::ir {

// nullopt when lo <= value <= hi; otherwise the sentence for argument `which` ("parameter 'n'
// (#2)"), naming the element of an integer view (element >= 0) or the scalar (element < 0).
inline std::optional<std::string> rangeViolation(const std::string& which, int64_t lo, int64_t hi, int64_t value,
                                                 int64_t element = -1) {
  if (value >= lo && value <= hi) return std::nullopt;
  return which + (element >= 0 ? ": element " + std::to_string(element) + " is " : " is ") + std::to_string(value) +
         ", outside its stated range [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

}  // namespace kiln::ir

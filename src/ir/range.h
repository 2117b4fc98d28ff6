// The stated-range rules of integer parameters (docs/ir.md, "Stated ranges"), header-only so
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

// nullopt when element `element` (> 0) of an integer view whose stated range is ascending is not
// below the element before it; otherwise the sentence for argument `which`.
inline std::optional<std::string> orderViolation(const std::string& which, int64_t previous, int64_t value,
                                                 int64_t element) {
  if (value >= previous) return std::nullopt;
  return which + ": element " + std::to_string(element) + " is " + std::to_string(value) + ", below element " +
         std::to_string(element - 1) + " (" + std::to_string(previous) + "); its stated range is ascending";
}

}  // namespace kiln::ir

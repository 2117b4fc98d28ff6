// Type rules of TileIR, in one place: the builder uses them to type new ops, the verifier
// re-checks every op with them.
// Expects: an Op whose operands and attributes are filled in (operands non-null).
// Guarantees: either the result types, or an error code and a sentence saying what to change.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace kiln::ir {

struct TypeError {
  std::string code;
  std::string message;
};

struct InferResult {
  std::vector<Type> results;
  std::optional<TypeError> error;
  bool ok() const { return !error.has_value(); }
};

// `declared` is the type written by the author, required for Const, Iota, Broadcast and Cast
// (Cast uses only its element type); ignored for every other op.
InferResult inferTypes(const Op& op, const Type* declared);

// True when a dim extent of 0 is acceptable for this value: every use contracts that dim
// in an mma (K = 0 is defined: the result is acc).
bool zeroExtentAllowed(const Value& v, const std::vector<const Op*>& users);

}  // namespace kiln::ir

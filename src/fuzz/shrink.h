// Shrinker: makes a failing kernel small while the failure persists (delta debugging on the
// canonical text). Expects: a kernel text that parses and verifies, and a predicate that is
// true on it ("still fails"). Guarantees: the result parses, verifies and satisfies the
// predicate; every step was kept only because the predicate held on it; stops at a fixed
// point or when the attempt or time budget runs out.
// Steps, repeated until none applies: drop an op (uses replaced by an earlier value of the same
// type, or by a const of its type); drop a store; drop a whole loop (its results become its inits,
// or consts);
// remove dead ops and unused parameters; run a loop once (bounds 0 to 1 step 1); turn a pipeline
// into a serial loop; shrink a named dim's extent, a view's extents, the root domain's extents.
#pragma once

#include <functional>
#include <string>

#include "ir/ir.h"

namespace kiln::fuzz {

struct ShrinkOptions {
  int max_attempts = 400;  // predicate evaluations
  double max_seconds = 60.0;
};

struct ShrinkStats {
  int attempts = 0;  // predicate evaluations
  int kept = 0;      // changes kept
};

// `stillFails` is called only on kernels that verified. Returns the shrunk canonical text.
std::string shrink(const std::string& text, const std::function<bool(const ir::Kernel&)>& stillFails,
                   const ShrinkOptions& options = {}, ShrinkStats* stats = nullptr);

}  // namespace kiln::fuzz

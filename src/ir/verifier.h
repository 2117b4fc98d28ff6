// Verifier: every rule of docs/ir.md checked over a whole kernel.
// Expects: any Kernel (possibly built wrongly through the DSL).
// Guarantees: true, or false with one positioned diagnostic per problem found. Never aborts.
#pragma once

#include "ir/diag.h"
#include "ir/ir.h"

namespace kiln::ir {

bool verify(const Kernel& kernel, DiagEngine& diag);

}  // namespace kiln::ir

// Parser: text form (docs/ir.md) -> Kernel.
// Expects: any bytes (garbage, truncated, huge input included).
// Guarantees: a kernel built through Builder and passed through verify(), or nullptr with at
// least one FILE:LINE:COL diagnostic. Never aborts, never recurses without bound.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "ir/diag.h"
#include "ir/ir.h"

namespace kiln::ir {

std::unique_ptr<Kernel> parseKernel(std::string_view text, const std::string& filename, DiagEngine& diag);

// Reads the file (a missing or unreadable file is a diagnostic at FILE:0:0), then parses it.
std::unique_ptr<Kernel> parseFile(const std::string& path, DiagEngine& diag);

}  // namespace kiln::ir

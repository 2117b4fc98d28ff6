#include "ir/diag.h"

#include <fmt/format.h>

namespace kiln::ir {

std::string format(const Diagnostic& d) {
  return fmt::format("{}:{}:{}: error: {} [{}]", d.loc.file.empty() ? "<unknown>" : d.loc.file, d.loc.line, d.loc.col,
                     d.message, d.code);
}

void DiagEngine::error(const Loc& loc, std::string code, std::string message) {
  diags_.push_back(Diagnostic{loc, std::move(code), std::move(message)});
}

std::string DiagEngine::str() const {
  std::string out;
  for (const Diagnostic& d : diags_) {
    out += format(d);
    out += '\n';
  }
  return out;
}

}  // namespace kiln::ir

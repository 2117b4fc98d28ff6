// Diagnostics: a user's mistake becomes a positioned message, never an abort.
#pragma once

#include <string>
#include <vector>

#include "ir/ir.h"

namespace kiln::ir {

struct Diagnostic {
  Loc loc;
  std::string code;     // short stable id, e.g. "shape-mismatch"
  std::string message;  // what is wrong and what to change
};

// "FILE:LINE:COL: error: MESSAGE [CODE]"
std::string format(const Diagnostic& d);

class DiagEngine {
 public:
  void error(const Loc& loc, std::string code, std::string message);
  bool hasErrors() const { return !diags_.empty(); }
  const std::vector<Diagnostic>& all() const { return diags_; }
  std::string str() const;  // every diagnostic, one per line
  void clear() { diags_.clear(); }

 private:
  std::vector<Diagnostic> diags_;
};

}  // namespace kiln::ir

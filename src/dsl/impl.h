// The DSL's private state: the kernel under construction, its diagnostics and builder, and
// the helpers the op files share.
// Expects: only src/dsl/*.cpp include this.
// Guarantees: every name handed to ir::Builder is unique in the kernel (renames included).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/builder.h"
#include "ir/diag.h"
#include "ir/ir.h"
#include "kiln/dsl.h"

namespace kiln::dsl {

struct KernelBuilder::Impl {
  Impl(const std::string& name, const ir::Loc& loc);

  std::unique_ptr<ir::Kernel> kernel;
  ir::DiagEngine diag;
  ir::Builder b;
  std::unordered_set<std::string> names;
  std::unordered_map<std::string, int> next_suffix;  // last suffix given per base name
  bool finished = false;

  // Rank-0 consts made for literals, by (element type, value bits): a literal reuses one that
  // is visible at the insertion point instead of repeating it.
  std::map<std::pair<ir::Elem, uint64_t>, std::vector<ir::Value*>> literals;

  // A name not used yet in this kernel, derived from `hint` (text-IR safe characters).
  std::string fresh(const std::string& hint);
  // A rank-0 const of `elem` holding `value` (f32: rounded to float; i64/i1: integral).
  ir::Value* scalarConst(ir::Elem elem, double fvalue, int64_t ivalue, const ir::Loc& loc);
  void error(const ir::Loc& loc, std::string code, std::string message) {
    diag.error(loc, std::move(code), std::move(message));
  }
};

ir::Loc toLoc(const SrcLoc& loc);

namespace detail {
// The one door into the handles' private parts.
struct Internal {
  static KernelBuilder::Impl& impl(KernelBuilder* kb) { return *kb->impl_; }
  static Tile tile(KernelBuilder* kb, ir::Value* v) { return Tile(kb, v); }
  static Idx idx(KernelBuilder* kb, ir::Value* v) { return Idx(kb, v); }
  static View view(KernelBuilder* kb, ir::Value* v) { return View(kb, v); }
};
}  // namespace detail

// The value behind a tile used in an op of `kb`; null (after a diagnostic where the handle was
// never assigned or belongs to another kernel) when there is nothing to build on.
ir::Value* valueOf(KernelBuilder* kb, const Tile& t, const ir::Loc& loc);
// An index operand for ir::Builder: a literal, a value, or the builder's "missing" marker.
ir::Index indexOf(KernelBuilder* kb, const IdxArg& a, const ir::Loc& loc);
std::vector<ir::Dim> toIrDims(const std::vector<Dim>& dims);

}  // namespace kiln::dsl

// Builder: the one way TileIR is constructed (the parser and the DSL both use it).
// Expects: operands created in the same Kernel. A null operand means an earlier error: the
// builder returns null without a second diagnostic.
// Guarantees: every op it appends is typed by inferTypes(); a type error becomes a
// positioned diagnostic and the op is not appended.
#pragma once

#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "ir/diag.h"
#include "ir/ir.h"

namespace kiln::ir {

class Builder {
 public:
  Builder(Kernel& kernel, DiagEngine& diag);

  Kernel& kernel() { return k_; }
  DiagEngine& diag() { return diag_; }

  // Where new ops go (defaults to the kernel body).
  Region* insertion() const { return at_; }
  void setInsertion(Region* r) { at_ = r; }

  // When set (the DSL), a name already used gets a numeric suffix; when clear (the parser),
  // the caller reports redefinitions itself.
  void setUniquifyNames(bool on) { uniquify_ = on; }

  Value* param(std::string name, Type type, const Loc& loc);
  // A workspace view (Kernel::workspaces), allocated by Kiln for each launch.
  Value* workspace(std::string name, Type type, const Loc& loc);

  // Structure. parallel/loop return the op; its body is op->regions[0], whose args are the
  // induction variables (and, for loops, the carried values).
  // `runtime` (empty, or one entry per axis): the axes whose extent is given at launch; their
  // `extents` entry is the maximum.
  Op* parallel(const std::vector<std::string>& ivNames, const std::vector<int64_t>& extents, const Loc& loc,
               const std::vector<RuntimeExtent>& runtime = {});
  Op* loop(OpKind kind, const std::string& ivName, Index lower, Index upper, int64_t step,
           const std::vector<std::pair<std::string, Value*>>& carried, const std::vector<std::string>& resultNames,
           const Loc& loc);
  Op* yield(const std::vector<Value*>& values, const Loc& loc);
  Op* stage(int64_t n, const Loc& loc);

  // Memory. `access` has one entry per view dim: a named dim, or name "" (extent 1, squeezed).
  Value* load(Value* view, std::vector<Index> origin, std::vector<Dim> access, double fill, const Loc& loc,
              std::string name = {});
  Op* store(Value* view, std::vector<Index> origin, std::vector<Dim> access, Value* tile, const Loc& loc);

  // Values.
  Value* constF32(double v, const Type& type, const Loc& loc, std::string name = {});
  Value* constInt(int64_t v, const Type& type, const Loc& loc, std::string name = {});  // i64 or i1
  Value* iota(const Type& type, const std::string& dim, const Loc& loc, std::string name = {});
  Value* broadcast(Value* x, const Type& to, const Loc& loc, std::string name = {});
  Value* unary(OpKind kind, Value* x, const Loc& loc, std::string name = {});
  Value* binary(OpKind kind, Value* a, Value* b, const Loc& loc, std::string name = {});
  Value* cmp(CmpPred pred, Value* a, Value* b, const Loc& loc, std::string name = {});
  Value* select(Value* cond, Value* a, Value* b, const Loc& loc, std::string name = {});
  Value* cast(Value* x, Elem to, const Loc& loc, std::string name = {});
  Value* reduce(ReduceKind kind, Value* x, std::vector<std::string> dims, Value* init, ReducePolicy policy,
                const Loc& loc, std::string name = {});
  Value* mma(Value* a, Value* b, Value* acc, std::vector<std::string> contract, MmaPolicy policy, const Loc& loc,
             std::string name = {});
  Value* extract(Value* x, std::vector<Index> indices, const Loc& loc, std::string name = {});

  // Generic form used by the parser: fill `op` (kind, operands, attributes), then type and
  // append it. Returns false (with a diagnostic) on a type error.
  bool finish(Op* op, const Type* declared, const std::vector<std::string>& resultNames);

 private:
  std::string freshName(std::string hint);
  bool operandsPresent(const std::vector<Value*>& vs, const std::vector<Index>& ixs) const;
  Value* single(Op* op, const Type* declared, std::string name);

  Kernel& k_;
  DiagEngine& diag_;
  Region* at_;
  bool uniquify_ = true;
  std::unordered_set<std::string> used_;
};

}  // namespace kiln::ir

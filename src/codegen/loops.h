// What both realizations share to walk tiles: index arithmetic that folds constants, and the
// loop builder (every loop of the lowering heads a block named kLoopHeaderName).
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <functional>
#include <vector>

namespace kiln::codegen {

// An index: a compile-time constant, or a runtime i64 (v != nullptr).
struct Ix {
  llvm::Value* v = nullptr;
  int64_t c = 0;
  bool isConst() const { return v == nullptr; }
};

// Index arithmetic on i64 that stays constant while both sides are (division is unsigned:
// indices are never negative).
class IndexMath {
 public:
  explicit IndexMath(llvm::IRBuilder<>& b) : b_(b) {}
  llvm::Value* value(Ix a) const { return a.isConst() ? b_.getInt64(a.c) : a.v; }
  Ix add(Ix a, Ix b) const;
  Ix mul(Ix a, int64_t c) const;
  Ix div(Ix a, int64_t c) const;
  Ix rem(Ix a, int64_t c) const;

 private:
  llvm::IRBuilder<>& b_;
};

using LoopBody = std::function<std::vector<llvm::Value*>(llvm::Value* iv, const std::vector<llvm::Value*>& carried)>;
using LoopCondition = std::function<llvm::Value*(llvm::Value* counter)>;

// The skeleton of every loop of the lowering: a header (named kLoopHeaderName) with an i64
// counter phi named `counter_name` from `start`, stepped by `step`, and a phi per carried value;
// `condition(counter)`, emitted in the header, decides whether the body runs; `body` returns
// the carried values of the next iteration. Returns the carried values at the exit. `noUnroll`
// marks the loop llvm.loop.unroll.disable (a plan's loop that full unrolling would only bloat).
// The builder is left at the exit block.
std::vector<llvm::Value*> buildLoop(llvm::IRBuilder<>& b, llvm::Function* f, llvm::Value* start, int64_t step,
                                    const char* counter_name, const std::vector<llvm::Value*>& init,
                                    const LoopCondition& condition, const LoopBody& body, bool noUnroll);

// for (iv = lo; iv < hi; iv += step): the skeleton with the counter as the induction variable.
std::vector<llvm::Value*> buildLoop(llvm::IRBuilder<>& b, llvm::Function* f, llvm::Value* lo, llvm::Value* hi,
                                    int64_t step, const std::vector<llvm::Value*>& init, const LoopBody& body,
                                    bool noUnroll);

}  // namespace kiln::codegen

// What both CPU realizations share when they emit one function of a kernel's root domain: the
// kernel, the plan and the builder; index arithmetic; the plan's loops; the parameters loaded
// from the argument array; the root domain's program ids decomposed along the plan's axis
// order; the walk over a region's ops with errors positioned at the op; the function's end.
// The realizations (packets/: a lane per program; lanes/: one program over the lanes) derive
// from it and own how values are laid out and how each op is emitted.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <string>
#include <vector>

#include "codegen/elementwise.h"
#include "codegen/loops.h"
#include "ir/ir.h"
#include "plan/plan.h"

namespace kiln::codegen {

// The extent of each axis of root domain `root` for the arguments at `params` (the argument
// array, docs/ir.md "Runtime extents"): a constant for a static axis, ceil(value / divisor) of
// the i64 scalar parameter's value (range-checked by the launch, so >= 0) for a runtime one;
// and their product, the programs of the domain (a constant when every axis is static).
std::vector<llvm::Value*> domainExtents(llvm::IRBuilder<>& b, llvm::Value* params, const ir::Op& root);
llvm::Value* domainPrograms(llvm::IRBuilder<>& b, llvm::Value* params, const ir::Op& root);

class ProgramEmitter {
 protected:
  // `noUnrollLoops`: the loops this realization builds carry llvm.loop.unroll.disable.
  ProgramEmitter(const ir::Kernel& kernel, const plan::Plan& plan, llvm::Module& module, bool noUnrollLoops);
  virtual ~ProgramEmitter() = default;

  // index arithmetic (constants folded)
  llvm::Value* val(Ix a) { return ix_.value(a); }
  Ix add(Ix a, Ix b) { return ix_.add(a, b); }
  Ix mul(Ix a, int64_t c) { return ix_.mul(a, c); }
  Ix div(Ix a, int64_t c) { return ix_.div(a, c); }
  Ix rem(Ix a, int64_t c) { return ix_.rem(a, c); }

  // for (iv = lo; iv < hi; iv += step) with carried values (buildLoop).
  std::vector<llvm::Value*> loop(llvm::Value* lo, llvm::Value* hi, int64_t step, const std::vector<llvm::Value*>& init,
                                 const LoopBody& body);

  // The coordinates an extract reads at, when every index is one value for the program (or the
  // packet): constants as they are, a runtime index (`index` gives it as an i64) clamped to 0
  // where it lies outside its dim; `ok` is set to the conjunction of the in-range tests
  // (nullptr when every index is a constant).
  std::vector<Ix> extractCoords(const ir::Op* op, const std::function<llvm::Value*(const ir::Index&)>& index,
                                llvm::Value*& ok);

  // A view's memory (docs/ir.md, "Integer views"): its element's LLVM type (float, i32, i64)
  // and alignment; a load's fill in that type; the conversion of a loaded scalar or vector to
  // the tile's element (an i32 view widens, sign-extended, to i64) and of a tile's value to the
  // view's element (i64 narrows to i32, keeping the low 32 bits). Identity for f32 and i64.
  llvm::Type* memType(const ir::Value* view);
  llvm::Align memAlign(const ir::Value* view) { return llvm::Align(ir::elemBytes(view->type.elem)); }
  llvm::Constant* memFill(const ir::Op* load);
  llvm::Value* widenLoaded(const ir::Value* view, llvm::Value* x);
  // One element of a load at `ptr`, widened to the tile's element: the fill where `inBounds` is
  // false (the view's first element, always there, is read instead of the address outside).
  llvm::Value* loadOrFill(const ir::Op* load, llvm::Value* ptr, llvm::Value* inBounds);
  // The same in two halves: the memory read (from the view's first element when `inBounds` is
  // false), and the fill and widening applied to it. A load issued ahead of its use keeps the
  // two apart, so that nothing waits for the read until the value is used.
  llvm::Value* rawLoad(const ir::Op* load, llvm::Value* ptr, llvm::Value* inBounds);
  llvm::Value* filled(const ir::Op* load, llvm::Value* raw, llvm::Value* inBounds);
  llvm::Value* narrowStored(const ir::Value* view, llvm::Value* x);

  // The internal function `void name(ptr params, i64 id)` (no inlining, no unwinding); returns
  // its entry block, where the builder is left.
  llvm::BasicBlock* beginFunction(const std::string& name);
  // Loads every parameter's pointer from the argument array (argument 0): a view's base goes
  // into base_; a scalar parameter's pointer is handed to `scalar`.
  void loadParams(const std::function<void(const ir::Value* param, llvm::Value* ptr)>& scalar);
  // The root domain's axes from the linear program id `ids` (a scalar, or a vector of ids) over
  // the domain's extents for this launch (domainExtents): innermost axis of the plan's order
  // first, `extent(e)` the divisor (an i64 scalar, a constant for a static axis) in the shape of
  // `ids`.
  void decomposeRootIds(llvm::Value* ids, const std::function<llvm::Value*(llvm::Value*)>& extent,
                        const std::function<void(const ir::Value* axis, llvm::Value* id)>& bind);
  // Every op of `r` but yields and stage markers, through emitOp then afterOp (a nested parallel
  // is an error); stops at the first error and positions it at its op.
  void emitRegion(const ir::Region* r);
  virtual void emitOp(const ir::Op* op) = 0;
  virtual void afterOp(const ir::Op* op) { (void)op; }
  // Ends the function: the function, or nullptr with `error` set.
  llvm::Function* finishFunction(std::string& error);

  const ir::Kernel& k_;
  const plan::Plan& p_;
  llvm::Module& m_;
  llvm::LLVMContext& c_;
  llvm::IRBuilder<> b_;
  Elementwise ew_{b_, m_};
  IndexMath ix_{b_};
  unsigned w_;
  bool no_unroll_loops_;
  bool half_nan_by_bits_;  // the target's f16 conversions do not give docs/ir.md's NaNs
  llvm::Function* f_ = nullptr;
  std::vector<llvm::Value*> base_;   // by param index: view base pointer
  std::vector<llvm::Value*> slots_;  // by storage slot: alloca
  std::string error_;
};

}  // namespace kiln::codegen

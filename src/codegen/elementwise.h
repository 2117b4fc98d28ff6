// What every realization shares: the element semantics of TileIR (docs/ir.md, "Arithmetic")
// as LLVM IR over any shape of value — a scalar, or a vector whose lanes are programs
// (local_lanes=1) or elements of one program (local_lanes=W). One rule, stated once.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "ir/ir.h"

namespace kiln::codegen {

// Fast math (fast_math=on): contraction and reassociation on every float op the
// builder creates; never reciprocal approximations, no-NaNs or no-infs (kernels mask with -inf).
void setFastMath(llvm::IRBuilder<>& b);

// A lowering error at `op`, as FILE:LINE:COL: error: MESSAGE (unchanged if already positioned).
std::string positionedError(const ir::Op* op, const std::string& error);

class Elementwise {
 public:
  Elementwise(llvm::IRBuilder<>& b, llvm::Module& m) : b_(b), m_(m) {}

  // `x` and the operands are scalars or vectors of one shape; `e` is the operands' element type.
  // An op the element type does not support sets `error` (never an abort).
  llvm::Value* unary(ir::OpKind k, llvm::Value* x, ir::Elem e, std::string& error);
  llvm::Value* binary(ir::OpKind k, llvm::Value* a, llvm::Value* b, ir::Elem e, std::string& error);
  llvm::Value* cmp(ir::CmpPred p, llvm::Value* a, llvm::Value* b, ir::Elem e);
  llvm::Value* cast(llvm::Value* x, ir::Elem from, ir::Elem to, std::string& error);
  llvm::Value* combine(ir::ReduceKind k, llvm::Value* a, llvm::Value* b, ir::Elem e);
  // An element-wise op (ir::isElementwise) on its operands' values `o` (in operand order): the
  // one dispatch from an op to the rules above, for every realization.
  llvm::Value* apply(const ir::Op* op, const std::vector<llvm::Value*>& o, std::string& error);
  // A partitioned mma's pieces (ir::MmaPolicy::partitions): a partition's first product, and
  // the merge of a partition into the accumulator; the policy's flags as in multiplyAdd.
  llvm::Value* mmaProduct(llvm::Value* a, llvm::Value* b, const ir::MmaPolicy& p);
  llvm::Value* mmaMerge(llvm::Value* c, llvm::Value* part, const ir::MmaPolicy& p);
  // One mma step: c + a*b (MUL then ADD, flags per the policy) or fma(a, b, c) when fused.
  llvm::Value* multiplyAdd(llvm::Value* a, llvm::Value* b, llvm::Value* c, const ir::MmaPolicy& p);
  // The bf16_dot order (docs/ir.md, MMA), by integer steps on the bits (the same on every ISA
  // and the GPU). `flushTiny` makes a value below 2^-126 in magnitude the zero of its sign.
  // `bf16DotBlock`: one block of 32 contributions for outputs `c` (each already flushed):
  // contributions j < count are terms(j) (an (a, b) pair per output), the rest +0 padding; per
  // output an even and an odd chain of flushTiny(fma(bf16(a), bf16(b), e)) from +0, each operand
  // rounded to bf16 (to nearest even) and flushed; then flushTiny(c + flushTiny(even + odd)).
  llvm::Value* flushTiny(llvm::Value* x);
  // f32 (scalar or vector) to bf16 bits (i16 of its shape), to nearest even; a NaN stays a NaN.
  llvm::Value* bf16Bits(llvm::Value* x);
  using Bf16DotTerms = std::function<std::vector<std::pair<llvm::Value*, llvm::Value*>>(int64_t j)>;
  std::vector<llvm::Value*> bf16DotBlock(std::vector<llvm::Value*> c, int64_t count, const Bf16DotTerms& terms);
  // The bf16_pairs order's pair (docs/ir.md, MMA): count 2 steps contribution 1, then 0, on
  // each output's one chain (count 1: contribution 0 alone); operands rounded and flushed.
  std::vector<llvm::Value*> bf16PairBlock(std::vector<llvm::Value*> c, int64_t count, const Bf16DotTerms& terms);
  // A round (ir::mmaRound: 32 or 2 contributions) of either bf16 order, per the policy.
  std::vector<llvm::Value*> bf16Round(const ir::MmaPolicy& p, std::vector<llvm::Value*> c, int64_t count,
                                      const Bf16DotTerms& terms);
  // bf16DotBlock's pieces, for a realization that shares rounded operands between outputs: an
  // operand rounded to bf16 and flushed (as f32); a chain's step on rounded operands; a chain's
  // +0 padding contribution; the block's merge of the even and odd chains into the output.
  llvm::Value* bf16Operand(llvm::Value* x);
  llvm::Value* bf16Step(llvm::Value* e, llvm::Value* x, llvm::Value* y);
  llvm::Value* bf16Pad(llvm::Value* e);
  llvm::Value* bf16Merge(llvm::Value* c, llvm::Value* even, llvm::Value* odd);

  // The type of `like`'s shape with element type `e`.
  llvm::Type* shaped(llvm::Type* like, ir::Elem e);

 private:
  llvm::Value* bitsConst(llvm::Value* like, uint32_t v);  // an i32 constant of like's shape

  llvm::IRBuilder<>& b_;
  llvm::Module& m_;
};

}  // namespace kiln::codegen

// Vector realization of Kiln's math algorithms (src/math/kmath_constants.h): the same IEEE
// operations in the same order as the strict-FP32 interpreter, over <W x float>.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "ir/ir.h"

namespace kiln::codegen {

// exp, log, tanh or erf of a <W x float>: a call to an internal always-inline function of the
// module (created on first use).
llvm::Value* emitKilnMath(llvm::IRBuilder<>& b, llvm::Module& m, ir::OpKind kind, llvm::Value* x);

}  // namespace kiln::codegen

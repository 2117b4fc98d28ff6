#include "codegen/elementwise.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

#include "codegen/kmath_emit.h"

namespace kiln::codegen {

using ir::Elem;
using ir::OpKind;

void setFastMath(llvm::IRBuilder<>& b) {
  llvm::FastMathFlags fmf;
  // No `arcp`: with it LLVM turns x / sqrt(y) into x times a refined rsqrt estimate, which is
  // NaN at y = 0 where the division is inf (kiln fuzz --programs 10000 --seed 1, program 9399;
  // tests/fuzz/fast_math_div_by_sqrt_zero.tile). Fast math never assumes infinities away.
  fmf.setAllowContract(true);
  fmf.setAllowReassoc(true);
  b.setFastMathFlags(fmf);
}

std::string positionedError(const ir::Op* op, const std::string& error) {
  if (error.find(": error: ") != std::string::npos) return error;
  return fmt::format("{}:{}:{}: error: {}", op->loc.file, op->loc.line, op->loc.col, error);
}

llvm::Type* Elementwise::shaped(llvm::Type* like, Elem e) {
  llvm::Type* s = e == Elem::I64 ? b_.getInt64Ty() : e == Elem::I1 ? b_.getInt1Ty() : b_.getFloatTy();
  if (auto* v = llvm::dyn_cast<llvm::VectorType>(like)) return llvm::VectorType::get(s, v->getElementCount());
  return s;
}

llvm::Value* Elementwise::unary(OpKind k, llvm::Value* x, Elem e, std::string& error) {
  llvm::Type* t = x->getType();
  if (e == Elem::I64) {
    if (k == OpKind::Neg) return b_.CreateSub(llvm::Constant::getNullValue(t), x);
    if (k == OpKind::Abs) return b_.CreateBinaryIntrinsic(llvm::Intrinsic::abs, x, b_.getFalse());
  } else {
    switch (k) {
      case OpKind::Neg: return b_.CreateFNeg(x);
      case OpKind::Abs: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
      case OpKind::Sqrt: return b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x);
      case OpKind::Rsqrt: {
        // Never under fast-math flags: LLVM would turn 1/sqrt into an estimate whose Newton step
        // makes rsqrt(+0) NaN instead of +inf (fast math keeps infinities and NaNs).
        llvm::IRBuilder<>::FastMathFlagGuard guard(b_);
        b_.clearFastMathFlags();
        return b_.CreateFDiv(llvm::ConstantFP::get(t, 1.0), b_.CreateUnaryIntrinsic(llvm::Intrinsic::sqrt, x));
      }
      case OpKind::Exp:
      case OpKind::Log:
      case OpKind::Tanh:
      case OpKind::Erf: {
        if (t->isVectorTy()) return emitKilnMath(b_, m_, k, x);
        // A scalar runs through the one-lane vector form of the same algorithm.
        llvm::Value* v =
            b_.CreateInsertElement(llvm::PoisonValue::get(llvm::FixedVectorType::get(t, 1)), x, uint64_t{0});
        return b_.CreateExtractElement(emitKilnMath(b_, m_, k, v), uint64_t{0});
      }
      default: break;
    }
  }
  error = fmt::format("no lowering for unary op '{}' on {}", ir::opName(k), ir::elemName(e));
  return x;
}

llvm::Value* Elementwise::binary(OpKind k, llvm::Value* a, llvm::Value* b, Elem e, std::string& error) {
  llvm::Type* t = a->getType();
  if (e == Elem::I64) {
    auto c = [&](int64_t v) { return llvm::ConstantInt::get(t, static_cast<uint64_t>(v), true); };
    switch (k) {
      case OpKind::Add: return b_.CreateAdd(a, b);
      case OpKind::Sub: return b_.CreateSub(a, b);
      case OpKind::Mul: return b_.CreateMul(a, b);
      case OpKind::Max: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, a, b);
      case OpKind::Min: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, a, b);
      case OpKind::Div: {
        // Defined everywhere: x / 0 = 0, and INT64_MIN / -1 wraps (= -x).
        llvm::Value* zero = b_.CreateICmpEQ(b, c(0));
        llvm::Value* minus1 = b_.CreateICmpEQ(b, c(-1));
        llvm::Value* safe = b_.CreateSelect(b_.CreateOr(zero, minus1), c(1), b);
        llvm::Value* q = b_.CreateSDiv(a, safe);
        q = b_.CreateSelect(minus1, b_.CreateSub(c(0), a), q);
        return b_.CreateSelect(zero, c(0), q);
      }
      default: break;
    }
  } else {
    switch (k) {
      case OpKind::Add: return b_.CreateFAdd(a, b);
      case OpKind::Sub: return b_.CreateFSub(a, b);
      case OpKind::Mul: return b_.CreateFMul(a, b);
      case OpKind::Div: return b_.CreateFDiv(a, b);
      case OpKind::Max: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::maximum, a, b);
      case OpKind::Min: return b_.CreateBinaryIntrinsic(llvm::Intrinsic::minimum, a, b);
      default: break;
    }
  }
  error = fmt::format("no lowering for binary op '{}' on {}", ir::opName(k), ir::elemName(e));
  return a;
}

llvm::Value* Elementwise::cmp(ir::CmpPred p, llvm::Value* a, llvm::Value* b, Elem e) {
  using P = llvm::CmpInst::Predicate;
  static constexpr P fp[] = {P::FCMP_OLT, P::FCMP_OLE, P::FCMP_OGT, P::FCMP_OGE, P::FCMP_OEQ, P::FCMP_UNE};
  static constexpr P ip[] = {P::ICMP_SLT, P::ICMP_SLE, P::ICMP_SGT, P::ICMP_SGE, P::ICMP_EQ, P::ICMP_NE};
  int i = static_cast<int>(p);
  if (e == Elem::F32) return b_.CreateFCmp(fp[i], a, b);
  return b_.CreateICmp(ip[i], a, b);
}

llvm::Value* Elementwise::apply(const ir::Op* op, const std::vector<llvm::Value*>& o, std::string& error) {
  const Elem e = op->operands[op->kind == ir::OpKind::Select ? 1 : 0]->type.elem;
  switch (op->kind) {
    case ir::OpKind::Select: return b_.CreateSelect(o[0], o[1], o[2]);
    case ir::OpKind::Cmp: return cmp(op->pred, o[0], o[1], e);
    case ir::OpKind::Cast: return cast(o[0], e, op->results[0]->type.elem, error);
    default: break;
  }
  if (ir::isUnary(op->kind)) return unary(op->kind, o[0], e, error);
  return binary(op->kind, o[0], o[1], e, error);
}

llvm::Value* Elementwise::cast(llvm::Value* x, Elem from, Elem to, std::string& error) {
  if (from == to) return x;
  llvm::Type* t = x->getType();
  llvm::Type* dst = shaped(t, to);
  if (from == Elem::F32 && to == Elem::I64) return b_.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {dst, t}, {x});
  if (from == Elem::F32 && to == Elem::I1) return b_.CreateFCmpUNE(x, llvm::Constant::getNullValue(t));
  if (from == Elem::I64 && to == Elem::F32) return b_.CreateSIToFP(x, dst);
  if (from == Elem::I64 && to == Elem::I1) return b_.CreateICmpNE(x, llvm::Constant::getNullValue(t));
  if (from == Elem::I1 && to == Elem::F32) return b_.CreateUIToFP(x, dst);
  if (from == Elem::I1 && to == Elem::I64) return b_.CreateZExt(x, dst);
  error = fmt::format("unsupported cast from {} to {}", ir::elemName(from), ir::elemName(to));
  return x;
}

llvm::Value* Elementwise::combine(ir::ReduceKind k, llvm::Value* a, llvm::Value* b, Elem e) {
  std::string unused;
  switch (k) {
    case ir::ReduceKind::Add: return binary(OpKind::Add, a, b, e, unused);
    case ir::ReduceKind::Mul: return binary(OpKind::Mul, a, b, e, unused);
    case ir::ReduceKind::Max: return binary(OpKind::Max, a, b, e, unused);
    case ir::ReduceKind::Min: return binary(OpKind::Min, a, b, e, unused);
  }
  return a;
}

namespace {
llvm::Value* withPolicy(llvm::Value* v, const ir::MmaPolicy& p) {
  if (auto* i = llvm::dyn_cast<llvm::Instruction>(v)) {
    if (p.allow_fma) i->setHasAllowContract(true);
    if (p.allow_reassociation) i->setHasAllowReassoc(true);
  }
  return v;
}
}  // namespace

llvm::Value* Elementwise::mmaProduct(llvm::Value* a, llvm::Value* b, const ir::MmaPolicy& p) {
  return withPolicy(b_.CreateFMul(a, b), p);
}

llvm::Value* Elementwise::mmaMerge(llvm::Value* c, llvm::Value* part, const ir::MmaPolicy& p) {
  return withPolicy(b_.CreateFAdd(c, part), p);
}

llvm::Value* Elementwise::multiplyAdd(llvm::Value* a, llvm::Value* b, llvm::Value* c, const ir::MmaPolicy& p) {
  if (p.fused) return b_.CreateIntrinsic(llvm::Intrinsic::fma, {a->getType()}, {a, b, c});
  llvm::Value* prod = b_.CreateFMul(a, b);
  llvm::Value* sum = b_.CreateFAdd(c, prod);
  for (llvm::Value* v : {prod, sum})
    if (auto* i = llvm::dyn_cast<llvm::Instruction>(v)) {
      if (p.allow_fma) i->setHasAllowContract(true);
      if (p.allow_reassociation) i->setHasAllowReassoc(true);
    }
  return sum;
}

// docs/ir.md, MMA, bf16_dot: steps on the bits as i32 of `x`'s shape. A NaN operand stays a NaN
// (any NaN is as good as another).
llvm::Value* Elementwise::bitsConst(llvm::Value* like, uint32_t v) {
  llvm::Constant* c = b_.getInt32(v);
  if (auto* vt = llvm::dyn_cast<llvm::VectorType>(like->getType()))
    return llvm::ConstantVector::getSplat(vt->getElementCount(), c);
  return c;
}

llvm::Value* Elementwise::flushTiny(llvm::Value* x) {
  llvm::Value* u = b_.CreateBitCast(x, x->getType()->getWithNewType(b_.getInt32Ty()));
  llvm::Value* tiny = b_.CreateICmpEQ(b_.CreateAnd(u, bitsConst(u, 0x7F800000u)), bitsConst(u, 0));
  return b_.CreateBitCast(b_.CreateSelect(tiny, b_.CreateAnd(u, bitsConst(u, 0x80000000u)), u), x->getType());
}

llvm::Value* Elementwise::bf16Bits(llvm::Value* x) {
  // Round to nearest even at bit 16 (bits + 0x7FFF + bit 16); a NaN keeps its top bits, made quiet.
  llvm::Value* u = b_.CreateBitCast(x, x->getType()->getWithNewType(b_.getInt32Ty()));
  llvm::Value* nan = b_.CreateICmpUGT(b_.CreateAnd(u, bitsConst(u, 0x7FFFFFFFu)), bitsConst(u, 0x7F800000u));
  llvm::Value* top = b_.CreateLShr(u, bitsConst(u, 16));
  llvm::Value* rounded = b_.CreateLShr(
      b_.CreateAdd(b_.CreateAdd(u, bitsConst(u, 0x7FFFu)), b_.CreateAnd(top, bitsConst(u, 1))), bitsConst(u, 16));
  llvm::Value* r = b_.CreateSelect(nan, b_.CreateOr(top, bitsConst(u, 0x40u)), rounded);
  return b_.CreateTrunc(r, x->getType()->getWithNewType(b_.getInt16Ty()));
}

llvm::Value* Elementwise::bf16Operand(llvm::Value* x) {
  llvm::Value* wide =
      b_.CreateShl(b_.CreateZExt(bf16Bits(x), x->getType()->getWithNewType(b_.getInt32Ty())), bitsConst(x, 16));
  return flushTiny(b_.CreateBitCast(wide, x->getType()));
}

llvm::Value* Elementwise::bf16Step(llvm::Value* e, llvm::Value* x, llvm::Value* y) {
  return flushTiny(b_.CreateIntrinsic(llvm::Intrinsic::fma, {e->getType()}, {x, y, e}));
}

llvm::Value* Elementwise::bf16Pad(llvm::Value* e) {
  return b_.CreateFAdd(e, llvm::ConstantFP::get(e->getType(), 0.0));
}

llvm::Value* Elementwise::bf16Merge(llvm::Value* c, llvm::Value* even, llvm::Value* odd) {
  return flushTiny(b_.CreateFAdd(c, flushTiny(b_.CreateFAdd(even, odd))));
}

std::vector<llvm::Value*> Elementwise::bf16DotBlock(std::vector<llvm::Value*> c, int64_t count,
                                                    const Bf16DotTerms& terms) {
  std::vector<llvm::Value*> chain;
  for (llvm::Value* v : c) chain.insert(chain.end(), 2, llvm::ConstantFP::get(v->getType(), 0.0));
  for (int64_t j = 0; j < 32; ++j) {
    std::vector<std::pair<llvm::Value*, llvm::Value*>> t;
    if (j < count) t = terms(j);
    for (size_t r = 0; r < c.size(); ++r) {
      llvm::Value*& e = chain[2 * r + j % 2];
      e = j < count ? bf16Step(e, bf16Operand(t[r].first), bf16Operand(t[r].second)) : bf16Pad(e);
    }
  }
  for (size_t r = 0; r < c.size(); ++r) c[r] = bf16Merge(c[r], chain[2 * r], chain[2 * r + 1]);
  return c;
}

std::vector<llvm::Value*> Elementwise::bf16PairBlock(std::vector<llvm::Value*> c, int64_t count,
                                                     const Bf16DotTerms& terms) {
  for (int64_t j = count - 1; j >= 0; --j) {
    const std::vector<std::pair<llvm::Value*, llvm::Value*>> t = terms(j);
    for (size_t r = 0; r < c.size(); ++r) c[r] = bf16Step(c[r], bf16Operand(t[r].first), bf16Operand(t[r].second));
  }
  return c;
}

std::vector<llvm::Value*> Elementwise::bf16Round(const ir::MmaPolicy& p, std::vector<llvm::Value*> c, int64_t count,
                                                 const Bf16DotTerms& terms) {
  return p.bf16_pairs ? bf16PairBlock(std::move(c), count, terms) : bf16DotBlock(std::move(c), count, terms);
}

}  // namespace kiln::codegen

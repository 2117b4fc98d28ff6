#include "codegen/program_emitter.h"

#include <fmt/format.h>

#include "target/target.h"

namespace kiln::codegen {

std::vector<llvm::Value*> domainExtents(llvm::IRBuilder<>& b, llvm::Value* params, const ir::Op& root) {
  std::vector<llvm::Value*> out;
  for (size_t i = 0; i < root.extents.size(); ++i) {
    const ir::RuntimeExtent r = i < root.runtime_extents.size() ? root.runtime_extents[i] : ir::RuntimeExtent{};
    if (!r.runtime()) {
      out.push_back(b.getInt64(root.extents[i]));
      continue;
    }
    llvm::Value* slot = b.CreateConstInBoundsGEP1_64(b.getPtrTy(), params, static_cast<uint64_t>(r.param->index));
    llvm::Value* v = b.CreateLoad(b.getInt64Ty(), b.CreateLoad(b.getPtrTy(), slot), r.param->name + ".extent");
    out.push_back(r.divisor == 1 ? v : b.CreateUDiv(b.CreateAdd(v, b.getInt64(r.divisor - 1)), b.getInt64(r.divisor)));
  }
  return out;
}

llvm::Value* domainPrograms(llvm::IRBuilder<>& b, llvm::Value* params, const ir::Op& root) {
  const std::vector<llvm::Value*> extents = domainExtents(b, params, root);
  int64_t fixed = 1;  // the static axes' product
  llvm::Value* n = nullptr;
  for (size_t i = 0; i < extents.size(); ++i) {
    if (llvm::isa<llvm::Constant>(extents[i]))
      fixed *= root.extents[i];
    else
      n = n ? b.CreateMul(n, extents[i]) : extents[i];
  }
  if (!n) return b.getInt64(fixed);  // every axis static: the plan's count
  return fixed == 1 ? n : b.CreateMul(n, b.getInt64(fixed), "programs");
}

ProgramEmitter::ProgramEmitter(const ir::Kernel& kernel, const plan::Plan& plan, llvm::Module& module,
                               bool noUnrollLoops)
    : k_(kernel),
      p_(plan),
      m_(module),
      c_(module.getContext()),
      b_(module.getContext()),
      w_(static_cast<unsigned>(plan.knobs.packet_width)),
      no_unroll_loops_(noUnrollLoops),
      half_nan_by_bits_(!target::of(plan.knobs.target).model(plan.knobs.isa).half_conversions_keep_nan) {
  if (plan.knobs.fast_math) setFastMath(b_);
}

std::vector<llvm::Value*> ProgramEmitter::loop(llvm::Value* lo, llvm::Value* hi, int64_t step,
                                               const std::vector<llvm::Value*>& init, const LoopBody& body) {
  return buildLoop(b_, f_, lo, hi, step, init, body, no_unroll_loops_);
}

llvm::Type* ProgramEmitter::memType(const ir::Value* view) {
  switch (view->type.elem) {
    case ir::Elem::I32: return b_.getInt32Ty();
    case ir::Elem::I64: return b_.getInt64Ty();
    case ir::Elem::F16:
    case ir::Elem::BF16: return b_.getInt16Ty();  // the bits; converted by widenLoaded / narrowStored
    default: return b_.getFloatTy();
  }
}

namespace {

// x's type with its scalar element replaced by `elem` (a vector stays a vector of as many).
llvm::Type* likeWith(llvm::Value* x, llvm::Type* elem) {
  if (auto* v = llvm::dyn_cast<llvm::VectorType>(x->getType()))
    return llvm::VectorType::get(elem, v->getElementCount());
  return elem;
}

llvm::Constant* constLike(llvm::Value* x, llvm::Constant* c) {
  if (auto* v = llvm::dyn_cast<llvm::VectorType>(x->getType()))
    return llvm::ConstantVector::getSplat(v->getElementCount(), c);
  return c;
}

}  // namespace

llvm::Constant* ProgramEmitter::memFill(const ir::Op* load) {
  const ir::Value* view = load->operands[0];
  if (ir::isIntegerStorage(view->type.elem))
    return llvm::ConstantInt::get(memType(view), static_cast<uint64_t>(static_cast<int64_t>(load->fconst)), true);
  if (ir::isHalfStorage(view->type.elem))  // the fill rounded to the view's type, as its bits (folded)
    return llvm::cast<llvm::Constant>(
        narrowStored(view, llvm::ConstantFP::get(b_.getFloatTy(), static_cast<float>(load->fconst))));
  return llvm::ConstantFP::get(b_.getFloatTy(), static_cast<float>(load->fconst));
}

llvm::Value* ProgramEmitter::loadOrFill(const ir::Op* load, llvm::Value* ptr, llvm::Value* inBounds) {
  return filled(load, rawLoad(load, ptr, inBounds), inBounds);
}

llvm::Value* ProgramEmitter::rawLoad(const ir::Op* load, llvm::Value* ptr, llvm::Value* inBounds) {
  const ir::Value* view = load->operands[0];
  llvm::Value* safe = b_.CreateSelect(inBounds, ptr, base_[view->index]);
  return b_.CreateAlignedLoad(memType(view), safe, memAlign(view));
}

llvm::Value* ProgramEmitter::filled(const ir::Op* load, llvm::Value* raw, llvm::Value* inBounds) {
  return widenLoaded(load->operands[0], b_.CreateSelect(inBounds, raw, memFill(load)));
}

// Loads from 16-bit views become f32 exactly: f16 by the IEEE extension (x86: F16C's vcvtph2ps,
// identical to the definition on all 2^16 inputs, tests/unit/test_heavy_storage.cpp; on a
// target whose conversion does not keep a NaN's payload, a NaN's result is built from its bits:
// sign, quiet, the half's 10 payload bits on top of the float's), bf16 by placing the bits at
// the top of a float.
llvm::Value* ProgramEmitter::widenLoaded(const ir::Value* view, llvm::Value* x) {
  if (view->type.elem == ir::Elem::F16) {
    llvm::Value* wide = b_.CreateFPExt(b_.CreateBitCast(x, likeWith(x, b_.getHalfTy())), likeWith(x, b_.getFloatTy()));
    if (!half_nan_by_bits_) return wide;
    llvm::Value* u = b_.CreateZExt(x, likeWith(x, b_.getInt32Ty()));
    auto c = [&](uint32_t v) { return constLike(x, b_.getInt32(v)); };
    llvm::Value* nan = b_.CreateICmpUGT(b_.CreateAnd(u, c(0x7FFFu)), c(0x7C00u));
    llvm::Value* bits = b_.CreateOr(b_.CreateShl(b_.CreateAnd(u, c(0x8000u)), c(16)),
                                    b_.CreateOr(c(0x7FC00000u), b_.CreateShl(b_.CreateAnd(u, c(0x3FFu)), c(13))));
    return b_.CreateSelect(nan, b_.CreateBitCast(bits, wide->getType()), wide);
  }
  if (view->type.elem == ir::Elem::BF16) {
    llvm::Value* wide = b_.CreateShl(b_.CreateZExt(x, likeWith(x, b_.getInt32Ty())), constLike(x, b_.getInt32(16)));
    return b_.CreateBitCast(wide, likeWith(x, b_.getFloatTy()));
  }
  if (view->type.elem != ir::Elem::I32) return x;
  return b_.CreateSExt(x, likeWith(x, b_.getInt64Ty()));
}

// Stores into 16-bit views round to nearest even: f16 by the IEEE truncation (x86: F16C's
// vcvtps2ph, identical on all 2^32 inputs; where the target's conversion does not keep a NaN's
// payload, a NaN's half is built from its bits: sign, 0x7E00, the top 10 payload bits), bf16 by
// integer arithmetic on the bits (AVX-512 BF16's vcvtneps2bf16 treats subnormals as zero, so it
// is not used): a NaN keeps its top bits, made quiet; else bits + 0x7FFF + (bit 16), the top half.
llvm::Value* ProgramEmitter::narrowStored(const ir::Value* view, llvm::Value* x) {
  if (view->type.elem == ir::Elem::F16) {
    llvm::Value* half =
        b_.CreateBitCast(b_.CreateFPTrunc(x, likeWith(x, b_.getHalfTy())), likeWith(x, b_.getInt16Ty()));
    if (!half_nan_by_bits_) return half;
    llvm::Value* u = b_.CreateBitCast(x, likeWith(x, b_.getInt32Ty()));
    auto c = [&](uint32_t v) { return constLike(x, b_.getInt32(v)); };
    llvm::Value* nan = b_.CreateICmpUGT(b_.CreateAnd(u, c(0x7FFFFFFFu)), c(0x7F800000u));
    llvm::Value* bits = b_.CreateOr(b_.CreateAnd(b_.CreateLShr(u, c(16)), c(0x8000u)),
                                    b_.CreateOr(c(0x7E00u), b_.CreateAnd(b_.CreateLShr(u, c(13)), c(0x3FFu))));
    return b_.CreateSelect(nan, b_.CreateTrunc(bits, half->getType()), half);
  }
  if (view->type.elem == ir::Elem::BF16) {
    llvm::Value* u = b_.CreateBitCast(x, likeWith(x, b_.getInt32Ty()));
    auto c = [&](uint32_t v) { return constLike(x, b_.getInt32(v)); };
    llvm::Value* nan = b_.CreateICmpUGT(b_.CreateAnd(u, c(0x7FFFFFFFu)), c(0x7F800000u));
    llvm::Value* top = b_.CreateLShr(u, c(16));
    llvm::Value* quiet = b_.CreateOr(top, c(0x40u));
    llvm::Value* rounded = b_.CreateLShr(b_.CreateAdd(b_.CreateAdd(u, c(0x7FFFu)), b_.CreateAnd(top, c(1u))), c(16));
    return b_.CreateTrunc(b_.CreateSelect(nan, quiet, rounded), likeWith(x, b_.getInt16Ty()));
  }
  if (view->type.elem != ir::Elem::I32) return x;
  return b_.CreateTrunc(x, likeWith(x, b_.getInt32Ty()));
}

std::vector<Ix> ProgramEmitter::extractCoords(const ir::Op* op,
                                              const std::function<llvm::Value*(const ir::Index&)>& index,
                                              llvm::Value*& ok) {
  const ir::Type& xt = op->operands[0]->type;
  std::vector<Ix> cs;
  ok = nullptr;
  for (size_t d = 0; d < op->indices.size(); ++d) {
    const ir::Index& ix = op->indices[d];
    if (ix.isConstant()) {
      cs.push_back(Ix{nullptr, ix.constant});
      continue;
    }
    llvm::Value* v = index(ix);
    llvm::Value* in = b_.CreateICmpULT(v, b_.getInt64(xt.dims[d].extent));
    ok = ok ? b_.CreateAnd(ok, in) : in;
    cs.push_back(Ix{b_.CreateSelect(in, v, b_.getInt64(0)), 0});
  }
  return cs;
}

llvm::BasicBlock* ProgramEmitter::beginFunction(const std::string& name) {
  auto* fnTy = llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy(), b_.getInt64Ty()}, false);
  f_ = llvm::Function::Create(fnTy, llvm::Function::InternalLinkage, name, m_);
  f_->addFnAttr(llvm::Attribute::NoInline);
  f_->addFnAttr(llvm::Attribute::NoUnwind);
  // InstCombine's fixpoint check (fatal in this LLVM) is a check of the pass, not of the code: a
  // block program's selects over loaded words (a paged KV cache's page index) took it two
  // rounds. The code is the same with or without it.
  f_->addFnAttr("instcombine-no-verify-fixpoint");
  llvm::BasicBlock* entry = llvm::BasicBlock::Create(c_, "entry", f_);
  b_.SetInsertPoint(entry);
  return entry;
}

void ProgramEmitter::loadParams(const std::function<void(const ir::Value* param, llvm::Value* ptr)>& scalar) {
  llvm::Value* params = f_->getArg(0);
  base_.assign(k_.params.size(), nullptr);
  for (const ir::Value* prm : k_.params) {
    llvm::Value* slot = b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), params, static_cast<uint64_t>(prm->index));
    llvm::Value* ptr = b_.CreateLoad(b_.getPtrTy(), slot, fmt::format("{}.ptr", prm->name));
    if (prm->type.isView())
      base_[prm->index] = ptr;
    else
      scalar(prm, ptr);
  }
}

void ProgramEmitter::decomposeRootIds(llvm::Value* ids, const std::function<llvm::Value*(llvm::Value*)>& extent,
                                      const std::function<void(const ir::Value* axis, llvm::Value* id)>& bind) {
  const ir::Op* root = k_.root();
  const auto& axes = root->regions[0]->args;
  const std::vector<llvm::Value*> extents = domainExtents(b_, f_->getArg(0), *root);
  llvm::Value* rest = ids;
  for (int i = static_cast<int>(p_.root_axis_order.size()) - 1; i >= 0; --i) {
    const int axis = p_.root_axis_order[i];
    llvm::Value* n = extent(extents[axis]);
    // Plan::root_axis_descending: the axis walked from its last index down.
    const bool down = !p_.root_axis_descending.empty() && p_.root_axis_descending[axis];
    llvm::Value* id = b_.CreateURem(rest, n, down ? "" : axes[axis]->name);
    if (down) id = b_.CreateSub(b_.CreateSub(n, b_.getInt64(1)), id, axes[axis]->name);
    bind(axes[axis], id);
    rest = b_.CreateUDiv(rest, n);
  }
}

void ProgramEmitter::emitRegion(const ir::Region* r) {
  for (const ir::Op* op : r->ops) {
    // A yield is its loop's to read, a stage marker emits nothing, and a nested domain is refused.
    if (op->kind == ir::OpKind::Yield || op->kind == ir::OpKind::Stage) continue;
    if (op->kind == ir::OpKind::Parallel)
      error_ = "a parallel op below the root domain cannot be lowered";
    else
      emitOp(op);
    if (error_.empty()) afterOp(op);
    if (!error_.empty()) {
      error_ = positionedError(op, error_);
      return;
    }
  }
}

llvm::Function* ProgramEmitter::finishFunction(std::string& error) {
  b_.CreateRetVoid();
  if (!error_.empty()) {
    error = error_;
    return nullptr;
  }
  return f_;
}

}  // namespace kiln::codegen

// The Spreader class (gpu_threads_impl.h), continued: its visitAlloca .. visitIntrinsic.
#include "codegen/gpu_threads_impl.h"

namespace kiln::codegen::detail {

bool Spreader::visitAlloca(llvm::AllocaInst& a) {
  if (a.isArrayAllocation() && !llvm::isa<llvm::ConstantInt>(a.getArraySize()))
    return fail("a private array of runtime size");
  const uint64_t bytes =
      dl_.getTypeAllocSize(a.getAllocatedType()) * llvm::cast<llvm::ConstantInt>(a.getArraySize())->getZExtValue();
  if (bytes % static_cast<uint64_t>(4 * w_) != 0) return fail("a private array not a multiple of W words");
  llvm::IRBuilder<> eb(entry_, entry_->getFirstInsertionPt());  // allocas first in the entry
  auto* slots = eb.CreateAlloca(llvm::ArrayType::get(eb.getInt32Ty(), bytes / static_cast<uint64_t>(4 * w_)), nullptr,
                                a.getName() + ".slots");
  slots->setAlignment(llvm::Align(16));
  private_[&a] = {slots, b_.getInt64(0), true};
  return true;
}

bool Spreader::visitGep(llvm::GetElementPtrInst& g) {
  if (auto p = privatePtr(g.getPointerOperand())) {
    llvm::Value* offset = p->offset;
    bool aligned = p->aligned;
    const int64_t vectorBytes = 4 * w_;
    for (llvm::gep_type_iterator it = llvm::gep_type_begin(g), end = llvm::gep_type_end(g); it != end; ++it) {
      const llvm::Value* idx = it.getOperand();
      if (idx->getType()->isVectorTy()) return fail("a gather from a private array");
      llvm::Value* k = get(idx);
      if (!k) return false;
      k = b_.CreateSExtOrTrunc(k, b_.getInt64Ty());
      int64_t step = 0;
      if (llvm::StructType* st = it.getStructTypeOrNull()) {
        const auto field = llvm::cast<llvm::ConstantInt>(idx)->getZExtValue();
        step = static_cast<int64_t>(dl_.getStructLayout(st)->getElementOffset(field));
        offset = b_.CreateAdd(offset, b_.getInt64(step));
        aligned = aligned && step % vectorBytes == 0;
        continue;
      }
      step = static_cast<int64_t>(it.getSequentialElementStride(dl_).getFixedValue());
      offset = b_.CreateAdd(offset, b_.CreateMul(k, b_.getInt64(step)));
      const auto* ck = llvm::dyn_cast<llvm::ConstantInt>(idx);
      aligned = aligned && (step % vectorBytes == 0 || (ck && (ck->getSExtValue() * step) % vectorBytes == 0));
    }
    private_[&g] = {p->slots, offset, aligned};
    return true;
  }
  std::vector<llvm::Value*> idx;
  llvm::Value* base = get(g.getPointerOperand());
  if (!base) return false;
  for (const llvm::Value* k : g.indices()) {
    llvm::Value* m = get(k);
    if (!m) return false;
    idx.push_back(m);
  }
  map_[&g] = b_.CreateGEP(g.getSourceElementType(), base, idx, g.getName(), g.getNoWrapFlags());
  return true;
}

std::pair<llvm::Value*, llvm::Value*> Spreader::privateWord(const PrivatePtr& p) {
  llvm::Value* word = b_.CreateLShr(p.offset, 2);
  llvm::Value* slot = b_.CreateUDiv(word, b_.getInt64(w_));
  llvm::Value* owner = b_.CreateTrunc(b_.CreateURem(word, b_.getInt64(w_)), b_.getInt32Ty());
  return {slot, owner};
}

bool Spreader::visitLoad(llvm::LoadInst& l) {
  llvm::Type* t = l.getType();
  if (auto p = privatePtr(l.getPointerOperand())) {
    if (!fourBytes(scalar(t))) return fail("a private array of other than 4-byte elements");
    if (lanes(t)) {
      if (!p->aligned) return fail("a vector at an unaligned offset of a private array");
      llvm::Value* slot = b_.CreateUDiv(b_.CreateLShr(p->offset, 2), b_.getInt64(w_));
      map_[&l] = b_.CreateLoad(scalar(t), slotAddress(*p, slot), l.getName());
      return true;
    }
    auto [slot, owner] = privateWord(*p);
    map_[&l] = shuffle(b_.CreateLoad(scalar(t), slotAddress(*p, slot)), owner);
    return map_[&l] != nullptr;
  }
  llvm::Value* ptr = get(l.getPointerOperand());
  if (!ptr) return false;
  if (lanes(t)) {
    llvm::Value* at = b_.CreateGEP(scalar(t), ptr, lane64_);
    auto* n = b_.CreateLoad(scalar(t), at, l.getName());
    n->setAlignment(std::min(l.getAlign(), llvm::Align(dl_.getTypeStoreSize(scalar(t)))));
    map_[&l] = n;
    return true;
  }
  auto* n = b_.CreateLoad(scalar(t), ptr, l.getName());
  n->setAlignment(std::min(l.getAlign(), llvm::Align(dl_.getTypeStoreSize(scalar(t)))));
  map_[&l] = n;
  return true;
}

bool Spreader::visitStore(llvm::StoreInst& s) {
  llvm::Value* v = get(s.getValueOperand());
  if (!v) return false;
  llvm::Type* t = s.getValueOperand()->getType();
  if (auto p = privatePtr(s.getPointerOperand())) {
    if (!fourBytes(scalar(t))) return fail("a private array of other than 4-byte elements");
    if (lanes(t)) {
      if (!p->aligned) return fail("a vector at an unaligned offset of a private array");
      llvm::Value* slot = b_.CreateUDiv(b_.CreateLShr(p->offset, 2), b_.getInt64(w_));
      b_.CreateStore(v, slotAddress(*p, slot));
      return true;
    }
    auto [slot, owner] = privateWord(*p);
    llvm::Value* mine = b_.CreateICmpEQ(lane_, owner);
    b_.CreateStore(v, b_.CreateSelect(mine, slotAddress(*p, slot), dummy_));
    return true;
  }
  if (private_.count(s.getValueOperand())) return fail("a private-array pointer stored to memory");
  llvm::Value* ptr = get(s.getPointerOperand());
  if (!ptr) return false;
  if (lanes(t)) {
    auto* n = b_.CreateStore(v, b_.CreateGEP(scalar(t), ptr, lane64_));
    n->setAlignment(std::min(s.getAlign(), llvm::Align(dl_.getTypeStoreSize(scalar(t)))));
  } else {
    b_.CreateStore(v, ptr)->setAlignment(std::min(s.getAlign(), llvm::Align(dl_.getTypeStoreSize(v->getType()))));
  }
  syncSegment();
  return true;
}

bool Spreader::visitShuffle(llvm::ShuffleVectorInst& sh) {
  llvm::ArrayRef<int> mask = sh.getShuffleMask();
  const llvm::Value* srcA = sh.getOperand(0);
  const llvm::Value* srcB = sh.getOperand(1);
  if (single(srcA->getType())) {
    // From one-element vectors: each result lane is a's value (index 0), b's (1) or poison.
    bool fromA = false, fromB = false;
    for (int k : mask) fromA = fromA || k == 0, fromB = fromB || k == 1;
    if (!fromA && !fromB) {
      map_[&sh] = llvm::PoisonValue::get(scalar(sh.getType()));
      return true;
    }
    llvm::Value* a = fromA ? get(srcA) : nullptr;
    llvm::Value* bv = fromB ? get(srcB) : nullptr;
    if ((fromA && !a) || (fromB && !bv)) return false;
    if (!fromA || !fromB || single(sh.getType())) {
      map_[&sh] = fromA && (mask[0] == 0 || !fromB) ? a : bv;
      return true;
    }
    if (!lanes(sh.getType())) return fail("a shuffle to another width than W");
    std::vector<llvm::Constant*> table;
    for (int64_t l = 0; l < w_; ++l) table.push_back(b_.getInt1(mask[static_cast<size_t>(l)] == 1));
    map_[&sh] = b_.CreateSelect(laneTable(b_.getInt1Ty(), table), bv, a);
    return true;
  }
  if (lanes(srcA->getType()) && single(sh.getType())) {  // one lane out, as a uniform value
    const int k = mask[0];
    if (k < 0) {
      map_[&sh] = llvm::PoisonValue::get(scalar(sh.getType()));
      return true;
    }
    llvm::Value* v = get(k < w_ ? srcA : srcB);
    if (!v) return false;
    map_[&sh] = shuffle(v, b_.getInt32(static_cast<uint32_t>(k % static_cast<int>(w_))));
    return map_[&sh] != nullptr;
  }
  if (!lanes(srcA->getType()) || !lanes(sh.getType())) return fail("a shuffle that changes width");
  int first = -1;
  bool splat = true, idA = true, idB = true, anyB = false;
  for (int64_t l = 0; l < w_; ++l) {
    const int k = mask[static_cast<size_t>(l)];
    if (k < 0) continue;
    if (first < 0) first = k;
    splat = splat && k == first;
    idA = idA && k == l;
    idB = idB && k == l + w_;
    anyB = anyB || k >= w_;
  }
  if (first < 0) {
    map_[&sh] = llvm::PoisonValue::get(scalar(sh.getType()));
    return true;
  }
  if (splat) {
    const llvm::Value* from = first < w_ ? srcA : srcB;
    const int lane = first % static_cast<int>(w_);
    // A splat of a value just inserted at that lane is the value itself.
    if (const auto* ins = llvm::dyn_cast<llvm::InsertElementInst>(from))
      if (const auto* at = llvm::dyn_cast<llvm::ConstantInt>(ins->getOperand(2)))
        if (at->getSExtValue() == lane) {
          map_[&sh] = get(ins->getOperand(1));
          return map_[&sh] != nullptr;
        }
    llvm::Value* v = get(from);
    if (!v) return false;
    map_[&sh] = shuffle(v, b_.getInt32(static_cast<uint32_t>(lane)));
    return map_[&sh] != nullptr;
  }
  if (idA || idB) {
    map_[&sh] = get(idA ? srcA : srcB);
    return map_[&sh] != nullptr;
  }
  std::vector<llvm::Constant*> table;
  for (int64_t l = 0; l < w_; ++l)
    table.push_back(b_.getInt32(static_cast<uint32_t>(std::max(0, mask[static_cast<size_t>(l)]))));
  llvm::Value* from = laneTable(b_.getInt32Ty(), table);
  llvm::Value* inSegment = b_.CreateAnd(from, b_.getInt32(static_cast<uint32_t>(w_ - 1)));
  llvm::Value* a = get(srcA);
  if (!a) return false;
  llvm::Value* va = shuffle(a, inSegment);
  if (!va) return false;
  if (!anyB) {
    map_[&sh] = va;
    return true;
  }
  llvm::Value* bv = get(srcB);
  if (!bv) return false;
  llvm::Value* vb = shuffle(bv, inSegment);
  if (!vb) return false;
  map_[&sh] = b_.CreateSelect(b_.CreateICmpULT(from, b_.getInt32(static_cast<uint32_t>(w_))), va, vb);
  return true;
}

llvm::Value* Spreader::foldLanes(llvm::Value* v, llvm::Value* start,
                                 const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& op) {
  llvm::Value* acc = start;
  for (int64_t l = 0; l < w_; ++l) {
    llvm::Value* x = shuffle(v, b_.getInt32(static_cast<uint32_t>(l)));
    if (!x) return nullptr;
    acc = acc ? op(acc, x) : x;
  }
  return acc;
}

bool Spreader::visitIntrinsic(llvm::IntrinsicInst& call) {
  const llvm::Intrinsic::ID id = call.getIntrinsicID();
  auto arg = [&](unsigned k) { return get(call.getArgOperand(k)); };
  auto maskedAddress = [&](llvm::Value* mask, llvm::Value* ptr) { return b_.CreateSelect(mask, ptr, dummy_); };
  switch (id) {
    case llvm::Intrinsic::masked_load:
    case llvm::Intrinsic::masked_gather: {
      const bool gather = id == llvm::Intrinsic::masked_gather;
      llvm::Type* t = scalar(call.getType());
      llvm::Value* ptr = nullptr;
      if (auto p = privatePtr(call.getArgOperand(0))) {
        if (gather || !p->aligned || !fourBytes(t) || !lanes(call.getType()))
          return fail("a masked access of a private array");
        ptr = slotAddress(*p, b_.CreateUDiv(b_.CreateLShr(p->offset, 2), b_.getInt64(w_)));
      } else {
        llvm::Value* base = arg(0);
        if (!base) return false;
        ptr = gather || !lanes(call.getType()) ? base : b_.CreateGEP(t, base, lane64_);
      }
      llvm::Value* mask = arg(1);  // (ptr, mask, passthru): LLVM 22 keeps the alignment as an attribute
      llvm::Value* pass = arg(2);
      if (!mask || !pass) return false;
      llvm::Value* v = b_.CreateAlignedLoad(t, maskedAddress(mask, ptr), llvm::Align(4));
      map_[&call] = b_.CreateSelect(mask, v, pass);
      return true;
    }
    case llvm::Intrinsic::masked_store:
    case llvm::Intrinsic::masked_scatter: {
      const bool scatter = id == llvm::Intrinsic::masked_scatter;
      llvm::Value* v = arg(0);
      llvm::Value* mask = arg(2);  // (value, ptr, mask)
      if (!v || !mask) return false;
      llvm::Type* t = v->getType();
      const bool perLane = lanes(call.getArgOperand(0)->getType());
      if (auto p = privatePtr(call.getArgOperand(1))) {
        if (scatter || !p->aligned || !fourBytes(t) || !perLane) return fail("a masked access of a private array");
        llvm::Value* ptr = slotAddress(*p, b_.CreateUDiv(b_.CreateLShr(p->offset, 2), b_.getInt64(w_)));
        b_.CreateAlignedStore(v, maskedAddress(mask, ptr), llvm::Align(4));
        return true;
      }
      llvm::Value* base = arg(1);
      if (!base) return false;
      llvm::Value* ptr = scatter || !perLane ? base : b_.CreateGEP(t, base, lane64_);
      b_.CreateAlignedStore(v, maskedAddress(mask, ptr), llvm::Align(4));
      syncSegment();
      return true;
    }
    case llvm::Intrinsic::vector_reduce_or:
    case llvm::Intrinsic::vector_reduce_and: {
      llvm::Value* v = arg(0);
      if (!v) return false;
      if (single(call.getArgOperand(0)->getType())) {  // one element: itself
        map_[&call] = v;
        return true;
      }
      if (!v->getType()->isIntegerTy(1)) break;
      llvm::Value* ballot = b_.CreateIntrinsic(b_.getInt32Ty(), llvm::Intrinsic::nvvm_vote_ballot_sync, {members_, v});
      llvm::Value* mine = b_.CreateAnd(ballot, members_);
      map_[&call] = id == llvm::Intrinsic::vector_reduce_or ? b_.CreateICmpNE(mine, b_.getInt32(0))
                                                            : b_.CreateICmpEQ(mine, members_);
      return true;
    }
    case llvm::Intrinsic::lifetime_start:
    case llvm::Intrinsic::lifetime_end:
    case llvm::Intrinsic::assume: return true;
    default: break;
  }
  // Ordered or integer reductions: lanes in order.
  auto binary = [&](llvm::Instruction::BinaryOps op) {
    return [this, op, &call](llvm::Value* a, llvm::Value* x) {
      llvm::Value* r = b_.CreateBinOp(op, a, x);
      if (auto* ri = llvm::dyn_cast<llvm::Instruction>(r)) ri->copyFastMathFlags(&call);
      return r;
    };
  };
  auto intrinsic2 = [&](llvm::Intrinsic::ID f) {
    return [this, f](llvm::Value* a, llvm::Value* x) { return b_.CreateBinaryIntrinsic(f, a, x); };
  };
  std::optional<std::function<llvm::Value*(llvm::Value*, llvm::Value*)>> fold;
  bool hasStart = false;
  switch (id) {
    case llvm::Intrinsic::vector_reduce_fadd: fold = binary(llvm::Instruction::FAdd), hasStart = true; break;
    case llvm::Intrinsic::vector_reduce_fmul: fold = binary(llvm::Instruction::FMul), hasStart = true; break;
    case llvm::Intrinsic::vector_reduce_add: fold = binary(llvm::Instruction::Add); break;
    case llvm::Intrinsic::vector_reduce_mul: fold = binary(llvm::Instruction::Mul); break;
    case llvm::Intrinsic::vector_reduce_and: fold = binary(llvm::Instruction::And); break;
    case llvm::Intrinsic::vector_reduce_or: fold = binary(llvm::Instruction::Or); break;
    case llvm::Intrinsic::vector_reduce_xor: fold = binary(llvm::Instruction::Xor); break;
    case llvm::Intrinsic::vector_reduce_smax: fold = intrinsic2(llvm::Intrinsic::smax); break;
    case llvm::Intrinsic::vector_reduce_smin: fold = intrinsic2(llvm::Intrinsic::smin); break;
    case llvm::Intrinsic::vector_reduce_umax: fold = intrinsic2(llvm::Intrinsic::umax); break;
    case llvm::Intrinsic::vector_reduce_umin: fold = intrinsic2(llvm::Intrinsic::umin); break;
    case llvm::Intrinsic::vector_reduce_fmax: fold = intrinsic2(llvm::Intrinsic::maxnum); break;
    case llvm::Intrinsic::vector_reduce_fmin: fold = intrinsic2(llvm::Intrinsic::minnum); break;
    case llvm::Intrinsic::vector_reduce_fmaximum: fold = intrinsic2(llvm::Intrinsic::maximum); break;
    case llvm::Intrinsic::vector_reduce_fminimum: fold = intrinsic2(llvm::Intrinsic::minimum); break;
    default: break;
  }
  if (fold) {
    llvm::Value* start = hasStart ? arg(0) : nullptr;
    llvm::Value* v = arg(hasStart ? 1 : 0);
    if ((hasStart && !start) || !v) return false;
    if (single(call.getArgOperand(hasStart ? 1 : 0)->getType())) {
      map_[&call] = start ? (*fold)(start, v) : v;
      return true;
    }
    map_[&call] = foldLanes(v, start, *fold);
    return map_[&call] != nullptr;
  }
  // Elementwise intrinsics (fma, maximum, sqrt, fabs, smax, fptosi.sat, ...): the same on
  // the lane, overloaded on the scalar types.
  for (const llvm::Value* a : call.args())
    if (private_.count(a)) return fail("a private-array pointer passed to an intrinsic");
  std::vector<llvm::Value*> args;
  for (unsigned k = 0; k < call.arg_size(); ++k) {
    llvm::Value* m = arg(k);
    if (!m) return false;
    args.push_back(m);
  }
  if (call.getType()->isVoidTy() && !call.onlyReadsMemory()) return fail("an intrinsic that writes memory");
  llvm::CallInst* n = b_.CreateIntrinsic(scalar(call.getType()), id, args, {}, call.getName());
  n->copyIRFlags(&call);
  if (!call.getType()->isVoidTy()) map_[&call] = n;
  return true;
}

}  // namespace kiln::codegen::detail

// Lanes over threads: the lane program's W-lane vector IR rewritten as per-thread scalar IR
// with warp shuffles (see gpu_threads.h). Rules, per vector construct:
//   elementwise op, compare, cast, select, intrinsic   the same op on the thread's lane
//   load/store of a vector at p (view memory)            element p[lane] (coalesced)
//   masked load/store, gather/scatter                    the lane's element when its mask bit is
//                                                        set (masked-off lanes touch a private
//                                                        dummy word instead)
//   extractelement v, i                                  shfl.idx from lane i of the segment
//   insertelement v, x, i                                x where lane == i (x everywhere when v is
//                                                        poison: a refinement of poison)
//   shufflevector a, b, mask                             shfl.idx from lane mask[lane] of a or b
//   vector.reduce.or/and (of masks)                      vote.ballot over the segment
//   other vector.reduce.*                                lanes 0..W-1 in order, by shuffles
//   private arrays (allocas)                             element e lives in thread e mod W at
//                                                        slot e div W: a vector at an aligned
//                                                        offset is the thread's own slot; a
//                                                        scalar read is a load + shfl, a scalar
//                                                        write is done by the owning thread
// Every store to view memory is followed by bar.warp.sync over the segment, so a later read
// by another lane of the same program sees it. Scalars stay uniform over the segment (they
// come from uniform values, shuffles and ballots), so control flow is the program's.

#include "codegen/gpu_threads_impl.h"

namespace kiln::codegen {
namespace detail {

llvm::Function* Spreader::run(std::string& why) {
  dst_ = llvm::Function::Create(src_->getFunctionType(), llvm::Function::InternalLinkage, src_->getName() + ".threads",
                                m_);
  dst_->copyAttributesFrom(src_);
  for (size_t i = 0; i < src_->arg_size(); ++i) map_[src_->getArg(i)] = dst_->getArg(i);
  for (llvm::BasicBlock& bb : *src_) blocks_[&bb] = llvm::BasicBlock::Create(c_, bb.getName(), dst_);
  prelude();
  llvm::ReversePostOrderTraversal<llvm::Function*> rpo(src_);
  std::set<const llvm::BasicBlock*> reached;
  for (llvm::BasicBlock* bb : rpo) {
    reached.insert(bb);
    b_.SetInsertPoint(blocks_[bb]);
    for (llvm::Instruction& i : *bb) {
      if (!visit(i)) {
        why = fail_.empty() ? "unsupported instruction" : fail_;
        std::string text;
        llvm::raw_string_ostream os(text);
        i.print(os);
        why += ": " + text.substr(text.find_first_not_of(' '));
        dst_->eraseFromParent();
        return nullptr;
      }
    }
  }
  for (auto& [phi, orig] : phis_)
    for (unsigned k = 0; k < orig->getNumIncomingValues(); ++k) {
      llvm::BasicBlock* from = orig->getIncomingBlock(k);
      if (!reached.count(from)) continue;
      b_.SetInsertPoint(blocks_[from]->getTerminator());
      llvm::Value* v = get(orig->getIncomingValue(k));
      if (!v) {
        why = "phi input not available";
        dst_->eraseFromParent();
        return nullptr;
      }
      phi->addIncoming(v, blocks_[from]);
    }
  // Blocks unreachable in the source stay empty: give them a terminator.
  for (llvm::BasicBlock& bb : *dst_)
    if (!bb.getTerminator()) new llvm::UnreachableInst(c_, &bb);
  return dst_;
}

bool Spreader::lanes(const llvm::Type* t) const {
  const auto* v = llvm::dyn_cast<llvm::FixedVectorType>(t);
  return v && static_cast<int64_t>(v->getNumElements()) == w_;
}

bool Spreader::single(const llvm::Type* t) const {
  const auto* v = llvm::dyn_cast<llvm::FixedVectorType>(t);
  return v && v->getNumElements() == 1 && w_ > 1;
}

bool Spreader::fail(const std::string& why) {
  if (fail_.empty()) fail_ = why;
  return false;
}

void Spreader::prelude() {
  entry_ = blocks_[&src_->getEntryBlock()];
  b_.SetInsertPoint(entry_);
  llvm::Value* tid =
      b_.CreateIntrinsic(b_.getInt32Ty(), llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, llvm::ArrayRef<llvm::Value*>{});
  const auto w = static_cast<uint32_t>(w_);
  lane_ = b_.CreateAnd(tid, b_.getInt32(w - 1), "lane");
  lane64_ = b_.CreateZExt(lane_, b_.getInt64Ty());
  llvm::Value* base = b_.CreateSub(b_.CreateAnd(tid, b_.getInt32(31)), lane_);
  const uint32_t segment = w == 32 ? 0xffffffffu : ((1u << w) - 1u);
  members_ = b_.CreateShl(b_.getInt32(segment), base, "members");
  dummy_ = b_.CreateAlloca(b_.getInt64Ty(), b_.getInt32(2), "masked.off");
}

llvm::Value* Spreader::shuffle(llvm::Value* v, llvm::Value* from) {
  llvm::Type* t = v->getType();
  if (t->isFloatTy())
    return b_.CreateIntrinsic(t, llvm::Intrinsic::nvvm_shfl_sync_idx_f32, {members_, v, from, clampOperand()});
  if (t->isIntegerTy(32))
    return b_.CreateIntrinsic(t, llvm::Intrinsic::nvvm_shfl_sync_idx_i32, {members_, v, from, clampOperand()});
  if (t->isIntegerTy() && t->getIntegerBitWidth() < 32)
    return b_.CreateTrunc(shuffle(b_.CreateZExt(v, b_.getInt32Ty()), from), t);
  if (t->isIntegerTy(64)) {
    llvm::Value* lo = shuffle(b_.CreateTrunc(v, b_.getInt32Ty()), from);
    llvm::Value* hi = shuffle(b_.CreateTrunc(b_.CreateLShr(v, 32), b_.getInt32Ty()), from);
    return b_.CreateOr(b_.CreateZExt(lo, t), b_.CreateShl(b_.CreateZExt(hi, t), 32));
  }
  if (t->isPointerTy()) return b_.CreateIntToPtr(shuffle(b_.CreatePtrToInt(v, b_.getInt64Ty()), from), t);
  fail("a shuffle of an unsupported type");
  return nullptr;
}

llvm::Value* Spreader::laneTable(llvm::Type* t, const std::vector<llvm::Constant*>& values) {
  // An affine integer table is arithmetic on the lane.
  if (t->isIntegerTy() && t->getIntegerBitWidth() <= 64) {
    bool affine = true;
    const auto* c0 = llvm::dyn_cast<llvm::ConstantInt>(values[0]);
    const auto* c1 = values.size() > 1 ? llvm::dyn_cast<llvm::ConstantInt>(values[1]) : nullptr;
    affine = c0 && c1;
    int64_t first = affine ? c0->getSExtValue() : 0, step = affine ? c1->getSExtValue() - first : 0;
    for (size_t l = 0; affine && l < values.size(); ++l) {
      const auto* c = llvm::dyn_cast<llvm::ConstantInt>(values[l]);
      affine = c && c->getSExtValue() == first + step * static_cast<int64_t>(l);
    }
    if (affine && t->getIntegerBitWidth() > 1) {
      llvm::Value* l = b_.CreateZExtOrTrunc(lane64_, t);
      return b_.CreateAdd(llvm::ConstantInt::get(t, first, true), b_.CreateMul(l, llvm::ConstantInt::get(t, step)));
    }
  }
  llvm::Type* stored = t->isIntegerTy(1) ? b_.getInt8Ty() : t;
  std::vector<llvm::Constant*> elems;
  for (llvm::Constant* v : values)
    elems.push_back(t->isIntegerTy(1) ? llvm::ConstantInt::get(stored, v->isNullValue() ? 0 : 1) : v);
  auto* arr = llvm::ArrayType::get(stored, elems.size());
  auto* g = new llvm::GlobalVariable(m_, arr, true, llvm::GlobalValue::PrivateLinkage,
                                     llvm::ConstantArray::get(arr, elems), "lane.table");
  llvm::Value* v = b_.CreateLoad(stored, b_.CreateInBoundsGEP(arr, g, {b_.getInt64(0), lane64_}));
  return t->isIntegerTy(1) ? b_.CreateTrunc(v, t) : v;
}

llvm::Value* Spreader::get(const llvm::Value* v) {
  auto it = map_.find(v);
  if (it != map_.end()) return it->second;
  if (const auto* c = llvm::dyn_cast<llvm::Constant>(v)) {
    if (!c->getType()->isVectorTy()) return const_cast<llvm::Constant*>(c);
    llvm::Type* t = scalar(c->getType());
    if (llvm::isa<llvm::PoisonValue>(c) || llvm::isa<llvm::UndefValue>(c)) return llvm::PoisonValue::get(t);
    if (single(c->getType())) return c->getAggregateElement(0u);
    if (!lanes(c->getType())) return fail("a vector constant of another width"), nullptr;
    if (llvm::Constant* s = c->getSplatValue()) return s;
    std::vector<llvm::Constant*> values;
    for (int64_t l = 0; l < w_; ++l) {
      llvm::Constant* e = c->getAggregateElement(static_cast<unsigned>(l));
      if (!e) return fail("a vector constant without elements"), nullptr;
      if (llvm::isa<llvm::UndefValue>(e)) e = llvm::Constant::getNullValue(t);
      values.push_back(e);
    }
    return laneTable(t, values);
  }
  fail("a value used before it is defined");
  return nullptr;
}

std::optional<PrivatePtr> Spreader::privatePtr(const llvm::Value* p) {
  auto it = private_.find(p);
  if (it == private_.end()) return std::nullopt;
  return it->second;
}

llvm::Value* Spreader::slotAddress(const PrivatePtr& p, llvm::Value* elementSlot) {
  return b_.CreateInBoundsGEP(b_.getInt32Ty(), p.slots, elementSlot);
}

bool Spreader::visit(llvm::Instruction& i) {
  for (const llvm::Value* op : i.operands())
    if (otherVector(op->getType())) return fail("a vector of another width than W");
  if (otherVector(i.getType())) return fail("a vector of another width than W");

  if (auto* phi = llvm::dyn_cast<llvm::PHINode>(&i)) {
    for (const llvm::Value* in : phi->incoming_values())
      if (private_.count(in)) return fail("a private-array pointer through a phi");
    llvm::PHINode* n = b_.CreatePHI(scalar(phi->getType()), phi->getNumIncomingValues(), phi->getName());
    phis_.emplace_back(n, phi);
    map_[&i] = n;
    return true;
  }
  if (auto* a = llvm::dyn_cast<llvm::AllocaInst>(&i)) return visitAlloca(*a);
  if (auto* g = llvm::dyn_cast<llvm::GetElementPtrInst>(&i)) return visitGep(*g);
  if (auto* l = llvm::dyn_cast<llvm::LoadInst>(&i)) return visitLoad(*l);
  if (auto* s = llvm::dyn_cast<llvm::StoreInst>(&i)) return visitStore(*s);
  if (auto* call = llvm::dyn_cast<llvm::IntrinsicInst>(&i)) return visitIntrinsic(*call);
  if (llvm::isa<llvm::CallInst>(i)) return fail("a call");
  for (const llvm::Value* op : i.operands())
    if (private_.count(op)) return fail("a private-array pointer used other than by a load, store or GEP");
  if (auto* e = llvm::dyn_cast<llvm::ExtractElementInst>(&i)) {
    llvm::Value* v = get(e->getVectorOperand());
    llvm::Value* k = get(e->getIndexOperand());
    if (!v || !k) return false;
    if (single(e->getVectorOperand()->getType())) {  // index 0, the only one
      map_[&i] = v;
      return true;
    }
    map_[&i] = shuffle(v, b_.CreateZExtOrTrunc(k, b_.getInt32Ty()));
    return map_[&i] != nullptr;
  }
  if (auto* ins = llvm::dyn_cast<llvm::InsertElementInst>(&i)) {
    llvm::Value* x = get(ins->getOperand(1));
    llvm::Value* k = get(ins->getOperand(2));
    if (!x || !k) return false;
    const llvm::Value* into = ins->getOperand(0);
    if (llvm::isa<llvm::PoisonValue>(into) || llvm::isa<llvm::UndefValue>(into) || single(into->getType())) {
      map_[&i] = x;
      return true;
    }
    llvm::Value* v = get(into);
    if (!v) return false;
    map_[&i] = b_.CreateSelect(b_.CreateICmpEQ(lane64_, b_.CreateZExtOrTrunc(k, b_.getInt64Ty())), x, v);
    return true;
  }
  if (auto* sh = llvm::dyn_cast<llvm::ShuffleVectorInst>(&i)) return visitShuffle(*sh);
  if (i.isTerminator()) {
    llvm::Instruction* n = i.clone();
    for (unsigned k = 0; k < n->getNumOperands(); ++k) {
      llvm::Value* op = n->getOperand(k);
      if (auto* bb = llvm::dyn_cast<llvm::BasicBlock>(op)) {
        n->setOperand(k, blocks_.at(bb));
      } else {
        if (op->getType()->isVectorTy()) return fail("a branch on a vector");
        llvm::Value* m = get(op);
        if (!m) return false;
        n->setOperand(k, m);
      }
    }
    b_.Insert(n);
    return true;
  }
  // Elementwise: binary, unary, compare, cast, select, freeze.
  std::vector<llvm::Value*> ops;
  for (const llvm::Value* op : i.operands()) {
    llvm::Value* m = get(op);
    if (!m) return false;
    ops.push_back(m);
  }
  llvm::Value* r = nullptr;
  if (auto* bo = llvm::dyn_cast<llvm::BinaryOperator>(&i)) {
    r = b_.CreateBinOp(bo->getOpcode(), ops[0], ops[1], i.getName());
  } else if (auto* uo = llvm::dyn_cast<llvm::UnaryOperator>(&i)) {
    r = b_.CreateUnOp(uo->getOpcode(), ops[0], i.getName());
  } else if (auto* cmp = llvm::dyn_cast<llvm::CmpInst>(&i)) {
    r = cmp->isFPPredicate() ? b_.CreateFCmp(cmp->getPredicate(), ops[0], ops[1], i.getName())
                             : b_.CreateICmp(cmp->getPredicate(), ops[0], ops[1], i.getName());
  } else if (auto* cast = llvm::dyn_cast<llvm::CastInst>(&i)) {
    r = b_.CreateCast(cast->getOpcode(), ops[0], scalar(i.getType()), i.getName());
  } else if (llvm::isa<llvm::SelectInst>(i)) {
    r = b_.CreateSelect(ops[0], ops[1], ops[2], i.getName());
  } else if (llvm::isa<llvm::FreezeInst>(i)) {
    r = b_.CreateFreeze(ops[0], i.getName());
  } else {
    return fail(std::string("the instruction '") + i.getOpcodeName() + "'");
  }
  if (auto* ri = llvm::dyn_cast<llvm::Instruction>(r)) ri->copyIRFlags(&i);
  map_[&i] = r;
  return true;
}

}  // namespace detail

using detail::Spreader;

namespace {

// Inlines every call in `f` to a function defined in the module (Kiln's math functions).
bool inlineCalls(llvm::Function* f, std::string& why) {
  for (bool changed = true; changed;) {
    changed = false;
    for (llvm::Instruction& i : llvm::instructions(*f)) {
      auto* call = llvm::dyn_cast<llvm::CallInst>(&i);
      if (!call || !call->getCalledFunction() || call->getCalledFunction()->isDeclaration()) continue;
      llvm::InlineFunctionInfo info;
      llvm::InlineResult r = llvm::InlineFunction(*call, info);
      if (!r.isSuccess()) {
        why = std::string("cannot inline a call: ") + r.getFailureReason();
        return false;
      }
      changed = true;
      break;
    }
  }
  return true;
}

}  // namespace

llvm::Function* spreadLanesOverThreads(llvm::Function* program, int64_t w, std::string& why) {
  if (w < 1 || w > 32 || (w & (w - 1)) != 0) {
    why = "W = " + std::to_string(w) + " is not a power of two up to 32";
    return nullptr;
  }
  if (!inlineCalls(program, why)) return nullptr;
  Spreader s(program, w);
  llvm::Function* out = s.run(why);
  if (!out) return nullptr;
  out->takeName(program);
  program->eraseFromParent();
  return out;
}

}  // namespace kiln::codegen

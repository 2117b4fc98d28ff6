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
#include "codegen/gpu_threads.h"

#include <llvm/ADT/PostOrderIterator.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/GetElementPtrTypeIterator.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/Module.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <vector>

namespace kiln::codegen {
namespace {

// A pointer into a private array: the array's per-thread slots and a byte offset into the
// original (W-lane) array; `aligned`: the offset is a multiple of W elements of 4 bytes.
struct PrivatePtr {
  llvm::AllocaInst* slots = nullptr;
  llvm::Value* offset = nullptr;  // i64 bytes
  bool aligned = true;
};

class Spreader {
 public:
  Spreader(llvm::Function* src, int64_t w)
      : src_(src), w_(w), m_(*src->getParent()), c_(m_.getContext()), dl_(m_.getDataLayout()), b_(c_) {}

  llvm::Function* run(std::string& why) {
    dst_ = llvm::Function::Create(src_->getFunctionType(), llvm::Function::InternalLinkage,
                                  src_->getName() + ".threads", m_);
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

 private:
  llvm::Function* src_;
  int64_t w_;
  llvm::Module& m_;
  llvm::LLVMContext& c_;
  const llvm::DataLayout& dl_;
  llvm::IRBuilder<> b_;
  llvm::Function* dst_ = nullptr;
  std::map<const llvm::Value*, llvm::Value*> map_;
  std::map<const llvm::BasicBlock*, llvm::BasicBlock*> blocks_;
  std::map<const llvm::Value*, PrivatePtr> private_;
  std::vector<std::pair<llvm::PHINode*, const llvm::PHINode*>> phis_;
  std::string fail_;
  llvm::Value* lane_ = nullptr;     // i32: lane in the segment
  llvm::Value* lane64_ = nullptr;   // i64
  llvm::Value* members_ = nullptr;  // i32: the segment's bits in the warp
  llvm::Value* dummy_ = nullptr;    // a private word for masked-off lanes
  llvm::BasicBlock* entry_ = nullptr;

  bool lanes(const llvm::Type* t) const {
    const auto* v = llvm::dyn_cast<llvm::FixedVectorType>(t);
    return v && static_cast<int64_t>(v->getNumElements()) == w_;
  }
  // A one-element vector (W > 1): one value, the same in every thread, like a scalar.
  bool single(const llvm::Type* t) const {
    const auto* v = llvm::dyn_cast<llvm::FixedVectorType>(t);
    return v && v->getNumElements() == 1 && w_ > 1;
  }
  bool otherVector(const llvm::Type* t) const { return t->isVectorTy() && !lanes(t) && !single(t); }
  llvm::Type* scalar(llvm::Type* t) const { return t->isVectorTy() ? t->getScalarType() : t; }
  bool fail(const std::string& why) {
    if (fail_.empty()) fail_ = why;
    return false;
  }

  void prelude() {
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

  // The shuffle's packed operand c for a segment of W lanes (PTX shfl.sync).
  llvm::Value* clampOperand() { return b_.getInt32(static_cast<uint32_t>(((32 - w_) << 8) | 0x1f)); }

  // Value `v` (scalar, uniform or not) of lane `from` (i32, in the segment) to every lane.
  llvm::Value* shuffle(llvm::Value* v, llvm::Value* from) {
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

  // A per-lane table of constants (W entries) read at this thread's lane.
  llvm::Value* laneTable(llvm::Type* t, const std::vector<llvm::Constant*>& values) {
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

  llvm::Value* get(const llvm::Value* v) {
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

  std::optional<PrivatePtr> privatePtr(const llvm::Value* p) {
    auto it = private_.find(p);
    if (it == private_.end()) return std::nullopt;
    return it->second;
  }

  // The thread's slot address for byte offset `offset` (a multiple of 4) of a private array.
  llvm::Value* slotAddress(const PrivatePtr& p, llvm::Value* elementSlot) {
    return b_.CreateInBoundsGEP(b_.getInt32Ty(), p.slots, elementSlot);
  }

  void syncSegment() { b_.CreateIntrinsic(b_.getVoidTy(), llvm::Intrinsic::nvvm_bar_warp_sync, {members_}); }

  bool visit(llvm::Instruction& i) {
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

  bool visitAlloca(llvm::AllocaInst& a) {
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

  bool visitGep(llvm::GetElementPtrInst& g) {
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

  // Word `offset / 4` of a private array: this thread's slot index (i64) and owning lane (i32).
  std::pair<llvm::Value*, llvm::Value*> privateWord(const PrivatePtr& p) {
    llvm::Value* word = b_.CreateLShr(p.offset, 2);
    llvm::Value* slot = b_.CreateUDiv(word, b_.getInt64(w_));
    llvm::Value* owner = b_.CreateTrunc(b_.CreateURem(word, b_.getInt64(w_)), b_.getInt32Ty());
    return {slot, owner};
  }

  bool fourBytes(const llvm::Type* t) const { return t->isFloatTy() || t->isIntegerTy(32); }

  bool visitLoad(llvm::LoadInst& l) {
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

  bool visitStore(llvm::StoreInst& s) {
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

  bool visitShuffle(llvm::ShuffleVectorInst& sh) {
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

  // Lanes 0..W-1 of `v` folded in order by `op`, from `start` (or from lane 0).
  llvm::Value* foldLanes(llvm::Value* v, llvm::Value* start,
                         const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& op) {
    llvm::Value* acc = start;
    for (int64_t l = 0; l < w_; ++l) {
      llvm::Value* x = shuffle(v, b_.getInt32(static_cast<uint32_t>(l)));
      if (!x) return nullptr;
      acc = acc ? op(acc, x) : x;
    }
    return acc;
  }

  bool visitIntrinsic(llvm::IntrinsicInst& call) {
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
        llvm::Value* ballot =
            b_.CreateIntrinsic(b_.getInt32Ty(), llvm::Intrinsic::nvvm_vote_ballot_sync, {members_, v});
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
};

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

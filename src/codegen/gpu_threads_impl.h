// Private to gpu_threads.cpp and gpu_threads_rules.cpp: the Spreader class, split by idea across the two files.
#pragma once

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

#include "codegen/gpu_threads.h"

namespace kiln::codegen::detail {

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

  llvm::Function* run(std::string& why);

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

  bool lanes(const llvm::Type* t) const;
  // A one-element vector (W > 1): one value, the same in every thread, like a scalar.
  bool single(const llvm::Type* t) const;
  bool otherVector(const llvm::Type* t) const { return t->isVectorTy() && !lanes(t) && !single(t); }
  llvm::Type* scalar(llvm::Type* t) const { return t->isVectorTy() ? t->getScalarType() : t; }
  bool fail(const std::string& why);

  void prelude();

  // The shuffle's packed operand c for a segment of W lanes (PTX shfl.sync).
  llvm::Value* clampOperand() { return b_.getInt32(static_cast<uint32_t>(((32 - w_) << 8) | 0x1f)); }

  // Value `v` (scalar, uniform or not) of lane `from` (i32, in the segment) to every lane.
  llvm::Value* shuffle(llvm::Value* v, llvm::Value* from);

  // A per-lane table of constants (W entries) read at this thread's lane.
  llvm::Value* laneTable(llvm::Type* t, const std::vector<llvm::Constant*>& values);

  llvm::Value* get(const llvm::Value* v);

  std::optional<PrivatePtr> privatePtr(const llvm::Value* p);

  // The thread's slot address for byte offset `offset` (a multiple of 4) of a private array.
  llvm::Value* slotAddress(const PrivatePtr& p, llvm::Value* elementSlot);

  void syncSegment() { b_.CreateIntrinsic(b_.getVoidTy(), llvm::Intrinsic::nvvm_bar_warp_sync, {members_}); }

  bool visit(llvm::Instruction& i);

  bool visitAlloca(llvm::AllocaInst& a);

  bool visitGep(llvm::GetElementPtrInst& g);

  // Word `offset / 4` of a private array: this thread's slot index (i64) and owning lane (i32).
  std::pair<llvm::Value*, llvm::Value*> privateWord(const PrivatePtr& p);

  bool fourBytes(const llvm::Type* t) const { return t->isFloatTy() || t->isIntegerTy(32); }

  bool visitLoad(llvm::LoadInst& l);

  bool visitStore(llvm::StoreInst& s);

  bool visitShuffle(llvm::ShuffleVectorInst& sh);

  // Lanes 0..W-1 of `v` folded in order by `op`, from `start` (or from lane 0).
  llvm::Value* foldLanes(llvm::Value* v, llvm::Value* start,
                         const std::function<llvm::Value*(llvm::Value*, llvm::Value*)>& op);

  bool visitIntrinsic(llvm::IntrinsicInst& call);
};

}  // namespace kiln::codegen::detail

#include "codegen/loops.h"

#include <llvm/IR/Metadata.h>

#include "codegen/lower.h"

namespace kiln::codegen {

Ix IndexMath::add(Ix a, Ix b) const {
  if (a.isConst() && b.isConst()) return {nullptr, a.c + b.c};
  if (a.isConst() && a.c == 0) return b;
  if (b.isConst() && b.c == 0) return a;
  return {b_.CreateAdd(value(a), value(b)), 0};
}

Ix IndexMath::mul(Ix a, int64_t c) const {
  if (a.isConst()) return {nullptr, a.c * c};
  if (c == 1) return a;
  if (c == 0) return {nullptr, 0};
  return {b_.CreateMul(a.v, b_.getInt64(c)), 0};
}

Ix IndexMath::div(Ix a, int64_t c) const {
  if (a.isConst()) return {nullptr, a.c / c};
  if (c == 1) return a;
  return {b_.CreateUDiv(a.v, b_.getInt64(c)), 0};
}

Ix IndexMath::rem(Ix a, int64_t c) const {
  if (a.isConst()) return {nullptr, a.c % c};
  if (c == 1) return {nullptr, 0};
  return {b_.CreateURem(a.v, b_.getInt64(c)), 0};
}

std::vector<llvm::Value*> buildLoop(llvm::IRBuilder<>& b, llvm::Function* f, llvm::Value* start, int64_t step,
                                    const char* counter_name, const std::vector<llvm::Value*>& init,
                                    const LoopCondition& condition, const LoopBody& body, bool noUnroll) {
  llvm::LLVMContext& c = f->getContext();
  llvm::BasicBlock* pre = b.GetInsertBlock();
  llvm::BasicBlock* header = llvm::BasicBlock::Create(c, kLoopHeaderName, f);
  llvm::BasicBlock* bodyBB = llvm::BasicBlock::Create(c, "kiln.body", f);
  llvm::BasicBlock* exit = llvm::BasicBlock::Create(c, "kiln.exit", f);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode* counter = b.CreatePHI(b.getInt64Ty(), 2, counter_name);
  counter->addIncoming(start, pre);
  std::vector<llvm::PHINode*> phis;
  std::vector<llvm::Value*> cur;
  for (llvm::Value* v : init) {
    phis.push_back(b.CreatePHI(v->getType(), 2));
    phis.back()->addIncoming(v, pre);
    cur.push_back(phis.back());
  }
  b.CreateCondBr(condition(counter), bodyBB, exit);
  b.SetInsertPoint(bodyBB);
  std::vector<llvm::Value*> next = body(counter, cur);
  llvm::Value* counterNext = b.CreateAdd(counter, b.getInt64(step));
  llvm::BasicBlock* latch = b.GetInsertBlock();
  llvm::BranchInst* back = b.CreateBr(header);
  if (noUnroll) {
    llvm::MDNode* self = llvm::MDNode::getTemporary(c, {}).release();
    llvm::MDNode* disable = llvm::MDNode::get(c, {llvm::MDString::get(c, "llvm.loop.unroll.disable")});
    llvm::MDNode* id = llvm::MDNode::get(c, {self, disable});
    id->replaceOperandWith(0, id);
    llvm::MDNode::deleteTemporary(self);
    back->setMetadata(llvm::LLVMContext::MD_loop, id);
  }
  counter->addIncoming(counterNext, latch);
  for (size_t i = 0; i < phis.size(); ++i) phis[i]->addIncoming(next[i], latch);
  b.SetInsertPoint(exit);
  return cur;
}

std::vector<llvm::Value*> buildLoop(llvm::IRBuilder<>& b, llvm::Function* f, llvm::Value* lo, llvm::Value* hi,
                                    int64_t step, const std::vector<llvm::Value*>& init, const LoopBody& body,
                                    bool noUnroll) {
  return buildLoop(
      b, f, lo, step, "iv", init, [&](llvm::Value* iv) { return b.CreateICmpSLT(iv, hi); }, body, noUnroll);
}

}  // namespace kiln::codegen

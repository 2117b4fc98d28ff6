// Internal to the lowering: emits one packet body (W programs as SIMD lanes) from the IR and
// the plan. Every tile element is an LLVM vector over the lanes of the packet.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <vector>

#include "codegen/elementwise.h"
#include "codegen/loops.h"
#include "ir/ir.h"
#include "plan/plan.h"

namespace kiln::codegen {

class Emitter {
 public:
  // fullPacket: emit the clone specialised to all W lanes active.
  Emitter(const ir::Kernel& kernel, const plan::Plan& plan, llvm::Module& module, bool fullPacket);

  // Emits `void NAME(ptr params, i64 first_program)`. Returns nullptr and sets `error` on failure.
  llvm::Function* emitPacket(const std::string& name, std::string& error);

 private:
  using Gen = std::function<llvm::Value*(Ix)>;
  using GroupGen = std::function<std::vector<llvm::Value*>(Ix first)>;

  // --- types and constants
  llvm::Type* scalarTy(ir::Elem e);
  llvm::VectorType* vecTy(ir::Elem e);
  llvm::Value* splat(llvm::Value* scalar);
  llvm::Value* splatI64(int64_t v);
  llvm::Value* constVec(ir::Elem e, double f, int64_t i);
  llvm::Value* zeroVec(ir::Elem e);
  llvm::Value* allTrue();

  // --- index arithmetic (uniform scalars)
  Ix add(Ix a, Ix b);
  Ix mul(Ix a, int64_t c);
  llvm::Value* toValue(Ix a);
  std::vector<Ix> coords(const ir::Type& t, Ix linear);
  Ix linear(const ir::Type& t, const std::vector<Ix>& coords);
  // Coordinate of `v`'s dim `name` taken from coordinates of type `from`.
  static int dimIndex(const ir::Type& t, const std::string& name) { return t.findDim(name); }

  // --- loops
  std::vector<llvm::Value*> loop(llvm::Value* lo, llvm::Value* hi, int64_t step, const std::vector<llvm::Value*>& init,
                                 const LoopBody& body);
  void loopFor(int64_t n, const std::function<void(llvm::Value* iv)>& body);

  // --- values
  llvm::Value* read(const ir::Value* v, Ix idx);
  llvm::Value* storagePtr(const ir::Value* v, Ix idx);
  void define(const ir::Value* v, const Gen& gen);
  void defineGroups(const ir::Value* v, int64_t group, const GroupGen& gen);
  llvm::Value* uniformScalar(const ir::Index& ix);  // i64 scalar of a uniform index
  llvm::Value* laneIndex(const ir::Index& ix);      // i64 vector of any index

  // --- ops
  void emitRegion(const ir::Region* r);
  void emitOp(const ir::Op* op);
  llvm::Value* genElement(const ir::Op* op, Ix idx);
  llvm::Value* genUnary(ir::OpKind k, llvm::Value* x, ir::Elem e);
  llvm::Value* genBinary(ir::OpKind k, llvm::Value* a, llvm::Value* b, ir::Elem e);
  llvm::Value* genCmp(ir::CmpPred p, llvm::Value* a, llvm::Value* b, ir::Elem e);
  llvm::Value* genCast(llvm::Value* x, ir::Elem from, ir::Elem to);
  llvm::Value* combine(ir::ReduceKind k, llvm::Value* a, llvm::Value* b, ir::Elem e);
  llvm::Value* genReduce(const ir::Op* op, Ix out);
  std::vector<llvm::Value*> genMmaGroup(const ir::Op* op, Ix first, int64_t group);
  llvm::Value* genExtract(const ir::Op* op);
  llvm::Value* viewAccess(const ir::Op* op, const std::vector<Ix>& tileCoords, const ir::Type& tileType,
                          llvm::Value*& inBounds);
  void emitStore(const ir::Op* op);
  void emitLoop(const ir::Op* op);
  void copyInto(const ir::Value* dst, const ir::Value* src, llvm::Value* laneSelect);

  const ir::Kernel& k_;
  const plan::Plan& p_;
  llvm::Module& m_;
  llvm::LLVMContext& c_;
  llvm::IRBuilder<> b_;
  Elementwise ew_{b_, m_};
  IndexMath ix_{b_};
  unsigned w_;
  bool full_;
  llvm::Function* f_ = nullptr;
  llvm::Value* mask_ = nullptr;  // active lanes <W x i1>
  llvm::Value* laneIota_ = nullptr;
  std::vector<llvm::Value*> base_;              // by param index: view base pointer
  std::vector<std::vector<llvm::Value*>> ssa_;  // by value id
  std::vector<llvm::Value*> slots_;             // by storage slot: alloca
  std::string error_;
};

}  // namespace kiln::codegen

// Internal to the lowering: emits one packet body (W programs as SIMD lanes) from the IR and
// the plan. Every tile element is an LLVM vector over the lanes of the packet.
#pragma once

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <vector>

#include "codegen/elementwise.h"
#include "codegen/loops.h"
#include "codegen/program_emitter.h"
#include "ir/ir.h"
#include "plan/plan.h"

namespace kiln::codegen {

class PacketEmitter final : public ProgramEmitter {
 public:
  // fullPacket: emit the clone specialised to all W lanes active.
  PacketEmitter(const ir::Kernel& kernel, const plan::Plan& plan, llvm::Module& module, bool fullPacket);

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

  // --- index arithmetic (uniform scalars; add, mul and val are ProgramEmitter's)
  std::vector<Ix> coords(const ir::Type& t, Ix linear);
  Ix linear(const ir::Type& t, const std::vector<Ix>& coords);
  // Coordinate of `v`'s dim `name` taken from coordinates of type `from`.
  static int dimIndex(const ir::Type& t, const std::string& name) { return t.findDim(name); }

  // --- loops (loop is ProgramEmitter's)
  void loopFor(int64_t n, const std::function<void(llvm::Value* iv)>& body);

  // --- values
  llvm::Value* read(const ir::Value* v, Ix idx);
  llvm::Value* storagePtr(const ir::Value* v, Ix idx);
  void define(const ir::Value* v, const Gen& gen);
  void defineGroups(const ir::Value* v, int64_t group, const GroupGen& gen);
  llvm::Value* uniformScalar(const ir::Index& ix);  // i64 scalar of a uniform index
  llvm::Value* laneIndex(const ir::Index& ix);      // i64 vector of any index

  // --- ops
  void emitOp(const ir::Op* op) override;
  llvm::Value* genElement(const ir::Op* op, Ix idx);
  llvm::Value* genReduce(const ir::Op* op, Ix out);
  std::vector<llvm::Value*> genMmaGroup(const ir::Op* op, Ix first, int64_t group);
  llvm::Value* genExtract(const ir::Op* op);
  llvm::Value* viewAccess(const ir::Op* op, const std::vector<Ix>& tileCoords, const ir::Type& tileType,
                          llvm::Value*& inBounds);
  void emitStore(const ir::Op* op);
  void emitLoop(const ir::Op* op);
  void copyInto(const ir::Value* dst, const ir::Value* src, llvm::Value* laneSelect);

  bool full_;
  llvm::Value* mask_ = nullptr;  // active lanes <W x i1>
  llvm::Value* laneIota_ = nullptr;
  std::vector<std::vector<llvm::Value*>> ssa_;  // by value id
};

}  // namespace kiln::codegen

// The packets realization (local_lanes=1), its core: types, index arithmetic, loops, and value representations (SSA
// elements, snapshots, recipes, splats) as the plan assigned them.
#include "codegen/packets/packet_emitter.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

#include "codegen/lower.h"

namespace kiln::codegen {

using ir::Elem;

PacketEmitter::PacketEmitter(const ir::Kernel& kernel, const plan::Plan& plan, llvm::Module& module, bool fullPacket)
    : ProgramEmitter(kernel, plan, module, /*noUnrollLoops=*/false), full_(fullPacket) {}

llvm::Type* PacketEmitter::scalarTy(Elem e) {
  switch (e) {
    case Elem::I64: return b_.getInt64Ty();
    case Elem::I1: return b_.getInt1Ty();
    default: return b_.getFloatTy();
  }
}

llvm::VectorType* PacketEmitter::vecTy(Elem e) {
  return llvm::FixedVectorType::get(scalarTy(e), w_);
}

llvm::Value* PacketEmitter::splat(llvm::Value* scalar) {
  return b_.CreateVectorSplat(w_, scalar);
}

llvm::Value* PacketEmitter::splatI64(int64_t v) {
  return splat(b_.getInt64(v));
}

llvm::Value* PacketEmitter::constVec(Elem e, double f, int64_t i) {
  switch (e) {
    case Elem::I64: return splat(b_.getInt64(i));
    case Elem::I1: return splat(b_.getInt1(i != 0));
    default: return splat(llvm::ConstantFP::get(b_.getFloatTy(), static_cast<float>(f)));
  }
}

llvm::Value* PacketEmitter::zeroVec(Elem e) {
  return llvm::Constant::getNullValue(vecTy(e));
}

llvm::Value* PacketEmitter::allTrue() {
  return llvm::Constant::getAllOnesValue(vecTy(Elem::I1));
}

// ---------------------------------------------------------------- index arithmetic

std::vector<Ix> PacketEmitter::coords(const ir::Type& t, Ix lin) {
  std::vector<Ix> out(t.dims.size());
  for (int i = static_cast<int>(t.dims.size()) - 1; i >= 0; --i) {
    int64_t ext = t.dims[i].extent;
    if (ext == 1) {
      out[i] = Ix{nullptr, 0};
      continue;
    }
    bool outermost = true;
    for (int j = 0; j < i; ++j) outermost = outermost && t.dims[j].extent == 1;
    if (lin.isConst()) {
      out[i] = Ix{nullptr, ext ? lin.c % ext : 0};
      lin.c = ext ? lin.c / ext : 0;
    } else if (outermost) {
      out[i] = lin;  // the remaining index is already below this extent
      lin = Ix{nullptr, 0};
    } else {
      out[i] = Ix{b_.CreateURem(lin.v, b_.getInt64(ext)), 0};
      lin = Ix{b_.CreateUDiv(lin.v, b_.getInt64(ext)), 0};
    }
  }
  return out;
}

Ix PacketEmitter::linear(const ir::Type& t, const std::vector<Ix>& cs) {
  Ix acc{nullptr, 0};
  int64_t stride = 1;
  for (int i = static_cast<int>(t.dims.size()) - 1; i >= 0; --i) {
    if (t.dims[i].extent != 1) acc = add(acc, mul(cs[i], stride));
    stride *= t.dims[i].extent;
  }
  return acc;
}

// ---------------------------------------------------------------- loops

void PacketEmitter::loopFor(int64_t n, const std::function<void(llvm::Value* iv)>& body) {
  loop(b_.getInt64(0), b_.getInt64(n), 1, {}, [&](llvm::Value* iv, const std::vector<llvm::Value*>&) {
    body(iv);
    return std::vector<llvm::Value*>{};
  });
}

// ---------------------------------------------------------------- values

llvm::Value* PacketEmitter::storagePtr(const ir::Value* v, Ix idx) {
  int slot = p_.storage_of[v->id];
  llvm::Value* base = slots_[slot];
  return b_.CreateInBoundsGEP(vecTy(v->type.elem), base, val(idx));
}

llvm::Value* PacketEmitter::read(const ir::Value* v, Ix idx) {
  if (v->type.isScalar()) idx = Ix{nullptr, 0};
  switch (p_.repOf(v)) {
    case plan::Rep::Splat: return ssa_[v->id][0];
    case plan::Rep::Snapshot: return b_.CreateLoad(vecTy(v->type.elem), storagePtr(v, idx));
    case plan::Rep::Recipe: return genElement(v->def, idx);
    case plan::Rep::SSA: break;
  }
  const std::vector<llvm::Value*>& elems = ssa_[v->id];
  if (idx.isConst()) return elems[idx.c];
  // The seed's `_read`: a runtime index into an SSA tile is a SELECT chain over its elements.
  llvm::Value* r = elems[0];
  for (size_t e = 1; e < elems.size(); ++e)
    r = b_.CreateSelect(b_.CreateICmpEQ(idx.v, b_.getInt64(static_cast<int64_t>(e))), elems[e], r);
  return r;
}

void PacketEmitter::define(const ir::Value* v, const Gen& gen) {
  int64_t n = v->type.numElements();
  switch (p_.repOf(v)) {
    case plan::Rep::Recipe: return;
    case plan::Rep::Splat: ssa_[v->id] = {gen(Ix{nullptr, 0})}; return;
    case plan::Rep::SSA: {
      std::vector<llvm::Value*> elems;
      for (int64_t e = 0; e < n; ++e) elems.push_back(gen(Ix{nullptr, e}));
      ssa_[v->id] = std::move(elems);
      return;
    }
    case plan::Rep::Snapshot:
      if (n == 0) return;
      loopFor(n, [&](llvm::Value* iv) { b_.CreateStore(gen(Ix{iv, 0}), storagePtr(v, Ix{iv, 0})); });
      return;
  }
}

void PacketEmitter::defineGroups(const ir::Value* v, int64_t group, const GroupGen& gen) {
  int64_t n = v->type.numElements();
  if (p_.repOf(v) == plan::Rep::Snapshot) {
    if (n == 0) return;
    loopFor(n / group, [&](llvm::Value* g) {
      Ix first = mul(Ix{g, 0}, group);
      std::vector<llvm::Value*> vals = gen(first);
      for (int64_t r = 0; r < group; ++r) b_.CreateStore(vals[r], storagePtr(v, add(first, Ix{nullptr, r})));
    });
    return;
  }
  std::vector<llvm::Value*> elems(n);
  for (int64_t g = 0; g < n / group; ++g) {
    std::vector<llvm::Value*> vals = gen(Ix{nullptr, g * group});
    for (int64_t r = 0; r < group; ++r) elems[g * group + r] = vals[r];
  }
  ssa_[v->id] = std::move(elems);
}

llvm::Value* PacketEmitter::laneIndex(const ir::Index& ix) {
  if (ix.isConstant()) return splatI64(ix.constant);
  return read(ix.value, Ix{nullptr, 0});
}

llvm::Value* PacketEmitter::uniformScalar(const ir::Index& ix) {
  if (ix.isConstant()) return b_.getInt64(ix.constant);
  return b_.CreateExtractElement(read(ix.value, Ix{nullptr, 0}), uint64_t{0});
}

}  // namespace kiln::codegen

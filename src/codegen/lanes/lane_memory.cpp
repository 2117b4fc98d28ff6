// The lane realization's memory: vector (or gathered) loads and stores with masks from the
// tile's tail and the view's edges, and the per-tile in-bounds test.
#include "codegen/lanes/lane_emitter.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Intrinsics.h>

namespace kiln::codegen {

using ir::Elem;
using ir::Op;
using ir::OpKind;
using plan::LaneRep;

// ---------------------------------------------------------------- memory

// Pointer to the view element at tile coords `cs` (lane coord = laneCoord), and whether every
// coordinate of the non-lane view dims is inside the view.
llvm::Value* LaneEmitter::elementPointer(const Op* op, const ir::Type& tt, const Coords& cs, Ix laneCoord,
                                         llvm::Value*& inBounds) {
  const ir::Value* view = op->operands[0];
  const auto& vd = view->type.dims;
  const std::string lane = tt.isScalar() ? std::string() : tt.dims.back().name;
  llvm::Value* offset = b_.getInt64(0);
  inBounds = b_.getTrue();
  int64_t stride = 1;
  for (int k = static_cast<int>(vd.size()) - 1; k >= 0; --k) {
    llvm::Value* c = indexValue(op->indices[k]);
    const ir::Dim& a = op->access[k];
    if (!a.name.empty()) {
      Ix t = a.name == lane ? laneCoord : cs[tt.findDim(a.name)];
      if (!(t.isConst() && t.c == 0)) c = b_.CreateAdd(c, val(t));
    }
    if (a.name.empty() || a.name != lane)
      inBounds = b_.CreateAnd(inBounds, b_.CreateICmpULT(c, b_.getInt64(vd[k].extent)));
    offset = b_.CreateAdd(offset, stride == 1 ? c : b_.CreateMul(c, b_.getInt64(stride)));
    stride *= vd[k].extent;
  }
  return b_.CreateGEP(memType(view), base_[view->index], offset);
}

namespace {
// The view dim of the tile's lane dim, its extent and element stride.
struct LaneAxis {
  int k = -1;
  int64_t extent = 0, stride = 0;
};
LaneAxis laneAxis(const Op* op, const std::string& lane) {
  const auto& vd = op->operands[0]->type.dims;
  LaneAxis a;
  int64_t stride = 1;
  for (int k = static_cast<int>(vd.size()) - 1; k >= 0; --k) {
    if (op->access[k].name == lane) a = {k, vd[k].extent, stride};
    stride *= vd[k].extent;
  }
  return a;
}
}  // namespace

llvm::Value* LaneEmitter::loadElement(const Op* op, const Coords& cs) {
  const ir::Type& rt = op->results[0]->type;
  const ir::Value* view = op->operands[0];
  llvm::Type* mt = memType(view);
  llvm::Value* inb = nullptr;
  Ix lane = rt.isScalar() ? Ix{nullptr, 0} : cs.back();
  llvm::Value* ptr = elementPointer(op, rt, cs, lane, inb);
  if (!rt.isScalar()) {
    const ir::Dim& ld = rt.dims.back();
    const auto& vd = op->operands[0]->type.dims;
    for (size_t k = 0; k < op->access.size(); ++k)
      if (op->access[k].name == ld.name) {
        llvm::Value* pos = b_.CreateAdd(indexValue(op->indices[k]), val(lane));
        inb = b_.CreateAnd(inb, b_.CreateICmpULT(pos, b_.getInt64(vd[k].extent)));
      }
  }
  if (isInside(op)) return widenLoaded(view, b_.CreateLoad(mt, ptr));
  return loadOrFill(op, ptr, inb);
}

llvm::Value* LaneEmitter::tileInside(const Op* op) {
  const auto& vd = op->operands[0]->type.dims;
  llvm::Value* in = b_.getTrue();
  for (size_t k = 0; k < vd.size(); ++k) {
    const int64_t ext = op->access[k].name.empty() ? 1 : op->access[k].extent;
    if (ext > vd[k].extent) return b_.getFalse();
    // origin in [0, view extent - tile extent]: unsigned compare catches negatives too.
    in = b_.CreateAnd(in, b_.CreateICmpULE(indexValue(op->indices[k]), b_.getInt64(vd[k].extent - ext)));
  }
  return in;
}

llvm::Value* LaneEmitter::loadVector(const Op* op, Ix row, Ix chunk) {
  const ir::Value* view = op->operands[0];
  return widenLoaded(view, loadMemoryVector(op, row, chunk));
}

// The plan's prefetch (LanePrefetch): a vector that starts a cache line asks for the line of
// the next tile; a prefetch never faults, past the view's end it is only wasted.
void LaneEmitter::prefetchAhead(const Op* op, llvm::Value* ptr, Ix first) {
  auto pf = lp_.prefetch.find(op);
  if (pf == lp_.prefetch.end()) return;
  const ir::Value* view = op->operands[0];
  const int64_t lineElements = 64 / ir::elemBytes(view->type.elem);
  if (first.isConst() && first.c % lineElements != 0) return;
  llvm::Value* ahead = b_.CreateGEP(memType(view), ptr, b_.getInt64(pf->second.elements));
  b_.CreateIntrinsic(llvm::Intrinsic::prefetch, {ahead->getType()},
                     {ahead, b_.getInt32(0), b_.getInt32(2), b_.getInt32(1)});
}

// Inside the view (the tile's inside copy), a whole chunk of a 16-bit tile as W/2 32-bit words:
// one plain load.
llvm::Value* LaneEmitter::loadWords(const Op* op, Ix row, Ix chunk) {
  const ir::Type& rt = op->results[0]->type;
  Ix first = mul(chunk, w_);
  llvm::Value* inb = nullptr;
  llvm::Value* ptr = elementPointer(op, rt, rowCoords(rt, row), first, inb);
  prefetchAhead(op, ptr, first);
  return b_.CreateAlignedLoad(llvm::FixedVectorType::get(b_.getInt32Ty(), w_ / 2), ptr, memAlign(op->operands[0]));
}

llvm::Value* LaneEmitter::loadMemoryVector(const Op* op, Ix row, Ix chunk) {
  const ir::Type& rt = op->results[0]->type;
  const ir::Value* view = op->operands[0];
  llvm::Type* mt = memType(view);
  llvm::VectorType* vt = llvm::FixedVectorType::get(mt, w_);
  const llvm::Align align = memAlign(view);
  llvm::Constant* fill = memFill(op);
  const std::string& lane = rt.dims.back().name;
  const int64_t laneExt = rt.dims.back().extent;
  LaneAxis ax = laneAxis(op, lane);
  llvm::Value* origin = indexValue(op->indices[ax.k]);
  Coords cs = rowCoords(rt, row);
  Ix first = mul(chunk, w_);
  llvm::Value* inb = nullptr;
  llvm::Value* ptr = elementPointer(op, rt, cs, first, inb);
  prefetchAhead(op, ptr, first);
  // Lanes inside the tile and inside the view along the lane dim.
  llvm::Value* lanes = b_.CreateAdd(splat(val(first)), laneIota());
  llvm::Value* mask = b_.CreateICmpULT(lanes, splat(b_.getInt64(laneExt)));
  llvm::Value* viewPos = b_.CreateAdd(lanes, splat(origin));
  mask = b_.CreateAnd(mask, b_.CreateICmpULT(viewPos, splat(b_.getInt64(ax.extent))));
  mask = b_.CreateAnd(mask, splat(inb));
  // A vector wholly outside the view (a padding row of the tile) reads from the view's first
  // element instead: its mask is empty, but a masked load whose masked-off lanes touch an
  // unmapped page costs a microcode assist of ~1000 cycles on current x86 cores.
  if (!isInside(op)) ptr = b_.CreateSelect(b_.CreateOrReduce(mask), ptr, base_[op->operands[0]->index]);
  if (isInside(op)) {
    // Inside the view: only the tile's own tail chunk is masked.
    int64_t valid = laneExt - (chunk.isConst() ? chunk.c * w_ : 0);
    if (chunk.isConst() && valid >= w_) {
      if (lp_.access.at(op) == plan::LaneAccess::Vector) return b_.CreateAlignedLoad(vt, ptr, align);
    } else if (chunk.isConst()) {
      mask = laneMask(valid);
    } else {
      mask = b_.CreateICmpULT(lanes, splat(b_.getInt64(laneExt)));
    }
  }
  if (lp_.access.at(op) == plan::LaneAccess::Vector) {
    // A vector wider than a register (16 lanes on AVX2) is loaded as register-wide pieces,
    // each piece's mask passed through an empty inline asm: when LLVM 22 could prove one half
    // of a split 16-lane masked load all false (here: a view of extent 1 along the lanes), its
    // AVX2 lowering replaced that half by an unmasked load (wrong bits and an out-of-bounds
    // read; tests/fuzz/masked_load_half_empty_avx2.tile). Behind the asm a mask is opaque, and
    // vmaskmovps with an all-false mask reads nothing.
    // Register lanes count 4-byte elements: a register holds half as many 8-byte ones.
    const int64_t r = lp_.register_lanes * 4 / ir::elemBytes(view->type.elem);
    if (static_cast<int64_t>(w_) <= r) return b_.CreateMaskedLoad(vt, ptr, align, mask, splat(fill));
    llvm::Type* pieceTy = llvm::FixedVectorType::get(mt, static_cast<unsigned>(r));
    llvm::Value* fillPiece = b_.CreateVectorSplat(static_cast<unsigned>(r), fill);
    std::vector<llvm::Value*> pieces;
    for (int64_t at = 0; at < static_cast<int64_t>(w_); at += r) {
      std::vector<int> lanesOf;
      for (int64_t l = 0; l < r; ++l) lanesOf.push_back(static_cast<int>(at + l));
      llvm::Value* m = b_.CreateShuffleVector(mask, lanesOf);
      llvm::Type* intsTy = llvm::FixedVectorType::get(b_.getInt32Ty(), static_cast<unsigned>(r));
      llvm::InlineAsm* opaque =
          llvm::InlineAsm::get(llvm::FunctionType::get(intsTy, {intsTy}, false), "", "=x,0", /*hasSideEffects=*/false);
      m = b_.CreateICmpNE(b_.CreateCall(opaque, {b_.CreateSExt(m, intsTy)}), llvm::Constant::getNullValue(intsTy));
      llvm::Value* p = b_.CreateGEP(mt, ptr, b_.getInt64(at));
      pieces.push_back(b_.CreateMaskedLoad(pieceTy, p, align, m, fillPiece));
    }
    while (pieces.size() > 1) {
      std::vector<llvm::Value*> next;
      for (size_t i = 0; i + 1 < pieces.size(); i += 2) {
        const unsigned n = llvm::cast<llvm::FixedVectorType>(pieces[i]->getType())->getNumElements();
        std::vector<int> both;
        for (unsigned l = 0; l < 2 * n; ++l) both.push_back(static_cast<int>(l));
        next.push_back(b_.CreateShuffleVector(pieces[i], pieces[i + 1], both));
      }
      pieces = next;
    }
    return pieces[0];
  }
  llvm::Value* ptrs = b_.CreateGEP(mt, ptr, b_.CreateMul(laneIota(), splat(b_.getInt64(ax.stride))));
  return b_.CreateMaskedGather(vt, ptrs, align, mask, splat(fill));
}

void LaneEmitter::emitLoad(const Op* op) {
  const ir::Value* r = op->results[0];
  if (r->type.isScalar()) {
    scalars_[r->id] = loadElement(op, {});
    return;
  }
  // Direct: read from the view at each use (no store can intervene); otherwise a value now.
  if (lp_.layout[r->id].rep == LaneRep::Direct) return;
  define(r, [&](Ix row, Ix chunk) { return loadVector(op, row, chunk); });
}

void LaneEmitter::emitStore(const Op* op) {
  const ir::Value* t = op->operands[1];
  const ir::Type& tt = t->type;
  const ir::Value* view = op->operands[0];
  const llvm::Align align = memAlign(view);
  if (tt.isScalar()) {
    llvm::Value* inb = nullptr;
    llvm::Value* ptr = elementPointer(op, tt, {}, Ix{nullptr, 0}, inb);
    b_.CreateMaskedStore(b_.CreateVectorSplat(1, narrowStored(view, scalar(t))), ptr, align,
                         b_.CreateVectorSplat(1, inb));
    return;
  }
  const plan::Layout& l = lp_.layout[t->id];
  const std::string& lane = tt.dims.back().name;
  const int64_t laneExt = tt.dims.back().extent;
  LaneAxis ax = laneAxis(op, lane);
  llvm::Value* origin = indexValue(op->indices[ax.k]);
  bool vector = lp_.access.at(op) == plan::LaneAccess::Vector;
  forEachVector(l, [&](Ix row, Ix chunk) {
    Coords cs = rowCoords(tt, row);
    Ix first = mul(chunk, w_);
    llvm::Value* inb = nullptr;
    llvm::Value* ptr = elementPointer(op, tt, cs, first, inb);
    llvm::Value* lanes = b_.CreateAdd(splat(val(first)), laneIota());
    llvm::Value* mask = b_.CreateICmpULT(lanes, splat(b_.getInt64(laneExt)));
    mask = b_.CreateAnd(mask, b_.CreateICmpULT(b_.CreateAdd(lanes, splat(origin)), splat(b_.getInt64(ax.extent))));
    mask = b_.CreateAnd(mask, splat(inb));
    // As for loads: an empty-masked vector outside the view addresses the view's first element.
    ptr = b_.CreateSelect(b_.CreateOrReduce(mask), ptr, base_[op->operands[0]->index]);
    llvm::Value* x = narrowStored(view, vec(t, row, chunk));
    if (vector) {
      b_.CreateMaskedStore(x, ptr, align, mask);
      return;
    }
    llvm::Value* ptrs = b_.CreateGEP(memType(view), ptr, b_.CreateMul(laneIota(), splat(b_.getInt64(ax.stride))));
    b_.CreateMaskedScatter(x, ptrs, align, mask);
  });
}

}  // namespace kiln::codegen

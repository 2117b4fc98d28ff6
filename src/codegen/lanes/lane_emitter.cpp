// The lane realization's emitter: layouts, vector loads and stores, register-blocked
// outer-product mma, reductions in the IR's order, loops with carried registers or panels.
#include "codegen/lanes/lane_emitter.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

#include "codegen/lower.h"

namespace kiln::codegen {

using ir::Elem;
using ir::Op;
using ir::OpKind;
using plan::LaneRep;

namespace {
bool isElementwise(OpKind k) {
  return ir::isUnary(k) || ir::isBinary(k) || k == OpKind::Cmp || k == OpKind::Select || k == OpKind::Cast;
}
}  // namespace

LaneEmitter::LaneEmitter(const ir::Kernel& kernel, const plan::Plan& plan, llvm::Module& module)
    : k_(kernel),
      p_(plan),
      lp_(plan.lanes),
      m_(module),
      c_(module.getContext()),
      b_(module.getContext()),
      w_(static_cast<unsigned>(plan.knobs.packet_width)) {
  if (plan.knobs.fast_math) {
    llvm::FastMathFlags fmf;
    fmf.setAllowContract(true);
    fmf.setAllowReassoc(true);
    fmf.setAllowReciprocal(true);
    b_.setFastMathFlags(fmf);
  }
}

// ---------------------------------------------------------------- indices

llvm::Value* LaneEmitter::val(Ix a) {
  return ix_.value(a);
}
Ix LaneEmitter::add(Ix a, Ix b) {
  return ix_.add(a, b);
}
Ix LaneEmitter::mul(Ix a, int64_t c) {
  return ix_.mul(a, c);
}
Ix LaneEmitter::div(Ix a, int64_t c) {
  return ix_.div(a, c);
}
Ix LaneEmitter::rem(Ix a, int64_t c) {
  return ix_.rem(a, c);
}

LaneEmitter::Coords LaneEmitter::rowCoords(const ir::Type& t, Ix row) {
  Coords cs(t.dims.size(), Ix{nullptr, 0});
  for (int i = static_cast<int>(t.dims.size()) - 2; i >= 0; --i) {
    int64_t e = t.dims[i].extent;
    if (e == 1) continue;
    bool outer = true;
    for (int j = 0; j < i; ++j) outer = outer && t.dims[j].extent == 1;
    if (outer) {
      cs[i] = row;
      break;
    }
    cs[i] = rem(row, e);
    row = div(row, e);
  }
  return cs;
}

Ix LaneEmitter::rowOf(const ir::Type& t, const Coords& cs) {
  Ix r{nullptr, 0};
  int64_t stride = 1;
  for (int i = static_cast<int>(t.dims.size()) - 2; i >= 0; --i) {
    if (t.dims[i].extent != 1) r = add(r, mul(cs[i], stride));
    stride *= t.dims[i].extent;
  }
  return r;
}

LaneEmitter::Coords LaneEmitter::mapCoords(const ir::Type& to, const ir::Type& from, const Coords& cs,
                                           const Coords* extra, const ir::Type* extraType) {
  Coords out;
  for (const ir::Dim& d : to.dims) {
    int i = from.findDim(d.name);
    if (i >= 0) {
      out.push_back(cs[i]);
      continue;
    }
    int j = extraType ? extraType->findDim(d.name) : -1;
    out.push_back(j >= 0 ? (*extra)[j] : Ix{nullptr, 0});
  }
  return out;
}

// ---------------------------------------------------------------- types and loops

llvm::Type* LaneEmitter::sty(Elem e) {
  return e == Elem::I64 ? b_.getInt64Ty() : e == Elem::I1 ? b_.getInt1Ty() : b_.getFloatTy();
}
llvm::VectorType* LaneEmitter::vty(Elem e) {
  return llvm::FixedVectorType::get(sty(e), w_);
}
llvm::Value* LaneEmitter::laneIota() {
  std::vector<llvm::Constant*> l;
  for (unsigned i = 0; i < w_; ++i) l.push_back(b_.getInt64(i));
  return llvm::ConstantVector::get(l);
}
llvm::Value* LaneEmitter::laneMask(int64_t valid) {
  std::vector<llvm::Constant*> l;
  for (unsigned i = 0; i < w_; ++i) l.push_back(b_.getInt1(static_cast<int64_t>(i) < valid));
  return llvm::ConstantVector::get(l);
}

// The plan's loops (register tiles, panels): LLVM must not unroll them fully, which would
// multiply code size (and compile time) by the trip count for no gain.
std::vector<llvm::Value*> LaneEmitter::loop(llvm::Value* lo, llvm::Value* hi, int64_t step,
                                            const std::vector<llvm::Value*>& init, const LoopBody& body) {
  return buildLoop(b_, f_, lo, hi, step, init, body, /*noUnroll=*/true);
}

void LaneEmitter::forEach(int64_t n, bool runtime, const std::function<void(Ix)>& body) {
  if (n <= 0) return;
  if (!runtime) {
    for (int64_t i = 0; i < n; ++i) body(Ix{nullptr, i});
    return;
  }
  loop(b_.getInt64(0), b_.getInt64(n), 1, {}, [&](llvm::Value* iv, const std::vector<llvm::Value*>&) {
    body(Ix{iv, 0});
    return std::vector<llvm::Value*>{};
  });
}

void LaneEmitter::forEachVector(int64_t rows, int64_t chunks, bool runtime, const std::function<void(Ix, Ix)>& body) {
  if (rows <= 0 || chunks <= 0) return;
  if (!runtime) {
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < chunks; ++c) body(Ix{nullptr, r}, Ix{nullptr, c});
    return;
  }
  if (chunks <= 8) {
    forEach(rows, true, [&](Ix r) {
      for (int64_t c = 0; c < chunks; ++c) body(r, Ix{nullptr, c});
    });
    return;
  }
  forEach(rows, true, [&](Ix r) { forEach(chunks, true, [&](Ix c) { body(r, c); }); });
}

// ---------------------------------------------------------------- values

// Panels hold i1 as bytes: vectors of i1 are bit-packed in memory and not element-addressable.
llvm::Value* LaneEmitter::slotPtr(int slot, Elem e, Ix vi) {
  llvm::Type* t = e == Elem::I1 ? static_cast<llvm::Type*>(llvm::FixedVectorType::get(b_.getInt8Ty(), w_)) : vty(e);
  return b_.CreateInBoundsGEP(t, slots_[slot], val(vi));
}

Ix LaneEmitter::vindex(const ir::Value* v, Ix row, Ix chunk) {
  return add(mul(row, lp_.layout[v->id].chunks), chunk);
}

llvm::Value* LaneEmitter::vec(const ir::Value* v, Ix row, Ix chunk) {
  const plan::Layout& l = lp_.layout[v->id];
  if (l.rep == LaneRep::Recipe) return genVec(v->def, row, chunk);
  if (l.rep == LaneRep::Direct) return loadVector(v->def, row, chunk);
  return vec(v, vindex(v, row, chunk));
}

llvm::Value* LaneEmitter::vec(const ir::Value* v, Ix vi) {
  const plan::Layout& l = lp_.layout[v->id];
  if (l.rep == LaneRep::Recipe || l.rep == LaneRep::Direct) return vec(v, div(vi, l.chunks), rem(vi, l.chunks));
  Elem e = v->type.elem;
  switch (l.rep) {
    case LaneRep::Scalar: return splat(scalar(v));
    case LaneRep::Splat: return splat(genScalar(v->def, {}));
    case LaneRep::Vectors:
      if (!vi.isConst() || vi.c >= static_cast<int64_t>(vecs_[v->id].size()) || !vecs_[v->id][vi.c]) {
        error_ = fmt::format("internal error: %{} (registers) read at a runtime or undefined index", v->name);
        return llvm::PoisonValue::get(vty(e));
      }
      return vecs_[v->id][vi.c];
    case LaneRep::Panel: {
      if (e == Elem::I1) {
        auto* t8 = llvm::FixedVectorType::get(b_.getInt8Ty(), w_);
        return b_.CreateTrunc(b_.CreateLoad(t8, slotPtr(l.slot, e, vi)), vty(e));
      }
      return b_.CreateLoad(vty(e), slotPtr(l.slot, e, vi));
    }
    case LaneRep::Recipe:
    case LaneRep::Direct: break;
  }
  return nullptr;
}

llvm::Value* LaneEmitter::scalar(const ir::Value* v) {
  if (lp_.layout[v->id].rep == LaneRep::Scalar && scalars_[v->id]) return scalars_[v->id];
  if (v->type.isScalar() && v->def) return genScalar(v->def, {});
  error_ = fmt::format("internal error: scalar %{} used before its definition", v->name);
  return llvm::PoisonValue::get(sty(v->type.elem));
}

llvm::Value* LaneEmitter::elem(const ir::Value* v, const Coords& cs) {
  const plan::Layout& l = lp_.layout[v->id];
  Elem e = v->type.elem;
  switch (l.rep) {
    case LaneRep::Scalar: return scalar(v);
    case LaneRep::Splat: return genScalar(v->def, {});
    case LaneRep::Recipe: return genScalar(v->def, cs);
    case LaneRep::Direct: return loadElement(v->def, cs);
    case LaneRep::Vectors: {
      Ix row = rowOf(v->type, cs);
      Ix lane = cs.back();
      if (!row.isConst() || !lane.isConst()) {
        error_ = fmt::format("internal error: %{} (registers) read at a runtime element index", v->name);
        return llvm::PoisonValue::get(sty(e));
      }
      return b_.CreateExtractElement(vec(v, Ix{nullptr, row.c * l.chunks + lane.c / w_}), uint64_t(lane.c % w_));
    }
    case LaneRep::Panel: {
      Ix flat = add(mul(rowOf(v->type, cs), l.chunks * w_), cs.back());
      llvm::Type* st = e == Elem::I1 ? b_.getInt8Ty() : sty(e);
      llvm::Value* ptr = b_.CreateInBoundsGEP(st, slots_[l.slot], val(flat));
      llvm::Value* x = b_.CreateLoad(st, ptr);
      return e == Elem::I1 ? b_.CreateTrunc(x, b_.getInt1Ty()) : x;
    }
  }
  return nullptr;
}

llvm::Value* LaneEmitter::alongLane(const ir::Value* v, const ir::Type& ct, const Coords& ctx, int64_t, Ix chunk) {
  const std::string& lane = ct.dims.back().name;
  if (v->type.isScalar()) return splat(scalar(v));
  Coords vc = mapCoords(v->type, ct, ctx);
  int li = v->type.findDim(lane);
  if (li < 0) return splat(elem(v, vc));
  const plan::Layout& l = lp_.layout[v->id];
  (void)l;
  if (li == v->type.rank() - 1) return vec(v, rowOf(v->type, vc), chunk);
  // The lane dim lies elsewhere in v: element by element (counted as a conversion).
  llvm::Value* r = llvm::PoisonValue::get(vty(v->type.elem));
  int64_t ext = v->type.dims[li].extent;
  for (unsigned j = 0; j < w_; ++j) {
    if (chunk.isConst() && chunk.c * w_ + j >= static_cast<uint64_t>(ext)) break;
    vc[li] = add(mul(chunk, w_), Ix{nullptr, j});
    if (!vc[li].isConst())
      vc[li] = Ix{b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, vc[li].v, b_.getInt64(ext - 1)), 0};
    r = b_.CreateInsertElement(r, elem(v, vc), uint64_t(j));
  }
  return r;
}

void LaneEmitter::define(const ir::Value* v, const VecGen& gen) {
  const plan::Layout& l = lp_.layout[v->id];
  int64_t n = l.vectors();
  if (l.rep == LaneRep::Vectors) {
    std::vector<llvm::Value*> vs(n);
    for (int64_t i = 0; i < n; ++i) vs[i] = gen(Ix{nullptr, i / l.chunks}, Ix{nullptr, i % l.chunks});
    vecs_[v->id] = std::move(vs);
  } else if (l.rep == LaneRep::Panel) {
    Elem e = v->type.elem;
    forEachVector(l.rows, l.chunks, l.large, [&](Ix row, Ix chunk) {
      llvm::Value* x = gen(row, chunk);
      if (e == Elem::I1) x = b_.CreateZExt(x, llvm::FixedVectorType::get(b_.getInt8Ty(), w_));
      b_.CreateStore(x, slotPtr(l.slot, e, vindex(v, row, chunk)));
    });
  }
}

llvm::Value* LaneEmitter::indexValue(const ir::Index& ix) {
  return ix.isConstant() ? b_.getInt64(ix.constant) : scalar(ix.value);
}

llvm::Value* LaneEmitter::genScalar(const Op* op, const Coords& cs) {
  const ir::Type& rt = op->results[0]->type;
  switch (op->kind) {
    case OpKind::Const:
      if (rt.elem == Elem::I64) return b_.getInt64(op->iconst);
      if (rt.elem == Elem::I1) return b_.getInt1(op->iconst != 0);
      return llvm::ConstantFP::get(b_.getFloatTy(), static_cast<float>(op->fconst));
    case OpKind::Iota: return val(cs[rt.findDim(op->dims[0])]);
    case OpKind::Broadcast: {
      const ir::Value* x = op->operands[0];
      return elem(x, mapCoords(x->type, rt, cs));
    }
    default: break;
  }
  if (isElementwise(op->kind)) {
    std::vector<llvm::Value*> o;
    for (const ir::Value* x : op->operands) o.push_back(x->type.isScalar() ? scalar(x) : elem(x, cs));
    Elem e = op->operands[op->kind == OpKind::Select ? 1 : 0]->type.elem;
    if (op->kind == OpKind::Select) return b_.CreateSelect(o[0], o[1], o[2]);
    if (op->kind == OpKind::Cmp) return ew_.cmp(op->pred, o[0], o[1], e);
    if (op->kind == OpKind::Cast) return ew_.cast(o[0], e, rt.elem, error_);
    if (ir::isUnary(op->kind)) return ew_.unary(op->kind, o[0], e, error_);
    return ew_.binary(op->kind, o[0], o[1], e, error_);
  }
  error_ = fmt::format("internal error: no scalar generator for op '{}'", ir::opName(op->kind));
  return llvm::PoisonValue::get(sty(rt.elem));
}

llvm::Value* LaneEmitter::genVec(const Op* op, Ix row, Ix chunk) {
  const ir::Type& rt = op->results[0]->type;
  switch (op->kind) {
    case OpKind::Const: return splat(genScalar(op, {}));
    case OpKind::Iota: {
      int d = rt.findDim(op->dims[0]);
      if (d == rt.rank() - 1) return b_.CreateAdd(splat(val(mul(chunk, w_))), laneIota());
      return splat(val(rowCoords(rt, row)[d]));
    }
    case OpKind::Broadcast: return alongLane(op->operands[0], rt, rowCoords(rt, row), 0, chunk);
    default: break;
  }
  if (isElementwise(op->kind)) {
    std::vector<llvm::Value*> o;
    for (const ir::Value* x : op->operands) o.push_back(x->type.isScalar() ? splat(scalar(x)) : vec(x, row, chunk));
    Elem e = op->operands[op->kind == OpKind::Select ? 1 : 0]->type.elem;
    if (op->kind == OpKind::Select) return b_.CreateSelect(o[0], o[1], o[2]);
    if (op->kind == OpKind::Cmp) return ew_.cmp(op->pred, o[0], o[1], e);
    if (op->kind == OpKind::Cast) return ew_.cast(o[0], e, rt.elem, error_);
    if (ir::isUnary(op->kind)) return ew_.unary(op->kind, o[0], e, error_);
    return ew_.binary(op->kind, o[0], o[1], e, error_);
  }
  error_ = fmt::format("internal error: no vector generator for op '{}'", ir::opName(op->kind));
  return llvm::PoisonValue::get(vty(rt.elem));
}

// ---------------------------------------------------------------- program

llvm::Function* LaneEmitter::emitProgram(const std::string& name, std::string& error) {
  auto* fnTy = llvm::FunctionType::get(b_.getVoidTy(), {b_.getPtrTy(), b_.getInt64Ty()}, false);
  f_ = llvm::Function::Create(fnTy, llvm::Function::InternalLinkage, name, m_);
  f_->addFnAttr(llvm::Attribute::NoInline);
  f_->addFnAttr(llvm::Attribute::NoUnwind);
  entry_ = llvm::BasicBlock::Create(c_, "entry", f_);
  b_.SetInsertPoint(entry_);
  vecs_.assign(k_.values.size(), {});
  scalars_.assign(k_.values.size(), nullptr);
  slots_.assign(lp_.slot_vectors.size(), nullptr);
  for (size_t s = 0; s < lp_.slot_vectors.size(); ++s) {
    Elem e = lp_.slot_elem[s];
    llvm::Type* t = e == Elem::I1 ? static_cast<llvm::Type*>(llvm::FixedVectorType::get(b_.getInt8Ty(), w_)) : vty(e);
    auto* a = b_.CreateAlloca(llvm::ArrayType::get(t, static_cast<uint64_t>(lp_.slot_vectors[s])), nullptr,
                              fmt::format("panel.{}", s));
    a->setAlignment(llvm::Align(64));
    slots_[s] = a;
  }
  llvm::Value* params = f_->getArg(0);
  base_.assign(k_.params.size(), nullptr);
  for (const ir::Value* prm : k_.params) {
    llvm::Value* ptr = b_.CreateLoad(
        b_.getPtrTy(), b_.CreateConstInBoundsGEP1_64(b_.getPtrTy(), params, static_cast<uint64_t>(prm->index)),
        fmt::format("{}.ptr", prm->name));
    if (prm->type.isView())
      base_[prm->index] = ptr;
    else
      scalars_[prm->id] = b_.CreateLoad(sty(prm->type.elem), ptr, prm->name);
  }
  const Op* root = k_.root();
  const auto& axes = root->regions[0]->args;
  llvm::Value* rest = f_->getArg(1);
  for (int i = static_cast<int>(p_.root_axis_order.size()) - 1; i >= 0; --i) {
    int axis = p_.root_axis_order[i];
    int64_t ext = root->extents[axis];
    scalars_[axes[axis]->id] = b_.CreateURem(rest, b_.getInt64(ext), axes[axis]->name);
    rest = b_.CreateUDiv(rest, b_.getInt64(ext));
  }
  emitRegion(root->regions[0]);
  b_.CreateRetVoid();
  if (!error_.empty()) {
    error = error_;
    return nullptr;
  }
  return f_;
}

void LaneEmitter::emitRegion(const ir::Region* r) {
  for (const Op* op : r->ops) {
    if (op->kind == OpKind::Yield) continue;
    emitOp(op);
    if (!error_.empty()) {
      // A lowering error names the op it happened at (FILE:LINE:COL), once.
      if (error_.find(": error: ") == std::string::npos)
        error_ = fmt::format("{}:{}:{}: error: {}", op->loc.file, op->loc.line, op->loc.col, error_);
      return;
    }
  }
}

void LaneEmitter::emitOp(const Op* op) {
  switch (op->kind) {
    case OpKind::Parallel: error_ = "a parallel op below the root domain cannot be lowered"; return;
    case OpKind::Stage:
    case OpKind::Yield: return;
    case OpKind::Load: emitLoad(op); return;
    case OpKind::Store: emitStore(op); return;
    case OpKind::Serial:
    case OpKind::Pipeline: emitLoop(op); return;
    case OpKind::Reduce: emitReduce(op); return;
    case OpKind::Mma:
      for (const plan::Conversion& c : lp_.conversions)
        if (c.at == op) emitConversion(c);
      emitMma(op);
      return;
    case OpKind::Extract: scalars_[op->results[0]->id] = emitExtract(op); return;
    default: break;
  }
  const ir::Value* r = op->results[0];
  if (lp_.layout[r->id].rep == LaneRep::Scalar) {
    scalars_[r->id] = genScalar(op, {});
    return;
  }
  define(r, [&](Ix row, Ix chunk) { return genVec(op, row, chunk); });
}

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
  return b_.CreateGEP(b_.getFloatTy(), base_[view->index], offset);
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
  llvm::Value* fill = llvm::ConstantFP::get(b_.getFloatTy(), static_cast<float>(op->fconst));
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
  if (isInside(op)) return b_.CreateLoad(b_.getFloatTy(), ptr);
  // Out of the view: read the view's first element (always there) and keep the fill.
  llvm::Value* safe = b_.CreateSelect(inb, ptr, base_[op->operands[0]->index]);
  return b_.CreateSelect(inb, b_.CreateLoad(b_.getFloatTy(), safe), fill);
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
  const ir::Type& rt = op->results[0]->type;
  llvm::Value* fill = llvm::ConstantFP::get(b_.getFloatTy(), static_cast<float>(op->fconst));
  const std::string& lane = rt.dims.back().name;
  const int64_t laneExt = rt.dims.back().extent;
  LaneAxis ax = laneAxis(op, lane);
  llvm::Value* origin = indexValue(op->indices[ax.k]);
  Coords cs = rowCoords(rt, row);
  Ix first = mul(chunk, w_);
  llvm::Value* inb = nullptr;
  llvm::Value* ptr = elementPointer(op, rt, cs, first, inb);
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
      if (lp_.access.at(op) == plan::LaneAccess::Vector)
        return b_.CreateAlignedLoad(vty(Elem::F32), ptr, llvm::Align(4));
    } else if (chunk.isConst()) {
      mask = laneMask(valid);
    } else {
      mask = b_.CreateICmpULT(lanes, splat(b_.getInt64(laneExt)));
    }
  }
  if (lp_.access.at(op) == plan::LaneAccess::Vector)
    return b_.CreateMaskedLoad(vty(Elem::F32), ptr, llvm::Align(4), mask, splat(fill));
  llvm::Value* ptrs = b_.CreateGEP(b_.getFloatTy(), ptr, b_.CreateMul(laneIota(), splat(b_.getInt64(ax.stride))));
  return b_.CreateMaskedGather(vty(Elem::F32), ptrs, llvm::Align(4), mask, splat(fill));
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
  if (tt.isScalar()) {
    llvm::Value* inb = nullptr;
    llvm::Value* ptr = elementPointer(op, tt, {}, Ix{nullptr, 0}, inb);
    b_.CreateMaskedStore(b_.CreateVectorSplat(1, scalar(t)), ptr, llvm::Align(4), b_.CreateVectorSplat(1, inb));
    return;
  }
  const plan::Layout& l = lp_.layout[t->id];
  const std::string& lane = tt.dims.back().name;
  const int64_t laneExt = tt.dims.back().extent;
  LaneAxis ax = laneAxis(op, lane);
  llvm::Value* origin = indexValue(op->indices[ax.k]);
  bool vector = lp_.access.at(op) == plan::LaneAccess::Vector;
  forEachVector(l.rows, l.chunks, l.large, [&](Ix row, Ix chunk) {
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
    llvm::Value* x = vec(t, row, chunk);
    if (vector) {
      b_.CreateMaskedStore(x, ptr, llvm::Align(4), mask);
      return;
    }
    llvm::Value* ptrs = b_.CreateGEP(b_.getFloatTy(), ptr, b_.CreateMul(laneIota(), splat(b_.getInt64(ax.stride))));
    b_.CreateMaskedScatter(x, ptrs, llvm::Align(4), mask);
  });
}

// ---------------------------------------------------------------- reduce

void LaneEmitter::emitReduce(const Op* op) {
  const ir::Value* x = op->operands[0];
  const ir::Value* init = op->operands[1];
  const ir::Value* r = op->results[0];
  const ir::Type& rt = r->type;
  const plan::ReducePlan& rp = p_.reduce.at(op);
  const plan::LaneReduce& lr = lp_.reduce.at(op);
  const plan::Layout& xl = lp_.layout[x->id];
  Elem e = rt.elem;
  ir::Type red = ir::Type::tile(x->type.elem, {});
  for (const ir::Dim& d : x->type.dims)
    if (std::find(op->dims.begin(), op->dims.end(), d.name) != op->dims.end()) red.dims.push_back(d);
  const int64_t n = rp.contributions;
  const int64_t P = rp.partitions;
  // The defined order (docs/ir.md, Reductions): contribution j to partition j mod P, each
  // partition folded from its first contribution, then init merged with the partitions in order.
  auto fold = [&](llvm::Value* s, const std::function<llvm::Value*(Ix)>& contribution) {
    if (n == 0) return s;
    int64_t parts = std::min<int64_t>(P, n);
    std::vector<llvm::Value*> part(parts);
    for (int64_t q = 0; q < parts; ++q) part[q] = contribution(Ix{nullptr, q});
    // `ordered` folds from the initial value: ((init ⊕ c0) ⊕ c1) ⊕ ... (the tree's init is merged last).
    const bool ordered = op->reduce_policy.kind == ir::ReducePolicy::Kind::Ordered;
    if (ordered) part[0] = ew_.combine(op->reduce, s, part[0], e);
    int64_t full = n / P;
    auto step = [&](Ix base, std::vector<llvm::Value*> cur) {
      for (int64_t q = 0; q < parts; ++q)
        cur[q] = ew_.combine(op->reduce, cur[q], contribution(add(base, Ix{nullptr, q})), e);
      return cur;
    };
    if (lr.rolled && full > 1) {
      part =
          loop(b_.getInt64(1), b_.getInt64(full), 1, part, [&](llvm::Value* t, const std::vector<llvm::Value*>& cur) {
            return step(mul(Ix{t, 0}, P), cur);
          });
    } else {
      for (int64_t t = 1; t < full; ++t) part = step(Ix{nullptr, t * P}, part);
    }
    for (int64_t j = std::max<int64_t>(full, 1) * P; j < n; ++j)
      part[j % P] = ew_.combine(op->reduce, part[j % P], contribution(Ix{nullptr, j}), e);
    if (ordered) return part[0];
    for (int64_t q = 0; q < parts; ++q) s = ew_.combine(op->reduce, s, part[q], e);
    return s;
  };
  auto redCoords = [&](Ix j) {
    Coords jc(red.dims.size(), Ix{nullptr, 0});
    for (int i = static_cast<int>(red.dims.size()) - 1; i >= 0; --i) {
      jc[i] = rem(j, red.dims[i].extent);
      j = div(j, red.dims[i].extent);
    }
    return jc;
  };
  if (!lr.horizontal) {
    // Vertical: the lanes are independent outputs; each folds its contributions in order.
    const plan::Layout& l = lp_.layout[r->id];
    define(r, [&](Ix row, Ix chunk) {
      Coords rc = rowCoords(rt, row);
      llvm::Value* s = init->type.isScalar() ? splat(scalar(init)) : vec(init, row, chunk);
      return fold(s, [&](Ix j) {
        Coords jc = redCoords(j);
        Coords xc = mapCoords(x->type, rt, rc, &jc, &red);
        return vec(x, rowOf(x->type, xc), chunk);
      });
    });
    return;
  }
  // Lanes hold partitions (P a multiple of W, the lane extent a multiple of P): contribution
  // j = outer * extent + chunk * W + lane lies in partition j mod P, i.e. lane `lane` of
  // accumulator (chunk mod P/W). The first P/W vectors are each partition's first
  // contributions; later vectors fold in ascending j; then init merges partitions 0..P-1.
  auto laneFold = [&](const Coords& rc, llvm::Value* s) {
    const int64_t A = P / w_, chunksX = xl.chunks, vectors = n / w_;
    ir::Type outerT = red;
    outerT.dims.back() = ir::Dim{"", 1};
    auto vector = [&](Ix v) {
      Ix o = div(v, chunksX), c = rem(v, chunksX);
      Coords oc = rowCoords(outerT, o);
      Coords xc = mapCoords(x->type, rt, rc, &oc, &outerT);
      return vec(x, rowOf(x->type, xc), c);
    };
    std::vector<llvm::Value*> acc(A);
    for (int64_t a = 0; a < A; ++a) acc[a] = vector(Ix{nullptr, a});
    auto step = [&](Ix t, std::vector<llvm::Value*> cur) {
      for (int64_t a = 0; a < A; ++a)
        cur[a] = ew_.combine(op->reduce, cur[a], vector(add(mul(t, A), Ix{nullptr, a})), e);
      return cur;
    };
    if (lr.rolled)
      acc = loop(b_.getInt64(1), b_.getInt64(vectors / A), 1, acc,
                 [&](llvm::Value* t, const std::vector<llvm::Value*>& cur) {
                   return step(Ix{t, 0}, cur);
                 });
    else
      for (int64_t t = 1; t < vectors / A; ++t) acc = step(Ix{nullptr, t}, acc);
    for (int64_t q = 0; q < P; ++q)
      s = ew_.combine(op->reduce, s, b_.CreateExtractElement(acc[q / w_], uint64_t(q % w_)), e);
    return s;
  };
  // Horizontal: every result element folds its contributions as scalars, in order.
  auto element = [&](const Coords& rc) {
    llvm::Value* s = init->type.isScalar() ? scalar(init) : elem(init, rc);
    if (lr.vector_partitions) return laneFold(rc, s);
    return fold(s, [&](Ix j) {
      Coords jc = redCoords(j);
      return elem(x, mapCoords(x->type, rt, rc, &jc, &red));
    });
  };
  if (rt.isScalar()) {
    scalars_[r->id] = element({});
    return;
  }
  const plan::Layout& l = lp_.layout[r->id];
  const int64_t laneExt = rt.dims.back().extent;
  define(r, [&](Ix row, Ix chunk) {
    Coords rc = rowCoords(rt, row);
    llvm::Value* v = llvm::Constant::getNullValue(vty(e));
    for (unsigned j = 0; j < w_; ++j) {
      if (chunk.isConst() && chunk.c * w_ + j >= static_cast<uint64_t>(laneExt)) break;
      rc.back() = add(mul(chunk, w_), Ix{nullptr, j});
      // A runtime chunk's lanes past the extent read the last element instead (never stored).
      if (!rc.back().isConst())
        rc.back() = Ix{b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, rc.back().v, b_.getInt64(laneExt - 1)), 0};
      v = b_.CreateInsertElement(v, element(rc), uint64_t(j));
    }
    return v;
  });
}

// ---------------------------------------------------------------- mma

// Transpose of `x` so that `to_lane_dim` (L) lies along the lanes: W source vectors (W
// consecutive values of L, one chunk of x's own lane dim) are loaded, transposed in registers
// (log2 W stages of two-source shuffles, each swapping the off-diagonal blocks) and stored as
// W target vectors. Never element by element.
void LaneEmitter::emitConversion(const plan::Conversion& c) {
  const ir::Value* x = c.value;
  const ir::Type& xt = x->type;
  const plan::Layout& xl = lp_.layout[x->id];
  const int li = xt.findDim(c.to_lane_dim);
  const int last = xt.rank() - 1;
  const int64_t extL = xt.dims[li].extent, extLast = xt.dims[last].extent;
  ir::Type outerT = ir::Type::tile(xt.elem, {});
  for (int d = 0; d < last; ++d)
    if (d != li) outerT.dims.push_back(xt.dims[d]);
  int64_t outer = 1;
  for (const ir::Dim& d : outerT.dims) outer *= d.extent;
  outerT.dims.push_back(ir::Dim{"", 1});  // the lane slot rowCoords/rowOf skip
  const int64_t lBlocks = c.chunks, xChunks = xl.chunks;
  const int64_t iterations = outer * lBlocks * xChunks;
  Elem e = xt.elem;
  // A tile read straight from its view: a fast copy of the transpose when the whole tile lies
  // inside the view (no per-row bounds), the guarded one otherwise.
  const Op* load = xl.rep == LaneRep::Direct ? x->def : nullptr;
  llvm::BasicBlock* done = nullptr;
  llvm::BasicBlock* slow = nullptr;
  if (load) {
    llvm::BasicBlock* fast = llvm::BasicBlock::Create(c_, "transpose.inside", f_);
    slow = llvm::BasicBlock::Create(c_, "transpose.edge", f_);
    done = llvm::BasicBlock::Create(c_, "transpose.done", f_);
    b_.CreateCondBr(tileInside(load), fast, slow);
    b_.SetInsertPoint(fast);
    inside_ = {load};
  }
  for (int pass = 0; pass < (load ? 2 : 1); ++pass) {
    if (pass == 1) {
      b_.CreateBr(done);
      b_.SetInsertPoint(slow);
      inside_.clear();
    }
    forEach(iterations, iterations > 4, [&](Ix it) {
      Ix xc = rem(it, xChunks), rest = div(it, xChunks);
      Ix lb = rem(rest, lBlocks), o = div(rest, lBlocks);
      Coords oc = rowCoords(outerT, o);
      Coords xcs = mapCoords(xt, outerT, oc);
      std::vector<llvm::Value*> r(w_);
      for (unsigned i = 0; i < w_; ++i) {
        Ix l = add(mul(lb, w_), Ix{nullptr, i});
        if (l.isConst())
          l.c = std::min(l.c, extL - 1);
        else
          l = Ix{b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, l.v, b_.getInt64(extL - 1)), 0};
        xcs[li] = l;
        r[i] = vec(x, rowOf(xt, xcs), xc);
      }
      for (unsigned s = 1; s < w_; s <<= 1) {
        std::vector<int> lo(w_), hi(w_);
        for (unsigned k = 0; k < w_; ++k) {
          lo[k] = (k & s) ? static_cast<int>(w_ + (k ^ s)) : static_cast<int>(k);
          hi[k] = (k & s) ? static_cast<int>(w_ + k) : static_cast<int>(k ^ s);
        }
        for (unsigned i = 0; i < w_; ++i) {
          if (i & s) continue;
          unsigned j = i | s;
          llvm::Value* ni = b_.CreateShuffleVector(r[i], r[j], lo);
          llvm::Value* nj = b_.CreateShuffleVector(r[i], r[j], hi);
          r[i] = ni;
          r[j] = nj;
        }
      }
      // Target row: x's dims without L, row-major (x's lane dim innermost); target chunk: lb.
      Ix oRow = rowOf(outerT, oc);
      for (unsigned t = 0; t < w_; ++t) {
        Ix lastCoord = add(mul(xc, w_), Ix{nullptr, t});
        if (lastCoord.isConst() && lastCoord.c >= extLast) break;
        Ix vi = add(mul(add(mul(oRow, extLast), lastCoord), lBlocks), lb);
        if (lastCoord.isConst()) {
          b_.CreateStore(r[t], slotPtr(c.slot, e, vi));
          continue;
        }
        // A runtime chunk of x's lane dim: lanes past its extent are not stored.
        llvm::BasicBlock* st = llvm::BasicBlock::Create(c_, "transpose.store", f_);
        llvm::BasicBlock* nx = llvm::BasicBlock::Create(c_, "transpose.next", f_);
        b_.CreateCondBr(b_.CreateICmpULT(lastCoord.v, b_.getInt64(extLast)), st, nx);
        b_.SetInsertPoint(st);
        b_.CreateStore(r[t], slotPtr(c.slot, e, vi));
        b_.CreateBr(nx);
        b_.SetInsertPoint(nx);
      }
    });
  }
  inside_.clear();
  if (load) {
    b_.CreateBr(done);
    b_.SetInsertPoint(done);
  }
}

// An mma reading tiles straight from their views runs twice over: a copy for the common case
// where every such tile lies inside its view (plain loads and broadcasts from memory), and the
// guarded copy for edges; registers meet in phis.
void LaneEmitter::emitMma(const Op* op) {
  std::vector<const Op*> direct;
  for (int i = 0; i < 2; ++i) {
    const ir::Value* x = op->operands[i];
    if (lp_.layout[x->id].rep == LaneRep::Direct && lp_.mma.at(op).conversion[i] < 0) direct.push_back(x->def);
  }
  const ir::Value* r = op->results[0];
  if (direct.empty() || r->type.isScalar()) {
    emitMmaTiles(op);
    return;
  }
  llvm::Value* in = b_.getTrue();
  for (const Op* l : direct) in = b_.CreateAnd(in, tileInside(l));
  llvm::BasicBlock* fast = llvm::BasicBlock::Create(c_, "mma.inside", f_);
  llvm::BasicBlock* slow = llvm::BasicBlock::Create(c_, "mma.edge", f_);
  llvm::BasicBlock* done = llvm::BasicBlock::Create(c_, "mma.done", f_);
  b_.CreateCondBr(in, fast, slow);
  b_.SetInsertPoint(fast);
  inside_ = direct;
  emitMmaTiles(op);
  inside_.clear();
  std::vector<llvm::Value*> fastVals = vecs_[r->id];
  llvm::BasicBlock* fastEnd = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(slow);
  emitMmaTiles(op);
  std::vector<llvm::Value*> slowVals = vecs_[r->id];
  llvm::BasicBlock* slowEnd = b_.GetInsertBlock();
  b_.CreateBr(done);
  b_.SetInsertPoint(done);
  for (size_t i = 0; i < fastVals.size(); ++i) {
    llvm::PHINode* phi = b_.CreatePHI(fastVals[i]->getType(), 2);
    phi->addIncoming(fastVals[i], fastEnd);
    phi->addIncoming(slowVals[i], slowEnd);
    vecs_[r->id][i] = phi;
  }
}

void LaneEmitter::emitMmaTiles(const Op* op) {
  const ir::Value* a = op->operands[0];
  const ir::Value* bv = op->operands[1];
  const ir::Value* acc = op->operands[2];
  const ir::Value* r = op->results[0];
  const ir::Type& at = acc->type;
  const plan::MmaPlan& mp = p_.mma.at(op);
  const plan::LaneMma& lm = lp_.mma.at(op);
  ir::Type ct = ir::Type::tile(Elem::F32, {});
  for (const std::string& d : op->dims) ct.dims.push_back(a->type.dims[a->type.findDim(d)]);
  auto kCoords = [&](Ix k) {
    Coords kc(ct.dims.size(), Ix{nullptr, 0});
    for (int i = static_cast<int>(ct.dims.size()) - 1; i >= 0; --i) {
      kc[i] = rem(k, ct.dims[i].extent);
      k = div(k, ct.dims[i].extent);
    }
    return kc;
  };
  if (lm.form == "scalar") {
    llvm::Value* s = scalar(acc);
    auto step = [&](Ix k, llvm::Value* c) {
      Coords kc = kCoords(k);
      llvm::Value* av = a->type.isScalar() ? scalar(a) : elem(a, mapCoords(a->type, ct, kc));
      llvm::Value* bw = bv->type.isScalar() ? scalar(bv) : elem(bv, mapCoords(bv->type, ct, kc));
      return ew_.multiplyAdd(av, bw, c, op->mma_policy);
    };
    if (lm.k_rolled && mp.k > 1) {
      s = loop(b_.getInt64(0), b_.getInt64(mp.k), 1, {s}, [&](llvm::Value* k, const std::vector<llvm::Value*>& cur) {
        return std::vector<llvm::Value*>{step(Ix{k, 0}, cur[0])};
      })[0];
    } else {
      for (int64_t k = 0; k < mp.k; ++k) s = step(Ix{nullptr, k}, s);
    }
    scalars_[r->id] = s;
    return;
  }
  const plan::Layout& al = lp_.layout[acc->id];
  const plan::Layout& rl = lp_.layout[r->id];
  if (rl.rep == LaneRep::Vectors) vecs_[r->id].assign(rl.vectors(), nullptr);
  const ir::Value* ops[2] = {a, bv};
  // The K-step operand of one accumulator (row coords rc, chunk): a splat or a lane vector.
  auto operand = [&](int i, const Coords& rc, const Coords& kc, Ix chunk) -> llvm::Value* {
    const ir::Value* x = ops[i];
    if (x->type.isScalar()) return splat(scalar(x));
    Coords xc = mapCoords(x->type, at, rc, &kc, &ct);
    if (lm.broadcast[i]) return splat(elem(x, xc));
    if (lm.conversion[i] < 0) {
      return vec(x, rowOf(x->type, xc), chunk);
    }
    const plan::Conversion& c = lp_.conversions[lm.conversion[i]];
    ir::Type rowsT = ir::Type::tile(x->type.elem, {});
    Coords rcs;
    for (size_t d = 0; d < x->type.dims.size(); ++d)
      if (x->type.dims[d].name != c.to_lane_dim) {
        rowsT.dims.push_back(x->type.dims[d]);
        rcs.push_back(xc[d]);
      }
    rowsT.dims.push_back(ir::Dim{c.to_lane_dim, 1});
    rcs.push_back(Ix{nullptr, 0});
    Ix vi = add(mul(rowOf(rowsT, rcs), c.chunks), chunk);
    return b_.CreateLoad(vty(x->type.elem), slotPtr(c.slot, x->type.elem, vi));
  };
  for (int64_t r0 = 0; r0 < al.rows; r0 += lm.block_rows) {
    for (int64_t c0 = 0; c0 < al.chunks; c0 += lm.block_chunks) {
      const int64_t nr = std::min(lm.block_rows, al.rows - r0), nc = std::min(lm.block_chunks, al.chunks - c0);
      std::vector<Coords> rcs;
      for (int64_t i = 0; i < nr; ++i) rcs.push_back(rowCoords(at, Ix{nullptr, r0 + i}));
      std::vector<llvm::Value*> cur;
      for (int64_t i = 0; i < nr; ++i)
        for (int64_t j = 0; j < nc; ++j) cur.push_back(vec(acc, Ix{nullptr, (r0 + i) * al.chunks + c0 + j}));
      auto body = [&](Ix k, std::vector<llvm::Value*> s) {
        Coords kc = kCoords(k);
        // Operand values shared across the register tile: one per row (splats) and per chunk.
        std::vector<std::vector<llvm::Value*>> rowVals(2), chunkVals(2);
        for (int i = 0; i < 2; ++i) {
          bool perRow = lm.broadcast[i];
          for (int64_t q = 0; q < (perRow ? nr : nc); ++q) {
            if (perRow) rowVals[i].push_back(operand(i, rcs[q], kc, Ix{nullptr, 0}));
          }
        }
        for (int64_t ri = 0; ri < nr; ++ri)
          for (int64_t j = 0; j < nc; ++j) {
            llvm::Value* v[2];
            for (int i = 0; i < 2; ++i) {
              if (lm.broadcast[i]) {
                v[i] = rowVals[i][ri];
              } else {
                // A lane operand without the row's dims is shared by every row: read once.
                v[i] = operand(i, rcs[ri], kc, Ix{nullptr, c0 + j});
              }
            }
            s[ri * nc + j] = ew_.multiplyAdd(v[0], v[1], s[ri * nc + j], op->mma_policy);
          }
        return s;
      };
      if (lm.k_rolled && mp.k > 1) {
        cur = loop(b_.getInt64(0), b_.getInt64(mp.k), 1, cur, [&](llvm::Value* k, const std::vector<llvm::Value*>& s) {
          return body(Ix{k, 0}, s);
        });
      } else {
        for (int64_t k = 0; k < mp.k; ++k) cur = body(Ix{nullptr, k}, cur);
      }
      for (int64_t i = 0; i < nr; ++i)
        for (int64_t j = 0; j < nc; ++j) {
          int64_t vi = (r0 + i) * al.chunks + c0 + j;
          if (rl.rep == LaneRep::Vectors)
            vecs_[r->id][vi] = cur[i * nc + j];
          else
            b_.CreateStore(cur[i * nc + j], slotPtr(rl.slot, Elem::F32, Ix{nullptr, vi}));
        }
    }
  }
}

// ---------------------------------------------------------------- extract

llvm::Value* LaneEmitter::emitExtract(const Op* op) {
  const ir::Value* x = op->operands[0];
  const ir::Type& xt = x->type;
  if (xt.isScalar()) return scalar(x);
  Coords cs;
  llvm::Value* ok = nullptr;
  for (size_t d = 0; d < op->indices.size(); ++d) {
    const ir::Index& ix = op->indices[d];
    if (ix.isConstant()) {
      cs.push_back(Ix{nullptr, ix.constant});
      continue;
    }
    llvm::Value* v = scalar(ix.value);
    llvm::Value* in = b_.CreateICmpULT(v, b_.getInt64(xt.dims[d].extent));
    ok = ok ? b_.CreateAnd(ok, in) : in;
    cs.push_back(Ix{b_.CreateSelect(in, v, b_.getInt64(0)), 0});
  }
  llvm::Value* v = elem(x, cs);
  return ok ? b_.CreateSelect(ok, v, llvm::Constant::getNullValue(v->getType())) : v;
}

// ---------------------------------------------------------------- loops

void LaneEmitter::emitLoop(const Op* op) {
  const ir::Region* body = op->regions[0];
  const ir::Value* ivArg = body->args[0];
  const Op* yield = body->ops.empty() ? nullptr : body->ops.back();
  if (yield && yield->kind != OpKind::Yield) yield = nullptr;
  const size_t nc = op->results.size();
  auto layoutOf = [&](size_t i) -> const plan::Layout& { return lp_.layout[body->args[i + 1]->id]; };
  auto copyPanel = [&](const ir::Value* dst, const std::function<llvm::Value*(Ix, Ix)>& src) {
    const plan::Layout& l = lp_.layout[dst->id];
    Elem e = dst->type.elem;
    forEachVector(l.rows, l.chunks, l.large, [&](Ix row, Ix chunk) {
      Ix vi = vindex(dst, row, chunk);
      llvm::Value* x = src(row, chunk);
      if (e == Elem::I1) x = b_.CreateZExt(x, llvm::FixedVectorType::get(b_.getInt8Ty(), w_));
      b_.CreateStore(x, slotPtr(l.slot, e, vi));
    });
  };
  // Inits: registers become phis; panels are copied into the carried storage.
  std::vector<llvm::Value*> flat;
  for (size_t i = 0; i < nc; ++i) {
    const ir::Value* arg = body->args[i + 1];
    const ir::Value* init = op->operands[i];
    const plan::Layout& l = layoutOf(i);
    if (l.rep == LaneRep::Scalar) {
      flat.push_back(scalar(init));
    } else if (l.rep == LaneRep::Vectors) {
      for (int64_t v = 0; v < l.vectors(); ++v) flat.push_back(vec(init, Ix{nullptr, v}));
    } else {
      copyPanel(arg, [&](Ix row, Ix chunk) { return vec(init, row, chunk); });
    }
  }
  auto unflatten = [&](const std::vector<llvm::Value*>& vals, bool results) {
    size_t at = 0;
    for (size_t i = 0; i < nc; ++i) {
      const ir::Value* v = results ? op->results[i] : body->args[i + 1];
      const plan::Layout& l = layoutOf(i);
      if (l.rep == LaneRep::Scalar) {
        scalars_[v->id] = vals[at++];
      } else if (l.rep == LaneRep::Vectors) {
        vecs_[v->id].assign(vals.begin() + at, vals.begin() + at + l.vectors());
        at += l.vectors();
      }
    }
  };
  llvm::Value* lo = indexValue(op->indices[0]);
  llvm::Value* hi = indexValue(op->indices[1]);
  int64_t step = op->indices[2].constant;
  std::vector<llvm::Value*> fin = loop(lo, hi, step, flat, [&](llvm::Value* iv, const std::vector<llvm::Value*>& cur) {
    scalars_[ivArg->id] = iv;
    unflatten(cur, false);
    emitRegion(body);
    std::vector<llvm::Value*> next;
    for (size_t i = 0; i < nc; ++i) {
      const plan::Layout& l = layoutOf(i);
      const ir::Value* y = yield->operands[i];
      if (l.rep == LaneRep::Scalar) next.push_back(scalar(y));
      if (l.rep == LaneRep::Vectors)
        for (int64_t v = 0; v < l.vectors(); ++v) next.push_back(vec(y, Ix{nullptr, v}));
    }
    // Panels: a yielded value that is another carried panel of this loop (a swap) goes
    // through a temporary first, so no copy reads storage an earlier copy overwrote.
    std::vector<std::pair<size_t, llvm::Value*>> staged;
    for (size_t i = 0; i < nc; ++i) {
      const plan::Layout& l = layoutOf(i);
      const ir::Value* y = yield->operands[i];
      if (l.rep != LaneRep::Panel || y == body->args[i + 1]) continue;
      bool carried = y->origin == ir::Value::Origin::RegionArg && y->region == body;
      if (!carried) continue;
      llvm::IRBuilder<>::InsertPointGuard g(b_);
      b_.SetInsertPoint(entry_, entry_->getFirstInsertionPt());
      Elem e = y->type.elem == Elem::I1 ? Elem::I64 : y->type.elem;
      auto* tmp = b_.CreateAlloca(llvm::ArrayType::get(vty(e), static_cast<uint64_t>(l.vectors())));
      staged.push_back({i, tmp});
    }
    for (auto& [i, tmp] : staged) {
      const ir::Value* y = yield->operands[i];
      Elem e = y->type.elem == Elem::I1 ? Elem::I64 : y->type.elem;
      forEachVector(layoutOf(i).rows, layoutOf(i).chunks, layoutOf(i).large, [&](Ix row, Ix chunk) {
        Ix vi = vindex(y, row, chunk);
        llvm::Value* x = vec(y, row, chunk);
        if (y->type.elem == Elem::I1) x = b_.CreateZExt(x, vty(Elem::I64));
        b_.CreateStore(x, b_.CreateInBoundsGEP(vty(e), tmp, val(vi)));
      });
    }
    for (size_t i = 0; i < nc; ++i) {
      const plan::Layout& l = layoutOf(i);
      const ir::Value* y = yield->operands[i];
      if (l.rep != LaneRep::Panel || y == body->args[i + 1]) continue;
      auto it = std::find_if(staged.begin(), staged.end(), [&](const auto& s) { return s.first == i; });
      if (it == staged.end()) {
        copyPanel(body->args[i + 1], [&](Ix row, Ix chunk) { return vec(y, row, chunk); });
        continue;
      }
      llvm::Value* tmp = it->second;
      Elem e = y->type.elem == Elem::I1 ? Elem::I64 : y->type.elem;
      copyPanel(body->args[i + 1], [&](Ix row, Ix chunk) {
        Ix vi = vindex(y, row, chunk);
        llvm::Value* x = b_.CreateLoad(vty(e), b_.CreateInBoundsGEP(vty(e), tmp, val(vi)));
        return y->type.elem == Elem::I1 ? b_.CreateTrunc(x, vty(Elem::I1)) : x;
      });
    }
    return next;
  });
  unflatten(fin, true);
}

}  // namespace kiln::codegen

// The lane realization's emitter core: values by layout (registers, panels, recipes, direct
// loads), element-wise ops, the program function, extract and loops. Memory is in
// lane_memory.cpp, reductions in lane_reduce.cpp, mma in lane_mma.cpp.
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

LaneEmitter::LaneEmitter(const ir::Kernel& kernel, const plan::Plan& plan, llvm::Module& module)
    // The plan's loops (register tiles, panels) carry unroll.disable: LLVM must not unroll them
    // fully, which would multiply code size (and compile time) by the trip count for no gain.
    : ProgramEmitter(kernel, plan, module, /*noUnrollLoops=*/true), lp_(plan.lanes) {}

// ---------------------------------------------------------------- indices

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

void LaneEmitter::forEachVector(const plan::Layout& l, const std::function<void(Ix, Ix)>& body) {
  if (l.rows <= 0 || l.chunks <= 0) return;
  if (!l.large) {
    for (int64_t r = 0; r < l.rows; ++r)
      for (int64_t c = 0; c < l.chunks; ++c) body(Ix{nullptr, r}, Ix{nullptr, c});
    return;
  }
  forEach(l.rows, true, [&](Ix r) {
    if (l.chunk_loop) {
      forEach(l.chunks, true, [&](Ix c) { body(r, c); });
      return;
    }
    for (int64_t c = 0; c < l.chunks; ++c) body(r, Ix{nullptr, c});
  });
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
      if (!vi.isConst() && spilled_.count(v->id))
        return b_.CreateLoad(vty(e), b_.CreateInBoundsGEP(vty(e), spilled_.at(v->id), val(vi)));
      if (!vi.isConst() || vi.c >= static_cast<int64_t>(vecs_[v->id].size()) || !vecs_[v->id][vi.c]) {
        error_ = fmt::format("internal error: %{} (registers) read at a runtime or undefined index", v->name);
        return llvm::PoisonValue::get(vty(e));
      }
      return vecs_[v->id][vi.c];
    case LaneRep::Panel: {
      if (l.pair_words) {
        error_ = fmt::format("internal error: %{} (a pair-word panel) read other than by its bf16_pairs mma", v->name);
        return llvm::PoisonValue::get(vty(e));
      }
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
      if ((!row.isConst() || !lane.isConst()) && spilled_.count(v->id)) {
        Ix flat = add(mul(row, l.chunks * w_), lane);
        return b_.CreateLoad(sty(e), b_.CreateInBoundsGEP(sty(e), spilled_.at(v->id), val(flat)));
      }
      if (!row.isConst() || !lane.isConst()) {
        error_ = fmt::format("internal error: %{} (registers) read at a runtime element index", v->name);
        return llvm::PoisonValue::get(sty(e));
      }
      return b_.CreateExtractElement(vec(v, Ix{nullptr, row.c * l.chunks + lane.c / w_}), uint64_t(lane.c % w_));
    }
    case LaneRep::Panel: {
      if (l.pair_words) {
        error_ = fmt::format("internal error: %{} (a pair-word panel) read other than by its bf16_pairs mma", v->name);
        return llvm::PoisonValue::get(sty(e));
      }
      Ix flat = add(mul(rowOf(v->type, cs), l.chunks * w_), cs.back());
      llvm::Type* st = e == Elem::I1 ? b_.getInt8Ty() : sty(e);
      llvm::Value* ptr = b_.CreateInBoundsGEP(st, slots_[l.slot], val(flat));
      llvm::Value* x = b_.CreateLoad(st, ptr);
      return e == Elem::I1 ? b_.CreateTrunc(x, b_.getInt1Ty()) : x;
    }
  }
  return nullptr;
}

void LaneEmitter::spill(const ir::Value* v) {
  const plan::Layout& l = lp_.layout[v->id];
  llvm::Value* buf = nullptr;
  {
    llvm::IRBuilder<>::InsertPointGuard g(b_);
    b_.SetInsertPoint(entry_, entry_->getFirstInsertionPt());
    auto* a = b_.CreateAlloca(llvm::ArrayType::get(vty(v->type.elem), static_cast<uint64_t>(l.vectors())), nullptr,
                              fmt::format("spill.{}", v->name));
    a->setAlignment(llvm::Align(64));
    buf = a;
  }
  for (int64_t i = 0; i < l.vectors(); ++i)
    b_.CreateStore(vecs_[v->id][i], b_.CreateInBoundsGEP(vty(v->type.elem), buf, b_.getInt64(i)));
  spilled_[v->id] = buf;
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
    if (chunk.isConst() && chunk.c * static_cast<int64_t>(w_) + static_cast<int64_t>(j) >= ext) break;
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
  } else if (l.rep == LaneRep::Panel && l.pair_words) {
    definePairWords(v, gen);
  } else if (l.rep == LaneRep::Panel) {
    Elem e = v->type.elem;
    forEachVector(l, [&](Ix row, Ix chunk) {
      llvm::Value* x = gen(row, chunk);
      if (e == Elem::I1) x = b_.CreateZExt(x, llvm::FixedVectorType::get(b_.getInt8Ty(), w_));
      b_.CreateStore(x, slotPtr(l.slot, e, vindex(v, row, chunk)));
    });
  }
}

// A pair-word panel (plan::Layout::pair_words): rows 2t and 2t + 1 of the bf16 values gen makes
// (f32 vectors, every value a bf16's) as one vector of 32-bit words, 2t's bf16 in the low half
// and 2t + 1's in the high; an odd last row with +0 in the high half. plan::CodeModel::pairWalk
// counts this walk.
void LaneEmitter::definePairWords(const ir::Value* v, const VecGen& gen) {
  const plan::Layout& l = lp_.layout[v->id];
  llvm::Type* i32v = llvm::FixedVectorType::get(b_.getInt32Ty(), w_);
  auto bits = [&](Ix row, Ix chunk) { return b_.CreateBitCast(gen(row, chunk), i32v); };
  auto put = [&](Ix t, Ix chunk, llvm::Value* words) {
    b_.CreateStore(b_.CreateBitCast(words, vty(Elem::F32)), slotPtr(l.slot, Elem::F32, add(mul(t, l.chunks), chunk)));
  };
  auto pair = [&](Ix t, Ix chunk) {
    llvm::Value* lo = b_.CreateLShr(bits(mul(t, 2), chunk), 16);
    llvm::Value* hi = b_.CreateAnd(bits(add(mul(t, 2), Ix{nullptr, 1}), chunk), 0xFFFF0000u);
    put(t, chunk, b_.CreateOr(lo, hi));
  };
  auto last = [&](Ix chunk) {
    const int64_t t = l.rows / 2;
    put(Ix{nullptr, t}, chunk, b_.CreateLShr(bits(Ix{nullptr, 2 * t}, chunk), 16));
  };
  plan::Layout pairs = l;  // the panel's walk over its pairs of rows, then an odd last row
  pairs.rows = l.rows / 2;
  forEachVector(pairs, pair);
  if (l.rows % 2) forEach(l.chunks, l.chunk_loop, last);
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
  if (ir::isElementwise(op->kind)) {
    std::vector<llvm::Value*> o;
    for (const ir::Value* x : op->operands) o.push_back(x->type.isScalar() ? scalar(x) : elem(x, cs));
    return ew_.apply(op, o, error_);
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
  if (ir::isElementwise(op->kind)) {
    std::vector<llvm::Value*> o;
    for (const ir::Value* x : op->operands) o.push_back(x->type.isScalar() ? splat(scalar(x)) : vec(x, row, chunk));
    return ew_.apply(op, o, error_);
  }
  error_ = fmt::format("internal error: no vector generator for op '{}'", ir::opName(op->kind));
  return llvm::PoisonValue::get(vty(rt.elem));
}

// ---------------------------------------------------------------- program

llvm::Function* LaneEmitter::emitProgram(const std::string& name, std::string& error) {
  entry_ = beginFunction(name);
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
  loadParams([&](const ir::Value* prm, llvm::Value* ptr) {
    scalars_[prm->id] = b_.CreateLoad(sty(prm->type.elem), ptr, prm->name);
  });
  decomposeRootIds(
      f_->getArg(1), [](llvm::Value* extent) { return extent; },
      [&](const ir::Value* axis, llvm::Value* id) { scalars_[axis->id] = id; });
  emitRegion(k_.root()->regions[0]);
  return finishFunction(error);
}

// A conversion hoisted after `op` (Conversion::after) is made right after it.
void LaneEmitter::afterOp(const Op* op) {
  for (const plan::Conversion& c : lp_.conversions)
    if (c.after == op && error_.empty()) emitConversion(c);
}

void LaneEmitter::emitOp(const Op* op) {
  switch (op->kind) {
    case OpKind::Load: emitLoad(op); return;
    case OpKind::Store: emitStore(op); return;
    case OpKind::Serial:
    case OpKind::Pipeline: emitLoop(op); return;
    case OpKind::Reduce: emitReduce(op); return;
    case OpKind::Mma:
      for (const plan::Conversion& c : lp_.conversions)
        if (c.at == op && !c.after && !c.fused) emitConversion(c);
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

// ---------------------------------------------------------------- extract

llvm::Value* LaneEmitter::emitExtract(const Op* op) {
  const ir::Value* x = op->operands[0];
  const ir::Type& xt = x->type;
  if (xt.isScalar()) return scalar(x);
  llvm::Value* ok = nullptr;
  const Coords cs = extractCoords(
      op, [&](const ir::Index& ix) { return scalar(ix.value); }, ok);
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
    forEachVector(l, [&](Ix row, Ix chunk) {
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
    for (size_t i : lp_.loops.at(op).staged) {
      const ir::Value* y = yield->operands[i];
      llvm::IRBuilder<>::InsertPointGuard g(b_);
      b_.SetInsertPoint(entry_, entry_->getFirstInsertionPt());
      Elem e = y->type.elem == Elem::I1 ? Elem::I64 : y->type.elem;
      auto* tmp = b_.CreateAlloca(llvm::ArrayType::get(vty(e), static_cast<uint64_t>(layoutOf(i).vectors())));
      staged.push_back({i, tmp});
    }
    for (auto& [i, tmp] : staged) {
      const ir::Value* y = yield->operands[i];
      Elem e = y->type.elem == Elem::I1 ? Elem::I64 : y->type.elem;
      forEachVector(layoutOf(i), [&](Ix row, Ix chunk) {
        Ix vi = vindex(y, row, chunk);
        llvm::Value* x = vec(y, row, chunk);
        if (y->type.elem == Elem::I1) x = b_.CreateZExt(x, vty(Elem::I64));
        b_.CreateStore(x, b_.CreateInBoundsGEP(vty(e), tmp, val(vi)));
      });
    }
    for (size_t i = 0; i < nc; ++i) {
      const plan::Layout& l = layoutOf(i);
      const ir::Value* y = yield->operands[i];
      if (l.rep != LaneRep::Panel || y == body->args[i + 1] || plan::inPlace(lp_.loops.at(op), i)) continue;
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

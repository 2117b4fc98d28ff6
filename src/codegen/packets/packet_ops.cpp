// The packets realization (local_lanes=1), its ops: the packet function, control flow, and the element generators of
// every op.
#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

#include <fmt/format.h>

#include "codegen/lower.h"
#include "codegen/packets/packet_emitter.h"

namespace kiln::codegen {

using ir::Elem;
using ir::Op;
using ir::OpKind;

llvm::Function* PacketEmitter::emitPacket(const std::string& name, std::string& error) {
  beginFunction(name);
  llvm::Value* first = f_->getArg(1);

  ssa_.assign(k_.values.size(), {});
  // Private arrays (snapshots): one per storage slot, [elements x <W x T>].
  slots_.assign(p_.storage_elements.size(), nullptr);
  for (const auto& v : k_.values) {
    int slot = p_.storage_of[v->id];
    if (slot < 0 || slots_[slot]) continue;
    auto* arr = llvm::ArrayType::get(vecTy(v->type.elem), static_cast<uint64_t>(p_.storage_elements[slot]));
    auto* a = b_.CreateAlloca(arr, nullptr, fmt::format("snapshot.{}", v->name));
    a->setAlignment(llvm::Align(64));
    slots_[slot] = a;
  }
  // Parameters: view base pointers and splatted scalars.
  loadParams([&](const ir::Value* prm, llvm::Value* ptr) {
    ssa_[prm->id] = {splat(b_.CreateLoad(scalarTy(prm->type.elem), ptr, prm->name))};
  });
  // Lanes: program ids first .. first+W-1, masked beyond the domain.
  std::vector<llvm::Constant*> lanes;
  for (unsigned l = 0; l < w_; ++l) lanes.push_back(b_.getInt64(l));
  laneIota_ = llvm::ConstantVector::get(lanes);
  llvm::Value* ids = b_.CreateAdd(splat(first), laneIota_, "program");
  llvm::Value* programs = domainPrograms(b_, f_->getArg(0), *k_.root());
  auto splatExtent = [&](llvm::Value* e) {
    if (auto* c = llvm::dyn_cast<llvm::ConstantInt>(e)) return splatI64(c->getSExtValue());
    return b_.CreateVectorSplat(w_, e);
  };
  mask_ = full_ ? allTrue() : b_.CreateICmpULT(ids, splatExtent(programs), "active");
  decomposeRootIds(ids, splatExtent, [&](const ir::Value* axis, llvm::Value* id) { ssa_[axis->id] = {id}; });
  emitRegion(k_.root()->regions[0]);
  return finishFunction(error);
}

void PacketEmitter::emitOp(const Op* op) {
  switch (op->kind) {
    case OpKind::Store: emitStore(op); return;
    case OpKind::Serial:
    case OpKind::Pipeline: emitLoop(op); return;
    case OpKind::Reduce: define(op->results[0], [&](Ix o) { return genReduce(op, o); }); return;
    case OpKind::Mma: {
      int64_t r = p_.mma.at(op).output_block;
      defineGroups(op->results[0], r, [&](Ix first) { return genMmaGroup(op, first, r); });
      return;
    }
    case OpKind::Extract: ssa_[op->results[0]->id] = {genExtract(op)}; return;
    default: define(op->results[0], [&](Ix idx) { return genElement(op, idx); }); return;
  }
}

// ---------------------------------------------------------------- elementwise

llvm::Value* PacketEmitter::genElement(const Op* op, Ix idx) {
  const ir::Type& rt = op->results[0]->type;
  switch (op->kind) {
    case OpKind::Const: return constVec(rt.elem, op->fconst, op->iconst);
    case OpKind::Iota: {
      std::vector<Ix> cs = coords(rt, idx);
      return splat(val(cs[rt.findDim(op->dims[0])]));
    }
    case OpKind::Broadcast: {
      const ir::Value* x = op->operands[0];
      std::vector<Ix> cs = coords(rt, idx);
      std::vector<Ix> xcs;
      for (const ir::Dim& d : x->type.dims) xcs.push_back(cs[rt.findDim(d.name)]);
      return read(x, linear(x->type, xcs));
    }
    case OpKind::Load: {
      std::vector<Ix> cs = coords(rt, idx);
      llvm::Value* inb = nullptr;
      llvm::Value* ptrs = viewAccess(op, cs, rt, inb);
      llvm::Value* m = inb ? b_.CreateAnd(mask_, inb) : mask_;
      const ir::Value* view = op->operands[0];
      llvm::Type* vt = llvm::FixedVectorType::get(memType(view), w_);
      return widenLoaded(view, b_.CreateMaskedGather(vt, ptrs, memAlign(view), m, splat(memFill(op))));
    }
    default: break;
  }
  if (ir::isElementwise(op->kind)) {
    // Operands are read last to first: the order this realization has always emitted them in
    // (the same objects as before the shared dispatch).
    std::vector<llvm::Value*> o(op->operands.size());
    for (size_t i = o.size(); i-- > 0;) o[i] = read(op->operands[i], idx);
    return ew_.apply(op, o, error_);
  }
  error_ = fmt::format("no element generator for op '{}'", ir::opName(op->kind));
  return zeroVec(rt.elem);
}

// ---------------------------------------------------------------- reduce

llvm::Value* PacketEmitter::genReduce(const Op* op, Ix out) {
  const ir::Value* x = op->operands[0];
  const ir::Value* init = op->operands[1];
  const ir::Type& rt = op->results[0]->type;
  const plan::ReducePlan& rp = p_.reduce.at(op);
  Elem e = rt.elem;
  ir::Type red = ir::Type::tile(x->type.elem, {});
  for (const ir::Dim& d : x->type.dims)
    if (std::find(op->dims.begin(), op->dims.end(), d.name) != op->dims.end()) red.dims.push_back(d);
  std::vector<Ix> ocs = coords(rt, out);
  auto contribution = [&](Ix j) {
    std::vector<Ix> jcs = coords(red, j);
    std::vector<Ix> xcs;
    for (const ir::Dim& d : x->type.dims) {
      int ri = red.findDim(d.name);
      xcs.push_back(ri >= 0 ? jcs[ri] : ocs[rt.findDim(d.name)]);
    }
    return read(x, linear(x->type, xcs));
  };
  llvm::Value* s = read(init, out);
  int64_t n = rp.contributions;
  if (n == 0) return s;
  int64_t parts = std::min<int64_t>(rp.partitions, n);
  // Partition p folds contributions p, p+P, p+2P, ... starting from its first one.
  std::vector<llvm::Value*> part(parts);
  for (int64_t p = 0; p < parts; ++p) part[p] = contribution(Ix{nullptr, p});
  // `ordered` folds from the initial value: ((init ⊕ c0) ⊕ c1) ⊕ ... (the tree's init is merged last).
  const bool ordered = op->reduce_policy.kind == ir::ReducePolicy::Kind::Ordered;
  if (ordered) part[0] = ew_.combine(op->reduce, s, part[0], e);
  int64_t chunks = n / rp.partitions;  // full chunks of P contributions
  auto step = [&](Ix base, std::vector<llvm::Value*> cur) {
    for (int64_t p = 0; p < parts; ++p)
      cur[p] = ew_.combine(op->reduce, cur[p], contribution(add(base, Ix{nullptr, p})), e);
    return cur;
  };
  if (rp.rolled) {
    part = loop(b_.getInt64(1), b_.getInt64(std::max<int64_t>(chunks, 1)), 1, part,
                [&](llvm::Value* t, const std::vector<llvm::Value*>& cur) {
                  return step(mul(Ix{t, 0}, rp.partitions), cur);
                });
  } else {
    for (int64_t t = 1; t < chunks; ++t) part = step(Ix{nullptr, t * rp.partitions}, part);
  }
  // The last, partial chunk (when P does not divide n, and n > P).
  for (int64_t j = std::max<int64_t>(chunks, 1) * rp.partitions; j < n; ++j) {
    int64_t p = j % rp.partitions;
    part[p] = ew_.combine(op->reduce, part[p], contribution(Ix{nullptr, j}), e);
  }
  if (ordered) return part[0];
  for (int64_t p = 0; p < parts; ++p) s = ew_.combine(op->reduce, s, part[p], e);
  return s;
}

// ---------------------------------------------------------------- mma

std::vector<llvm::Value*> PacketEmitter::genMmaGroup(const Op* op, Ix first, int64_t group) {
  const ir::Value* a = op->operands[0];
  const ir::Value* bv = op->operands[1];
  const ir::Value* acc = op->operands[2];
  const ir::Type& at = acc->type;
  const plan::MmaPlan& mp = p_.mma.at(op);
  ir::Type ct = ir::Type::tile(Elem::F32, {});
  for (const std::string& d : op->dims) ct.dims.push_back(a->type.dims[a->type.findDim(d)]);
  std::vector<Ix> ocs0 = coords(at, first);
  std::vector<std::vector<Ix>> ocs(group, ocs0);
  for (int64_t r = 1; r < group; ++r) ocs[r].back() = add(ocs0.back(), Ix{nullptr, r});
  std::vector<llvm::Value*> s(group);
  for (int64_t r = 0; r < group; ++r) s[r] = read(acc, add(first, Ix{nullptr, r}));
  if (mp.k == 0) return s;
  auto operandIndex = [&](const ir::Value* v, const std::vector<Ix>& oc, const std::vector<Ix>& kc) {
    std::vector<Ix> cs;
    for (const ir::Dim& d : v->type.dims) {
      int ci = ct.findDim(d.name);
      cs.push_back(ci >= 0 ? kc[ci] : oc[at.findDim(d.name)]);
    }
    return linear(v->type, cs);
  };
  const std::string inner = at.dims.empty() ? std::string() : at.dims.back().name;
  bool aShared = group > 1 && a->type.findDim(inner) < 0;
  bool bShared = group > 1 && bv->type.findDim(inner) < 0;
  // The operand pairs of the group's outputs at contraction index k.
  auto terms = [&](Ix k) {
    std::vector<Ix> kc = coords(ct, k);
    std::vector<std::pair<llvm::Value*, llvm::Value*>> t;
    llvm::Value* a0 = nullptr;
    llvm::Value* b0 = nullptr;
    for (int64_t r = 0; r < group; ++r) {
      llvm::Value* av = aShared && a0 ? a0 : read(a, operandIndex(a, ocs[r], kc));
      llvm::Value* bw = bShared && b0 ? b0 : read(bv, operandIndex(bv, ocs[r], kc));
      a0 = av;
      b0 = bw;
      t.push_back({av, bw});
    }
    return t;
  };
  auto body = [&](Ix k, std::vector<llvm::Value*> cur) {
    auto t = terms(k);
    for (int64_t r = 0; r < group; ++r) cur[r] = ew_.multiplyAdd(t[r].first, t[r].second, cur[r], op->mma_policy);
    return cur;
  };
  if (ir::bf16Order(op->mma_policy)) {
    // docs/ir.md, MMA, bf16_dot or bf16_pairs: rounds of 32 or 2 (whole rounds by a loop when
    // rolled); bf16_dot's last block completed with +0 products, per block an even and an odd
    // chain from +0, then the merge; bf16_pairs' pairs one chain, k+1 before k.
    const int64_t R = ir::mmaRound(op->mma_policy), full = mp.k / R, tail = mp.k % R;
    if (mp.k == 0) return s;  // K = 0 gives the accumulator as it is
    for (int64_t r = 0; r < group; ++r) s[r] = ew_.flushTiny(s[r]);
    auto block = [&](Ix k0, int64_t count, std::vector<llvm::Value*> cur) {
      return ew_.bf16Round(op->mma_policy, std::move(cur), count, [&](int64_t j) {
        return terms(add(k0, Ix{nullptr, j}));
      });
    };
    if (mp.contraction_rolled && full > 1)
      s = loop(b_.getInt64(0), b_.getInt64(full), 1, s, [&](llvm::Value* t, const std::vector<llvm::Value*>& c) {
        return block(mul(Ix{t, 0}, R), R, c);
      });
    else
      for (int64_t t = 0; t < full; ++t) s = block(Ix{nullptr, t * R}, R, s);
    if (tail > 0) s = block(Ix{nullptr, full * R}, tail, s);
    return s;
  }
  if (const int64_t P = op->mma_policy.partitions; P > 0) {
    // docs/ir.md, MMA: partition q = k mod P (part[r * P + q]), each from its first product;
    // later contributions fold in ascending k, whole rounds of P by a loop when rolled; then
    // each output merges its partitions in order.
    const int64_t parts = std::min(P, mp.k), rounds = mp.k / P;
    std::vector<llvm::Value*> part(group * P);
    for (int64_t q = 0; q < parts; ++q) {
      auto t = terms(Ix{nullptr, q});
      for (int64_t r = 0; r < group; ++r) part[r * P + q] = ew_.mmaProduct(t[r].first, t[r].second, op->mma_policy);
    }
    auto fold = [&](Ix k, int64_t q, std::vector<llvm::Value*>& cur) {
      auto t = terms(k);
      for (int64_t r = 0; r < group; ++r)
        cur[r * P + q] = ew_.multiplyAdd(t[r].first, t[r].second, cur[r * P + q], op->mma_policy);
    };
    int64_t next = parts;
    if (mp.contraction_rolled && rounds > 1) {
      part =
          loop(b_.getInt64(1), b_.getInt64(rounds), 1, part, [&](llvm::Value* t, const std::vector<llvm::Value*>& c) {
            std::vector<llvm::Value*> cur = c;
            for (int64_t q = 0; q < P; ++q) fold(add(mul(Ix{t, 0}, P), Ix{nullptr, q}), q, cur);
            return cur;
          });
      next = rounds * P;
    }
    for (int64_t k = next; k < mp.k; ++k) fold(Ix{nullptr, k}, k % P, part);
    for (int64_t r = 0; r < group; ++r)
      for (int64_t q = 0; q < parts; ++q) s[r] = ew_.mmaMerge(s[r], part[r * P + q], op->mma_policy);
    return s;
  }
  if (mp.contraction_rolled)
    return loop(b_.getInt64(0), b_.getInt64(mp.k), 1, s, [&](llvm::Value* k, const std::vector<llvm::Value*>& cur) {
      return body(Ix{k, 0}, cur);
    });
  for (int64_t k = 0; k < mp.k; ++k) s = body(Ix{nullptr, k}, s);
  return s;
}

// ---------------------------------------------------------------- extract

llvm::Value* PacketEmitter::genExtract(const Op* op) {
  const ir::Value* x = op->operands[0];
  const ir::Type& xt = x->type;
  Elem e = xt.elem;
  bool uniform = true;
  for (const ir::Index& ix : op->indices)
    if (!ix.isConstant() && !p_.isUniform(ix.value)) uniform = false;
  if (uniform) {
    llvm::Value* ok = nullptr;
    const std::vector<Ix> cs = extractCoords(
        op, [&](const ir::Index& ix) { return uniformScalar(ix); }, ok);
    llvm::Value* got = read(x, linear(xt, cs));
    return ok ? b_.CreateSelect(ok, got, zeroVec(e)) : got;
  }
  // Per-lane indices: each lane reads its own element (0 when out of range).
  llvm::Value* lin = splatI64(0);
  llvm::Value* ok = allTrue();
  int64_t stride = 1;
  for (int d = static_cast<int>(op->indices.size()) - 1; d >= 0; --d) {
    llvm::Value* v = laneIndex(op->indices[d]);
    ok = b_.CreateAnd(ok, b_.CreateICmpULT(v, splatI64(xt.dims[d].extent)));
    lin = b_.CreateAdd(lin, b_.CreateMul(v, splatI64(stride)));
    stride *= xt.dims[d].extent;
  }
  if (p_.repOf(x) == plan::Rep::Snapshot) {
    llvm::Value* slot = storagePtr(x, Ix{nullptr, 0});
    llvm::Value* off = b_.CreateAdd(b_.CreateMul(lin, splatI64(w_)), laneIota_);
    llvm::Value* ptrs = b_.CreateInBoundsGEP(scalarTy(e), slot, off);
    return b_.CreateMaskedGather(vecTy(e), ptrs, llvm::Align(1), b_.CreateAnd(ok, mask_), zeroVec(e));
  }
  llvm::Value* r = zeroVec(e);
  for (int64_t i = 0; i < xt.numElements(); ++i)
    r = b_.CreateSelect(b_.CreateICmpEQ(lin, splatI64(i)), read(x, Ix{nullptr, i}), r);
  // Every index must lie inside its own dim; an in-range flattened offset is not enough.
  return b_.CreateSelect(ok, r, zeroVec(e));
}

// ---------------------------------------------------------------- memory

llvm::Value* PacketEmitter::viewAccess(const Op* op, const std::vector<Ix>& tileCoords, const ir::Type& tileType,
                                       llvm::Value*& inBounds) {
  const ir::Value* view = op->operands[0];
  const auto& vd = view->type.dims;
  llvm::Value* offset = nullptr;
  inBounds = nullptr;
  int64_t stride = 1;
  for (int k = static_cast<int>(vd.size()) - 1; k >= 0; --k) {
    llvm::Value* c = laneIndex(op->indices[k]);
    const ir::Dim& acc = op->access[k];
    if (!acc.name.empty()) {
      Ix t = tileCoords[tileType.findDim(acc.name)];
      if (!(t.isConst() && t.c == 0)) c = b_.CreateAdd(c, splat(val(t)));
    }
    llvm::Value* in = b_.CreateICmpULT(c, splatI64(vd[k].extent));
    inBounds = inBounds ? b_.CreateAnd(inBounds, in) : in;
    llvm::Value* term = stride == 1 ? c : b_.CreateMul(c, splatI64(stride));
    offset = offset ? b_.CreateAdd(offset, term) : term;
    stride *= vd[k].extent;
  }
  return b_.CreateInBoundsGEP(memType(view), base_[view->index], offset);
}

void PacketEmitter::emitStore(const Op* op) {
  const ir::Value* tile = op->operands[1];
  const ir::Type& tt = tile->type;
  int64_t n = tt.numElements();
  auto one = [&](Ix idx) {
    std::vector<Ix> cs = coords(tt, idx);
    llvm::Value* inb = nullptr;
    llvm::Value* ptrs = viewAccess(op, cs, tt, inb);
    llvm::Value* m = inb ? b_.CreateAnd(mask_, inb) : mask_;
    const ir::Value* view = op->operands[0];
    b_.CreateMaskedScatter(narrowStored(view, read(tile, idx)), ptrs, memAlign(view), m);
  };
  if (p_.largeTile(n)) {
    loopFor(n, [&](llvm::Value* iv) { one(Ix{iv, 0}); });
  } else {
    for (int64_t e = 0; e < n; ++e) one(Ix{nullptr, e});
  }
}

// ---------------------------------------------------------------- loops

void PacketEmitter::copyInto(const ir::Value* dst, const ir::Value* src, llvm::Value* laneSelect) {
  int64_t n = dst->type.numElements();
  if (n == 0) return;
  loopFor(n, [&](llvm::Value* iv) {
    llvm::Value* v = read(src, Ix{iv, 0});
    llvm::Value* ptr = storagePtr(dst, Ix{iv, 0});
    if (laneSelect) v = b_.CreateSelect(laneSelect, v, b_.CreateLoad(vecTy(dst->type.elem), ptr));
    b_.CreateStore(v, ptr);
  });
}

void PacketEmitter::emitLoop(const Op* op) {
  const ir::Region* body = op->regions[0];
  const ir::Value* ivArg = body->args[0];
  const Op* yield = body->ops.empty() ? nullptr : body->ops.back();
  size_t nc = op->results.size();
  bool uniform = true;
  for (int i = 0; i < 2; ++i)
    if (!op->indices[i].isConstant() && !p_.isUniform(op->indices[i].value)) uniform = false;
  int64_t step = op->indices[2].constant;

  // Carried values: SSA ones become phis (flattened), snapshot ones live in their storage.
  std::vector<llvm::Value*> flat;
  for (size_t i = 0; i < nc; ++i) {
    const ir::Value* arg = body->args[i + 1];
    const ir::Value* init = op->operands[i];
    if (p_.repOf(arg) == plan::Rep::Snapshot) {
      copyInto(arg, init, nullptr);
    } else {
      for (int64_t e = 0; e < arg->type.numElements(); ++e) flat.push_back(read(init, Ix{nullptr, e}));
    }
  }
  auto unflatten = [&](const std::vector<llvm::Value*>& vals, bool results) {
    size_t at = 0;
    for (size_t i = 0; i < nc; ++i) {
      const ir::Value* arg = body->args[i + 1];
      if (p_.repOf(arg) == plan::Rep::Snapshot) continue;
      int64_t n = arg->type.numElements();
      std::vector<llvm::Value*> elems(vals.begin() + at, vals.begin() + at + n);
      at += n;
      ssa_[results ? op->results[i]->id : arg->id] = elems;
    }
  };
  auto next = [&](const std::vector<llvm::Value*>& cur, llvm::Value* active) {
    std::vector<llvm::Value*> out;
    for (size_t i = 0; i < nc; ++i) {
      const ir::Value* arg = body->args[i + 1];
      if (p_.repOf(arg) == plan::Rep::Snapshot) continue;
      for (int64_t e = 0; e < arg->type.numElements(); ++e) out.push_back(read(yield->operands[i], Ix{nullptr, e}));
    }
    if (active)
      for (size_t j = 0; j < out.size(); ++j) out[j] = b_.CreateSelect(active, out[j], cur[j]);
    // A carried snapshot yielded in another's place (e.g. a swap) is staged in a temporary
    // first, so that no copy reads storage an earlier copy has overwritten.
    std::vector<std::pair<size_t, llvm::Value*>> staged;
    for (size_t i : p_.staged_carries.at(op)) {
      const ir::Value* y = yield->operands[i];
      int64_t n = body->args[i + 1]->type.numElements();
      llvm::IRBuilder<>::InsertPointGuard guard(b_);
      b_.SetInsertPoint(&f_->getEntryBlock(), f_->getEntryBlock().getFirstInsertionPt());
      auto* tmp = b_.CreateAlloca(llvm::ArrayType::get(vecTy(y->type.elem), static_cast<uint64_t>(n)));
      tmp->setAlignment(llvm::Align(64));
      staged.push_back({i, tmp});
    }
    for (auto& [i, tmp] : staged) {
      const ir::Value* y = yield->operands[i];
      loopFor(y->type.numElements(), [&](llvm::Value* iv) {
        b_.CreateStore(read(y, Ix{iv, 0}), b_.CreateInBoundsGEP(vecTy(y->type.elem), tmp, iv));
      });
    }
    for (size_t i = 0; i < nc; ++i) {
      const ir::Value* arg = body->args[i + 1];
      if (p_.repOf(arg) != plan::Rep::Snapshot) continue;
      auto it = std::find_if(staged.begin(), staged.end(), [&](const auto& s) { return s.first == i; });
      if (it == staged.end()) {
        copyInto(arg, yield->operands[i], active);
        continue;
      }
      llvm::Value* tmp = it->second;
      llvm::Type* vt = vecTy(arg->type.elem);
      loopFor(arg->type.numElements(), [&](llvm::Value* iv) {
        llvm::Value* v = b_.CreateLoad(vt, b_.CreateInBoundsGEP(vt, tmp, iv));
        llvm::Value* ptr = storagePtr(arg, Ix{iv, 0});
        if (active) v = b_.CreateSelect(active, v, b_.CreateLoad(vt, ptr));
        b_.CreateStore(v, ptr);
      });
    }
    return out;
  };

  if (uniform) {
    llvm::Value* lo = uniformScalar(op->indices[0]);
    llvm::Value* hi = uniformScalar(op->indices[1]);
    std::vector<llvm::Value*> fin =
        loop(lo, hi, step, flat, [&](llvm::Value* iv, const std::vector<llvm::Value*>& cur) {
          ssa_[ivArg->id] = {splat(iv)};
          unflatten(cur, false);
          emitRegion(body);
          return next(cur, nullptr);
        });
    unflatten(fin, true);
    return;
  }
  // Divergent bounds: lanes iterate lo_l, lo_l+step, ... < hi_l; the loop runs while any lane
  // is active, and inactive lanes keep their carried values and do not store.
  llvm::Value* lo = laneIndex(op->indices[0]);
  llvm::Value* hi = laneIndex(op->indices[1]);
  llvm::Value* outer = mask_;
  llvm::Value* active = nullptr;
  std::vector<llvm::Value*> fin = buildLoop(
      b_, f_, b_.getInt64(0), 1, "trip", flat,
      [&](llvm::Value* trip) {
        llvm::Value* iv = b_.CreateAdd(lo, splat(b_.CreateMul(trip, b_.getInt64(step))));
        active = b_.CreateAnd(outer, b_.CreateICmpSLT(iv, hi));
        ssa_[ivArg->id] = {iv};
        return b_.CreateOrReduce(active);
      },
      [&](llvm::Value*, const std::vector<llvm::Value*>& cur) {
        mask_ = active;
        unflatten(cur, false);
        emitRegion(body);
        return next(cur, active);
      },
      /*noUnroll=*/false);
  mask_ = outer;
  unflatten(fin, true);
}

}  // namespace kiln::codegen

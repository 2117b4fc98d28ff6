// The block realization's program (see block_emitter.h and src/plan/block.cpp).
//
// Barriers: a stage's shared stores are followed by a barrier before the first shared read
// (pending_writes_); a single-buffered stage's stores wait for a barrier after the last shared
// read of the previous contents (pending_reads_). A double-buffered stage writes buffer
// parity(i) in trip i: the barrier of trip i-1 already separates those stores from the reads of
// trip i-2, the last to use that buffer, so it needs none before; a barrier at the loop's exit
// keeps a later run of the loop from writing buffer 0 while a thread still reads it. Loops make
// both flags conservative (set) at their entry and exit.
#include <llvm/IR/InlineAsm.h>

#include "codegen/block/block_emitter.h"

#include <fmt/format.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <algorithm>
#include <functional>

namespace kiln::codegen {

using ir::Elem;
using ir::Op;
using ir::OpKind;

namespace {
constexpr unsigned kSharedAddressSpace = 3;
constexpr const char* kDynamicShared = "kiln_dynamic_shared";

bool within(const ir::Region* r, const ir::Region* outer) {
  for (; r; r = r->parent ? r->parent->parent : nullptr)
    if (r == outer) return true;
  return false;
}

// The region a value is made in (nullptr: a parameter or workspace, outside every region).
const ir::Region* madeIn(const ir::Value* v) {
  if (v->origin == ir::Value::Origin::RegionArg) return v->region;
  if (v->origin == ir::Value::Origin::OpResult && v->def) return v->def->parent;
  return nullptr;
}

// The loops (serial ops) around `op`, innermost first.
std::vector<const Op*> loopsAround(const Op* op) {
  std::vector<const Op*> loops;
  for (const ir::Region* r = op->parent; r && r->parent; r = r->parent->parent)
    if (r->parent->kind == OpKind::Serial || r->parent->kind == OpKind::Pipeline) loops.push_back(r->parent);
  return loops;
}

}  // namespace

BlockEmitter::BlockEmitter(const ir::Kernel& kernel, const plan::Plan& plan, llvm::Module& module)
    : ProgramEmitter(kernel, plan, module, /*noUnrollLoops=*/false), bp_(plan.block) {}

llvm::Type* BlockEmitter::sty(Elem e) {
  return e == Elem::I64 ? b_.getInt64Ty() : e == Elem::I1 ? b_.getInt1Ty() : b_.getFloatTy();
}

llvm::Value* BlockEmitter::rowCoord(int64_t r) {
  const int64_t g = bp_.group_y;
  return b_.CreateAdd(b_.CreateMul(ty_, b_.getInt64(g)), b_.getInt64((r / g) * bp_.threads_y * g + r % g));
}

llvm::Value* BlockEmitter::colCoord(const plan::BlockDim& x, int64_t c) {
  const int64_t g = x.group;
  return b_.CreateAdd(b_.CreateMul(tx_, b_.getInt64(g)), b_.getInt64((c / g) * bp_.threads_x * g + c % g));
}

// A row dim's coordinate: the flattened row index, row-major over the rows' dims.
llvm::Value* BlockEmitter::coordOf(const std::string& dim, int64_t r, int64_t c) {
  if (const int i = bp_.rowDim(dim); i >= 0) {
    int64_t inner = 1;
    for (size_t j = i + 1; j < bp_.ys.size(); ++j) inner *= bp_.ys[j].extent;
    llvm::Value* y = rowCoord(r);
    if (inner > 1) y = b_.CreateUDiv(y, b_.getInt64(inner));
    return i == 0 ? y : b_.CreateURem(y, b_.getInt64(bp_.ys[i].extent));
  }
  if (const plan::BlockDim* x = bp_.columnDim(dim)) return colCoord(*x, c);
  return b_.getInt64(0);
}

llvm::Value* BlockEmitter::scalar(const ir::Value* v) {
  auto it = scalars_.find(v->id);
  if (it != scalars_.end()) return it->second;
  error_ = fmt::format("internal error: scalar %{} used before its definition", v->name);
  return llvm::PoisonValue::get(sty(v->type.elem));
}

llvm::Value* BlockEmitter::at(const ir::Value* v, int64_t r, int64_t c) {
  if (v->type.isScalar()) return scalar(v);
  auto it = tiles_.find(v->id);
  if (it == tiles_.end()) {
    error_ = fmt::format("internal error: tile %{} used before its definition", v->name);
    return llvm::PoisonValue::get(sty(v->type.elem));
  }
  return it->second[(hasY(v) ? r : 0) * cols(v) + (columnOf(v) ? c : 0)];
}

void BlockEmitter::define(const ir::Value* v, const std::function<llvm::Value*(int64_t, int64_t)>& gen) {
  if (v->type.isScalar()) {
    scalars_[v->id] = gen(0, 0);
    return;
  }
  Tile t;
  for (int64_t r = 0; r < rows(v); ++r)
    for (int64_t c = 0; c < cols(v); ++c) t.push_back(gen(r, c));
  tiles_[v->id] = std::move(t);
}

// A scalar at another trip of the loop being emitted: the override's values, and the body's
// constants and scalar element-wise ops over them recomputed (the plan admits nothing else in
// an early origin: BlockPlanner::earlyComputable).
llvm::Value* BlockEmitter::scalarAt(const ir::Value* v, const Override& over) {
  auto it = over.find(v->id);
  if (it != over.end()) return it->second;
  const Op* d = v->def;
  if (!d || !v->type.isScalar()) return scalar(v);
  if (d->kind == OpKind::Const) return constant(d);
  if (!ir::isElementwise(d->kind)) return scalar(v);
  std::function<bool(const ir::Value*)> reaches = [&](const ir::Value* x) {
    if (over.count(x->id)) return true;
    if (!x->def || !x->type.isScalar() || !ir::isElementwise(x->def->kind)) return false;
    for (const ir::Value* o : x->def->operands)
      if (reaches(o)) return true;
    return false;
  };
  // A value made inside a loop whose trip `over` gives is made again: its scalars_ entry may be
  // another emission's of that body (a loop emitted twice, batches then the trips past them,
  // inside a loop itself so emitted), which need not dominate this one.
  bool inLoop = false;
  for (const auto& [id, value] : over) {
    const ir::Value* x = k_.values[static_cast<size_t>(id)].get();
    inLoop = inLoop || (x->origin == ir::Value::Origin::RegionArg && within(d->parent, x->region));
  }
  if (!reaches(v) && !inLoop && scalars_.count(v->id)) return scalar(v);
  std::vector<llvm::Value*> ops;
  for (const ir::Value* o : d->operands) ops.push_back(scalarAt(o, over));
  return ew_.apply(d, ops, error_);
}

llvm::Value* BlockEmitter::constant(const Op* op) {
  const Elem e = op->results[0]->type.elem;
  if (e == Elem::I64) return b_.getInt64(op->iconst);
  if (e == Elem::I1) return b_.getInt1(op->iconst != 0);
  return llvm::ConstantFP::get(b_.getFloatTy(), static_cast<float>(op->fconst));
}

llvm::Value* BlockEmitter::indexValue(const ir::Index& ix, const Override* over) {
  if (ix.isConstant()) return b_.getInt64(ix.constant);
  return over ? scalarAt(ix.value, *over) : scalar(ix.value);
}

llvm::Value* BlockEmitter::elementPointer(const Op* op, const std::function<llvm::Value*(const std::string&)>& coord,
                                          const Override* over, llvm::Value*& inBounds) {
  const ir::Value* view = op->operands[0];
  const auto& vd = view->type.dims;
  llvm::Value* offset = b_.getInt64(0);
  inBounds = b_.getTrue();
  int64_t stride = 1;
  for (int k = static_cast<int>(vd.size()) - 1; k >= 0; --k) {
    llvm::Value* c = indexValue(op->indices[k], over);
    const ir::Dim& a = op->access[k];
    if (!a.name.empty()) c = b_.CreateAdd(c, coord(a.name));
    inBounds = b_.CreateAnd(inBounds, b_.CreateICmpULT(c, b_.getInt64(vd[k].extent)));
    offset = b_.CreateAdd(offset, stride == 1 ? c : b_.CreateMul(c, b_.getInt64(stride)));
    stride *= vd[k].extent;
  }
  return b_.CreateGEP(memType(view), base_[view->index], offset);
}

void BlockEmitter::barrier() {
  b_.CreateIntrinsic(llvm::Intrinsic::nvvm_barrier_cta_sync_aligned_all, {}, {b_.getInt32(0)});
  pending_writes_ = pending_reads_ = scratch_busy_ = false;
  stored_.clear();
  loaded_.clear();
}

// Whether two accesses of one view may share an element (a == b: one access in two trips of
// its loops). Disjoint: some dim at constant origins whose ranges do not meet; or, for one op
// in two trips, origins the loops do not change (the same elements, each by the same thread)
// but at most one, the loop's induction variable times k with |k| x step at least the extent.
bool BlockEmitter::mayOverlap(const Op* a, const Op* b) const {
  auto extent = [](const Op* o, size_t p) { return o->access[p].name.empty() ? int64_t{1} : o->access[p].extent; };
  if (a == b) {
    const std::vector<const Op*> loops = loopsAround(a);
    int varying = 0;
    for (size_t p = 0; p < a->indices.size(); ++p) {
      const ir::Index& x = a->indices[p];
      if (x.isConstant()) continue;
      const ir::Region* at = madeIn(x.value);
      bool invariant = true;
      for (const Op* l : loops) invariant = invariant && !within(at, l->regions[0]);
      if (invariant) continue;
      // iv, iv * k or k * iv of one of the loops, whose trips then touch disjoint ranges.
      const ir::Value* iv = x.value;
      int64_t k = 1;
      if (const Op* d = x.value->def; d && d->kind == OpKind::Mul && d->operands.size() == 2) {
        for (int i = 0; i < 2; ++i)
          if (const Op* c = d->operands[1 - i]->def; c && c->kind == OpKind::Const && c->results[0]->type.isScalar() &&
                                                     c->results[0]->type.elem == ir::Elem::I64) {
            iv = d->operands[i];
            k = c->iconst;
          }
      }
      const Op* loop = nullptr;
      for (const Op* l : loops)
        if (iv->origin == ir::Value::Origin::RegionArg && iv->region == l->regions[0] && iv->index == 0) loop = l;
      if (!loop || !loop->indices[2].isConstant()) return true;
      const int64_t step = loop->indices[2].constant;
      if (++varying > 1 || std::abs(k) * std::abs(step) < extent(a, p)) return true;
    }
    return false;
  }
  for (size_t p = 0; p < a->indices.size() && p < b->indices.size(); ++p) {
    const ir::Index& x = a->indices[p];
    const ir::Index& y = b->indices[p];
    if (x.isConstant() && y.isConstant() &&
        (x.constant + extent(a, p) <= y.constant || y.constant + extent(b, p) <= x.constant))
      return false;
  }
  return true;
}

void BlockEmitter::beforeLoad(const Op* load) {
  const ir::Value* view = load->operands[0];
  if (auto it = stored_.find(view); it != stored_.end())
    for (const Op* s : it->second)
      if (mayOverlap(load, s)) {
        barrier();
        break;
      }
  if (written_.count(view)) loaded_[view].push_back(load);
}

void BlockEmitter::beforeStore(const Op* store) {
  const ir::Value* view = store->operands[0];
  bool wait = false;
  for (auto* pending : {&stored_, &loaded_})
    if (auto it = pending->find(view); it != pending->end())
      for (const Op* o : it->second) wait = wait || mayOverlap(store, o);
  if (wait) barrier();
  stored_[view].push_back(store);
}

void BlockEmitter::pendTrip(const ir::Region* body) {
  ir::walk(body, [&](const Op* o) {
    if (o->kind == OpKind::Store) stored_[o->operands[0]].push_back(o);
    if (o->kind == OpKind::Load && written_.count(o->operands[0])) loaded_[o->operands[0]].push_back(o);
  });
}

llvm::Value* BlockEmitter::sharedPointer(llvm::Value* floatIndex) {
  return b_.CreateInBoundsGEP(b_.getFloatTy(), shared_, floatIndex);
}

llvm::Value* BlockEmitter::scratchPointer(llvm::Value* floatIndex) {
  return sharedPointer(b_.CreateAdd(floatIndex, b_.getInt64(bp_.scratch_offset)));
}

// A reduction over the operand's column dim x whose threads_x threads lie in one warp segment
// (plan: BlockPlan::shuffle_reductions). Column j of a line is element c(j) of thread
// owner(j) of the row's segment (the layout of plan.h). When every partition of
// unordered_tree(P) lies in one thread (threads_x · group divides P), each thread folds its own
// partitions left to right and every thread gathers the P partials by shuffles and merges them
// in index order from the init; otherwise every thread gathers the line's N contributions and
// folds them exactly as the IR says. Either way every thread of the row ends with the same
// result, in the IR's order.
void BlockEmitter::reduceByShuffles(const Op* op) {
  const ir::Value* x = op->operands[0];
  const ir::Value* init = op->operands[1];
  const ir::Value* res = op->results[0];
  const plan::BlockDim& xd = *columnOf(x);
  const int64_t T = bp_.threads_x, G = xd.group, N = xd.extent;
  const bool ordered = op->reduce_policy.kind == ir::ReducePolicy::Kind::Ordered;
  const int64_t P = ordered                            ? 1
                    : op->reduce_policy.partitions > 0 ? op->reduce_policy.partitions
                                                       : p_.knobs.reduction_partitions;
  const Elem e = x->type.elem;
  llvm::Value* lane = b_.CreateTrunc(b_.CreateURem(tid_, b_.getInt64(32)), b_.getInt32Ty());
  llvm::Value* base = b_.CreateAnd(lane, b_.getInt32(static_cast<uint32_t>(~(T - 1))));  // the row's first lane
  auto owner = [&](int64_t j) { return (j / G) % T; };
  auto element = [&](int64_t j) { return (j / (T * G)) * G + j % G; };
  auto shuffle = [&](llvm::Value* v, int64_t fromThread) {
    return b_.CreateIntrinsic(b_.getFloatTy(), llvm::Intrinsic::nvvm_shfl_sync_idx_f32,
                              {b_.getInt32(0xffffffffu), v,
                               b_.CreateAdd(base, b_.getInt32(static_cast<uint32_t>(fromThread))), b_.getInt32(0x1f)});
  };
  if ((op->reduce == ir::ReduceKind::Max || op->reduce == ir::ReduceKind::Min) && e == Elem::F32 && xd.micro * T == N) {
    // max and min (NaN-propagating, -0 below +0) pick one operand of a total order: any order
    // of folding gives the IR's bits (a NaN is a NaN). Each thread folds its own elements, then
    // log2(T) butterfly shuffles within the row's lanes, then the init.
    define(res, [&](int64_t r, int64_t) {
      llvm::Value* v = at(x, r, 0);
      for (int64_t c = 1; c < xd.micro; ++c) v = ew_.combine(op->reduce, v, at(x, r, c), e);
      for (int64_t d = 1; d < T; d *= 2)
        v = ew_.combine(
            op->reduce, v,
            b_.CreateIntrinsic(b_.getFloatTy(), llvm::Intrinsic::nvvm_shfl_sync_bfly_f32,
                               {b_.getInt32(0xffffffffu), v, b_.getInt32(static_cast<uint32_t>(d)), b_.getInt32(0x1f)}),
            e);
      return ew_.combine(op->reduce, at(init, r, 0), v, e);
    });
    return;
  }
  const bool local = !ordered && P % (T * G) == 0;
  define(res, [&](int64_t r, int64_t) {
    llvm::Value* acc = at(init, r, 0);
    if (local) {
      // This thread's partitions q (owner(q) = tx): partial index i(q) = (q / (T·G))·G + q mod G.
      const int64_t mine = P / T;  // partitions per thread
      std::vector<llvm::Value*> partial(static_cast<size_t>(mine), nullptr);
      for (int64_t c = 0; c < xd.micro; ++c) {
        // Column of element c: (c / G)·T·G + tx·G + c mod G; its partition's index in the thread's list.
        const int64_t i = ((c / G) * T * G % P) / (T * G) * G + c % G;
        llvm::Value* v = at(x, r, c);
        partial[i] = partial[i] ? ew_.combine(op->reduce, partial[i], v, e) : v;
      }
      for (int64_t q = 0; q < std::min(P, N); ++q) {
        // Every lane offers its partial of the same index (one of its partitions; an empty
        // one, past N, offers 0: only owner(q)'s value is read).
        llvm::Value* mineQ = partial[static_cast<size_t>(element(q))];
        if (!mineQ) mineQ = llvm::ConstantFP::get(b_.getFloatTy(), 0.0);
        acc = ew_.combine(op->reduce, acc, shuffle(mineQ, owner(q)), e);
      }
      return acc;
    }
    std::vector<llvm::Value*> col(static_cast<size_t>(N));
    for (int64_t j = 0; j < N; ++j) col[j] = shuffle(at(x, r, element(j)), owner(j));
    if (ordered) {
      for (int64_t j = 0; j < N; ++j) acc = ew_.combine(op->reduce, acc, col[j], e);
      return acc;
    }
    for (int64_t q = 0; q < std::min(P, N); ++q) {
      llvm::Value* part = col[q];
      for (int64_t j = q + P; j < N; j += P) part = ew_.combine(op->reduce, part, col[j], e);
      acc = ew_.combine(op->reduce, acc, part, e);
    }
    return acc;
  });
}

// A reduction through the scratch area (plan.h, BlockPlan::scratch_*): every thread writes its
// elements of x (line-major; a line is a coordinate of the kept dim, contributions row-major
// over the reduced dims in x's order) and of a tile init; a barrier; thread w < lines x P folds
// contributions q, q + P, ... of line w / P (q = w mod P) left to right from its first, or, when
// ordered (P = 1), all of the line from the init; a barrier; each thread merges its result
// elements' partitions in index order from the init: the IR's order exactly.
void BlockEmitter::emitReduce(const Op* op) {
  if (bp_.shuffle_reductions.count(op)) {
    reduceByShuffles(op);
    return;
  }
  const ir::Value* x = op->operands[0];
  const ir::Value* init = op->operands[1];
  const ir::Value* res = op->results[0];
  const bool ordered = op->reduce_policy.kind == ir::ReducePolicy::Kind::Ordered;
  const int64_t P = ordered                            ? 1
                    : op->reduce_policy.partitions > 0 ? op->reduce_policy.partitions
                                                       : p_.knobs.reduction_partitions;
  std::vector<const ir::Dim*> reduced, kept;
  for (const ir::Dim& d : x->type.dims)
    (std::find(op->dims.begin(), op->dims.end(), d.name) != op->dims.end() ? reduced : kept).push_back(&d);
  int64_t n = 1;
  for (const ir::Dim* d : reduced) n *= d->extent;
  const int64_t lines = res->type.numElements();
  const int64_t initAt = lines * n, partsAt = initAt + lines;
  const Elem e = x->type.elem;
  auto lineOf = [&](int64_t r, int64_t c) {  // row-major over the kept dims
    llvm::Value* l = b_.getInt64(0);
    for (const ir::Dim* d : kept) l = b_.CreateAdd(b_.CreateMul(l, b_.getInt64(d->extent)), coordOf(d->name, r, c));
    return l;
  };
  if (pending_reads_ || scratch_busy_ || pending_writes_) barrier();
  for (int64_t r = 0; r < rows(x); ++r)
    for (int64_t c = 0; c < cols(x); ++c) {
      llvm::Value* k = b_.getInt64(0);
      for (const ir::Dim* d : reduced)
        k = b_.CreateAdd(b_.CreateMul(k, b_.getInt64(d->extent)), coordOf(d->name, r, c));
      llvm::Value* line = lineOf(r, c);
      b_.CreateStore(at(x, r, c), scratchPointer(b_.CreateAdd(b_.CreateMul(line, b_.getInt64(n)), k)));
    }
  if (!init->type.isScalar())
    for (int64_t r = 0; r < rows(init); ++r)
      for (int64_t c = 0; c < cols(init); ++c) {
        llvm::Value* line = lineOf(r, c);
        b_.CreateStore(at(init, r, c), scratchPointer(b_.CreateAdd(line, b_.getInt64(initAt))));
      }
  barrier();
  // The folds: item w = line * P + q, for w = tid, tid + threads, ... below lines * P.
  const int64_t items = lines * P;
  auto* body = llvm::BasicBlock::Create(c_, "reduce.fold", f_);
  auto* done = llvm::BasicBlock::Create(c_, "reduce.folded", f_);
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  b_.CreateCondBr(b_.CreateICmpULT(tid_, b_.getInt64(items)), body, done);
  b_.SetInsertPoint(body);
  auto* w = b_.CreatePHI(b_.getInt64Ty(), 2, "item");
  w->addIncoming(tid_, pre);
  llvm::Value* line = b_.CreateUDiv(w, b_.getInt64(P));
  llvm::Value* q = b_.CreateURem(w, b_.getInt64(P));
  llvm::Value* base = b_.CreateMul(line, b_.getInt64(n));
  llvm::Value* first;
  llvm::Value* from;
  if (ordered) {
    first = init->type.isScalar()
                ? scalar(init)
                : b_.CreateLoad(b_.getFloatTy(), scratchPointer(b_.CreateAdd(line, b_.getInt64(initAt))));
    from = b_.getInt64(0);
  } else {
    first = b_.CreateLoad(b_.getFloatTy(), scratchPointer(b_.CreateAdd(base, q)));
    from = b_.CreateAdd(q, b_.getInt64(P));
  }
  // q + P >= n: a partition of one contribution; q >= n cannot happen (P <= n is not required,
  // but an empty partition is never written nor merged: see below). The contributions are read
  // kFoldReads at a time, then folded in order: a trip waits for one shared-memory round trip,
  // not one per contribution (H100, docs/gpu.md "Run Y": the row kernels 0.64-0.94 of the time).
  constexpr int64_t kFoldReads = 8;
  auto contribution = [&](llvm::Value* k) {
    return b_.CreateLoad(b_.getFloatTy(), scratchPointer(b_.CreateAdd(base, k)));
  };
  std::vector<llvm::Value*> acc = {first, from};
  if (n > kFoldReads * P)
    acc = buildLoop(
        b_, f_, from, kFoldReads * P, "fold", acc,
        [&](llvm::Value* k) {
          return b_.CreateICmpSLT(b_.CreateAdd(k, b_.getInt64((kFoldReads - 1) * P)), b_.getInt64(n));
        },
        [&](llvm::Value* k, const std::vector<llvm::Value*>& cur) {
          std::vector<llvm::Value*> v;
          for (int64_t i = 0; i < kFoldReads; ++i) v.push_back(contribution(b_.CreateAdd(k, b_.getInt64(i * P))));
          llvm::Value* a = cur[0];
          for (llvm::Value* x : v) a = ew_.combine(op->reduce, a, x, e);
          return std::vector<llvm::Value*>{a, b_.CreateAdd(k, b_.getInt64(kFoldReads * P))};
        },
        /*noUnroll=*/true);
  acc = buildLoop(
      b_, f_, acc[1], b_.getInt64(n), P, {acc[0]},
      [&](llvm::Value* k, const std::vector<llvm::Value*>& cur) {
        return std::vector<llvm::Value*>{ew_.combine(op->reduce, cur[0], contribution(k), e)};
      },
      /*noUnroll=*/true);
  if (ordered || P <= n) {
    b_.CreateStore(acc[0], scratchPointer(b_.CreateAdd(w, b_.getInt64(partsAt))));
  } else {
    auto* store = llvm::BasicBlock::Create(c_, "reduce.part", f_);
    auto* skip = llvm::BasicBlock::Create(c_, "reduce.part.next", f_);
    b_.CreateCondBr(b_.CreateICmpULT(q, b_.getInt64(n)), store, skip);
    b_.SetInsertPoint(store);
    b_.CreateStore(acc[0], scratchPointer(b_.CreateAdd(w, b_.getInt64(partsAt))));
    b_.CreateBr(skip);
    b_.SetInsertPoint(skip);
  }
  llvm::Value* nextW = b_.CreateAdd(w, b_.getInt64(bp_.threads));
  w->addIncoming(nextW, b_.GetInsertBlock());
  b_.CreateCondBr(b_.CreateICmpULT(nextW, b_.getInt64(items)), body, done);
  b_.SetInsertPoint(done);
  barrier();
  // The merges: each result element from its line's partitions.
  const int64_t used = std::min(P, n);
  define(res, [&](int64_t r, int64_t c) {
    llvm::Value* ln = lineOf(r, c);
    llvm::Value* at0 = b_.CreateAdd(b_.CreateMul(ln, b_.getInt64(P)), b_.getInt64(partsAt));
    if (ordered) return static_cast<llvm::Value*>(b_.CreateLoad(b_.getFloatTy(), scratchPointer(at0)));
    llvm::Value* v = at(init, r, c);
    for (int64_t j = 0; j < used; ++j)
      v = ew_.combine(op->reduce, v, b_.CreateLoad(b_.getFloatTy(), scratchPointer(b_.CreateAdd(at0, b_.getInt64(j)))),
                      e);
    return v;
  });
  scratch_busy_ = true;
}

llvm::Function* BlockEmitter::emitProgram(const std::string& name, std::string& error) {
  beginFunction(name);
  auto sreg = [&](llvm::Intrinsic::ID id) {
    return b_.CreateZExt(b_.CreateIntrinsic(b_.getInt32Ty(), id, llvm::ArrayRef<llvm::Value*>{}), b_.getInt64Ty());
  };
  tid_ = sreg(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x);
  tx_ = b_.CreateURem(tid_, b_.getInt64(bp_.threads_x), "tx");
  ty_ = b_.CreateUDiv(tid_, b_.getInt64(bp_.threads_x), "ty");
  if (bp_.dynamic_shared) {
    // Sized at launch (plan::GpuLaunch::dynamic_shared_bytes): one extern array every entry shares.
    shared_ = m_.getGlobalVariable(kDynamicShared);
    if (!shared_) {
      auto* ty = llvm::ArrayType::get(b_.getFloatTy(), 0);
      shared_ = new llvm::GlobalVariable(m_, ty, false, llvm::GlobalValue::ExternalLinkage, nullptr, kDynamicShared,
                                         nullptr, llvm::GlobalValue::NotThreadLocal, kSharedAddressSpace);
      shared_->setAlignment(llvm::Align(16));
    }
  } else if (bp_.shared_bytes > 0) {
    auto* ty = llvm::ArrayType::get(b_.getFloatTy(), static_cast<uint64_t>(bp_.shared_bytes / 4));
    shared_ =
        new llvm::GlobalVariable(m_, ty, false, llvm::GlobalValue::InternalLinkage, llvm::UndefValue::get(ty),
                                 name + ".stages", nullptr, llvm::GlobalValue::NotThreadLocal, kSharedAddressSpace);
    shared_->setAlignment(llvm::Align(16));
  }
  loadParams([&](const ir::Value* prm, llvm::Value* ptr) {
    scalars_[prm->id] = b_.CreateLoad(sty(prm->type.elem), ptr, prm->name);
  });
  decomposeRootIds(
      f_->getArg(1), [](llvm::Value* e) { return e; },
      [&](const ir::Value* axis, llvm::Value* id) { scalars_[axis->id] = id; });
  ir::walk(k_.root()->regions[0], [&](const Op* o) {
    if (o->kind == OpKind::Store) written_.insert(o->operands[0]);
  });
  emitRegion(k_.root()->regions[0]);
  return finishFunction(error);
}

void BlockEmitter::emitOp(const Op* op) {
  for (const auto& [loop, before] : bp_.early_copies)
    if (before == op) firstCopies(loop);
  if (bp_.folded.count(op)) return;  // computed where its stage is filled (maskedValue)
  const ir::Value* r = op->results.empty() ? nullptr : op->results[0];
  if (bp_.wholeOp(op)) {
    if (op->kind == OpKind::Load) beforeLoad(op);  // held whole, read by every thread alike
    emitWhole(op);
    return;
  }
  if (op->kind == OpKind::Extract) {  // of a rank-0 tile
    scalars_[r->id] = scalar(op->operands[0]);
    return;
  }
  switch (op->kind) {
    case OpKind::Const: {
      llvm::Value* c = constant(op);
      define(r, [&](int64_t, int64_t) { return c; });
      return;
    }
    case OpKind::Iota: define(r, [&](int64_t i, int64_t j) { return coordOf(op->dims[0], i, j); }); return;
    case OpKind::Broadcast: define(r, [&](int64_t i, int64_t j) { return at(op->operands[0], i, j); }); return;
    case OpKind::Load: emitLoad(op); return;
    case OpKind::Store: emitStore(op); return;
    case OpKind::Mma: emitMma(op); return;
    case OpKind::Serial: emitLoop(op); return;
    case OpKind::Reduce: emitReduce(op); return;
    default: break;
  }
  if (!ir::isElementwise(op->kind)) {
    error_ = fmt::format("internal error: op '{}' has no block form", ir::opName(op->kind));
    return;
  }
  define(r, [&](int64_t i, int64_t j) {
    std::vector<llvm::Value*> ops;
    for (const ir::Value* o : op->operands) ops.push_back(at(o, i, j));
    return ew_.apply(op, ops, error_);
  });
}

// Ops over tiles every thread holds whole (BlockPlan::whole): all their elements, row-major,
// in each thread; element coordinates are constants.
void BlockEmitter::emitWhole(const Op* op) {
  auto coordsOf = [](const ir::Type& t, int64_t e) {
    std::map<std::string, int64_t> c;
    for (int i = static_cast<int>(t.dims.size()) - 1; i >= 0; --i) {
      c[t.dims[i].name] = e % t.dims[i].extent;
      e /= t.dims[i].extent;
    }
    return c;
  };
  auto element = [&](const ir::Value* v, int64_t e) -> llvm::Value* {
    if (v->type.isScalar()) return scalar(v);
    return tiles_.at(v->id)[static_cast<size_t>(e)];
  };
  const ir::Value* r = op->results[0];
  const int64_t n = r->type.numElements();
  Tile t;
  switch (op->kind) {
    case OpKind::Load:
      for (int64_t e = 0; e < n; ++e) {
        const auto c = coordsOf(r->type, e);
        llvm::Value* inb = nullptr;
        llvm::Value* ptr = elementPointer(
            op, [&](const std::string& d) { return b_.getInt64(c.at(d)); }, nullptr, inb);
        t.push_back(filled(op, rawLoad(op, ptr, inb), inb));
      }
      break;
    case OpKind::Const:
      for (int64_t e = 0; e < n; ++e) t.push_back(constant(op));
      break;
    case OpKind::Iota:
      for (int64_t e = 0; e < n; ++e) t.push_back(b_.getInt64(coordsOf(r->type, e).at(op->dims[0])));
      break;
    case OpKind::Extract: {
      // Constant indices: the element (0 outside the tile); runtime ones: compared with each.
      const ir::Value* x = op->operands[0];
      const int64_t m = x->type.numElements();
      llvm::Value* v = llvm::Constant::getNullValue(sty(r->type.elem));
      for (int64_t e = 0; e < m; ++e) {
        const auto c = coordsOf(x->type, e);
        llvm::Value* hit = b_.getTrue();
        for (size_t k = 0; k < op->indices.size(); ++k) {
          const ir::Index& ix = op->indices[k];
          const int64_t want = c.at(x->type.dims[k].name);
          hit = ix.isConstant() ? (ix.constant == want ? hit : b_.getFalse())
                                : b_.CreateAnd(hit, b_.CreateICmpEQ(indexValue(ix), b_.getInt64(want)));
        }
        if (hit != b_.getFalse()) v = hit == b_.getTrue() ? element(x, e) : b_.CreateSelect(hit, element(x, e), v);
      }
      scalars_[r->id] = v;
      return;
    }
    case OpKind::Reduce: {
      // Each result element: the init, then the contributions row-major over the reduced dims
      // (the ordered fold; integer folds give the same value in any order).
      const ir::Value* x = op->operands[0];
      const ir::Value* init = op->operands[1];
      for (int64_t e = 0; e < n; ++e) {
        const auto kept = coordsOf(r->type, e);
        llvm::Value* acc = element(init, e);
        for (int64_t xe = 0; xe < x->type.numElements(); ++xe) {
          const auto c = coordsOf(x->type, xe);
          bool mine = true;
          for (const auto& [d, at] : kept) mine = mine && c.at(d) == at;
          if (mine) acc = ew_.combine(op->reduce, acc, element(x, xe), x->type.elem);
        }
        t.push_back(acc);
      }
      break;
    }
    default:
      for (int64_t e = 0; e < n; ++e) {
        std::vector<llvm::Value*> ops;
        for (const ir::Value* o : op->operands) ops.push_back(element(o, e));
        t.push_back(ew_.apply(op, ops, error_));
      }
      break;
  }
  if (r->type.isScalar())
    scalars_[r->id] = t.at(0);
  else
    tiles_[r->id] = std::move(t);
}

void BlockEmitter::emitLoad(const Op* op) {
  beforeLoad(op);
  // A stage filled from the threads' registers (a loaded tile that is also read otherwise, e.g. an
  // mma's accumulator and another's operand) is loaded as any tile; its mma puts it there.
  if (auto st = bp_.stages.find(op); st != bp_.stages.end() && !st->second.registers) {
    const plan::BlockStage& s = st->second;
    const Op* loop = op->parent->parent;
    if (s.async) {
      // At the loop's first async stage: this trip's copies (issued a trip early) complete and
      // seen by every thread; the next trip's issued into the other buffer, whose last reads
      // (the previous trip's) the barrier has passed. The loop's later async stages: nothing.
      const std::vector<const Op*>& all = async_.at(loop);
      if (all.front() != op) return;
      b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group, {}, {b_.getInt32(0)});
      barrier();
      llvm::Value* other = b_.CreateXor(parity_.at(loop), b_.getInt64(1));
      for (const Op* a : all) asyncCopy(a, nextTrip_.at(loop), other);
      b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, llvm::ArrayRef<llvm::Value*>{});
      return;
    }
    if (s.buffers == 2) {
      // This trip's registers (fetched a trip early) to its buffer; the next trip's in flight.
      put(op, current_.at(op), parity_.at(loop));
      next_[op] = fetch(op, nextTrip_.at(loop));
      return;
    }
    if (pending_reads_) barrier();
    copyStage(op);
    return;
  }
  const ir::Value* r = op->results[0];
  Tile t = filledTile(op, [&] {
    if (auto it = batched_.find(op); it != batched_.end()) return it->second;  // read at the start of the batch
    return loadTile(op, {});
  }());
  if (r->type.isScalar())  // one element, the same in every thread (read where scalars are: at)
    scalars_[r->id] = t.at(0);
  else
    tiles_[r->id] = std::move(t);
}

// The elements read, then their in-bounds flags (the fill is applied at the use: filledTile).
BlockEmitter::Tile BlockEmitter::loadTile(const Op* op, const Override& over) {
  const ir::Value* r = op->results[0];
  Tile raw, inb;
  for (int64_t i = 0; i < rows(r); ++i)
    for (int64_t j = 0; j < cols(r); ++j) {
      llvm::Value* in = nullptr;
      llvm::Value* ptr = elementPointer(
          op, [&](const std::string& d) { return coordOf(d, i, j); }, &over, in);
      raw.push_back(rawLoad(op, ptr, in));
      inb.push_back(in);
    }
  raw.insert(raw.end(), inb.begin(), inb.end());
  return raw;
}

BlockEmitter::Tile BlockEmitter::filledTile(const Op* op, const Tile& pending) {
  const size_t n = pending.size() / 2;
  Tile t;
  for (size_t i = 0; i < n; ++i) t.push_back(filled(op, pending[i], pending[n + i]));
  return t;
}

void BlockEmitter::emitStore(const Op* op) {
  const ir::Value* view = op->operands[0];
  const ir::Value* x = op->operands[1];
  beforeStore(op);
  for (int64_t i = 0; i < rows(x); ++i)
    for (int64_t j = 0; j < cols(x); ++j) {
      llvm::Value* inb = nullptr;
      llvm::Value* ptr = elementPointer(
          op, [&](const std::string& d) { return coordOf(d, i, j); }, nullptr, inb);
      llvm::Value* v = narrowStored(view, at(x, i, j));
      auto* then = llvm::BasicBlock::Create(c_, "store.in", f_);
      auto* cont = llvm::BasicBlock::Create(c_, "store.next", f_);
      b_.CreateCondBr(inb, then, cont);
      b_.SetInsertPoint(then);
      b_.CreateAlignedStore(v, ptr, memAlign(view));
      b_.CreateBr(cont);
      b_.SetInsertPoint(cont);
    }
}

// acc[r][c] += a[r][k] * b[k][c] for k ascending (one FMA when fused), each thread its own
// accumulators; a row's values (and a column's) are read from the stage as vectors of a group.
void BlockEmitter::emitMma(const Op* op) {
  const Op* la = bp_.stagedDef(op->operands[0]);
  const Op* lb = bp_.stagedDef(op->operands[1]);
  const plan::BlockStage& sa = bp_.stages.at(la);
  const plan::BlockStage& sb = bp_.stages.at(lb);
  for (int i = 0; i < 2; ++i) {
    const plan::BlockStage& s = i == 0 ? sa : sb;
    if (s.registers) putRegisters(op->operands[i], s);
  }
  const bool aIsRow = sa.rows;
  const Op* rowLoad = aIsRow ? la : lb;
  const Op* colLoad = aIsRow ? lb : la;
  const plan::BlockStage& sr = bp_.stages.at(rowLoad);
  const plan::BlockStage& sc = bp_.stages.at(colLoad);
  const plan::BlockDim& column = *bp_.columnDim(op->results[0]->type.dims.back().name);
  const ir::Value* acc = op->operands[2];
  const ir::Value* res = op->results[0];
  const int64_t my = bp_.micro_y, mx = column.micro;
  if (pending_writes_) barrier();
  Tile cur(static_cast<size_t>(my * mx));
  for (int64_t r = 0; r < my; ++r)
    for (int64_t c = 0; c < mx; ++c) cur[r * mx + c] = at(acc, r, c);
  llvm::Value* rowBuf = bufferOf(rowLoad);
  llvm::Value* colBuf = bufferOf(colLoad);
  // Offsets (floats) of the thread's groups within one K row of each stage.
  std::vector<llvm::Value*> rowAt, colAt;
  for (int64_t r = 0; r < my; r += bp_.group_y) rowAt.push_back(rowCoord(r));
  for (int64_t c = 0; c < mx; c += column.group) colAt.push_back(colCoord(column, c));
  auto readGroups = [&](const plan::BlockStage& s, llvm::Value* buf, llvm::Value* k,
                        const std::vector<llvm::Value*>& at, int64_t g) {
    std::vector<llvm::Value*> vals;
    llvm::Value* rowStart = b_.CreateMul(k, b_.getInt64(s.pitch));
    for (llvm::Value* a : at) {
      llvm::Value* p = stagePointer(s, buf, b_.CreateAdd(rowStart, a));
      if (g == 1) {
        vals.push_back(b_.CreateAlignedLoad(b_.getFloatTy(), p, llvm::Align(4)));
        continue;
      }
      auto* vt = llvm::FixedVectorType::get(b_.getFloatTy(), static_cast<unsigned>(g));
      llvm::Value* v = b_.CreateAlignedLoad(vt, p, llvm::Align(static_cast<uint64_t>(4 * g)));
      for (int64_t i = 0; i < g; ++i) vals.push_back(b_.CreateExtractElement(v, static_cast<uint64_t>(i)));
    }
    return vals;
  };
  using Reads = std::pair<std::vector<llvm::Value*>, std::vector<llvm::Value*>>;
  auto read = [&](llvm::Value* k) {
    return Reads{readGroups(sr, rowBuf, k, rowAt, bp_.group_y), readGroups(sc, colBuf, k, colAt, column.group)};
  };
  // Steps k0 .. k0 + n - 1; a K-inner column stage (plan: BlockStage::k_inner, groups of one)
  // read as 4 steps of a line per vector (k0 and n multiples of 4).
  auto readSteps = [&](llvm::Value* k0, int64_t n) {
    std::vector<Reads> steps;
    for (int64_t u = 0; u < n; ++u) {
      llvm::Value* k = b_.CreateAdd(k0, b_.getInt64(u));
      steps.push_back(Reads{readGroups(sr, rowBuf, k, rowAt, bp_.group_y),
                            sc.k_inner ? std::vector<llvm::Value*>(static_cast<size_t>(mx))
                                       : readGroups(sc, colBuf, k, colAt, column.group)});
    }
    if (sc.k_inner) {
      auto* vt = llvm::FixedVectorType::get(b_.getFloatTy(), 4);
      for (int64_t c = 0; c < mx; ++c)
        for (int64_t u = 0; u < n; u += 4) {
          llvm::Value* at0 = b_.CreateAdd(b_.CreateMul(colAt[static_cast<size_t>(c)], b_.getInt64(sc.pitch)),
                                          b_.CreateAdd(k0, b_.getInt64(u)));
          llvm::Value* v = b_.CreateAlignedLoad(vt, stagePointer(sc, colBuf, at0), llvm::Align(16));
          for (int64_t i = 0; i < 4; ++i)
            steps[static_cast<size_t>(u + i)].second[static_cast<size_t>(c)] =
                b_.CreateExtractElement(v, static_cast<uint64_t>(i));
        }
    }
    return steps;
  };
  auto multiply = [&](const Reads& reads, Tile& t) {
    const std::vector<llvm::Value*>& rv = reads.first;
    const std::vector<llvm::Value*>& cv = reads.second;
    for (int64_t r = 0; r < my; ++r)
      for (int64_t c = 0; c < mx; ++c) {
        llvm::Value* a = aIsRow ? rv[r] : cv[c];
        llvm::Value* bv = aIsRow ? cv[c] : rv[r];
        t[r * mx + c] = ew_.multiplyAdd(a, bv, t[r * mx + c], op->mma_policy);
      }
  };
  const int64_t K = sa.k_extent;
  const int64_t U = bp_.mma_steps.at(op);  // K steps per trip (plan): their reads first, then their products
  // The reads of the U steps from k.
  auto readTrip = [&](llvm::Value* k, int64_t n) {
    if (sc.k_inner) return readSteps(k, n);
    std::vector<Reads> reads;
    for (int64_t u = 0; u < n; ++u) reads.push_back(read(b_.CreateAdd(k, b_.getInt64(u))));
    return reads;
  };
  if (U >= K && sc.k_inner) {
    for (const Reads& r : readSteps(b_.getInt64(0), K)) multiply(r, cur);
  } else if (U >= K) {
    for (int64_t k = 0; k < K; ++k) multiply(read(b_.getInt64(k)), cur);
  } else if (!bp_.read_ahead.count(op)) {
    cur = loop(b_.getInt64(0), b_.getInt64(K), U, cur, [&](llvm::Value* k, const std::vector<llvm::Value*>& in) {
      Tile t = in;
      for (const Reads& r : readTrip(k, U)) multiply(r, t);
      return t;
    });
  } else {
    // Read ahead (plan: BlockPlan::read_ahead): the loop carries the next trip's values, read
    // before this trip's products, so their shared-memory latency overlaps the products. The
    // last trip reads trip 0 again (in the stage, unused) rather than past the stage's K lines.
    auto flat = [](const std::vector<Reads>& reads) {
      std::vector<llvm::Value*> out;
      for (const Reads& r : reads) {
        out.insert(out.end(), r.first.begin(), r.first.end());
        out.insert(out.end(), r.second.begin(), r.second.end());
      }
      return out;
    };
    const size_t n = cur.size();
    std::vector<llvm::Value*> carried = cur;
    for (llvm::Value* v : flat(readTrip(b_.getInt64(0), U))) carried.push_back(v);
    carried =
        loop(b_.getInt64(0), b_.getInt64(K), U, carried, [&](llvm::Value* k, const std::vector<llvm::Value*>& in) {
          Tile t(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(n));
          std::vector<Reads> reads;
          size_t at = n;
          for (int64_t u = 0; u < U; ++u) {
            Reads r;
            r.first.assign(in.begin() + static_cast<std::ptrdiff_t>(at),
                           in.begin() + static_cast<std::ptrdiff_t>(at + my));
            at += static_cast<size_t>(my);
            r.second.assign(in.begin() + static_cast<std::ptrdiff_t>(at),
                            in.begin() + static_cast<std::ptrdiff_t>(at + mx));
            at += static_cast<size_t>(mx);
            reads.push_back(std::move(r));
          }
          llvm::Value* next = b_.CreateAdd(k, b_.getInt64(U));
          next = b_.CreateSelect(b_.CreateICmpEQ(next, b_.getInt64(K)), b_.getInt64(0), next);
          // Each value through an opaque move (free in ptxas): else LLVM folds the loop's phis of
          // loads back into loads at the trip's start, undoing the read ahead.
          std::vector<llvm::Value*> ahead = flat(readTrip(next, U));
          llvm::InlineAsm* move =
              llvm::InlineAsm::get(llvm::FunctionType::get(b_.getFloatTy(), {b_.getFloatTy()}, false),
                                   "mov.b32 $0, $1;", "=f,f", /*hasSideEffects=*/false);
          for (llvm::Value*& v : ahead) v = b_.CreateCall(move, {v});
          for (const Reads& r : reads) multiply(r, t);
          t.insert(t.end(), ahead.begin(), ahead.end());
          return t;
        });
    cur.assign(carried.begin(), carried.begin() + static_cast<std::ptrdiff_t>(n));
  }
  pending_reads_ = true;
  tiles_[res->id] = cur;
}

void BlockEmitter::emitLoop(const Op* op) {
  const ir::Region* body = op->regions[0];
  const Op* yield = body->ops.empty() ? nullptr : body->ops.back();
  const size_t nc = op->operands.size();
  const bool prefetch = std::find(bp_.prefetch_loops.begin(), bp_.prefetch_loops.end(), op) != bp_.prefetch_loops.end();
  // This loop's double-buffered stages through registers, and those cp.async fills.
  const std::vector<const Op*> staged = prefetch ? doubleBuffered(op, false) : std::vector<const Op*>{};
  const std::vector<const Op*>& async = async_[op] = prefetch ? doubleBuffered(op, true) : std::vector<const Op*>{};
  // The accesses pending before the loop stay pending after it: a barrier in its body does not
  // run when the loop takes no trip.
  const auto storedBefore = stored_, loadedBefore = loaded_;

  std::vector<llvm::Value*> flat;
  std::vector<size_t> width;  // values per carried entry
  for (size_t i = 0; i < nc; ++i) {
    const ir::Value* v = op->operands[i];
    if (v->type.isScalar()) {
      flat.push_back(scalar(v));
      width.push_back(1);
    } else {
      const Tile& t = tiles_.at(v->id);
      flat.insert(flat.end(), t.begin(), t.end());
      width.push_back(t.size());
    }
  }
  llvm::Value* lo = indexValue(op->indices[0]);
  llvm::Value* hi = indexValue(op->indices[1]);
  const int64_t stepBy = op->indices[2].constant;
  const ir::Value* iv = body->args[0];
  // Plain loads of batched trips (plan: BlockPlan::load_prefetch).
  std::vector<const Op*> ahead;
  for (const Op* o : body->ops)
    if (bp_.load_prefetch.count(o)) ahead.push_back(o);
  for (const Op* a : ahead)
    if (pendingStore(a->operands[0])) barrier();
  std::vector<size_t> regCount;
  if (prefetch) {
    // The loop's buffers may be an earlier loop's stages (BlockPlanner::placeStages shares the
    // memory of sibling loops' stages): their reads end before the first copies.
    if (pending_reads_) barrier();
    for (const Op* s : staged)
      if (pendingStore(s->operands[0])) barrier();
    Override first{{iv->id, lo}};
    if (!async.empty() && !bp_.early_copies.count(op)) firstCopies(op);
    for (const Op* s : staged) {
      std::vector<llvm::Value*> regs = fetch(s, first);
      regCount.push_back(regs.size());
      flat.insert(flat.end(), regs.begin(), regs.end());
    }
  }
  auto unflatten = [&](const std::vector<llvm::Value*>& vals, bool results) {
    size_t at = 0;
    for (size_t i = 0; i < nc; ++i) {
      const ir::Value* v = results ? op->results[i] : body->args[i + 1];
      if (v->type.isScalar())
        scalars_[v->id] = vals[at];
      else
        tiles_[v->id] = Tile(vals.begin() + at, vals.begin() + at + width[i]);
      at += width[i];
    }
    return at;
  };
  pending_reads_ = pending_writes_ = true;
  auto trip = [&](llvm::Value* ivv, const std::vector<llvm::Value*>& cur) {
    scalars_[iv->id] = ivv;
    size_t pos = unflatten(cur, false);
    if (prefetch) {
      for (size_t s = 0; s < staged.size(); ++s) {
        current_[staged[s]] = std::vector<llvm::Value*>(cur.begin() + pos, cur.begin() + pos + regCount[s]);
        pos += regCount[s];
      }
      llvm::Value* trip = b_.CreateUDiv(b_.CreateSub(ivv, lo), b_.getInt64(stepBy));
      parity_[op] = b_.CreateAnd(trip, b_.getInt64(1));
      nextTrip_[op] = Override{{iv->id, b_.CreateAdd(ivv, b_.getInt64(stepBy))}};
    }
    pending_reads_ = pending_writes_ = true;
    pendTrip(body);  // by the previous trip
    emitRegion(body);
    std::vector<llvm::Value*> next;
    for (size_t i = 0; i < nc && yield; ++i) {
      const ir::Value* y = yield->operands[i];
      if (y->type.isScalar()) {
        next.push_back(scalar(y));
      } else {
        for (int64_t r = 0; r < rows(y); ++r)
          for (int64_t c = 0; c < cols(y); ++c) next.push_back(at(y, r, c));
      }
    }
    for (const Op* s : staged) next.insert(next.end(), next_.at(s).begin(), next_.at(s).end());
    return next;
  };
  std::vector<llvm::Value*> fin;
  if (ahead.empty()) {
    fin = loop(lo, hi, stepBy, flat, trip);
  } else {
    // Batches of `depth` trips: the batch's plain loads first (in flight together), then its
    // trips in order; the trips past the last whole batch one by one.
    const int64_t depth = bp_.load_prefetch.at(ahead[0]);
    llvm::Value* span = b_.CreateSub(hi, lo);
    llvm::Value* trips = b_.CreateSelect(
        b_.CreateICmpSGT(span, b_.getInt64(0)),
        b_.CreateSDiv(b_.CreateAdd(span, b_.getInt64(stepBy - 1)), b_.getInt64(stepBy)), b_.getInt64(0));
    llvm::Value* batches = b_.CreateSDiv(trips, b_.getInt64(depth));
    fin = loop(b_.getInt64(0), batches, 1, flat, [&](llvm::Value* batch, const std::vector<llvm::Value*>& cur) {
      llvm::Value* first = b_.CreateAdd(lo, b_.CreateMul(batch, b_.getInt64(depth * stepBy)));
      std::vector<std::map<const Op*, Tile>> loaded(static_cast<size_t>(depth));
      for (int64_t u = 0; u < depth; ++u)
        for (const Op* a : ahead)
          loaded[u][a] = loadTile(a, Override{{iv->id, b_.CreateAdd(first, b_.getInt64(u * stepBy))}});
      std::vector<llvm::Value*> v = cur;
      for (int64_t u = 0; u < depth; ++u) {
        batched_ = loaded[u];
        v = trip(b_.CreateAdd(first, b_.getInt64(u * stepBy)), v);
      }
      batched_.clear();
      return v;
    });
    fin = loop(b_.CreateAdd(lo, b_.CreateMul(batches, b_.getInt64(depth * stepBy))), hi, stepBy, fin, trip);
  }
  unflatten(fin, true);
  // The last trip's copies (of a trip past the loop) land before the buffers are used again.
  if (!async.empty()) b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group, {}, {b_.getInt32(0)});
  if (prefetch) barrier();
  pending_reads_ = pending_writes_ = true;
  pendTrip(body);
  for (const auto& [view, ops] : storedBefore) stored_[view].insert(stored_[view].end(), ops.begin(), ops.end());
  for (const auto& [view, ops] : loadedBefore) loaded_[view].insert(loaded_[view].end(), ops.begin(), ops.end());
}

}  // namespace kiln::codegen

// The block realization's stages (see block_emitter.h and src/plan/block.cpp): how a staged
// operand gets from global memory (or the threads' registers) into shared memory — element
// fetches and puts, single-buffered copies, cp.async copies (element by element, or 16-byte
// groups for a wide stage) — and where each element lies there.
#include <llvm/IR/IntrinsicsNVPTX.h>

#include "codegen/block/block_emitter.h"

namespace kiln::codegen {

using ir::Op;
using ir::OpKind;

namespace {
constexpr int64_t kCopyChunk = 16;  // a single-buffered stage's steps per thread in flight together
}  // namespace

// The staged tile's elements in the view's order (its last named dim fastest), element
// e = step * threads + tid for this thread: consecutive threads read consecutive addresses.
// The elements read, then their in-bounds flags: the fill is applied when they are put, so a
// fetch a trip ahead waits for nothing until then.
std::vector<llvm::Value*> BlockEmitter::fetch(const Op* load, const Override& over) {
  const plan::BlockStage& s = bp_.stages.at(load);
  const int64_t total = s.k_extent * s.out_extent;
  std::vector<llvm::Value*> regs, inb;
  for (int64_t step = 0; step * bp_.threads < total; ++step) {
    auto [raw, in] =
        fetchOne(load, over, b_.CreateAdd(tid_, b_.getInt64(step * bp_.threads)), (step + 1) * bp_.threads > total);
    regs.push_back(raw);
    inb.push_back(in);
  }
  regs.insert(regs.end(), inb.begin(), inb.end());
  return regs;
}

// The coordinates (by dim name) of element e of a staged load's tile in the view's order (its
// last named dim fastest).
std::map<std::string, llvm::Value*> BlockEmitter::stagedCoords(const Op* load, llvm::Value* e) {
  std::vector<const ir::Dim*> order;  // named access dims, view order
  for (const ir::Dim& a : load->access)
    if (!a.name.empty()) order.push_back(&a);
  std::map<std::string, llvm::Value*> coord;
  llvm::Value* rest = e;
  for (int i = static_cast<int>(order.size()) - 1; i >= 0; --i) {
    coord[order[i]->name] = b_.CreateURem(rest, b_.getInt64(order[i]->extent));
    rest = b_.CreateUDiv(rest, b_.getInt64(order[i]->extent));
  }
  return coord;
}

// Element e of the staged tile (view order) from global memory, and whether it is in bounds;
// `partial`: e may pass the tile.
std::pair<llvm::Value*, llvm::Value*> BlockEmitter::fetchOne(const Op* load, const Override& over, llvm::Value* e,
                                                             bool partial) {
  const plan::BlockStage& s = bp_.stages.at(load);
  const std::map<std::string, llvm::Value*> coord = stagedCoords(load, e);
  llvm::Value* inb = nullptr;
  llvm::Value* ptr = elementPointer(
      load, [&](const std::string& d) { return coord.at(d); }, &over, inb);
  if (partial) inb = b_.CreateAnd(inb, b_.CreateICmpULT(e, b_.getInt64(s.k_extent * s.out_extent)));
  return {rawLoad(load, ptr, inb), inb};
}

// A single-buffered stage straight from global to shared memory: this thread's steps in chunks
// of kCopyChunk (each chunk's loads in flight together, then its stores), a loop over the
// chunks when there are several (the registers of one chunk live at a time), then the rest.
void BlockEmitter::copyStage(const Op* load) {
  const plan::BlockStage& s = bp_.stages.at(load);
  const int64_t total = s.k_extent * s.out_extent;
  const int64_t steps = (total + bp_.threads - 1) / bp_.threads;
  const int64_t chunks = (total / bp_.threads) / kCopyChunk;  // whole chunks of whole steps
  if (chunks <= 1) {
    put(load, fetch(load, {}), b_.getInt64(0));
    return;
  }
  auto copy = [&](llvm::Value* first, int64_t n, int64_t from) {  // steps first + i, i < n
    std::vector<std::pair<llvm::Value*, std::pair<llvm::Value*, llvm::Value*>>> regs;
    for (int64_t i = 0; i < n; ++i) {
      llvm::Value* step = b_.CreateAdd(first, b_.getInt64(i));
      llvm::Value* e = b_.CreateAdd(tid_, b_.CreateMul(step, b_.getInt64(bp_.threads)));
      regs.push_back({e, fetchOne(load, {}, e, (from + i + 1) * bp_.threads > total)});
    }
    for (int64_t i = 0; i < n; ++i)
      putOne(load, filled(load, regs[i].second.first, regs[i].second.second), b_.getInt64(0), regs[i].first,
             (from + i + 1) * bp_.threads > total);
  };
  loop(b_.getInt64(0), b_.getInt64(chunks), 1, {}, [&](llvm::Value* c, const std::vector<llvm::Value*>&) {
    copy(b_.CreateMul(c, b_.getInt64(kCopyChunk)), kCopyChunk, 0);
    return std::vector<llvm::Value*>{};
  });
  if (steps > chunks * kCopyChunk)
    copy(b_.getInt64(chunks * kCopyChunk), steps - chunks * kCopyChunk, chunks * kCopyChunk);
  pending_writes_ = true;
}

llvm::Value* BlockEmitter::stagePointer(const plan::BlockStage& s, llvm::Value* buffer, llvm::Value* floatIndex) {
  llvm::Value* at = b_.CreateAdd(b_.CreateMul(buffer, b_.getInt64(s.floats())), floatIndex);
  return sharedPointer(b_.CreateAdd(at, b_.getInt64(s.offset)));
}

// `regs`: fetch's elements then their in-bounds flags.
void BlockEmitter::put(const Op* load, const std::vector<llvm::Value*>& regs, llvm::Value* buffer) {
  const plan::BlockStage& s = bp_.stages.at(load);
  const int64_t total = s.k_extent * s.out_extent;
  const size_t n = regs.size() / 2;
  for (size_t step = 0; step < n; ++step)
    putOne(load, filled(load, regs[step], regs[n + step]), buffer,
           b_.CreateAdd(tid_, b_.getInt64(static_cast<int64_t>(step) * bp_.threads)),
           static_cast<int64_t>(step + 1) * bp_.threads > total);
  pending_writes_ = true;
}

// The float index within a buffer of the staged element at `coord`: K row, then the output
// side's position (row-major over its dims: the rows' flattened index).
llvm::Value* BlockEmitter::stageIndex(const Op* load, const plan::BlockStage& s,
                                      const std::map<std::string, llvm::Value*>& coord) {
  llvm::Value* o = b_.getInt64(0);
  for (const std::string& d : s.out_dims)
    for (const ir::Dim& a : load->access)
      if (a.name == d) o = b_.CreateAdd(b_.CreateMul(o, b_.getInt64(a.extent)), coord.at(d));
  if (s.k_inner) return b_.CreateAdd(b_.CreateMul(o, b_.getInt64(s.pitch)), coord.at(s.k_dim));
  return b_.CreateAdd(b_.CreateMul(coord.at(s.k_dim), b_.getInt64(s.pitch)), o);
}

// Element e of the staged tile (view order) to its place in the stage.
void BlockEmitter::putOne(const Op* load, llvm::Value* v, llvm::Value* buffer, llvm::Value* e, bool partial) {
  const plan::BlockStage& s = bp_.stages.at(load);
  const std::map<std::string, llvm::Value*> coord = stagedCoords(load, e);
  llvm::Value* ptr = stagePointer(s, buffer, stageIndex(load, s, coord));
  if (s.mask) v = maskedValue(load, s, v, coord, {});
  if (!partial) {
    b_.CreateAlignedStore(v, ptr, llvm::Align(4));
    return;
  }
  auto* then = llvm::BasicBlock::Create(c_, "stage.in", f_);
  auto* cont = llvm::BasicBlock::Create(c_, "stage.next", f_);
  b_.CreateCondBr(b_.CreateICmpULT(e, b_.getInt64(s.k_extent * s.out_extent)), then, cont);
  b_.SetInsertPoint(then);
  b_.CreateAlignedStore(v, ptr, llvm::Align(4));
  b_.CreateBr(cont);
  b_.SetInsertPoint(cont);
}

// A masked load's element `v` at `coord` as its select gives it: the condition computed from
// the coordinates (the plan admits iota, constants, broadcasts, element-wise ops and scalars
// known at the load: BlockPlanner::maskedLoad), the scalars at `over`'s trip.
llvm::Value* BlockEmitter::maskedValue(const Op* load, const plan::BlockStage& s, llvm::Value* v,
                                       const std::map<std::string, llvm::Value*>& coord, const Override& over) {
  return atCoords(load, s.mask->results[0], v, coord, over);
}

llvm::Value* BlockEmitter::atCoords(const Op* load, const ir::Value* x, llvm::Value* v,
                                    const std::map<std::string, llvm::Value*>& coord, const Override& over) {
  if (x == load->results[0]) return v;
  if (x->type.isScalar()) return scalarAt(x, over);
  const Op* d = x->def;
  if (d->kind == OpKind::Iota) return coord.at(d->dims[0]);
  if (d->kind == OpKind::Const) return constant(d);
  if (d->kind == OpKind::Broadcast) return atCoords(load, d->operands[0], v, coord, over);
  std::vector<llvm::Value*> ops;
  for (const ir::Value* o : d->operands) ops.push_back(atCoords(load, o, v, coord, over));
  return ew_.apply(d, ops, error_);
}

// A loop's double-buffered stages in program order: those cp.async fills (`async`) or the others.
std::vector<const Op*> BlockEmitter::doubleBuffered(const Op* loop, bool async) const {
  std::vector<const Op*> out;
  for (const Op* o : loop->regions[0]->ops)
    if (auto it = bp_.stages.find(o);
        o->kind == OpKind::Load && it != bp_.stages.end() && it->second.buffers == 2 && it->second.async == async)
      out.push_back(o);
  return out;
}

// A loop's first trip of async stages into buffer 0, one group: at the loop, or earlier
// (plan: BlockPlan::early_copies).
void BlockEmitter::firstCopies(const Op* loop) {
  const std::vector<const Op*> async = doubleBuffered(loop, true);
  if (pending_reads_) barrier();  // a buffer may be an earlier loop's stage (see emitLoop)
  for (const Op* s : async)
    if (pendingStore(s->operands[0])) barrier();
  const Override first{{loop->regions[0]->args[0]->id, indexValue(loop->indices[0])}};
  for (const Op* s : async) asyncCopy(s, first, b_.getInt64(0));
  b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, llvm::ArrayRef<llvm::Value*>{});
}

// An async stage (plan: BlockStage::async) at `over`'s trip into `buffer` by cp.async: the bytes
// copied are 0 (the element becomes +0, the load's fill or its mask's value) where the element
// lies outside the view or its mask keeps the other operand. A wide stage (BlockStage::wide)
// goes by 16-byte copies where the view's base is 16-byte aligned and the origin along the
// groups' dim a multiple of 4 (one test, the same for every thread), else element by element.
void BlockEmitter::asyncCopy(const Op* load, const Override& over, llvm::Value* buffer) {
  const plan::BlockStage& s = bp_.stages.at(load);
  if (!s.wide) return asyncCopyElements(load, over, buffer);
  const ir::Value* view = load->operands[0];
  llvm::Value* origin = indexValue(load->indices.back(), &over);
  llvm::Value* ok = b_.CreateICmpEQ(
      b_.CreateAnd(b_.CreateOr(b_.CreatePtrToInt(base_[view->index], b_.getInt64Ty()), b_.CreateShl(origin, 2)),
                   b_.getInt64(15)),
      b_.getInt64(0));
  auto* wide = llvm::BasicBlock::Create(c_, "copy.wide", f_);
  auto* apart = llvm::BasicBlock::Create(c_, "copy.apart", f_);
  auto* cont = llvm::BasicBlock::Create(c_, "copy.done", f_);
  b_.CreateCondBr(ok, wide, apart);
  b_.SetInsertPoint(wide);
  asyncCopyGroups(load, over, buffer);
  b_.CreateBr(cont);
  b_.SetInsertPoint(apart);
  // A loop over the thread's elements: its addresses are computed in each trip, not held (the
  // unrolled copies' per-element offsets took registers the wide path needed).
  const int64_t total = s.k_extent * s.out_extent;
  loop(b_.getInt64(0), b_.getInt64((total + bp_.threads - 1) / bp_.threads), 1, {},
       [&](llvm::Value* step, const std::vector<llvm::Value*>&) {
         asyncCopyElement(load, over, buffer, b_.CreateAdd(tid_, b_.CreateMul(step, b_.getInt64(bp_.threads))),
                          total % bp_.threads != 0);
         return std::vector<llvm::Value*>{};
       });
  b_.CreateBr(cont);
  b_.SetInsertPoint(cont);
}

// A copy's source at `coord` and whether its bytes are copied: inside the view and, for a
// masked stage, where the mask keeps the load (`inb`: inside the view).
BlockEmitter::CopySource BlockEmitter::copySource(const Op* load, const std::map<std::string, llvm::Value*>& coord,
                                                  const Override& over) {
  const plan::BlockStage& s = bp_.stages.at(load);
  CopySource c;
  c.src = elementPointer(
      load, [&](const std::string& d) { return coord.at(d); }, &over, c.inb);
  c.copied = c.inb;
  if (s.mask) {
    llvm::Value* cond = atCoords(load, s.mask->operands[0], nullptr, coord, over);
    c.copied = b_.CreateAnd(c.copied, s.mask_keeps_load ? cond : b_.CreateNot(cond));
  }
  return c;
}

// The source as a global pointer: the view's base where the element lies outside the view, so
// that the address stays valid (nothing is read there: 0 bytes are copied).
llvm::Value* BlockEmitter::CopySource::global(BlockEmitter& e, const Op* load) const {
  return e.b_.CreateAddrSpaceCast(e.b_.CreateSelect(inb, src, e.base_[load->operands[0]->index]),
                                  llvm::PointerType::get(e.c_, 1));
}

// One cp.async of 4 bytes per element: thread t copies elements t, t + threads, ... in the
// view's order.
void BlockEmitter::asyncCopyElements(const Op* load, const Override& over, llvm::Value* buffer) {
  const plan::BlockStage& s = bp_.stages.at(load);
  const int64_t total = s.k_extent * s.out_extent;
  for (int64_t step = 0; step * bp_.threads < total; ++step)
    asyncCopyElement(load, over, buffer, b_.CreateAdd(tid_, b_.getInt64(step * bp_.threads)),
                     (step + 1) * bp_.threads > total);
}

// Element e (view order) of an async stage by a 4-byte cp.async; `partial`: e may pass the tile.
void BlockEmitter::asyncCopyElement(const Op* load, const Override& over, llvm::Value* buffer, llvm::Value* e,
                                    bool partial) {
  const plan::BlockStage& s = bp_.stages.at(load);
  const int64_t total = s.k_extent * s.out_extent;
  llvm::BasicBlock* cont = nullptr;
  if (partial) {
    auto* then = llvm::BasicBlock::Create(c_, "async.in", f_);
    cont = llvm::BasicBlock::Create(c_, "async.next", f_);
    b_.CreateCondBr(b_.CreateICmpULT(e, b_.getInt64(total)), then, cont);
    b_.SetInsertPoint(then);
  }
  const std::map<std::string, llvm::Value*> coord = stagedCoords(load, e);
  const CopySource c = copySource(load, coord, over);
  llvm::Value* src = c.global(*this, load);
  llvm::Value* copied = c.copied;
  llvm::Value* dst = stagePointer(s, buffer, stageIndex(load, s, coord));
  b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_ca_shared_global_4_s, {},
                     {dst, src, b_.CreateSelect(copied, b_.getInt32(4), b_.getInt32(0))});
  if (partial) {
    b_.CreateBr(cont);
    b_.SetInsertPoint(cont);
  }
}

// A wide stage's 16-byte copies (the caller has checked the alignment): thread t copies groups
// t, t + threads, ... of 4 elements adjacent along the view's fastest dim (the plan makes its
// extents multiples of 4, so a group lies wholly inside the view or wholly outside: 16 bytes or
// 0 copied; a mask does not vary within a group). Where the tile has two named dims and a
// step's groups span whole lines, a step's coordinates are the first step's plus whole lines,
// so its addresses are the first's plus a constant.
void BlockEmitter::asyncCopyGroups(const Op* load, const Override& over, llvm::Value* buffer) {
  const plan::BlockStage& s = bp_.stages.at(load);
  const int64_t groups = s.k_extent * s.out_extent / 4;
  std::vector<const ir::Dim*> order;  // named access dims, view order
  for (const ir::Dim& a : load->access)
    if (!a.name.empty()) order.push_back(&a);
  const int64_t fast = order.back()->extent;
  const bool lines = order.size() == 2 && (4 * bp_.threads) % fast == 0;
  std::map<std::string, llvm::Value*> first;
  if (lines) {
    llvm::Value* e = b_.CreateMul(tid_, b_.getInt64(4));
    first[order[0]->name] = b_.CreateUDiv(e, b_.getInt64(fast));
    first[order[1]->name] = b_.CreateURem(e, b_.getInt64(fast));
  }
  for (int64_t step = 0; step * bp_.threads < groups; ++step) {
    llvm::Value* g = b_.CreateAdd(tid_, b_.getInt64(step * bp_.threads));
    llvm::BasicBlock* cont = nullptr;
    if ((step + 1) * bp_.threads > groups) {
      auto* then = llvm::BasicBlock::Create(c_, "groups.in", f_);
      cont = llvm::BasicBlock::Create(c_, "groups.next", f_);
      b_.CreateCondBr(b_.CreateICmpULT(g, b_.getInt64(groups)), then, cont);
      b_.SetInsertPoint(then);
    }
    std::map<std::string, llvm::Value*> coord;
    if (lines) {
      coord = first;
      coord[order[0]->name] = b_.CreateNUWAdd(first.at(order[0]->name), b_.getInt64(step * (4 * bp_.threads / fast)));
    } else {
      coord = stagedCoords(load, b_.CreateMul(g, b_.getInt64(4)));
    }
    const CopySource c = copySource(load, coord, over);
    b_.CreateIntrinsic(llvm::Intrinsic::nvvm_cp_async_cg_shared_global_16_s, {},
                       {stagePointer(s, buffer, stageIndex(load, s, coord)), c.global(*this, load),
                        b_.CreateSelect(c.copied, b_.getInt32(16), b_.getInt32(0))});
    if (cont) {
      b_.CreateBr(cont);
      b_.SetInsertPoint(cont);
    }
  }
}

// Element (r, c) of the thread's [rows, K] tile to K row colCoord(c), position rowCoord(r).
void BlockEmitter::putRegisters(const ir::Value* v, const plan::BlockStage& s) {
  const plan::BlockDim& kx = *bp_.columnDim(s.k_dim);
  if (pending_reads_) barrier();
  for (int64_t r = 0; r < rows(v); ++r)
    for (int64_t c = 0; c < cols(v); ++c) {
      llvm::Value* at0 = b_.CreateAdd(b_.CreateMul(colCoord(kx, c), b_.getInt64(s.pitch)), rowCoord(r));
      b_.CreateAlignedStore(at(v, r, c), stagePointer(s, b_.getInt64(0), at0), llvm::Align(4));
    }
  pending_writes_ = true;
}

llvm::Value* BlockEmitter::bufferOf(const Op* load) {
  const plan::BlockStage& s = bp_.stages.at(load);
  return s.buffers == 2 ? parity_.at(load->parent->parent) : b_.getInt64(0);
}

}  // namespace kiln::codegen

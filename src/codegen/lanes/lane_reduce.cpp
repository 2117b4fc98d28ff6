// The lane realization's reductions in the IR's order (lanes as partitions when the tree
// allows) and the in-register transpose that reductions and mma share (lane_mma.cpp has the mma).
#include "codegen/lanes/lane_emitter.h"

#include <fmt/format.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Intrinsics.h>

namespace kiln::codegen {

using ir::Elem;
using ir::Op;
using ir::OpKind;
using plan::LaneRep;

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
    if (lr.loop) {
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
  const int64_t A = P / w_;
  // The A accumulators of result element rc: lane k of accumulator a holds partition a*W + k.
  auto lanePartials = [&](const Coords& rc) {
    const int64_t chunksX = xl.chunks, vectors = n / w_;
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
    if (lr.loop)
      acc = loop(b_.getInt64(1), b_.getInt64(vectors / A), 1, acc,
                 [&](llvm::Value* t, const std::vector<llvm::Value*>& cur) {
                   return step(Ix{t, 0}, cur);
                 });
    else
      for (int64_t t = 1; t < vectors / A; ++t) acc = step(Ix{nullptr, t}, acc);
    return acc;
  };
  auto laneFold = [&](const Coords& rc, llvm::Value* s) {
    std::vector<llvm::Value*> acc = lanePartials(rc);
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
  const int64_t laneExt = rt.dims.back().extent;
  if (lr.vector_partitions && laneExt >= static_cast<int64_t>(w_)) {
    // W result elements at once (when there are at least W along the lanes): the accumulators of W neighbouring
    // results, transposed in registers, so that vector k holds partition k of every result; then init merges the
    // partitions 0..P-1 in order, lane by lane: the same operations in the same order as the
    // scalar fold, W results per instruction.
    define(r, [&](Ix row, Ix chunk) {
      Coords rc = rowCoords(rt, row);
      std::vector<std::vector<llvm::Value*>> partials(w_);
      for (unsigned j = 0; j < w_; ++j) {
        rc.back() = lanePosition(chunk, j, laneExt);
        partials[j] = lanePartials(rc);
      }
      llvm::Value* s = init->type.isScalar() ? splat(scalar(init)) : vec(init, row, chunk);
      for (int64_t a = 0; a < A; ++a) {
        std::vector<llvm::Value*> block(w_);
        for (unsigned j = 0; j < w_; ++j) block[j] = partials[j][a];
        transposeInRegisters(block);
        for (unsigned k = 0; k < w_; ++k) s = ew_.combine(op->reduce, s, block[k], e);
      }
      return s;
    });
    return;
  }
  define(r, [&](Ix row, Ix chunk) {
    Coords rc = rowCoords(rt, row);
    llvm::Value* v = llvm::Constant::getNullValue(vty(e));
    for (unsigned j = 0; j < w_; ++j) {
      if (chunk.isConst() && chunk.c * static_cast<int64_t>(w_) + static_cast<int64_t>(j) >= laneExt) break;
      rc.back() = add(mul(chunk, w_), Ix{nullptr, j});
      // A runtime chunk's lanes past the extent read the last element instead (never stored).
      if (!rc.back().isConst())
        rc.back() = Ix{b_.CreateBinaryIntrinsic(llvm::Intrinsic::umin, rc.back().v, b_.getInt64(laneExt - 1)), 0};
      v = b_.CreateInsertElement(v, element(rc), uint64_t(j));
    }
    return v;
  });
}

// n vectors (n a power of two up to W) transposed in registers within each n-lane segment:
// log2 n stages of two-source shuffles, each swapping the off-diagonal blocks; afterwards lane
// s*n + k of vector i is lane s*n + i of vector k. At n = W, a W x W transpose.
void LaneEmitter::transposeInRegisters(std::vector<llvm::Value*>& r) {
  const unsigned n = static_cast<unsigned>(r.size());
  for (unsigned s = 1; s < n; s <<= 1) {
    std::vector<int> lo(w_), hi(w_);
    for (unsigned k = 0; k < w_; ++k) {
      lo[k] = (k & s) ? static_cast<int>(w_ + (k ^ s)) : static_cast<int>(k);
      hi[k] = (k & s) ? static_cast<int>(w_ + k) : static_cast<int>(k ^ s);
    }
    for (unsigned i = 0; i < n; ++i) {
      if (i & s) continue;
      unsigned j = i | s;
      // Inserted as instructions, never constant-folded by the builder: the code holds every
      // shuffle the plan counts (plan::LaneCode), whatever the operands; LLVM folds later.
      llvm::Value* ni = b_.Insert(new llvm::ShuffleVectorInst(r[i], r[j], lo));
      llvm::Value* nj = b_.Insert(new llvm::ShuffleVectorInst(r[i], r[j], hi));
      r[i] = ni;
      r[j] = nj;
    }
  }
}

}  // namespace kiln::codegen

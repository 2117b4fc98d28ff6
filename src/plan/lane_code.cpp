// The code of one program that the lane plan's decisions make (plan.h, LaneCode): loops,
// private arrays, view loads/stores/gathers/scatters, fused multiply-adds and transposing
// shuffles. Every number follows from a decision recorded in the LanePlan (layout walks,
// Conversion::rolled/edge_copy, LaneMma::k_loop/tiles_rolled/edge_copy/spilled,
// LaneReduce::loop, LaneLoop::staged); the emitter executes those decisions and
// codegen::realizedLaneCode counts what it emitted. Tests hold the two equal, so a change to
// either side that the other does not follow fails at once.
//
// How values are read: a Recipe is recomputed at each vector its consumer reads, a Direct load
// is read from its view at each vector; every other representation reads registers or
// private panels (not view memory). An element read (`elem`) never makes a vector instruction.
#include <algorithm>

#include "plan/plan.h"

namespace kiln::plan {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Value;

int64_t log2Of(int64_t w) {
  int64_t s = 0;
  while ((int64_t{1} << s) < w) ++s;
  return s;
}

class CodeModel {
 public:
  CodeModel(const ir::Kernel& k, const Plan& p)
      : k_(k), p_(p), lp_(p.lanes), w_(p.knobs.packet_width), transpose_(p.knobs.packet_width * log2Of(w_)) {}

  LaneCode run() {
    region(k_.root()->regions[0]);
    return code_;
  }

 private:
  const Layout& L(const Value* v) const { return lp_.layout[v->id]; }
  void add(int64_t LaneCode::*field, int64_t n) { code_.*field += n * copies_; }

  // Code emitted `n` times over (unrolled copies, or the two copies of an edge split).
  template <class F>
  void times(int64_t n, F&& f) {
    if (n <= 0) return;
    const int64_t saved = copies_;
    copies_ *= n;
    f();
    copies_ = saved;
  }

  // One vector of `v` read by its consumer.
  void read(const Value* v) {
    if (v->type.isScalar()) return;
    const Layout& l = L(v);
    if (l.rep == LaneRep::Recipe) genVec(v->def);
    if (l.rep == LaneRep::Direct) loadVector(v->def);
  }

  void loadVector(const Op* load) {
    add(lp_.access.at(load) == LaneAccess::Vector ? &LaneCode::vector_loads : &LaneCode::gathers, 1);
  }

  void genVec(const Op* op) {
    if (op->kind == OpKind::Const || op->kind == OpKind::Iota) return;
    if (op->kind == OpKind::Broadcast) {
      // Along the lanes only when the operand's own lane dim is the result's; else element-wise.
      const Value* x = op->operands[0];
      const std::string& lane = op->results[0]->type.dims.back().name;
      if (!x->type.isScalar() && x->type.findDim(lane) == x->type.rank() - 1) read(x);
      return;
    }
    for (const Value* x : op->operands) read(x);
  }

  // A value defined vector by vector: `gen(chunk)` per vector (chunk = -1: a runtime chunk).
  template <class G>
  void define(const Value* v, G&& gen) {
    const Layout& l = L(v);
    if (l.rep == LaneRep::Vectors) {
      for (int64_t i = 0; i < l.vectors(); ++i) gen(i % l.chunks);
    } else if (l.rep == LaneRep::Panel && l.pair_words) {
      pairWalk(l, gen);
    } else if (l.rep == LaneRep::Panel) {
      walk(l, gen);
    }
  }

  // A pair-word panel's walk (LaneEmitter::definePairWords): the walk over its pairs of rows,
  // both rows' vectors per copy; an odd last row after it (unrolled, or a chunk loop of its own).
  template <class G>
  void pairWalk(const Layout& l, G&& gen) {
    Layout pairs = l;
    pairs.rows = l.rows / 2;
    if (pairs.rows > 0)
      walk(pairs, [&](int64_t c) {
        gen(c);
        gen(c);
      });
    if (l.rows % 2 == 0) return;
    if (l.chunk_loop) {
      add(&LaneCode::loops, 1);
      gen(-1);
      return;
    }
    for (int64_t c = 0; c < l.chunks; ++c) gen(c);
  }

  template <class G>
  void walk(const Layout& l, G&& gen) {
    add(&LaneCode::loops, l.walkLoops());
    if (l.large && l.chunk_loop) {
      gen(-1);
      return;
    }
    if (l.large) {
      for (int64_t c = 0; c < l.chunks; ++c) gen(c);
      return;
    }
    for (int64_t i = 0; i < l.vectors(); ++i) gen(i % l.chunks);
  }

  void region(const ir::Region* r) {
    for (const Op* op : r->ops) {
      if (op->kind == OpKind::Yield) continue;
      emitOp(op);
      for (const Conversion& c : lp_.conversions)
        if (c.after == op) conversion(c);
    }
  }

  void emitOp(const Op* op) {
    switch (op->kind) {
      case OpKind::Stage:
      case OpKind::Yield:
      case OpKind::Extract: return;
      case OpKind::Load:
        if (op->results[0]->type.isScalar() || L(op->results[0]).rep == LaneRep::Direct) return;
        define(op->results[0], [&](int64_t) { loadVector(op); });
        return;
      case OpKind::Store: store(op); return;
      case OpKind::Serial:
      case OpKind::Pipeline: loop(op); return;
      case OpKind::Reduce: reduce(op); return;
      case OpKind::Mma:
        for (const Conversion& c : lp_.conversions)
          if (c.at == op && !c.after && !c.fused) conversion(c);
        mmaTiles(op, true);  // the copy for tiles inside their views (the only one without edge_copy)
        if (lp_.mma.at(op).edge_copy) mmaTiles(op, false);
        return;
      default: break;
    }
    if (op->results.empty() || L(op->results[0]).rep == LaneRep::Scalar) return;
    define(op->results[0], [&](int64_t) { genVec(op); });
  }

  void store(const Op* op) {
    const Value* t = op->operands[1];
    if (t->type.isScalar()) return;  // one element: a one-lane masked store
    const bool vector = lp_.access.at(op) == LaneAccess::Vector;
    walk(L(t), [&](int64_t) {
      add(vector ? &LaneCode::vector_stores : &LaneCode::scatters, 1);
      read(t);
    });
  }

  void loop(const Op* op) {
    const ir::Region* body = op->regions[0];
    const Op* yield = body->ops.empty() ? nullptr : body->ops.back();
    const LaneLoop& lo = lp_.loops.at(op);
    add(&LaneCode::allocas, static_cast<int64_t>(lo.staged.size()));
    add(&LaneCode::loops, 1);
    for (size_t i = 0; i < op->results.size(); ++i) {
      const Layout& l = L(body->args[i + 1]);
      if (l.rep == LaneRep::Vectors)
        for (int64_t v = 0; v < l.vectors(); ++v) read(op->operands[i]);
      else if (l.rep == LaneRep::Panel)
        walk(l, [&](int64_t) { read(op->operands[i]); });
    }
    region(body);
    if (!yield || yield->kind != OpKind::Yield) return;
    for (size_t i = 0; i < op->results.size(); ++i) {
      const Layout& l = L(body->args[i + 1]);
      if (l.rep == LaneRep::Vectors)
        for (int64_t v = 0; v < l.vectors(); ++v) read(yield->operands[i]);
    }
    for (size_t i : lo.staged) walk(L(body->args[i + 1]), [&](int64_t) { read(yield->operands[i]); });
    for (size_t i = 0; i < op->results.size(); ++i) {
      const Layout& l = L(body->args[i + 1]);
      const Value* y = yield->operands[i];
      if (l.rep != LaneRep::Panel || y == body->args[i + 1] || plan::inPlace(lo, i)) continue;
      const bool staged = std::find(lo.staged.begin(), lo.staged.end(), i) != lo.staged.end();
      walk(l, [&](int64_t) {
        if (!staged) read(y);
      });
    }
  }

  void reduce(const Op* op) {
    const Value* x = op->operands[0];
    const Value* init = op->operands[1];
    const Value* r = op->results[0];
    const ReducePlan& rp = p_.reduce.at(op);
    const LaneReduce& lr = lp_.reduce.at(op);
    const int64_t n = rp.contributions, P = rp.partitions;
    // One fold in the defined order; `contribution` reads one contribution.
    auto fold = [&](auto&& contribution) {
      if (n == 0) return;
      const int64_t parts = std::min(P, n), full = n / P;
      int64_t reads = parts + (lr.loop ? parts : std::max<int64_t>(full - 1, 0) * parts);
      reads += std::max<int64_t>(n - std::max<int64_t>(full, 1) * P, 0);
      add(&LaneCode::loops, lr.loop ? 1 : 0);
      for (int64_t i = 0; i < reads; ++i) contribution();
    };
    // Lanes hold partitions: A accumulators over n / W vectors of x.
    auto lanePartials = [&] {
      const int64_t A = P / w_, steps = n / w_ / A;
      add(&LaneCode::loops, lr.loop ? 1 : 0);
      const int64_t reads = A + (lr.loop ? A : std::max<int64_t>(steps - 1, 0) * A);
      for (int64_t i = 0; i < reads; ++i) read(x);
    };
    auto element = [&] {
      if (lr.vector_partitions)
        lanePartials();
      else
        fold([] {});  // scalar contributions: element reads
    };
    if (!lr.horizontal) {
      define(r, [&](int64_t) {
        read(init);
        fold([&] { read(x); });
      });
      return;
    }
    if (r->type.isScalar()) {
      element();
      return;
    }
    const int64_t laneExt = r->type.dims.back().extent;
    if (lr.vector_partitions && laneExt >= w_) {
      define(r, [&](int64_t) {
        for (int64_t j = 0; j < w_; ++j) lanePartials();
        read(init);
        add(&LaneCode::shuffles, (P / w_) * transpose_);
      });
      return;
    }
    define(r, [&](int64_t chunk) {
      const int64_t e = chunk < 0 ? w_ : std::min(w_, laneExt - chunk * w_);
      for (int64_t j = 0; j < e; ++j) element();
    });
  }

  // One W x W transpose of W vectors read from x.
  void transposeBlock(const Value* x) {
    for (int64_t i = 0; i < w_; ++i) read(x);
    add(&LaneCode::shuffles, transpose_);
  }

  // One block of bf16 words (Conversion::words): W half-vector loads (W/2 vectors' lanes) and
  // a W/2 x W/2 transpose within halves.
  void wordBlock() {
    add(&LaneCode::vector_loads, w_ / 2);
    add(&LaneCode::shuffles, (w_ / 2) * log2Of(w_ / 2));
  }

  // `n` blocks, by a runtime loop when `rolled`.
  template <class F>
  void blocks(int64_t n, bool rolled, F&& block) {
    if (n <= 0) return;
    add(&LaneCode::loops, rolled ? 1 : 0);
    times(rolled ? 1 : n, block);
  }

  void conversion(const Conversion& c) {
    if (c.kind == ConversionKind::Bf16Words) {  // each vector of the value read once
      walk(L(c.value), [&](int64_t) { read(c.value); });
      return;
    }
    auto transpose = [&] { transposeBlock(c.value); };
    if (c.words) {  // the inside copy: whole chunks as words, then the partial chunk
      blocks(c.word_iterations, c.word_rolled, [&] { wordBlock(); });
      blocks(c.tail_iterations, c.tail_rolled, transpose);
    } else {
      blocks(c.iterations, c.rolled, transpose);
    }
    if (c.edge_copy) blocks(c.iterations, c.rolled, transpose);
  }

  void mmaTiles(const Op* op, bool inside) {
    const LaneMma& m = lp_.mma.at(op);
    const MmaPlan& mp = p_.mma.at(op);
    const int64_t fma = op->mma_policy.fused ? 1 : 0;
    const Value* acc = op->operands[2];
    const int64_t P = ir::mmaRound(op->mma_policy);
    // Partitioned (or bf16_dot) element by element (scalars): a loop over whole rounds per element when planned.
    auto element = [&] {
      if (mp.k > 0) add(&LaneCode::loops, m.k_loop ? 1 : 0);
    };
    if (m.form == MmaForm::Scalar) {
      if (P > 0)
        element();
      else
        add(&LaneCode::loops, m.k_loop ? 1 : 0);
      return;
    }
    if (m.form == MmaForm::Elements) {
      const int64_t laneExt = acc->type.dims.back().extent;
      define(op->results[0], [&](int64_t chunk) {
        const int64_t e = chunk < 0 ? w_ : std::min(w_, laneExt - chunk * w_);
        for (int64_t j = 0; j < e; ++j) element();
      });
      return;
    }
    if (m.form == MmaForm::Amx) {  // packing loops over rows of a, b and the accumulator, twice
      if (mp.k > 0) add(&LaneCode::loops, 5);
      return;
    }
    if (m.form == MmaForm::Dot) {
      const int64_t A = P / w_, rounds = mp.k / P;
      const int64_t folds = m.k_loop ? A : (rounds - 1) * A;  // vectors folded after the first A
      define(op->results[0], [&](int64_t) {
        for (int64_t j = 0; j < w_; ++j) {
          add(&LaneCode::loops, m.k_loop ? 1 : 0);
          for (int64_t i = 0; i < A + folds; ++i) read(op->operands[0]), read(op->operands[1]);
          add(&LaneCode::fmas, fma * folds);
        }
        read(acc);
        add(&LaneCode::shuffles, A * transpose_);
      });
      return;
    }
    const Layout& al = L(acc);
    if (m.fused_transpose) {
      const int xi = m.broadcast[0] ? 1 : 0;  // the transposed operand; the other is broadcast
      const Value* x = op->operands[xi];
      const bool words = inside && lp_.conversions[m.conversion[xi]].words;
      const int64_t K = x->type.dims.back().extent, full = K / w_, tail = K % w_;
      for (int64_t lb = 0; lb < al.chunks; lb += m.fused_group) {
        const int64_t g = std::min(m.fused_group, al.chunks - lb);
        for (int64_t row = 0; row < g * al.rows; ++row) read(acc);
        add(&LaneCode::loops, m.k_loop ? 1 : 0);
        auto steps = [&](int64_t count, bool asWords) {
          for (int64_t i = 0; i < g; ++i) asWords ? wordBlock() : transposeBlock(x);
          add(&LaneCode::fmas, (m.dpbf16 ? 0 : fma) * count * al.rows * g);
        };
        times(m.k_loop ? 1 : full, [&] { steps(w_, words); });
        if (tail > 0) steps(tail, false);
      }
      return;
    }
    // Contributions emitted per register tile, each an FMA per accumulator (the bf16 dot order:
    // per block two steps by a loop over its pairs, or the pair; an odd count's last step; a
    // block by the K loop, whole blocks unrolled, the last block).
    // The bf16 pairs order: per pair two steps, or one VDPBF16PS reading both contributions
    // (counted as two reads, no FMA); whole pairs by the K loop or unrolled; an odd count's last.
    const bool bf16 = op->mma_policy.bf16_dot, pairsOrder = op->mma_policy.bf16_pairs;
    auto blockSteps = [](int64_t count) { return 2 * std::min<int64_t>(count / 2, 1) + count % 2; };
    const int64_t full = mp.k / 32, tail = mp.k % 32, blockCount = m.k_loop ? 1 : full;
    const int64_t pairSteps = (m.k_loop ? 1 : mp.k / 2) * 2 + mp.k % 2;
    const int64_t steps = pairsOrder ? pairSteps
                          : !bf16    ? (m.k_loop ? 1 : mp.k)
                                     : blockCount * blockSteps(32) + blockSteps(tail);
    const int64_t pairLoops = !bf16 ? 0 : blockCount * (full > 0 ? 1 : 0) + (tail / 2 > 1 ? 1 : 0);
    auto tileRows = [&](int64_t nr) {
      for (int64_t c0 = 0; c0 < al.chunks; c0 += m.block_chunks) {
        const int64_t nc = std::min(m.block_chunks, al.chunks - c0);
        for (int64_t i = 0; i < nr * nc; ++i) read(acc);
        add(&LaneCode::loops, (m.k_loop ? 1 : 0) + pairLoops);
        times(steps, [&] {
          for (int i = 0; i < 2; ++i)
            if (!m.broadcast[i] && m.conversion[i] < 0)
              for (int64_t t = 0; t < (m.row_shared[i] ? nc : nr * nc); ++t) read(op->operands[i]);
          add(&LaneCode::fmas, (bf16 || pairsOrder ? (m.dpbf16 ? 0 : 1) : fma) * nr * nc);
        });
      }
    };
    int64_t r0 = 0;
    if (m.tiles_rolled) {
      add(&LaneCode::allocas, static_cast<int64_t>(m.spilled.size()));
      add(&LaneCode::loops, 1);
      tileRows(m.block_rows);
      r0 = m.full_tiles * m.block_rows;
    }
    for (; r0 < al.rows; r0 += m.block_rows) tileRows(std::min(m.block_rows, al.rows - r0));
  }

  const ir::Kernel& k_;
  const Plan& p_;
  const LanePlan& lp_;
  const int64_t w_;
  const int64_t transpose_;  // shuffles of one W x W transpose in registers: W log2 W
  int64_t copies_ = 1;
  LaneCode code_;
};

}  // namespace

LaneCode predictLaneCode(const ir::Kernel& kernel, const Plan& p) {
  return CodeModel(kernel, p).run();
}

}  // namespace kiln::plan

// The lane realization's plan (local_lanes = W): one program over the W lanes of a vector.
//
// Layout rule: every tile value of rank >= 1 lies with its LAST dim along the lanes, in
// chunks of W; the other dims are rows. Loads keep the view's dim order, so the lane dim of a
// loaded tile is the view's innermost named dim: contiguous memory when that is the view's last
// dim. A value needed with another dim along the lanes (an mma operand) gets an explicit
// transpose conversion, made once per definition, never per element.
//
// Representation rule (cost model): constants are splats; single-use element-wise values whose
// consumer reads each vector once are recipes; values of at most `vector_cap` vectors stay in
// registers (Vectors) unless something reads them at a runtime index; the rest live in stack
// panels. Values defined or walked by a runtime loop read their operands at runtime indices,
// so those operands (through recipes) are panels.
//
// MMA rule: the accumulator's lane dim L. An operand holding L supplies vectors along L
// (transposed once when L is not its last dim: after its definition when that lies outside the
// loops around the mma, else before the mma); an operand without L is read one element per
// K step and splat (`vbroadcastss`). Accumulators form register tiles of block_rows x
// block_chunks: the whole accumulator where it fits the register file with a row's operands,
// else <= the target model's accumulators (target/model.h: 20 of 32 AVX-512 registers; 12 of
// AVX2's 16 at W = 8, 6 rows x 2 vectors), each tile one K loop in ascending K: the IR's order,
// MUL then ADD or one FMA.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "plan/plan.h"
#include "target/target.h"

namespace kiln::plan {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Value;

bool elementwise(OpKind k) {
  return ir::isUnary(k) || ir::isBinary(k) || k == OpKind::Cmp || k == OpKind::Select || k == OpKind::Cast;
}

class LanePlanner {
 public:
  LanePlanner(const ir::Kernel& k, Plan& p) : k_(k), p_(p), lp_(p.lanes) {}

  std::optional<std::string> run() {
    const int64_t w = p_.knobs.packet_width;
    const target::Model& model = target::of(p_.knobs.target).model(p_.knobs.isa);
    model_ = &model;
    lp_.model = model.name;
    lp_.accumulators = model.accumulators(w);
    lp_.max_tile_chunks = model.maxTileChunks(w);
    lp_.vector_cap = 32;
    // Target nvptx: a GPU thread holds one lane of each vector (or, with gpu_lanes=registers,
    // scalars), so a W-lane access is never split into register-wide pieces (nor their masks
    // hidden behind x86 inline asm).
    lp_.register_lanes = model.registerLanes(w);
    size_t n = k_.values.size();
    lp_.layout.assign(n, Layout{});
    users_.assign(n, {});
    ir::walk(k_.body, [&](const Op* op) {
      for (const Value* v : op->operands) users_[v->id].push_back(op);
      for (const ir::Index& ix : op->indices)
        if (ix.value) users_[ix.value->id].push_back(op);
    });
    for (const auto& v : k_.values) shape(v.get());
    chooseReps();
    planMmas();
    planReduces();
    planRuntimeReads();
    tieLoops();
    planAccess();
    planDirectLoads();
    planPairPanels();
    planPrefetch();
    planEmission();
    assignSlots();
    int64_t bytes = 0;
    for (size_t s = 0; s < lp_.slot_vectors.size(); ++s)
      bytes += lp_.slot_vectors[s] * w * ir::elemBytes(lp_.slot_elem[s]);
    p_.snapshot_bytes_per_worker = bytes;
    p_.snapshot_allocas = static_cast<int64_t>(lp_.slot_vectors.size());
    if (bytes > p_.knobs.max_local_bytes)
      return fmt::format(
          "panel bytes per program {} exceed knob 'max_local_bytes' = {} (legal 0..16777216); raise "
          "max_local_bytes or use smaller tiles",
          bytes, p_.knobs.max_local_bytes);
    lp_.code = predictLaneCode(k_, p_);
    lp_.code.allocas += static_cast<int64_t>(lp_.slot_vectors.size());
    p_.snapshot_allocas = lp_.code.allocas;
    p_.runtime_loops = lp_.code.loops;
    return std::nullopt;
  }

 private:
  Layout& L(const Value* v) { return lp_.layout[v->id]; }

  void shape(const Value* v) {
    Layout& l = L(v);
    if (!v->type.isTile() || v->type.isScalar()) {
      l.rep = LaneRep::Scalar;
      return;
    }
    const auto& d = v->type.dims;
    l.lane_dim = d.back().name;
    l.rows = 1;
    for (size_t i = 0; i + 1 < d.size(); ++i) l.rows *= d[i].extent;
    l.chunks = (d.back().extent + p_.knobs.packet_width - 1) / p_.knobs.packet_width;
    l.large = l.vectors() > lp_.vector_cap;
    l.rep = l.large ? LaneRep::Panel : LaneRep::Vectors;
  }

  bool readsOnce(const Op* user, const Value* v) const {
    if (elementwise(user->kind)) return !v->type.isScalar() || user->results[0]->type.isScalar();
    if (user->kind == OpKind::Store) return user->operands[1] == v;
    if (user->kind == OpKind::Mma) return user->operands[2] == v;
    if (user->kind == OpKind::Reduce) return false;
    return false;
  }

  void chooseReps() {
    ir::walk(k_.body, [&](const Op* op) {
      for (const Value* r : op->results) {
        Layout& l = L(r);
        if (l.rep == LaneRep::Scalar) continue;
        if (op->kind == OpKind::Const) {
          l.rep = LaneRep::Splat;
          continue;
        }
        bool yielded = std::any_of(users_[r->id].begin(), users_[r->id].end(),
                                   [](const Op* u) { return u->kind == OpKind::Yield; });
        if (yielded || ir::isLoop(op->kind)) continue;
        bool cheap = op->kind == OpKind::Iota || op->kind == OpKind::Broadcast;
        bool fusable = elementwise(op->kind) && p_.knobs.fuse_recipes && users_[r->id].size() == 1 &&
                       users_[r->id][0]->parent == op->parent && readsOnce(users_[r->id][0], r);
        if (cheap || fusable) l.rep = LaneRep::Recipe;
      }
    });
  }

  // A value read at runtime (vector) indices must be in memory; through recipes, their leaves.
  void needMemory(const Value* v) {
    Layout& l = L(v);
    switch (l.rep) {
      case LaneRep::Scalar:
      case LaneRep::Splat:
      case LaneRep::Direct:
      case LaneRep::Panel: return;
      case LaneRep::Vectors: l.rep = LaneRep::Panel; return;
      case LaneRep::Recipe:
        for (const Value* o : v->def->operands) needMemory(o);
        return;
    }
  }

  void materialize(const Value* v) {
    Layout& l = L(v);
    if (l.rep == LaneRep::Recipe) {
      l.rep = LaneRep::Panel;
    }
    needMemory(v);
  }

  static std::vector<std::string> contracted(const Op* op) { return op->dims; }

  // An mma the AMX form runs (knob amx; docs/backend.md): the bf16 dot order, AVX-512 code on a
  // host with AMX, c[r, n] from a[r, k] (K last) and b[n, k] or b[k, n] (n the lanes).
  bool amxForm(const Op* op) const {
    if (!op->mma_policy.bf16_dot || !amxTiles(p_.knobs, *model_)) return false;
    const ir::Type& at = op->operands[2]->type;
    const ir::Type& xa = op->operands[0]->type;
    const ir::Type& xb = op->operands[1]->type;
    if (at.dims.size() != 2 || op->dims.size() != 1 || xa.dims.size() != 2 || xb.dims.size() != 2) return false;
    const std::string& k = op->dims[0];
    const bool kInner = xb.dims[1].name == k && xb.dims[0].name == at.dims[1].name;
    const bool kOuter = xb.dims[0].name == k && xb.dims[1].name == at.dims[1].name;
    return xa.dims[1].name == k && xa.dims[0].name == at.dims[0].name && (kInner || kOuter);
  }

  void planMmas() {
    ir::walk(k_.body, [&](const Op* op) {
      if (op->kind != OpKind::Mma) return;
      LaneMma m;
      const Value* acc = op->operands[2];
      const MmaPlan& mp = p_.mma.at(op);
      // K is unrolled only when the whole contraction is small: K <= 16 and K x accumulator
      // vectors <= 256 (straight-line FMAs); otherwise one K loop per register tile.
      const int64_t accVectors = acc->type.isScalar() ? 1 : L(acc).vectors();
      m.k_rolled = !(mp.k <= 16 && mp.k * accVectors <= 256);
      m.k_reason = m.k_rolled
                       ? fmt::format("K={} with {} accumulator vectors: one K loop per register tile", mp.k, accVectors)
                       : fmt::format("K={} x {} accumulator vectors <= 256: unrolled", mp.k, accVectors);
      // (The bf16 dot order's outer product walks each block's pairs by a loop: K >= 4 reads its
      // operands at runtime K.)
      const bool rolled = (m.k_rolled && mp.k > 1) || (op->mma_policy.bf16_dot && mp.k >= 4);
      if (acc->type.isScalar()) {
        m.form = MmaForm::Scalar;
        for (int i = 0; i < 2; ++i) materialize(op->operands[i]);
        lp_.mma[op] = m;
        return;
      }
      if (amxForm(op)) {
        // The bf16 dot order on AMX tiles (docs/backend.md): operands packed as bf16 at runtime
        // rows (memory), the accumulator through a 16 x 16 f32 tile buffer.
        m.form = MmaForm::Amx;
        m.lane_dim = acc->type.dims.back().name;
        m.k_rolled = false;
        // b[n, k] beside at most 16 rows of a (decode): b's rows go to the tiles as the
        // instruction's A operand, as they are, and a's rows, transposed into 32-bit words, as
        // its B, where b as B would need all of b's words transposed (a row of a 16-row tile).
        // The products and their order are the same (the dot is symmetric in a and b).
        m.amx_b_first = acc->type.dims[0].extent <= 16 && op->operands[1]->type.dims[1].name == op->dims[0];
        m.k_reason = fmt::format(
            "bf16_dot on AMX: {} x {} outputs in 16 x 16 tiles, K={} in {} block(s) of 32 (TDPBF16PS){}",
            acc->type.dims[0].extent, acc->type.dims[1].extent, mp.k, (mp.k + 31) / 32,
            m.amx_b_first ? "; b's rows as the instruction's A, a's transposed words as its B (<= 16 rows of a)" : "");
        // An operand read from its view at use stays so (a bf16 view's bits go to the tiles as
        // they are); any other is read at runtime rows from memory.
        for (int i = 0; i < 2; ++i)
          if (L(op->operands[i]).rep != LaneRep::Direct) materialize(op->operands[i]);
        needMemory(acc);
        needMemory(op->results[0]);
        lp_.mma[op] = m;
        return;
      }
      if (const int64_t P = ir::mmaRound(op->mma_policy); P > 0 && !ir::bf16Order(op->mma_policy)) {
        // A partitioned order (docs/ir.md): the dot form when the lanes can hold the
        // partitions — one contracted dim, the last dim of both operands (vectors along K),
        // P a multiple of W and K a multiple of P; else element by element in that order.
        // The bf16 dot order: the element steps on vectors of outputs, a block of 32 per step.
        const int64_t w = p_.knobs.packet_width;
        const std::string& kd = op->dims[0];
        const Value* a = op->operands[0];
        const Value* b = op->operands[1];
        const bool dot = !op->mma_policy.bf16_dot && op->dims.size() == 1 && a->type.dims.back().name == kd &&
                         b->type.dims.back().name == kd && P % w == 0 && mp.k > 0 && mp.k % P == 0;
        m.form = dot ? MmaForm::Dot : MmaForm::Elements;
        if (dot) {  // K / W vectors per output: unrolled up to 16, else one loop per output
          m.k_rolled = mp.k / w > 16;
          // Read at runtime K vectors (a loop) or runtime rows (a large result's row loop): memory.
          if (m.k_rolled || L(op->results[0]).large) materialize(a), materialize(b);
        }
        m.lane_dim = dot ? kd : acc->type.dims.back().name;
        m.k_reason = dot ? fmt::format(
                               "partitions({}): lanes along {} hold the partitions, {} vector(s) each; {} "
                               "vectors of K per output {}",
                               P, kd, P / w, mp.k / w, mp.k / w > 16 ? "in a loop" : "unrolled")
                     : op->mma_policy.bf16_dot
                         ? fmt::format(
                               "bf16_dot: a vector of outputs per step (their operands per lane: "
                               "vectors, splats or gathers), {} block(s) of 32 {}",
                               (mp.k + 31) / 32, m.k_rolled && mp.k / 32 > 1 ? "in a loop" : "unrolled")
                         : fmt::format("partitions({}): element by element (the lanes cannot hold the partitions)", P);
        if (!dot)
          for (int i = 0; i < 2; ++i) materialize(op->operands[i]);
        // A result walked by a row loop reads the accumulator at runtime rows (fuzz seed 13).
        if (L(op->results[0]).large) needMemory(acc);
        lp_.mma[op] = m;
        return;
      }
      // The outer product: ascending K, the bf16 dot order's blocks (an even and an odd chain
      // per accumulator, docs/ir.md) or the bf16 pairs order's pairs (one chain), on register
      // tiles of accumulators.
      m.form = MmaForm::OuterProduct;
      m.lane_dim = acc->type.dims.back().name;
      if (ir::bf16Order(op->mma_policy)) {
        m.dpbf16 = dpbf16Steps(p_.knobs, *model_);
        if (op->mma_policy.bf16_dot)
          m.k_reason += fmt::format("; bf16_dot: {} block(s) of 32, an even and an odd chain per accumulator{}",
                                    (mp.k + 31) / 32, m.dpbf16 ? ", each step a VDPBF16PS" : "");
        else
          m.k_reason += fmt::format("; bf16_pairs: {} pair(s){}, one chain per accumulator{}", mp.k / 2,
                                    mp.k % 2 ? " and a last contribution alone" : "",
                                    m.dpbf16 ? ", each pair a VDPBF16PS" : ", two steps per pair");
      }
      for (int i = 0; i < 2; ++i) {
        const Value* x = op->operands[i];
        m.row_shared[i] = std::none_of(x->type.dims.begin(), x->type.dims.end(), [&](const ir::Dim& d) {
          return d.name != m.lane_dim && acc->type.findDim(d.name) >= 0;
        });
        if (x->type.findDim(m.lane_dim) < 0) {
          m.broadcast[i] = true;
          if (x->type.isScalar()) continue;
          if (bf16WordsOperand(op, m, x)) {
            // Rounded to bf16 once per definition (ConversionKind::Bf16Words), not per tile and pair.
            Conversion c;
            c.at = op;
            c.value = x;
            if (x->def && x->def->parent != op->parent && !ir::isLoop(x->def->kind)) c.after = x->def;
            c.kind = ConversionKind::Bf16Words;
            c.rows = L(x).rows;
            c.chunks = L(x).chunks;
            m.conversion[i] = static_cast<int>(lp_.conversions.size());
            lp_.conversions.push_back(c);
            continue;
          }
          // Read one element per K step: registers when K is unrolled, memory when rolled.
          if (rolled)
            materialize(x);
          else if (L(x).rep == LaneRep::Recipe)
            L(x).rep = LaneRep::Vectors, needLarge(x);
          continue;
        }
        if (x->type.dims.back().name == m.lane_dim) {
          if (rolled)
            materialize(x);
          else if (L(x).rep == LaneRep::Recipe)
            L(x).rep = LaneRep::Vectors, needLarge(x);
          continue;
        }
        // Transposed once: the operand's dims without L, then L along the lanes.
        Conversion c;
        c.at = op;
        c.value = x;
        // Loop-invariant operand: transposed once after its definition, not on every trip.
        if (x->def && x->def->parent != op->parent && !ir::isLoop(x->def->kind)) c.after = x->def;
        c.kind = ConversionKind::Transpose;
        c.to_lane_dim = m.lane_dim;
        c.rows = 1;
        for (const ir::Dim& d : x->type.dims)
          if (d.name != m.lane_dim) c.rows *= d.extent;
        c.chunks =
            (x->type.dims[x->type.findDim(m.lane_dim)].extent + p_.knobs.packet_width - 1) / p_.knobs.packet_width;
        // Rows of K (x's last dim, its only other dim of extent above 1) for VDPBF16PS: pair words.
        c.pair_words = op->mma_policy.bf16_pairs && m.dpbf16 && op->dims.size() == 1 &&
                       x->type.dims.back().name == op->dims[0] && c.rows == x->type.dims.back().extent;
        materialize(x);  // the transpose reads it at runtime indices
        m.conversion[i] = static_cast<int>(lp_.conversions.size());
        lp_.conversions.push_back(c);
      }
      const Layout& al = L(acc);
      // The whole accumulator in one register tile when it fits in the registers with a row's
      // lane-operand vectors and a broadcast, past the model's accumulator budget if need be (a
      // row's lane operands are then read once for all rows: AVX-512 decode 1,8,2,1,2053,80,96's
      // P.V, 4 rows x 6 chunks, one tile instead of 4 x 4 and 4 x 2, paired on AMD Zen 5: 0.93 of
      // the time with bf16 K/V, 0.95 f32); one row, or a model that does not state its register
      // file (the GPU's lanes), at most the budget; else rows x at most the model's chunks per
      // row. The bf16 dot order keeps two chains per accumulator in registers through a block
      // (the accumulators themselves wait, spilled if need be, for the block's merge): half as
      // many.
      const int64_t regs = model_->vectors(p_.knobs.packet_width);
      const int64_t chains = op->mma_policy.bf16_dot ? 2 : 1, accs = std::max<int64_t>(1, lp_.accumulators / chains);
      const bool fits = chains * al.vectors() + al.chunks + 1 <= regs;
      const bool fileKnown = model_->vector_registers > 0;
      const bool whole = al.rows > 1 && fileKnown ? fits : al.vectors() <= accs && (al.rows == 1 || fits);
      if (whole) {
        m.block_rows = al.rows;
        m.block_chunks = al.chunks;
      } else {
        // One row: each lane-operand vector is used once, so the tile may take every
        // accumulator register along the row.
        m.block_chunks = std::min<int64_t>(al.chunks, al.rows == 1 ? accs : lp_.max_tile_chunks);
        const int64_t fit = std::min(accs, (regs - m.block_chunks - 1) / chains) / m.block_chunks;
        m.block_rows = std::max<int64_t>(1, std::min<int64_t>(al.rows, fit));
        // Few rows (decode's query heads), all in the tile: more chunks per tile, up to the
        // budget and with a register to spare, so that fewer tiles read each row's broadcasts
        // (AVX-512 decode 1,32,8,1,4096,128,128's P.V: 4 x 5 and 4 x 3 instead of two 4 x 4;
        // GQA-2 AVX2 decode: 2 x 4 instead of 2 x 2; AVX2's 4 rows keep 4 x 2, whose 4 x 3 would
        // take all 16 registers: paired, bf16 long decode 1.01-1.06).
        // (c chunks: rows * c <= accs and chains * rows * c + c + 1 < regs.)
        if (m.block_rows == al.rows && al.rows > 1 && fileKnown)
          m.block_chunks =
              std::max(m.block_chunks, std::min({al.chunks, accs / al.rows, (regs - 2) / (chains * al.rows + 1)}));
      }
      m.blocks = ((al.rows + m.block_rows - 1) / m.block_rows) * ((al.chunks + m.block_chunks - 1) / m.block_chunks);
      if (!ir::bf16Order(op->mma_policy) || (op->mma_policy.bf16_pairs && m.dpbf16)) planFusedTranspose(op, m);
      lp_.mma[op] = m;
    });
  }

  // A bf16_pairs mma's broadcast operand on VDPBF16PS, contracted along its own lane dim (its
  // last dim, the mma's one contracted dim), other than a bf16 view's load (whose pairs are read
  // as 32-bit words from the view) and a constant: its bf16 words made once (ConversionKind::
  // Bf16Words), so that each pair of each row is one 32-bit broadcast.
  bool bf16WordsOperand(const Op* op, const LaneMma& m, const Value* x) {
    if (!op->mma_policy.bf16_pairs || !m.dpbf16 || op->dims.size() != 1) return false;
    if (x->type.dims.back().name != op->dims[0]) return false;
    if (x->def && x->def->kind == OpKind::Load && x->def->operands[0]->type.elem == ir::Elem::BF16) return false;
    return L(x).rep != LaneRep::Splat && L(x).rep != LaneRep::Scalar;
  }

  // Fused transpose: one operand converted before this mma (not hoisted), contracted along its
  // own last dim (the only contracted dim) and 2-D apart from extent-1 dims; the other operand
  // broadcast; at most 8 accumulator rows (8 accumulators + W transposed vectors + temporaries
  // fit AVX-512's 32 registers); read from a view of at most kFusedTransposeViewBytes. Paired
  // against the panel (AOT objects, one process): decode 1,8,2,1,2053,80,96 0.91, tail
  // 1,6,2,1,2053,80,96 0.92, MHA decode 1,8,8,1,2048,64,64 0.95; but 1,32,8,1,4096,128,128 1.31:
  // its 33 MB of K/V stream from DRAM, and the panel's transpose loop, loads only, keeps more
  // of them in flight than loads interleaved with the FMA chains of a few rows. The view's own
  // bytes count: with bf16 K (8 MiB, words and two chunks per step) the same decode fused is
  // 0.82 of the panel (AVX-512), 0.76 (AVX2), Xeon, 1 thread.
  void planFusedTranspose(const Op* op, LaneMma& m) {
    int conv = -1;
    for (int i = 0; i < 2; ++i)
      if (m.conversion[i] >= 0 && lp_.conversions[m.conversion[i]].kind == ConversionKind::Transpose) conv = i;
    if (conv < 0 || !m.broadcast[1 - conv] || op->dims.size() != 1) return;
    // The other operand as it is, or (bf16_pairs) as bf16 words.
    if (m.conversion[1 - conv] >= 0 && lp_.conversions[m.conversion[1 - conv]].kind != ConversionKind::Bf16Words)
      return;
    Conversion& c = lp_.conversions[m.conversion[conv]];
    const Value* x = op->operands[conv];
    if (c.after || c.rows != x->type.dims.back().extent || x->type.dims.back().name != op->dims[0]) return;
    const Layout& al = L(op->operands[2]);
    // The model's W x W transpose, with the rows' accumulators, W transposed vectors and a few
    // temporaries within the registers (AVX-512 at W = 16: 8 rows; AVX2 at W = 8: 4).
    const int64_t w = p_.knobs.packet_width;
    if (model_->transpose_lanes != w || al.rows > std::min<int64_t>(8, model_->vectors(w) - w - 4)) return;
    if (!x->def || x->def->kind != OpKind::Load) return;
    constexpr int64_t kFusedTransposeViewBytes = int64_t{8} << 20;
    const ir::Value* view = x->def->operands[0];
    if (ir::elemBytes(view->type.elem) * view->type.numElements() > kFusedTransposeViewBytes) return;
    m.fused_transpose = true;
    c.fused = true;
  }

  void needLarge(const Value* v) {
    if (L(v).large) L(v).rep = LaneRep::Panel;
  }

  void planReduces() {
    ir::walk(k_.body, [&](const Op* op) {
      if (op->kind != OpKind::Reduce) return;
      LaneReduce r;
      const Value* x = op->operands[0];
      const Layout& xl = L(x);
      r.horizontal = std::find(op->dims.begin(), op->dims.end(), xl.lane_dim) != op->dims.end();
      const ReducePlan& rp = p_.reduce.at(op);
      const int64_t w = p_.knobs.packet_width;
      const int64_t n = rp.contributions;
      if (r.horizontal) {
        const int64_t laneExt = x->type.dims.back().extent;
        r.vector_partitions = rp.partitions % w == 0 && laneExt % rp.partitions == 0;
        // Lanes hold partitions: n / P steps of P/W vectors; else one scalar per contribution.
        r.rolled = r.vector_partitions ? n / rp.partitions > 16 : n > 16;
      } else {
        r.rolled = n > 16;
      }
      if (r.rolled || L(op->results[0]).large) materialize(x);
      lp_.reduce[op] = r;
    });
  }

  // Runtime loops: a large value's definition, a large store, a yield copy of a large panel.
  void planRuntimeReads() {
    ir::walk(k_.body, [&](const Op* op) {
      if (op->kind == OpKind::Store) {
        if (L(op->operands[1]).large) needMemory(op->operands[1]);
        return;
      }
      if (op->kind == OpKind::Yield) {
        for (const Value* v : op->operands)
          if (L(v).large) needMemory(v);
        return;
      }
      if (ir::isLoop(op->kind)) {
        for (const Value* v : op->operands)
          if (L(v).large) needMemory(v);
        return;
      }
      if (op->kind == OpKind::Extract) {
        bool runtime =
            std::any_of(op->indices.begin(), op->indices.end(), [](const ir::Index& i) { return !i.isConstant(); });
        const Value* x = op->operands[0];
        if (!runtime || x->type.isScalar()) return;
        const bool recipe = L(x).rep == LaneRep::Recipe;
        materialize(x);
        // A large recipe made a panel here is filled by a runtime loop over its rows, which
        // reads its operands at runtime indices: as for any large value (below). Found by
        // `kiln fuzz --seed 11` (tests/ir/extract_of_large_broadcast.tile).
        if (recipe && L(x).large && x->def)
          for (const Value* o : x->def->operands) needMemory(o);
        return;
      }
      if (op->kind == OpKind::Reduce) {
        if (L(op->results[0]).large) needMemory(op->operands[1]);
        return;
      }
      if (op->results.empty() || op->kind == OpKind::Mma) return;
      const Value* r = op->results[0];
      if (!L(r).large || L(r).rep == LaneRep::Recipe) return;
      for (const Value* o : op->operands) needMemory(o);
    });
    // A recipe consumed inside a runtime loop was handled through its consumer above; a recipe
    // whose own consumer is a runtime-walked panel value reaches its leaves through needMemory.
  }

  void tieLoops() {
    ir::walk(k_.body, [&](const Op* op) {
      if (!ir::isLoop(op->kind)) return;
      for (size_t i = 0; i < op->results.size(); ++i) {
        const Value* arg = op->regions[0]->args[i + 1];
        const Value* res = op->results[i];
        if (L(arg).rep == LaneRep::Scalar) continue;
        bool panel = L(arg).rep == LaneRep::Panel || L(res).rep == LaneRep::Panel;
        L(arg).rep = L(res).rep = panel ? LaneRep::Panel : LaneRep::Vectors;
      }
    });
  }

  void planAccess() {
    ir::walk(k_.body, [&](const Op* op) {
      if (op->kind != OpKind::Load && op->kind != OpKind::Store) return;
      const Value* tile = op->kind == OpKind::Load ? op->results[0] : op->operands[1];
      const Value* view = op->operands[0];
      if (tile->type.isScalar()) {
        lp_.access[op] = LaneAccess::Gather;  // a single element: a scalar access
        return;
      }
      const std::string& lane = tile->type.dims.back().name;
      const auto& acc = op->access;
      bool contiguous = !acc.empty() && acc.back().name == lane && view->type.dims.size() == acc.size();
      lp_.access[op] = contiguous ? LaneAccess::Vector : LaneAccess::Gather;
    });
  }

  // The op of region `r` that contains `op` (op itself, or an ancestor), or nullptr.
  static const Op* ancestorIn(const Op* op, const ir::Region* r) {
    while (op && op->parent != r) op = op->parent && op->parent->parent ? op->parent->parent : nullptr;
    return op;
  }
  static bool hasStore(const Op* op) {
    if (op->kind == OpKind::Store) return true;
    for (const ir::Region* sub : op->regions)
      for (const Op* o : sub->ops)
        if (hasStore(o)) return true;
    return false;
  }

  // A load kept in a panel (large, or read at runtime indices) is read from its view at each
  // use instead when no store can run between the load and its last use: the copy would be a
  // value nobody can observe differing from memory.
  // A load from a 16-bit view that an outer-product mma splats stays a panel: it is widened to
  // f32 once, W elements per conversion, where reading the view at each use would widen one
  // element per splat (three instructions where f32 needs one load: f16 causal prefill
  // 1,8,8,256,256,64,64 1327 us against 786 with f32 K/V). Not for a bf16_pairs mma on
  // VDPBF16PS: a pair of its splat is two adjacent bf16 words of the view, one 32-bit load
  // broadcast (folded into the instruction), where the panel's f32 values take two loads and
  // three instructions to pack (AMD Zen 4, 1 thread, `kiln peers --kernel gemm --b-dtype bf16`
  // 128,2048,2048, kiln-bf16pairs: 3.39 ms, 1.05x oneDNN's time in the same run, against 5.02 ms,
  // 1.66x, with the panel; two runs minutes apart).
  void planDirectLoads() {
    ir::walk(k_.body, [&](const Op* op) {
      if (op->kind != OpKind::Load || L(op->results[0]).rep != LaneRep::Panel) return;
      const bool widenedSplat = anyMmaOperandUse(op->results[0], [](const Op* mma, const LaneMma& m, int i) {
        return m.form == MmaForm::OuterProduct && m.broadcast[i] && !(mma->mma_policy.bf16_pairs && m.dpbf16);
      });
      if (ir::elemBytes(op->operands[0]->type.elem) == 2 && widenedSplat) return;
      if (stripReadByRowTiles(op)) return;
      const ir::Region* r = op->parent;
      auto pos = [&](const Op* o) { return std::find(r->ops.begin(), r->ops.end(), o) - r->ops.begin(); };
      const auto at = pos(op);
      auto last = at;
      // Every op that reads the load: its users, and through recipes (recomputed where they are
      // consumed) their consumers' (fuzz: a load negated in place read after the store began).
      std::vector<const Value*> read = {op->results[0]};
      for (size_t i = 0; i < read.size(); ++i)
        for (const Op* u : users_[read[i]->id]) {
          const Op* a = ancestorIn(u, r);
          if (!a || a->kind == OpKind::Yield) return;
          last = std::max(last, pos(a));
          if (!u->results.empty() && L(u->results[0]).rep == LaneRep::Recipe &&
              std::find(read.begin(), read.end(), u->results[0]) == read.end())
            read.push_back(u->results[0]);
        }
      for (auto i = at + 1; i <= last; ++i)
        if (hasStore(r->ops[i])) return;
      L(op->results[0]).rep = LaneRep::Direct;
    });
  }

  // A bf16 view's load kept as a panel whose one reader is a bf16_pairs mma on VDPBF16PS,
  // as its lane operand [k, lane] (k the one contracted dim): the panel holds the instruction's
  // operand, each pair of rows as one row of 32-bit words (Layout::pair_words), so the mma
  // loads a pair's vector as it is where it would pack two f32 vectors into one per use (a
  // two-source word permute) for every register tile of rows; half the panel's bytes.
  void planPairPanels() {
    ir::walk(k_.body, [&](const Op* op) {
      if (op->kind != OpKind::Load || op->operands[0]->type.elem != ir::Elem::BF16) return;
      const Value* x = op->results[0];
      Layout& l = L(x);
      if (l.rep != LaneRep::Panel || users_[x->id].size() != 1 || x->type.rank() != 2) return;
      const Op* mma = users_[x->id][0];
      auto it = lp_.mma.find(mma);
      if (it == lp_.mma.end() || !mma->mma_policy.bf16_pairs) return;
      const LaneMma& m = it->second;
      if (m.form != MmaForm::OuterProduct || !m.dpbf16 || mma->dims.size() != 1) return;
      const int i = mma->operands[1] == x ? 1 : 0;
      if (mma->operands[i] != x || mma->operands[1 - i] == x || mma->operands[2] == x || m.broadcast[i] ||
          m.conversion[i] >= 0 || !m.row_shared[i])
        return;
      if (x->type.dims[0].name != mma->dims[0] || x->type.dims[1].name != l.lane_dim) return;
      l.pair_words = true;
    });
  }

  // Whether some mma has `x` as operand i (a or b) where pred(mma op, its plan, i) holds.
  template <class Pred>
  bool anyMmaOperandUse(const Value* x, Pred pred) const {
    for (const Op* u : users_[x->id]) {
      auto it = lp_.mma.find(u);
      if (it == lp_.mma.end()) continue;
      for (int i = 0; i < 2; ++i)
        if (u->operands[i] == x && pred(u, it->second, i)) return true;
    }
    return false;
  }

  // A load of a strip of its view's rows (fewer columns than the view's last dim) that an
  // outer-product mma reads as lane vectors from more than one register tile of rows stays a
  // panel: copied once into contiguous memory instead of read from the view by every tile. The
  // strip's rows lie a view row apart, and from a row of 512 floats (2 KB) all of a 64-row
  // strip falls into 8 of the L1's 64 sets; each register tile then reads it from L2 again.
  // Paired (Intel Xeon, AVX-512, 1 thread): gemm 512^3 0.77, 64x2048x256 0.76, 300x200x129
  // 0.72; AVX2 512^3 0.91; gemm 1x4096x4096 (one tile of rows) and attention (whole rows of
  // K/V) unchanged.
  bool stripReadByRowTiles(const Op* load) const {
    const ir::Type& vt = load->operands[0]->type;
    if (vt.rank() < 2 || load->access.empty() || load->access.back().name.empty() ||
        load->access.back().extent >= vt.dims.back().extent)
      return false;
    return laneOperandOfRowTiles(load->results[0]);
  }

  // Whether an outer-product mma reads `x` as lane vectors (the operand with its lane dim, not
  // transposed) from more than one register tile of rows.
  bool laneOperandOfRowTiles(const Value* x) const {
    return anyMmaOperandUse(x, [](const Op* u, const LaneMma& m, int i) {
      if (m.form != MmaForm::OuterProduct || m.broadcast[i] || m.conversion[i] >= 0) return false;
      const ir::Type& at = u->operands[2]->type;
      return at.numElements() / std::max<int64_t>(1, at.dims.back().extent) > m.block_rows;
    });
  }

  // Whether an mma reads `x` a strip of columns at a time: transposed (W rows per block), or as
  // the lane operand of register tiles narrower than its rows. Not the AMX form's packing,
  // though it reads b[k, n] in strips: its software prefetches took 1.04-1.1x the time there
  // and 1.25x for b[n, k] (gemm 128,5632,2048, bf16 b from DRAM, Intel Xeon; in a burst while
  // packing or spread between the tile products alike).
  bool readInStrips(const Value* x) const {
    return anyMmaOperandUse(x, [&](const Op*, const LaneMma& m, int i) {
      return m.conversion[i] >= 0 ||
             (m.form == MmaForm::OuterProduct && !m.broadcast[i] && m.block_chunks < lp_.layout[x->id].chunks);
    });
  }

  // Whether value v is computed from `axis` (through the ops that define it).
  static bool dependsOn(const Value* v, const Value* axis, std::set<const Value*>& seen) {
    if (v == axis) return true;
    if (!v || !seen.insert(v).second) return false;
    if (v->origin == ir::Value::Origin::RegionArg) {  // a loop's induction variable: its bounds
      const Op* loop = v->region ? v->region->parent : nullptr;
      if (!loop || !ir::isLoop(loop->kind) || v != v->region->args[0]) return false;
      for (const ir::Index& ix : loop->indices)
        if (ix.value && dependsOn(ix.value, axis, seen)) return true;
      return false;
    }
    if (!v->def) return false;
    for (const Value* o : v->def->operands)
      if (dependsOn(o, axis, seen)) return true;
    for (const ir::Index& ix : v->def->indices)
      if (ix.value && dependsOn(ix.value, axis, seen)) return true;
    return false;
  }

  // Every program reads a part of the load's view of its own: each root axis of extent > 1
  // reaches the load's indices (decode's KV chunks; not a prefill's query blocks, which all
  // read their head's K and V, from L2 after the first).
  bool ownPartPerProgram(const Op* load) const {
    const Op* root = k_.root();
    for (size_t a = 0; a < root->extents.size(); ++a) {
      if (root->extents[a] <= 1) continue;
      std::set<const Value*> seen;
      bool used = false;
      for (const ir::Index& ix : load->indices)
        used = used || (ix.value && dependsOn(ix.value, root->regions[0]->args[a], seen));
      if (!used) return false;
    }
    return true;
  }

  // Prefetch rule (LanePrefetch): a tile loaded inside a serial loop from a view of more than
  // the model's L2 (1 MiB when the OS does not say) streams from L3 or DRAM; so does one whose
  // view fits but whose loop's views together do not, when every program reads a part of its
  // own (no reuse from L2 by the next program). Read row after row (a dot product, a whole-row
  // register tile) the hardware prefetcher keeps up; read a strip of columns at a time (a
  // transpose, an outer product's narrow tiles) it does not, so the next tile's lines are asked
  // for one trip ahead. Paired (AOT objects, AVX2 code, 1 thread, AMD Zen 4, no prefetch /
  // prefetch): 1,32,8,1,4096,128,128 0.49, 1,8,2,1,2053,80,96 0.85, 1,6,2,1,2053,80,96 0.88;
  // the dot form's K of 1,8,8,1,2048,64,64 1.09, so not there. The views together: on the
  // Intel Xeon (2 MB of L2) K (1.3 MB) and V (1.6 MB) of 1,8,2,1,2053,80,96 each fit, yet not
  // both: with prefetch 0.90x the time (AVX2 0.82x), 1,6,2,1,2053,80,96 0.91x (0.82x); big
  // prefill's query blocks share their head's K/V, and prefetching them there took 1.09x.
  void planPrefetch() {
    const int64_t l2 = model_->l2_bytes > 0 ? model_->l2_bytes : int64_t{1} << 20;
    if (!model_->prefetch) return;
    auto loopOf = [](const Op* op) -> const Op* {  // the innermost serial loop around op
      for (const Op* a = op->parent ? op->parent->parent : nullptr; a; a = a->parent ? a->parent->parent : nullptr)
        if (a->kind == OpKind::Serial) return a;
      return nullptr;
    };
    auto bytesOf = [](const Value* v) { return v->type.numElements() * ir::elemBytes(v->type.elem); };
    auto vectorLoad = [&](const Op* op) {
      return op->kind == OpKind::Load && !op->results[0]->type.isScalar() && lp_.access[op] == LaneAccess::Vector;
    };
    std::map<const Op*, std::set<const Value*>> read;  // loop -> the views its vector loads read
    ir::walk(k_.body, [&](const Op* op) {
      if (const Op* loop = vectorLoad(op) ? loopOf(op) : nullptr) read[loop].insert(op->operands[0]);
    });
    ir::walk(k_.body, [&](const Op* op) {
      const Op* loop = vectorLoad(op) ? loopOf(op) : nullptr;
      if (!loop) return;
      const ir::Value* view = op->operands[0];
      int64_t bytes = bytesOf(view);
      const bool together = bytes <= l2 && ownPartPerProgram(op);
      if (together) {
        bytes = 0;
        for (const Value* v : read[loop]) bytes += bytesOf(v);
      }
      if (bytes <= l2 || !readInStrips(op->results[0])) return;
      // The tile's outermost dim of extent > 1 along the view: its extent times its stride.
      const auto& vd = view->type.dims;
      std::vector<int64_t> stride(vd.size(), 1);
      for (int k = static_cast<int>(vd.size()) - 2; k >= 0; --k) stride[k] = stride[k + 1] * vd[k + 1].extent;
      for (size_t k = 0; k < vd.size(); ++k)
        if (!op->access[k].name.empty() && op->access[k].extent > 1 && k + 1 < vd.size()) {
          lp_.prefetch[op] = {op->access[k].extent * stride[k],
                              fmt::format("{} {} B > L2 {} B, in a serial loop: the next tile along {}",
                                          together ? "views its loop reads, each part read by one program," : "view of",
                                          bytes, l2, op->access[k].name)};
          return;
        }
    });
  }

  // How the code walks what the decisions above laid out: every loop the emitter makes, every
  // copy of code for tiles inside their views, every private array besides the panels.
  void planEmission() {
    const int64_t w = p_.knobs.packet_width;
    for (const auto& v : k_.values) {
      Layout& l = L(v.get());
      l.chunk_loop = l.large && l.chunks > lp_.max_unrolled_chunks;
    }
    for (Conversion& c : lp_.conversions) {
      if (c.kind != ConversionKind::Transpose) continue;
      const ir::Type& xt = c.value->type;
      const int li = xt.findDim(c.to_lane_dim);
      int64_t outer = 1;
      for (int d = 0; d + 1 < xt.rank(); ++d)
        if (d != li) outer *= xt.dims[d].extent;
      c.iterations = outer * c.chunks * L(c.value).chunks;
      c.rolled = c.iterations > lp_.max_unrolled_transposes;
      c.edge_copy = L(c.value).rep == LaneRep::Direct;
      // bf16 as 32-bit words: whole chunks of a contiguous row (W even).
      const Op* load = c.value->def;
      if (c.edge_copy && model_->unaligned_vector_loads && w % 2 == 0 &&
          load->operands[0]->type.elem == ir::Elem::BF16 && lp_.access.at(load) == LaneAccess::Vector) {
        c.word_chunks = xt.dims.back().extent / w;
        c.words = c.word_chunks > 0;
        c.word_unpack = c.words && p_.knobs.word_transposes == "unpack" && p_.knobs.target == target::Kind::Cpu &&
                        (w == 8 || w == 16);
        c.word_iterations = outer * c.chunks * c.word_chunks;
        c.tail_iterations = outer * c.chunks * (L(c.value).chunks - c.word_chunks);
        c.word_rolled = c.word_iterations > lp_.max_unrolled_transposes;
        c.tail_rolled = c.tail_iterations > lp_.max_unrolled_transposes;
      }
    }
    for (auto& [op, m] : lp_.mma) {
      const MmaPlan& mp = p_.mma.at(op);
      if (m.fused_transpose) {                  // the ascending order, or bf16_pairs on VDPBF16PS
        const int xi = m.broadcast[0] ? 1 : 0;  // the transposed operand; the other is broadcast
        const Value* x = op->operands[xi];
        m.k_loop = m.k_rolled && x->type.dims.back().extent / w > 1;
        // Two chunks of L per step (bf16 words, whose transposed blocks take W/2 registers each)
        // where their accumulators take at most half the registers: twice the independent FMA
        // chains (decode has 4 rows: 4 chains of FMA latency 4 leave one of two FMA ports idle).
        // Xeon, 1 thread, bf16 decode 1,8,2,1,2053,80,96 (the two builds one after the other,
        // 7 rounds each): 0.90 (AVX-512), 0.83 (AVX2); 3 or 4 chunks spill (AVX-512 4: 1.11 of 2).
        const Conversion& c = lp_.conversions[m.conversion[xi]];
        const Layout& al = L(op->operands[2]);
        if (c.words && al.chunks >= 2 && 2 * al.rows <= model_->vectors(w) / 2) m.fused_group = 2;
      } else if (const int64_t P = ir::mmaRound(op->mma_policy); P > 0) {
        m.k_loop = m.k_rolled && mp.k / P > 1;  // whole rounds of P contributions (bf16_dot: blocks)
        if (m.form != MmaForm::OuterProduct) continue;
      } else {
        m.k_loop = m.k_rolled && mp.k > 1;
      }
      const Value* r = op->results[0];
      if (r->type.isScalar()) continue;
      for (int i = 0; i < 2; ++i)
        if (L(op->operands[i]).rep == LaneRep::Direct && (m.conversion[i] < 0 || m.fused_transpose)) m.edge_copy = true;
      if (m.fused_transpose) continue;
      // Tiles at a runtime row read every operand at a runtime row: stack panels, memory,
      // scalars, recipes of those, or register values copied to the stack (not i1: bit-packed).
      std::vector<const Value*> spill;
      std::function<bool(const Value*)> readable = [&](const Value* x) {
        if (x->type.isScalar()) return true;
        const LaneRep rep = L(x).rep;
        if (rep == LaneRep::Recipe) return std::all_of(x->def->operands.begin(), x->def->operands.end(), readable);
        if (rep == LaneRep::Vectors && x->type.elem != ir::Elem::I1) {
          if (std::find(spill.begin(), spill.end(), x) == spill.end()) spill.push_back(x);
          return true;
        }
        return rep == LaneRep::Panel || rep == LaneRep::Direct || rep == LaneRep::Scalar || rep == LaneRep::Splat;
      };
      const Layout& al = L(op->operands[2]);
      m.full_tiles = al.rows / m.block_rows;
      bool ok = m.full_tiles >= 2 && L(r).rep == LaneRep::Panel && readable(op->operands[2]);
      for (int i = 0; i < 2 && ok; ++i) ok = m.conversion[i] >= 0 || readable(op->operands[i]);
      m.tiles_rolled = ok;
      if (ok) m.spilled = spill;
    }
    for (auto& [op, r] : lp_.reduce) {
      const ReducePlan& rp = p_.reduce.at(op);
      r.loop = r.vector_partitions ? r.rolled : r.rolled && rp.contributions / rp.partitions > 1;
    }
    ir::walk(k_.body, [&](const Op* op) {
      if (!ir::isLoop(op->kind)) return;
      LaneLoop lo;
      const ir::Region* body = op->regions[0];
      const Op* yield = body->ops.empty() ? nullptr : body->ops.back();
      if (yield && yield->kind == OpKind::Yield)
        for (size_t i = 0; i < op->results.size(); ++i) {
          const Value* y = yield->operands[i];
          if (L(body->args[i + 1]).rep != LaneRep::Panel || y == body->args[i + 1]) continue;
          if (y->origin == ir::Value::Origin::RegionArg && y->region == body) lo.staged.push_back(i);
          if (accumulatesInPlace(body->args[i + 1], y)) lo.in_place.push_back(i);
        }
      lp_.loops[op] = lo;
    });
  }

  // A carried panel whose next value is an outer-product mma over it, its only use (a GEMM's
  // accumulator), or over an element-wise op of it that only the mma uses (attention's rescaled
  // accumulator acc * alpha, which reads each element where the mma writes it): the mma reads
  // each register tile's accumulators before it writes them, so it writes into the carried
  // storage and the trip ends without a copy. The AMX form likewise over the carried panel
  // itself (not an element-wise op of it).
  bool accumulatesInPlace(const Value* arg, const Value* y) const {
    const Op* mma = y->def;
    if (!mma || mma->kind != OpKind::Mma || users_[arg->id].size() != 1) return false;
    const Value* acc = mma->operands[2];
    if (acc != arg) {
      const Op* e = acc->def;
      if (!e || !elementwise(e->kind) || users_[acc->id].size() != 1 || acc->type.dims != arg->type.dims ||
          std::find(e->operands.begin(), e->operands.end(), arg) == e->operands.end())
        return false;
    }
    if (mma->operands[0] == acc || mma->operands[1] == acc || mma->operands[0] == arg || mma->operands[1] == arg)
      return false;
    const Layout &al = lp_.layout[arg->id], &rl = lp_.layout[y->id];
    const MmaForm form = lp_.mma.at(mma).form;
    return (form == MmaForm::OuterProduct || (form == MmaForm::Amx && acc == arg)) && rl.rep == LaneRep::Panel &&
           rl.rows == al.rows && rl.chunks == al.chunks && y->type.elem == arg->type.elem;
  }

  void assignSlots() {
    std::map<const Value*, const Value*> inPlace;  // mma result -> the carried panel it updates
    for (const auto& [op, lo] : lp_.loops)
      for (size_t i : lo.in_place) inPlace[op->regions[0]->ops.back()->operands[i]] = op->regions[0]->args[i + 1];
    auto slot = [&](int64_t vectors, ir::Elem e) {
      lp_.slot_vectors.push_back(std::max<int64_t>(vectors, 1));
      lp_.slot_elem.push_back(e);
      return static_cast<int>(lp_.slot_vectors.size() - 1);
    };
    ir::walk(k_.body, [&](const Op* op) {
      for (const ir::Region* reg : op->regions)
        for (size_t i = 0; i < reg->args.size(); ++i) {
          const Value* a = reg->args[i];
          if (L(a).rep == LaneRep::Panel) L(a).slot = slot(L(a).vectors(), a->type.elem);
        }
      for (size_t i = 0; i < op->results.size(); ++i) {
        const Value* r = op->results[i];
        if (L(r).rep != LaneRep::Panel) continue;
        if (ir::isLoop(op->kind))
          L(r).slot = L(op->regions[0]->args[i + 1]).slot;
        else if (auto it = inPlace.find(r); it != inPlace.end())
          L(r).slot = L(it->second).slot;  // assigned already: the loop is walked before its body
        else
          L(r).slot = slot(L(r).slotVectors(), r->type.elem);
      }
    });
    for (Conversion& c : lp_.conversions)
      if (!c.fused) c.slot = slot(c.slotVectors(p_.knobs.packet_width), c.value->type.elem);
  }

  const ir::Kernel& k_;
  Plan& p_;
  LanePlan& lp_;
  const target::Model* model_ = nullptr;
  std::vector<std::vector<const Op*>> users_;
};

}  // namespace

std::optional<std::string> planLanes(const ir::Kernel& kernel, Plan& p) {
  LanePlanner planner(kernel, p);
  return planner.run();
}

}  // namespace kiln::plan

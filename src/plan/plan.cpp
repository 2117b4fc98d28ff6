#include "plan/plan.h"

#include "target/target.h"

#include <fmt/format.h>

#include <algorithm>
#include <sstream>

namespace kiln::plan {

const char* repName(Rep r) {
  switch (r) {
    case Rep::SSA: return "ssa";
    case Rep::Snapshot: return "snapshot";
    case Rep::Recipe: return "recipe";
    case Rep::Splat: return "splat";
  }
  return "?";
}

namespace {

// The trips of a serial loop from `lower` to `upper` by `step` (> 0).
int64_t loopTrips(int64_t lower, int64_t upper, int64_t step) {
  return upper > lower ? (upper - lower + step - 1) / step : 0;
}

using ir::Op;
using ir::OpKind;
using ir::Value;

using ir::isElementwise;

// block_size=auto in the lane realization: at least this many blocks when there are as many
// programs (parallel slack for up to 64 workers).
constexpr int64_t kBlockSlack = 64;

class Planner {
 public:
  Planner(const ir::Kernel& k, Plan& p) : k_(k), p_(p) {}

  std::optional<std::string> run() {
    // Effective values: W from the target model when auto, local_lanes = W when W.
    if (p_.knobs.packet_width == 0)
      p_.knobs.packet_width = target::of(p_.knobs.target).model(p_.knobs.isa).packet_width;
    if (p_.knobs.local_lanes == 0) p_.knobs.local_lanes = p_.knobs.packet_width;
    if (auto e = checkKnobs()) return e;
    p_.realization = p_.knobs.local_lanes == p_.knobs.packet_width && p_.knobs.packet_width > 1 ? Realization::Lanes
                                                                                                : Realization::Packets;
    capScalarizedTiles();
    if (auto e = mapDomain()) return e;
    size_t n = k_.values.size();
    p_.rep.assign(n, Rep::SSA);
    p_.uniform.assign(n, false);
    p_.storage_of.assign(n, -1);
    users_.assign(n, {});
    ir::walk(k_.body, [&](const Op* op) {
      for (const Value* v : op->operands) users_[v->id].push_back(op);
      for (const ir::Index& ix : op->indices)
        if (ix.value) users_[ix.value->id].push_back(op);
    });
    analyseUniform();
    chooseReps();
    planMmas();
    planReduces();
    tieLoopValues();
    if (auto e = assignStorage()) return e;
    countLoops(k_.body);
    p_.work.multiply_adds_per_program = 0;
    countWork(k_.body, 1, true);
    const bool gpu = target::of(p_.knobs.target).gpuEntries();
    if (gpu && (p_.knobs.gpu_realization == "block" ||
                (p_.knobs.gpu_realization == "auto" && p_.realization == Realization::Lanes))) {
      p_.block_not_taken = planBlock(k_, p_);
      if (p_.block_not_taken.empty()) {
        p_.realization = Realization::Block;
        if (p_.knobs.gpu_heavy_first && p_.knobs.root_axis_order.empty()) orderHeavyFirst();
        return std::nullopt;
      }
      if (p_.knobs.gpu_realization == "block")
        return "knob 'gpu_realization=block': the program has no block form: " + p_.block_not_taken;
    } else if (gpu) {
      p_.block_not_taken = p_.knobs.gpu_realization == "lanes" ? "gpu_realization=lanes" : "local_lanes=1";
    }
    if (p_.realization == Realization::Lanes) return planLanes(k_, p_);
    return std::nullopt;
  }

 private:
  bool large(int64_t elements) const { return p_.largeTile(elements); }

  // One program per lane (local_lanes = 1) on a CPU without scatter instructions (AVX2, or
  // native without AVX-512), or with a 16-bit view (no x86 instruction gathers or scatters
  // 16-bit elements, AVX-512's included): every element of an unrolled tile that is stored, or
  // read through a gathered address, becomes W scalar accesses, each behind its own branch (LLVM
  // scalarizes masked scatters), and the backend's passes grow faster than the blocks (a 15 x 16
  // tile at W = 16 stored unrolled: 86 s of CPU to compile; kiln fuzz's bf16 and f16 views at
  // AVX-512 with 256-element tiles: 30 s). The size rule's cap on unrolled tiles is lowered so
  // that an unrolled tile is at most kMaxScalarizedLanes of such accesses; larger tiles live in
  // memory and are walked by loops, as any tile over the cap. The effective cap is the plan's
  // knob value, and the report says why.
  void capScalarizedTiles() {
    constexpr int64_t kMaxScalarizedLanes = 1024;
    Knobs& kn = p_.knobs;
    if (p_.realization == Realization::Lanes || kn.packet_width <= 1) return;
    const target::Model& model = target::of(kn.target).model(kn.isa);
    const auto narrow = std::find_if(k_.params.begin(), k_.params.end(), [&](const auto& v) {
      return v->type.isView() && ir::elemBytes(v->type.elem) < model.scatter_min_bytes;
    });
    const bool scatters = model.scatter;
    if (scatters && narrow == k_.params.end()) return;
    const int64_t cap = std::max<int64_t>(1, kMaxScalarizedLanes / kn.packet_width);
    if (kn.max_unrolled_tile_elements != 0 && kn.max_unrolled_tile_elements <= cap) return;
    p_.unrolled_tile_cap_reason = fmt::format(
        "max_unrolled_tile_elements={} lowered to {}: with local_lanes=1 on isa={} ({}) an unrolled tile element "
        "stored or gathered is {} scalar accesses; at most {} per tile",
        kn.max_unrolled_tile_elements, cap, kn.isa,
        scatters ? fmt::format("no gather or scatter instructions for 16-bit elements: %{} is {}", (*narrow)->name,
                               ir::elemName((*narrow)->type.elem))
                 : "no scatter instructions",
        kn.packet_width, kMaxScalarizedLanes);
    kn.max_unrolled_tile_elements = cap;
  }

  std::optional<std::string> checkKnobs() {
    const Knobs& kn = p_.knobs;
    const bool lanes = kn.local_lanes == kn.packet_width && kn.packet_width > 1;
    if (kn.block_size != 0 && !lanes && kn.block_size % kn.packet_width != 0)
      return fmt::format(
          "knob 'block_size': {} is not a multiple of packet_width {} (legal with local_lanes=1: 1..4096, a "
          "multiple of packet_width)",
          kn.block_size, kn.packet_width);
    if (kn.local_lanes != 1 && kn.local_lanes != kn.packet_width)
      return fmt::format(
          "knob 'local_lanes': {} is neither 1 nor packet_width ({}); legal values are 1 and W (= packet_width)",
          kn.local_lanes, kn.packet_width);
    return std::nullopt;
  }

  std::optional<std::string> mapDomain() {
    const Op* root = k_.root();
    if (!root) return "the kernel has no root parallel domain";
    p_.root_extents = root->extents;
    p_.num_programs = 1;
    for (int64_t e : root->extents) p_.num_programs *= e;
    if (p_.knobs.block_size == 0)  // auto: slack for up to kBlockSlack workers in the lane realization
      p_.knobs.block_size = p_.realization == Realization::Lanes
                                ? std::clamp<int64_t>((p_.num_programs + kBlockSlack - 1) / kBlockSlack, 1, 32)
                                : 32;
    p_.num_blocks = (p_.num_programs + p_.knobs.block_size - 1) / p_.knobs.block_size;
    const auto& args = root->regions[0]->args;
    p_.root_axis_order.clear();
    p_.root_axis_descending.assign(args.size(), false);
    if (p_.knobs.root_axis_order.empty()) {
      for (size_t i = 0; i < args.size(); ++i) p_.root_axis_order.push_back(static_cast<int>(i));
      return std::nullopt;
    }
    std::stringstream ss(p_.knobs.root_axis_order);
    std::string name;
    std::vector<bool> seen(args.size(), false);
    std::string names;
    for (const Value* a : args) names += (names.empty() ? "" : ",") + a->name;
    while (std::getline(ss, name, ',')) {
      auto it = std::find_if(args.begin(), args.end(), [&](const Value* a) { return a->name == name; });
      if (it == args.end() || seen[it - args.begin()])
        return fmt::format("knob 'root_axis_order': '{}' is not a permutation of the root domain's axes ({})",
                           p_.knobs.root_axis_order, names);
      seen[it - args.begin()] = true;
      p_.root_axis_order.push_back(static_cast<int>(it - args.begin()));
    }
    if (p_.root_axis_order.size() != args.size())
      return fmt::format("knob 'root_axis_order': '{}' is not a permutation of the root domain's axes ({})",
                         p_.knobs.root_axis_order, names);
    return std::nullopt;
  }

  // The value of a rank-0 i64 scalar in the program at root-axis indices `at`, where it is
  // made of constants, the axes and add/sub/mul/min/max/div of them (nullopt otherwise, or where
  // a step would wrap, divide by zero or divide a negative number).
  std::optional<int64_t> indexAt(const Value* v, const std::map<const Value*, int64_t>& at) const {
    if (!v->type.isScalar() || v->type.elem != ir::Elem::I64) return std::nullopt;
    if (auto it = at.find(v); it != at.end()) return it->second;
    if (v->origin != Value::Origin::OpResult) return std::nullopt;
    const Op* d = v->def;
    if (d->kind == OpKind::Const) return d->iconst;
    if (!ir::isBinary(d->kind)) return std::nullopt;
    const auto a = indexAt(d->operands[0], at), b = indexAt(d->operands[1], at);
    if (!a || !b) return std::nullopt;
    int64_t r = 0;
    switch (d->kind) {
      case OpKind::Add: return __builtin_add_overflow(*a, *b, &r) ? std::nullopt : std::optional(r);
      case OpKind::Sub: return __builtin_sub_overflow(*a, *b, &r) ? std::nullopt : std::optional(r);
      case OpKind::Mul: return __builtin_mul_overflow(*a, *b, &r) ? std::nullopt : std::optional(r);
      case OpKind::Min: return std::min(*a, *b);
      case OpKind::Max: return std::max(*a, *b);
      case OpKind::Div: return *a >= 0 && *b > 0 ? std::optional(*a / *b) : std::nullopt;
      default: return std::nullopt;
    }
  }

  // The trips of the loops directly in the program's region at root-axis indices `at` (nullopt
  // when a bound is not such a scalar, e.g. read from a view).
  std::optional<int64_t> tripsAt(const std::map<const Value*, int64_t>& at) const {
    int64_t trips = 0;
    for (const Op* op : k_.root()->regions[0]->ops) {
      if (!ir::isLoop(op->kind)) continue;
      int64_t bound[3];
      for (int i = 0; i < 3; ++i) {
        const ir::Index& ix = op->indices[i];
        const auto b = ix.value ? indexAt(ix.value, at) : std::optional(ix.constant);
        if (!b) return std::nullopt;
        bound[i] = *b;
      }
      if (bound[2] <= 0) return std::nullopt;
      trips += loopTrips(bound[0], bound[1], bound[2]);
    }
    return trips;
  }

  // GPU blocks start in the order of their index, as many at once as the SMs hold, and the next
  // one where one ends. Where the program's loops take more trips along a root axis (causal
  // attention: a later query block sees more keys), as written the longest programs start last
  // and run alone at the end. The axis along which the trips (the other axes at their first and
  // at their last index) never fall and rise the most is walked outermost and descending: the
  // longest programs start first and the short ones fill in behind them. Programs are
  // independent, so no bit changes.
  void orderHeavyFirst() {
    constexpr int64_t kMostIndices = 4096;
    const Op* root = k_.root();
    const auto& axes = root->regions[0]->args;
    std::map<const Value*, int64_t> at;
    int best = -1;
    int64_t widest = 0, lo = 0, hi = 0;  // the best axis's rise; its trips at either end (the others last)
    for (size_t a = 0; a < axes.size(); ++a) {
      const int64_t extent = root->extents[a];
      if (extent < 2 || extent > kMostIndices || (!root->runtime_extents.empty() && root->runtime_extents[a].runtime()))
        continue;
      // Along the axis, the other axes at their first and at their last index (a causal query
      // block's trips may rise only in the last KV chunk of a split).
      bool rising = true;
      int64_t rise = 0;
      std::optional<int64_t> first, prev;
      for (int corner = 0; corner < 2 && rising; ++corner) {
        for (size_t o = 0; o < axes.size(); ++o) at[axes[o]] = corner == 0 ? 0 : root->extents[o] - 1;
        first.reset(), prev.reset();
        for (int64_t i = 0; i < extent && rising; ++i) {
          at[axes[a]] = i;
          const auto t = tripsAt(at);
          rising = t && (!prev || *t >= *prev);
          if (!first) first = t;
          prev = t;
        }
        if (rising) rise = std::max(rise, *prev - *first);
      }
      if (rising && rise > widest) best = static_cast<int>(a), widest = rise, lo = *first, hi = *prev;
    }
    if (best < 0) return;
    p_.root_axis_order.erase(std::find(p_.root_axis_order.begin(), p_.root_axis_order.end(), best));
    p_.root_axis_order.insert(p_.root_axis_order.begin(), best);
    p_.root_axis_descending[best] = true;
    p_.program_order_reason = fmt::format(
        "{} outermost, from {} down: the program's loops take {} trips at {} = 0 and {} at {} = {} (the other "
        "axes last; the longest programs start first)",
        axes[best]->name, root->extents[best] - 1, lo, axes[best]->name, hi, axes[best]->name, root->extents[best] - 1);
  }

  void analyseUniform() {
    for (const Value* v : k_.params) p_.uniform[v->id] = true;
    ir::walk(k_.body, [&](const Op* op) {
      bool u = op->kind != OpKind::Load && op->kind != OpKind::Parallel;
      for (const Value* v : op->operands) u = u && p_.uniform[v->id];
      for (const ir::Index& ix : op->indices)
        if (ix.value) u = u && p_.uniform[ix.value->id];
      bool loop = ir::isLoop(op->kind);
      // Loop results and carried values are conservatively per-lane.
      for (const Value* r : op->results) p_.uniform[r->id] = u && !loop;
      for (const ir::Region* reg : op->regions)
        for (size_t i = 0; i < reg->args.size(); ++i)
          p_.uniform[reg->args[i]->id] = loop && i == 0 && u;  // a loop IV is uniform iff its bounds are
    });
  }

  // A consumer that reads each element of this operand at most once.
  bool readsOnce(const Op* user, const Value* v) const {
    if (isElementwise(user->kind)) return !v->type.isScalar() || user->results[0]->type.isScalar();
    if (user->kind == OpKind::Reduce) return user->operands[0] == v;
    if (user->kind == OpKind::Store) return user->operands[1] == v;
    return false;
  }

  void chooseReps() {
    for (const Value* v : k_.params) p_.rep[v->id] = Rep::SSA;
    ir::walk(k_.body, [&](const Op* op) {
      for (const ir::Region* reg : op->regions)
        for (size_t i = 0; i < reg->args.size(); ++i) {
          const Value* a = reg->args[i];
          bool carried = ir::isLoop(op->kind) && i > 0;
          p_.rep[a->id] = carried && large(a->type.numElements()) ? Rep::Snapshot : Rep::SSA;
        }
      for (const Value* r : op->results) {
        Rep rep = large(r->type.numElements()) ? Rep::Snapshot : Rep::SSA;
        if (op->kind == OpKind::Const) rep = Rep::Splat;
        if (op->kind == OpKind::Iota || op->kind == OpKind::Broadcast) rep = Rep::Recipe;
        if (op->kind == OpKind::Extract) rep = Rep::SSA;
        bool yielded = std::any_of(users_[r->id].begin(), users_[r->id].end(),
                                   [](const Op* u) { return u->kind == OpKind::Yield; });
        if (yielded && rep == Rep::Recipe) rep = large(r->type.numElements()) ? Rep::Snapshot : Rep::SSA;
        if (isElementwise(op->kind) && p_.knobs.fuse_recipes && users_[r->id].size() == 1) {
          const Op* u = users_[r->id][0];
          if (u->parent == op->parent && readsOnce(u, r)) rep = Rep::Recipe;
        }
        p_.rep[r->id] = rep;
      }
    });
  }

  static std::vector<int64_t> contractedExtents(const Op* op) {
    std::vector<int64_t> ks;
    const ir::Type& a = op->operands[0]->type;
    for (const std::string& d : op->dims) ks.push_back(a.dims[a.findDim(d)].extent);
    return ks;
  }

  void planMmas() {
    const Knobs& kn = p_.knobs;
    ir::walk(k_.body, [&](const Op* op) {
      if (op->kind != OpKind::Mma) return;
      MmaPlan m;
      const ir::Type& acc = op->operands[2]->type;
      m.outputs = acc.numElements();
      m.k = 1;
      for (int64_t e : contractedExtents(op)) m.k *= e;
      if (kn.max_unrolled_tile_elements == 0) {
        m.contraction_rolled = false;
        m.rolled_reason = "max_unrolled_tile_elements=0: the fully unrolled diagnostic wins over every cap";
      } else if (m.k > kn.max_unrolled_tile_elements) {
        m.contraction_rolled = true;
        m.rolled_reason = fmt::format("K={} > max_unrolled_tile_elements={}", m.k, kn.max_unrolled_tile_elements);
      } else if (kn.max_unrolled_mma_terms != 0 && m.k > kn.max_unrolled_mma_terms) {
        m.contraction_rolled = true;
        m.rolled_reason = fmt::format("K={} > max_unrolled_mma_terms={}", m.k, kn.max_unrolled_mma_terms);
      } else {
        m.contraction_rolled = false;
        m.rolled_reason = fmt::format("K={} within max_unrolled_tile_elements={}{}", m.k, kn.max_unrolled_tile_elements,
                                      kn.max_unrolled_mma_terms
                                          ? fmt::format(" and max_unrolled_mma_terms={}", kn.max_unrolled_mma_terms)
                                          : std::string());
      }
      if (m.k == 0) m.contraction_rolled = false;
      m.region_work = m.outputs * m.k * (2 + op->operands[0]->type.rank() + op->operands[1]->type.rank());
      m.output_block_requested = kn.mma_output_block;
      m.output_block = kn.mma_output_block;
      if (m.output_block > 1) {
        int64_t inner = acc.dims.empty() ? 1 : acc.dims.back().extent;
        if (acc.dims.empty() || inner % m.output_block != 0) {
          m.output_block_reason = fmt::format("R={} fell back to 1: the innermost acc dim ({}) is not a multiple of R",
                                              m.output_block, acc.dims.empty() ? "none" : acc.dims.back().name);
          m.output_block = 1;
        } else if (kn.max_unrolled_region_work != 0 && m.region_work > kn.max_unrolled_region_work) {
          m.output_block_reason = fmt::format("R={} fell back to 1: region work {} > max_unrolled_region_work={}",
                                              m.output_block, m.region_work, kn.max_unrolled_region_work);
          m.output_block = 1;
        }
      }
      if (m.contraction_rolled && m.k > 1) {
        for (int i = 0; i < 2; ++i) {
          const Value* v = op->operands[i];
          if (p_.rep[v->id] != Rep::SSA || v->type.numElements() <= 1) continue;
          if (kn.mma_indexable_snapshot) {
            p_.rep[v->id] = Rep::Snapshot;
            m.indexable_snapshot = true;
          } else {
            m.select_chain = true;
          }
        }
      }
      p_.mma[op] = m;
    });
    // Operand representations are final only after every mma has been planned.
    for (auto& [op, m] : p_.mma)
      for (int i = 0; i < 3; ++i) m.operand_representations.push_back(repName(p_.rep[op->operands[i]->id]));
  }

  void planReduces() {
    ir::walk(k_.body, [&](const Op* op) {
      if (op->kind != OpKind::Reduce) return;
      ReducePlan r;
      const ir::Type& x = op->operands[0]->type;
      r.contributions = 1;
      for (const std::string& d : op->dims) r.contributions *= x.dims[x.findDim(d)].extent;
      r.partitions = op->reduce_policy.kind == ir::ReducePolicy::Kind::Ordered ? 1
                     : op->reduce_policy.partitions                            ? op->reduce_policy.partitions
                                                                               : p_.knobs.reduction_partitions;
      r.rolled = large(r.contributions);
      p_.reduce[op] = r;
    });
  }

  // A loop's carried values and its results share one representation (and storage).
  void tieLoopValues() {
    ir::walk(k_.body, [&](const Op* op) {
      if (!ir::isLoop(op->kind)) return;
      for (size_t i = 0; i < op->results.size(); ++i) {
        const Value* arg = op->regions[0]->args[i + 1];
        const Value* res = op->results[i];
        bool snap = p_.rep[arg->id] == Rep::Snapshot || p_.rep[res->id] == Rep::Snapshot;
        p_.rep[arg->id] = p_.rep[res->id] = snap ? Rep::Snapshot : Rep::SSA;
      }
    });
  }

  std::optional<std::string> assignStorage() {
    auto slot = [&](const Value* v) {
      int64_t e = v->type.numElements();
      if (e == 0) return;
      p_.storage_of[v->id] = static_cast<int>(p_.storage_elements.size());
      p_.storage_elements.push_back(e);
      p_.snapshot_bytes_per_worker += e * ir::elemBytes(v->type.elem);
    };
    ir::walk(k_.body, [&](const Op* op) {
      for (const ir::Region* reg : op->regions)
        for (const Value* a : reg->args)
          if (p_.rep[a->id] == Rep::Snapshot) slot(a);
      for (size_t i = 0; i < op->results.size(); ++i) {
        const Value* r = op->results[i];
        if (p_.rep[r->id] != Rep::Snapshot) continue;
        if (ir::isLoop(op->kind))
          p_.storage_of[r->id] = p_.storage_of[op->regions[0]->args[i + 1]->id];
        else
          slot(r);
      }
    });
    p_.snapshot_allocas = static_cast<int64_t>(p_.storage_elements.size());
    if (p_.realization == Realization::Packets && p_.snapshot_bytes_per_worker > p_.knobs.max_local_bytes)
      return fmt::format(
          "snapshot bytes per worker {} exceed knob 'max_local_bytes' = {} (legal 0..16777216); "
          "raise max_local_bytes or max_unrolled_tile_elements, or use smaller tiles",
          p_.snapshot_bytes_per_worker, p_.knobs.max_local_bytes);
    return std::nullopt;
  }

  // Mirrors the emission rules of the lowering (src/codegen): which ops become IR loops.
  void countLoops(const ir::Region* r) {
    for (const Op* op : r->ops) {
      if (ir::isLoop(op->kind)) {
        p_.runtime_loops += 1;
        for (size_t i = 0; i < op->results.size(); ++i)
          if (p_.rep[op->results[i]->id] == Rep::Snapshot) p_.runtime_loops += 2;  // init copy, yield copy
        // A swap: one more copy loop and one private temporary per staged carry.
        const ir::Region* body = op->regions[0];
        const Op* yield = body->ops.empty() ? nullptr : body->ops.back();
        std::vector<size_t>& staged = p_.staged_carries[op];
        if (yield && yield->kind == OpKind::Yield)
          for (size_t i = 0; i < op->results.size(); ++i) {
            const Value* arg = body->args[i + 1];
            const Value* y = yield->operands[i];
            if (p_.rep[arg->id] == Rep::Snapshot && y != arg && y->origin == ir::Value::Origin::RegionArg &&
                y->region == body)
              staged.push_back(i);
          }
        p_.runtime_loops += static_cast<int64_t>(staged.size());
        p_.snapshot_allocas += static_cast<int64_t>(staged.size());
      } else if (op->kind == OpKind::Store) {
        if (large(op->operands[1]->type.numElements())) p_.runtime_loops += 1;
      } else if (!op->results.empty() && op->kind != OpKind::Parallel) {
        const Value* res = op->results[0];
        bool snap = p_.rep[res->id] == Rep::Snapshot;
        if (snap && res->type.numElements() > 0) p_.runtime_loops += 1;
        if (op->kind == OpKind::Reduce && p_.reduce[op].rolled && res->type.numElements() > 0)
          p_.runtime_loops += snap ? 1 : res->type.numElements();
        if (op->kind == OpKind::Mma) {
          const MmaPlan& m = p_.mma[op];
          // A partitioned mma loops over whole rounds of P (bf16_dot: blocks of 32), only when
          // there are two or more.
          const int64_t P = ir::mmaRound(op->mma_policy);
          const bool loops = m.contraction_rolled && m.k > 0 && (P == 0 || m.k / P > 1);
          if (loops && m.outputs > 0) p_.runtime_loops += snap ? 1 : m.outputs / m.output_block;
        }
      }
      for (const ir::Region* sub : op->regions) countLoops(sub);
    }
  }

  void countWork(const ir::Region* r, int64_t trips, bool tripsKnown) {
    for (const Op* op : r->ops) {
      if (op->kind == OpKind::Mma) {
        const MmaPlan& m = p_.mma[op];
        int64_t groups = m.outputs / m.output_block;
        p_.work.multiply_adds += m.outputs * m.k;
        p_.work.operand_loads += m.output_block > 1 ? groups * m.k * (1 + m.output_block) : m.outputs * m.k * 2;
        if (m.contraction_rolled) p_.work.k_loop_iterations += groups * m.k;
        if (tripsKnown) {
          int64_t prev = p_.work.multiply_adds_per_program.value_or(0);
          p_.work.multiply_adds_per_program = prev + trips * m.outputs * m.k;
        }
      }
      for (const ir::Region* sub : op->regions) {
        int64_t t = trips;
        bool known = tripsKnown;
        if (ir::isLoop(op->kind)) {
          const auto& ix = op->indices;
          if (ix[0].isConstant() && ix[1].isConstant()) {
            t *= loopTrips(ix[0].constant, ix[1].constant, ix[2].constant);
          } else {
            known = false;
          }
        }
        countWork(sub, t, known);
      }
    }
    unknown_ = unknown_ || !tripsKnown;
    if (unknown_) p_.work.multiply_adds_per_program.reset();
  }

  const ir::Kernel& k_;
  Plan& p_;
  bool unknown_ = false;
  std::vector<std::vector<const Op*>> users_;
};

}  // namespace

const char* laneRepName(LaneRep r) {
  switch (r) {
    case LaneRep::Scalar: return "scalar";
    case LaneRep::Vectors: return "vectors";
    case LaneRep::Panel: return "panel";
    case LaneRep::Recipe: return "recipe";
    case LaneRep::Splat: return "splat";
    case LaneRep::Direct: return "direct";
  }
  return "?";
}

std::optional<std::string> buildPlan(const ir::Kernel& kernel, const Knobs& knobs, Plan& out) {
  out = Plan{};
  out.knobs = knobs;
  Planner planner(kernel, out);
  return planner.run();
}

const char* toString(ConversionKind kind) {
  switch (kind) {
    case ConversionKind::Transpose: return "transpose";
    case ConversionKind::Bf16Words: return "bf16_words";
  }
  return "?";
}

const char* toString(Realization r) {
  switch (r) {
    case Realization::Packets: return "packets";
    case Realization::Lanes: return "lanes";
    case Realization::Block: return "block";
  }
  return "?";
}

const char* toString(MmaForm form) {
  switch (form) {
    case MmaForm::OuterProduct: return "outer_product";
    case MmaForm::Scalar: return "scalar";
    case MmaForm::Dot: return "dot";
    case MmaForm::Elements: return "elements";
    case MmaForm::Amx: return "amx";
  }
  return "?";
}

const ir::Op* BlockPlan::stagedDef(const ir::Value* operand) const {
  const ir::Op* d = operand->def;
  if (d && folded.count(d))
    for (const auto& [load, s] : stages)
      if (s.mask == d) return load;
  return d;
}

bool BlockPlan::whole(const ir::Type& t) const {
  if (!t.isTile() || t.isScalar()) return false;
  for (const ir::Dim& d : t.dims)
    if (rowDim(d.name) >= 0 || columnDim(d.name)) return false;
  return true;
}

bool BlockPlan::wholeOp(const ir::Op* op) const {
  for (const ir::Value* v : op->operands)
    if (whole(v->type)) return true;
  for (const ir::Value* v : op->results)
    if (whole(v->type)) return true;
  return false;
}

int BlockPlan::rowDim(const std::string& name) const {
  for (size_t i = 0; i < ys.size(); ++i)
    if (ys[i].name == name) return static_cast<int>(i);
  return -1;
}

const BlockDim* BlockPlan::columnDim(const std::string& name) const {
  for (const BlockDim& d : xs)
    if (d.name == name) return &d;
  return nullptr;
}

bool BlockPlan::hasRows(const ir::Type& t) const {
  for (const ir::Dim& d : t.dims)
    if (rowDim(d.name) >= 0) return true;
  return false;
}

const BlockDim* BlockPlan::columnOf(const ir::Type& t) const {
  return t.dims.empty() ? nullptr : columnDim(t.dims.back().name);
}

int64_t BlockPlan::elementsPerThread(const ir::Type& t) const {
  return (hasRows(t) ? micro_y : 1) * (columnOf(t) ? columnOf(t)->micro : 1);
}

GpuLaunch gpuLaunch(const Plan& p, int64_t threads_per_program) {
  GpuLaunch g;
  if (p.realization == Realization::Block) {
    g.threads_per_program = g.threads_per_block = p.block.threads;
    g.threads = p.num_programs * p.block.threads;
    g.grid = p.num_programs;
    if (p.block.dynamic_shared) g.dynamic_shared_bytes = p.block.shared_bytes;
    return g;
  }
  g.programs_per_thread = p.realization == Realization::Lanes ? 1 : p.knobs.packet_width;
  g.threads_per_program = threads_per_program;
  g.threads = (p.num_programs + g.programs_per_thread - 1) / g.programs_per_thread * threads_per_program;
  constexpr int64_t kWarp = 32, kMultiprocessors = 132, kWideBlock = 128;
  g.threads_per_block = g.threads <= kWarp * kMultiprocessors * 4 ? kWarp : kWideBlock;
  g.grid = (g.threads + g.threads_per_block - 1) / g.threads_per_block;
  return g;
}

}  // namespace kiln::plan

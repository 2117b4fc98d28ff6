// The GPU block realization's plan (target nvptx; plan.h, BlockPlan): one program per thread
// block.
//
// Form rule: the program's tile values have their dims among two, Y and X (the accumulator's
// of its mmas, all alike, else the first tile of the highest rank), at the extents the program uses; each
// mma contracts one dim of a and b in ascending K (no partitions), and both of its operands are
// loads of the mma's own region used by it alone (stages). A reduction (f32) goes through
// shared memory: the operand's elements, then one thread per line and partition folds its
// contributions in order, then every thread merges its lines' partitions in index order
// (ordered: one partition, the init first). Extract of a tile, pipelines and nested domains
// have no block form yet: such a program keeps the lane realization, and the report says why.
//
// Size rule (target model): with an mma, threads_y = the largest power of two dividing Y's
// extent, at most mma_threads_y, then threads_x likewise for X with what is left of
// block_threads (a thread's register tile is then about square: each row and column operand
// value read from shared memory serves several accumulators); without, X first (coalesced
// accesses) up to block_threads, then Y; at least a warp. A thread's elements of one tile (micro_y x micro_x) are at
// most microtile_elements. Groups of adjacent elements are as wide as one shared-memory vector load (4) where the
// microtile allows.
//
// Stage rule: a stage is K rows of its operand's accumulator dim, padded by 4 floats (its
// transposed fill from a row-major [M, K] tile then writes 32 banks apart); double-buffered
// when its load sits in a serial loop's body and its origin is computed from the induction
// variable, values from outside the loop and scalar arithmetic only (the next trip's origin is
// then known a trip early), while the stages fit the block's shared memory.
#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <numeric>
#include <set>

#include "plan/plan.h"
#include "target/target.h"

namespace kiln::plan {
namespace {

using ir::Op;
using ir::OpKind;
using ir::Value;

int64_t largestPowerOfTwoDividing(int64_t n, int64_t cap) {
  int64_t t = 1;
  while (t * 2 <= cap && n % (t * 2) == 0) t *= 2;
  return t;
}

class BlockPlanner {
 public:
  BlockPlanner(const ir::Kernel& k, Plan& p) : k_(k), p_(p), m_(target::of(p.knobs.target).model(p.knobs.isa)) {}

  std::string run() {
    const Op* root = k_.root();
    if (!root) return "the kernel has no root parallel domain";
    if (m_.block_threads == 0) return "the target model has no thread blocks";
    ir::walk(root->regions[0], [&](const Op* op) {
      for (const Value* v : op->operands) ++uses_[v->id];
      for (const ir::Index& ix : op->indices)
        if (ix.value) ++uses_[ix.value->id];
    });
    if (auto e = chooseDims(root->regions[0]); !e.empty()) return e;
    std::string error;
    ir::walk(root->regions[0], [&](const Op* op) {
      if (error.empty() && op->kind == OpKind::Mma) error = checkMma(op, op->parent);
    });
    if (!error.empty()) return error;
    if (auto e = checkRegion(root->regions[0]); !e.empty()) return e;
    if (auto e = sizeGrid(); !e.empty()) return e;
    return placeStages();
  }

 private:
  std::string fail(const Op* op, const std::string& why) {
    return fmt::format("{}:{}:{}: {}: {}", op->loc.file, op->loc.line, op->loc.col, ir::opName(op->kind), why);
  }

  // Y and X from the mmas' accumulators (all alike), else from the first stored tile.
  std::string chooseDims(const ir::Region* body) {
    const ir::Type* shape = nullptr;
    std::string error;
    ir::walk(body, [&](const Op* op) {
      if (!error.empty() || op->kind != OpKind::Mma) return;
      const ir::Type& t = op->results[0]->type;
      if (t.rank() != 2) {
        error = fail(op, fmt::format("an accumulator of rank {} (the block form takes rank 2)", t.rank()));
        return;
      }
      if (!shape) shape = &t;
      if (!(t.dims == shape->dims)) error = fail(op, "accumulators of two shapes in one program");
    });
    if (!error.empty()) return error;
    if (!shape)  // the first tile of the highest rank
      ir::walk(body, [&](const Op* op) {
        for (const Value* v : op->results)
          if (v->type.isTile() && v->type.rank() >= 1 && (!shape || v->type.rank() > shape->rank())) shape = &v->type;
      });
    if (!shape) return "no tile in the program";
    if (shape->rank() > 2)
      return fmt::format("a stored tile of rank {} (the block form takes at most 2)", shape->rank());
    const ir::Dim& x = shape->dims.back();
    b_.dim_x = x.name;
    b_.extent_x = x.extent;
    if (shape->rank() == 2) {
      b_.dim_y = shape->dims[0].name;
      b_.extent_y = shape->dims[0].extent;
    }
    return "";
  }

  // A tile value's dims are Y and/or X at their extents.
  bool distributable(const ir::Type& t) const {
    if (t.isView()) return false;
    for (const ir::Dim& d : t.dims) {
      if (d.name == b_.dim_x && d.extent == b_.extent_x) continue;
      if (!b_.dim_y.empty() && d.name == b_.dim_y && d.extent == b_.extent_y) continue;
      return false;
    }
    return t.rank() <= 2;
  }

  std::string checkValue(const Op* op, const Value* v) {
    if (v->type.isView() || distributable(v->type)) return "";
    return fail(op, fmt::format("%{} : {} has a dim other than the program's {}{}", v->name, ir::toString(v->type),
                                b_.dim_y.empty() ? "" : b_.dim_y + ", ", b_.dim_x));
  }

  std::string checkRegion(const ir::Region* r) {
    for (const Value* a : r->args)
      if (!a->type.isScalar() && !distributable(a->type))
        return fmt::format("%{} : {} has a dim other than the program's", a->name, ir::toString(a->type));
    for (const Op* op : r->ops) {
      std::string e = checkOp(op, r);
      if (!e.empty()) return e;
      for (const ir::Region* sub : op->regions)
        if (auto se = checkRegion(sub); !se.empty()) return se;
    }
    return "";
  }

  std::string checkOp(const Op* op, const ir::Region* r) {
    (void)r;
    switch (op->kind) {
      case OpKind::Serial:
      case OpKind::Yield: break;
      case OpKind::Load:
        if (staged_.count(op)) return "";
        if (ir::isHalfStorage(op->operands[0]->type.elem)) return fail(op, "a 16-bit view (not yet on the GPU)");
        break;
      case OpKind::Store:
        if (ir::isHalfStorage(op->operands[0]->type.elem)) return fail(op, "a 16-bit view (not yet on the GPU)");
        break;
      case OpKind::Const:
      case OpKind::Iota:
      case OpKind::Broadcast: break;
      case OpKind::Mma: return "";  // checked first
      case OpKind::Reduce: {
        const Value* x = op->operands[0];
        if (x->type.elem != ir::Elem::F32) return fail(op, "a reduction of a non-f32 tile");
        const int64_t lines = op->results[0]->type.numElements();
        const int64_t parts =
            op->reduce_policy.kind == ir::ReducePolicy::Kind::Ordered ? 1 : partitions(op->reduce_policy);
        scratch_ = std::max(scratch_, x->type.numElements() + lines + lines * parts);
        break;
      }
      default:
        if (!ir::isElementwise(op->kind)) return fail(op, "no block form yet");
        break;
    }
    for (const Value* v : op->operands)
      if (auto e = checkValue(op, v); !e.empty()) return e;
    for (const Value* v : op->results)
      if (auto e = checkValue(op, v); !e.empty()) return e;
    return "";
  }

  int64_t partitions(const ir::ReducePolicy& p) const {
    return p.partitions > 0 ? p.partitions : p_.knobs.reduction_partitions;
  }

  std::string checkMma(const Op* op, const ir::Region* r) {
    if (op->dims.size() != 1) return fail(op, "more than one contracted dim");
    if (op->mma_policy.partitions != 0) return fail(op, "a partitioned order (partitions(P))");
    const std::string& kd = op->dims[0];
    for (int i = 0; i < 2; ++i) {
      const Value* x = op->operands[i];
      const Op* load = x->def;
      if (!load || load->kind != OpKind::Load || load->parent != r || uses_[x->id] != 1)
        return fail(op, fmt::format("operand %{} is not a load of the mma's region used by the mma alone", x->name));
      if (ir::isHalfStorage(load->operands[0]->type.elem)) return fail(load, "a 16-bit view (not yet on the GPU)");
      const ir::Type& t = x->type;
      if (t.rank() != 2 || t.findDim(kd) < 0)
        return fail(op, fmt::format("operand %{} is not [K, one output dim]", x->name));
      const ir::Dim& out = t.dims[t.findDim(kd) == 0 ? 1 : 0];
      const bool isY = !b_.dim_y.empty() && out.name == b_.dim_y && out.extent == b_.extent_y;
      const bool isX = out.name == b_.dim_x && out.extent == b_.extent_x;
      if (!isY && !isX) return fail(op, fmt::format("operand %{} carries no output dim", x->name));
      BlockStage s;
      s.mma = op;
      s.operand = i;
      s.k_dim = kd;
      s.out_dim = out.name;
      s.k_extent = t.dims[t.findDim(kd)].extent;
      s.out_extent = out.extent;
      s.pitch = out.extent + 4;
      staged_[load] = s;
      order_.push_back(load);
    }
    if (op->operands[0]->type.dims == op->operands[1]->type.dims ||
        staged_[op->operands[0]->def].out_dim == staged_[op->operands[1]->def].out_dim)
      return fail(op, "both operands carry the same output dim");
    for (const Value* v : {op->operands[2], op->results[0]})
      if (auto e = checkValue(op, v); !e.empty()) return e;
    return "";
  }

  std::string sizeGrid() {
    // With an mma, rows first (at most mma_threads_y: a row operand's values serve a thread's
    // whole row of accumulators), then columns; without, columns first (coalesced accesses).
    if (!staged_.empty()) {
      b_.threads_y = b_.dim_y.empty() ? 1 : largestPowerOfTwoDividing(b_.extent_y, m_.mma_threads_y);
      b_.threads_x = largestPowerOfTwoDividing(b_.extent_x, m_.block_threads / b_.threads_y);
    } else {
      b_.threads_x = largestPowerOfTwoDividing(b_.extent_x, m_.block_threads);
      b_.threads_y = b_.dim_y.empty() ? 1 : largestPowerOfTwoDividing(b_.extent_y, m_.block_threads / b_.threads_x);
    }
    b_.threads = b_.threads_x * b_.threads_y;
    if (b_.threads < m_.warp_threads)
      return fmt::format("a grid of {} x {} threads (the tile's extents {} x {} give less than a warp)", b_.threads_y,
                         b_.threads_x, b_.extent_y, b_.extent_x);
    b_.micro_y = b_.extent_y / b_.threads_y;
    b_.micro_x = b_.extent_x / b_.threads_x;
    if (b_.micro_y * b_.micro_x > m_.microtile_elements)
      return fmt::format("{} x {} elements of a tile per thread (the target model's most: {})", b_.micro_y, b_.micro_x,
                         m_.microtile_elements);
    b_.group_y = std::gcd(b_.micro_y, m_.shared_vector_lanes);
    b_.group_x = std::gcd(b_.micro_x, m_.shared_vector_lanes);
    b_.model = m_.name;
    return "";
  }

  // The index values a load's origin reads can be computed a trip early in `loop`: the
  // induction variable, values from outside the loop body, and scalar element-wise ops or
  // constants of the body over those.
  bool earlyComputable(const Value* v, const Op* loop) const {
    const ir::Region* body = loop->regions[0];
    if (v == body->args[0]) return true;
    if (v->origin == Value::Origin::RegionArg) return v->region != body;
    if (v->origin != Value::Origin::OpResult) return true;
    if (v->def->parent != body) return true;  // defined outside (loops nest no deeper here: see below)
    if (!v->type.isScalar()) return false;
    if (v->def->kind != OpKind::Const && !ir::isElementwise(v->def->kind)) return false;
    for (const Value* o : v->def->operands)
      if (!earlyComputable(o, loop)) return false;
    return true;
  }

  std::string placeStages() {
    std::set<const Op*> loops;
    for (auto& [load, s] : staged_) {
      const Op* loop = load->parent->parent;
      bool early = loop && loop->kind == OpKind::Serial;
      for (const ir::Index& ix : load->indices)
        if (early && ix.value && !earlyComputable(ix.value, loop)) early = false;
      if (early) {
        s.buffers = 2;
        loops.insert(loop);
      }
    }
    // Loops whose stages are not all early keep single buffers.
    for (auto& [load, s] : staged_)
      if (s.buffers == 1 && load->parent->parent) loops.erase(load->parent->parent);
    for (auto& [load, s] : staged_)
      if (!loops.count(load->parent->parent)) s.buffers = 1;
    auto total = [&] {
      int64_t floats = 0;
      for (auto& [load, s] : staged_) floats += s.buffers * s.k_extent * s.pitch;
      return floats * 4;
    };
    if (total() > m_.shared_bytes_per_block) {
      for (auto& [load, s] : staged_) s.buffers = 1;
      loops.clear();
    }
    if (total() > m_.shared_bytes_per_block)
      return fmt::format("its stages take {} bytes of shared memory (a block's: {})", total(),
                         m_.shared_bytes_per_block);
    int64_t at = 0;  // in program order, so that the PTX does not depend on pointer values
    for (const Op* load : order_) {
      BlockStage& s = staged_[load];
      s.offset = at;
      at += (s.buffers * s.k_extent * s.pitch + 3) / 4 * 4;  // the next stage 16-byte aligned
    }
    b_.scratch_offset = at;
    b_.scratch_floats = scratch_;
    at += scratch_;
    if (at * 4 > m_.shared_bytes_per_block)
      return fmt::format("its stages and reduction scratch take {} bytes of shared memory (a block's: {})", at * 4,
                         m_.shared_bytes_per_block);
    b_.shared_bytes = at * 4;
    b_.stages = staged_;
    for (const Op* load : order_)
      if (loops.count(load->parent->parent) && std::find(b_.prefetch_loops.begin(), b_.prefetch_loops.end(),
                                                         load->parent->parent) == b_.prefetch_loops.end())
        b_.prefetch_loops.push_back(load->parent->parent);
    p_.block = b_;
    return "";
  }

  const ir::Kernel& k_;
  Plan& p_;
  const target::Model& m_;
  BlockPlan b_;
  std::map<int, int> uses_;
  std::map<const Op*, BlockStage> staged_;
  std::vector<const Op*> order_;  // staged loads in program order
  int64_t scratch_ = 0;           // floats of the largest reduction's scratch
};

}  // namespace

std::string planBlock(const ir::Kernel& kernel, Plan& p) {
  return BlockPlanner(kernel, p).run();
}

}  // namespace kiln::plan

// The GPU block realization's plan (target nvptx; plan.h, BlockPlan): one program per thread
// block.
//
// Form rule: the program's tile values have their dims among the rows (Y) and columns (X) at
// the extents the program uses. With mmas: the accumulators share their leading dims (the rows,
// outermost first) and each has one last dim (a column dim: a gemm's n; an attention program's
// keys n and value columns dv); without: the first tile of the highest rank gives the rows (all
// but its last dim) and the one column dim. A tile value holds some of the row dims (in order)
// and at most one column dim, last. Each mma contracts one dim in ascending K (no partitions);
// each operand is [K, its output side]: the rows (all of them) or the accumulator's column dim.
// An operand is staged in shared memory: a load used by mmas alone (in the mma's loop, or
// before it: loaded once; one stage for every mma that reads it alike), a masked load
// (select(cond, load, c), cond from the element's coordinates: applied as the stage is filled),
// or a tile the program computes, [rows, K] with K a column dim, put there from the threads'
// registers before the mma. A tile of neither row nor column dims (a length, offsets) is held
// whole by every thread. A reduction (f32) goes through shared
// memory: the operand's elements, then one thread per line and partition folds its
// contributions in order, then every thread merges its lines' partitions in index order
// (ordered: one partition, the init first) — except a reduction over a tile's column dim whose
// threads lie in one warp (threads_x <= warp_threads): it goes by warp shuffles, every thread of
// a row folding the row's contributions in the IR's order (no shared memory, no barrier). Extract of a tile held by
// many threads, pipelines and nested domains have no block form yet: such a program keeps the
// lane realization, and the report says why.
//
// Size rule (target model): with an mma, threads_y = the largest power of two dividing the
// rows' extent, at most mma_threads_y (or the largest divisor, where that gives a block of more
// threads in whole warps), then threads_x likewise for every column dim with what
// is left of the most threads: the knob gpu_threads, else block_threads or, with at least a
// block per SM, as many as give a thread of the largest mma output a full microtile (at least
// mma_min_block_threads); without an mma and with fewer blocks than SMs, few_blocks_threads (a thread's register tile
// is then about square: each row and column operand value read from shared memory serves several accumulators);
// without, X first (coalesced accesses) up to block_threads, then Y; at least a warp. Without an mma, where
// element-wise ops compute values of the rows alone (repeated by every thread of a row: a split's merge's
// rescale factors) and nothing reduces along the columns, a row's threads each take a group of 4 adjacent
// columns and the rest lie along Y, where that still fills a warp (H200, paired: a prefill's merge 18.4 -> 9.2 us). A
// thread's elements of one tile (micro_y x a column dim's micro) are at most microtile_elements. Groups of adjacent
// elements are as wide as one shared-memory vector load (4) where the microtile allows.
//
// Stage rule: a stage is K rows of its operand's output side, padded by 4 floats (16-byte rows
// for the reads of groups of 4). A loaded stage whose view has K fastest and whose reads are
// single elements is a column stage kept K-inner (placeStages), or, where that cannot be, rows
// of an odd pitch (its transposing fill then writes 32 banks); a loaded stage is
// double-buffered when its load sits in a serial loop's body and its origin is computed from the
// induction variable, values from outside the loop and scalar arithmetic only (the next trip's
// origin is then known a trip early), while the next trip's elements take at most a microtile
// of registers per thread and the stages fit the planner's shared memory of a block
// (shared_bytes_per_block); more than static_shared_bytes is sized at launch.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cmath>
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

// The largest divisor of n that is at most cap (at least 1).
int64_t largestDivisor(int64_t n, int64_t cap) {
  for (int64_t d = std::min(n, cap); d > 1; --d)
    if (n % d == 0) return d;
  return 1;
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
      if (op->kind == OpKind::Mma)
        for (int i = 0; i < 2; ++i) ++mmaUses_[op->operands[i]->id];
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

  // The rows and columns: from the mmas' accumulators, else from the first tile of the highest
  // rank.
  std::string chooseDims(const ir::Region* body) {
    std::string error;
    bool any = false;
    ir::walk(body, [&](const Op* op) {
      if (!error.empty() || op->kind != OpKind::Mma) return;
      const ir::Type& t = op->results[0]->type;
      if (t.isScalar()) {  // every dim contracted: no rows or columns to spread over the threads
        error = fail(op, "an mma whose result is a scalar (every dim contracted)");
        return;
      }
      std::vector<BlockDim> ys;
      for (size_t i = 0; i + 1 < t.dims.size(); ++i) ys.push_back({t.dims[i].name, t.dims[i].extent});
      if (!any) {
        b_.ys = ys;
        any = true;
      } else if (ys.size() != b_.ys.size() ||
                 !std::equal(ys.begin(), ys.end(), b_.ys.begin(), [](const BlockDim& x, const BlockDim& y) {
                   return x.name == y.name && x.extent == y.extent;
                 })) {
        error = fail(op, "accumulators whose leading dims differ (the rows of the block form are one set)");
        return;
      }
      if (auto e = addColumn(t.dims.back()); !e.empty()) error = fail(op, e);
    });
    if (!error.empty()) return error;
    if (!any) {  // the first tile of the highest rank
      const ir::Type* shape = nullptr;
      ir::walk(body, [&](const Op* op) {
        for (const Value* v : op->results)
          if (v->type.isTile() && v->type.rank() >= 1 && (!shape || v->type.rank() > shape->rank())) shape = &v->type;
      });
      if (!shape) return "no tile in the program";
      for (size_t i = 0; i + 1 < shape->dims.size(); ++i) b_.ys.push_back({shape->dims[i].name, shape->dims[i].extent});
      if (auto e = addColumn(shape->dims.back()); !e.empty()) return e;
    }
    for (const BlockDim& y : b_.ys) {
      if (b_.columnDim(y.name)) return fmt::format("dim {} is both a row and a column dim", y.name);
      b_.extent_y *= y.extent;
    }
    return "";
  }

  std::string addColumn(const ir::Dim& d) {
    if (const BlockDim* x = b_.columnDim(d.name)) {
      if (x->extent != d.extent)
        return fmt::format("column dim {} at two extents ({} and {})", d.name, x->extent, d.extent);
      return "";
    }
    b_.xs.push_back({d.name, d.extent});
    return "";
  }

  // A tile value's dims: some of the rows' (in their order, at their extents), then at most one
  // column dim.
  bool distributable(const ir::Type& t) const {
    if (t.isView()) return false;
    size_t next = 0;  // the next row dim it may have
    for (size_t i = 0; i < t.dims.size(); ++i) {
      const ir::Dim& d = t.dims[i];
      if (const BlockDim* x = b_.columnDim(d.name)) {
        if (x->extent != d.extent || i + 1 != t.dims.size()) return false;
        continue;
      }
      const int r = b_.rowDim(d.name);
      if (r < static_cast<int>(next) || b_.ys[r].extent != d.extent) return false;
      next = r + 1;
    }
    return true;
  }

  std::string programDims() const {
    std::vector<std::string> names;
    for (const BlockDim& y : b_.ys) names.push_back(y.name);
    std::string rows = fmt::format("rows [{}]", fmt::join(names, ", "));
    names.clear();
    for (const BlockDim& x : b_.xs) names.push_back(x.name);
    return fmt::format("{} and columns {{{}}}", rows, fmt::join(names, ", "));
  }

  std::string checkValue(const Op* op, const Value* v) {
    if (v->type.isView() || distributable(v->type)) return "";
    return fail(
        op, fmt::format("%{} : {} is not a tile of the program's {}", v->name, ir::toString(v->type), programDims()));
  }

  std::string checkRegion(const ir::Region* r) {
    for (const Value* a : r->args)
      if (!a->type.isScalar() && !distributable(a->type))
        return fmt::format("%{} : {} is not a tile of the program's {}", a->name, ir::toString(a->type), programDims());
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
    if (folded_.count(op)) return "";  // computed where its stage is filled
    if (b_.wholeOp(op)) return checkWhole(op);
    switch (op->kind) {
      case OpKind::Serial:
      case OpKind::Yield: break;
      case OpKind::Load:
        // A stage copied from memory: its tile is never held in registers (a stage filled from
        // registers holds the loaded tile as any other value).
        if (auto st = staged_.find(op); st != staged_.end() && !st->second.registers) return "";
        break;
      case OpKind::Store: break;
      case OpKind::Const:
      case OpKind::Iota:
      case OpKind::Broadcast: break;
      case OpKind::Mma: return "";  // checked first
      case OpKind::Extract:
        if (op->operands[0]->type.isScalar()) return "";
        return fail(op, "an extract of a tile held by many threads");
      case OpKind::Reduce: {
        const Value* x = op->operands[0];
        if (x->type.elem != ir::Elem::F32) return fail(op, "a reduction of a non-f32 tile");
        reductions_.push_back(op);  // by shuffles or through the scratch area: sized with the grid
        break;
      }
      default:
        if (!ir::isElementwise(op->kind)) return fail(op, "no block form yet");
        // A value of the rows alone (no column dim): every thread of a row computes it.
        if (const Value* v = op->results[0];
            !v->type.isView() && !v->type.dims.empty() && !b_.columnDim(v->type.dims.back().name))
          ++row_ops_;
        break;
    }
    for (const Value* v : op->operands)
      if (auto e = checkValue(op, v); !e.empty()) return e;
    for (const Value* v : op->results)
      if (auto e = checkValue(op, v); !e.empty()) return e;
    return "";
  }

  // An op over tiles every thread holds whole (BlockPlan::whole): computed alike by every
  // thread, element by element in the IR's order.
  std::string checkWhole(const Op* op) {
    for (const Value* v : op->results)
      if (b_.whole(v->type) && v->type.numElements() > m_.microtile_elements)
        return fail(op, fmt::format("%{} : {} is held whole by every thread and has more than {} elements", v->name,
                                    ir::toString(v->type), m_.microtile_elements));
    auto operandsWholeOrScalar = [&] {
      for (const Value* v : op->operands)
        if (!v->type.isScalar() && !b_.whole(v->type)) return false;
      return true;
    };
    const Value* r = op->results.empty() ? nullptr : op->results[0];
    const bool resultOk = r && (r->type.isScalar() || b_.whole(r->type));
    switch (op->kind) {
      case OpKind::Load:
        if (resultOk && !staged_.count(op)) return "";
        break;
      case OpKind::Const:
      case OpKind::Iota:
        if (resultOk) return "";
        break;
      case OpKind::Extract:
        if (resultOk && operandsWholeOrScalar()) return "";
        break;
      case OpKind::Reduce:
        if (resultOk && operandsWholeOrScalar() &&
            (op->reduce_policy.kind == ir::ReducePolicy::Kind::Ordered || op->operands[0]->type.elem != ir::Elem::F32))
          return "";
        break;
      default:
        if (ir::isElementwise(op->kind) && resultOk && operandsWholeOrScalar()) return "";
        break;
    }
    return fail(op, fmt::format("a tile held whole by every thread (no row or column dim of the program's {}) used "
                                "so (only loads, constants, iota, element-wise ops, ordered or integer "
                                "reductions and extracts)",
                                programDims()));
  }

  int64_t partitions(const ir::ReducePolicy& p) const {
    return p.partitions > 0 ? p.partitions : p_.knobs.reduction_partitions;
  }

  // `select(cond, load, c)` (or with the load third) as an mma operand x, each used once: the
  // load is staged and the select applied to each element as it is put there (plan.h,
  // BlockStage::mask). The condition's tiles must be computable from an element's coordinates
  // alone: iota along the load's dims, constants, broadcasts and element-wise ops, each used
  // only there, over scalars available where the load is (`folded` gets those ops).
  // `loadSide`: the select's operand (1 or 2) that is the load.
  const Op* maskedLoad(const Value* x, std::vector<const Op*>& folded, int& loadSide) {
    const Op* sel = x->def;
    if (!sel || sel->kind != OpKind::Select || uses_[x->id] != 1) return nullptr;
    const Value* loaded = nullptr;
    const Value* other = nullptr;
    for (int j : {1, 2}) {
      const Value* o = sel->operands[j];
      if (!loaded && o->def && o->def->kind == OpKind::Load && o->type == x->type && uses_[o->id] == 1)
        loaded = o, other = sel->operands[3 - j], loadSide = j;
    }
    if (!loaded || !other->def || other->def->kind != OpKind::Const) return nullptr;
    std::vector<const Op*> tree{sel};
    if (!other->type.isScalar()) {
      if (uses_[other->id] != 1) return nullptr;
      tree.push_back(other->def);
    }
    if (!maskable(sel->operands[0], loaded->def, tree)) return nullptr;
    folded = tree;
    return sel;
  }

  bool maskable(const Value* v, const Op* load, std::vector<const Op*>& tree) {
    if (v->type.isScalar()) return availableAt(v, load);
    const Op* d = v->def;
    if (!d || d->results.size() != 1 || uses_[v->id] != 1) return false;
    const ir::Type& lt = load->results[0]->type;
    for (const ir::Dim& dim : v->type.dims)
      if (lt.findDim(dim.name) < 0 || lt.dims[lt.findDim(dim.name)].extent != dim.extent) return false;
    tree.push_back(d);
    if (d->kind == OpKind::Iota || d->kind == OpKind::Const) return true;
    if (d->kind != OpKind::Broadcast && !ir::isElementwise(d->kind)) return false;
    for (const Value* o : d->operands)
      if (!maskable(o, load, tree)) return false;
    return true;
  }

  // A scalar is known where `load` runs: a parameter, an enclosing region's argument, a
  // constant or scalar element-wise op over such, or an op before the load (in its region or
  // an enclosing one).
  bool availableAt(const Value* v, const Op* load) const {
    if (v->origin == Value::Origin::Param || v->origin == Value::Origin::Workspace) return true;
    auto encloses = [&](const ir::Region* r, const Op*& within) {
      for (const Op* a = load; a; a = a->parent ? a->parent->parent : nullptr)
        if (a->parent == r) {
          within = a;
          return true;
        }
      return false;
    };
    const Op* within = nullptr;
    if (v->origin == Value::Origin::RegionArg) return encloses(v->region, within);
    const Op* d = v->def;
    if (!d) return false;
    if (d->kind == OpKind::Const) return true;
    if (encloses(d->parent, within)) {
      const auto& ops = d->parent->ops;
      return std::find(ops.begin(), ops.end(), d) < std::find(ops.begin(), ops.end(), within);
    }
    if (!ir::isElementwise(d->kind)) return false;
    for (const Value* o : d->operands)
      if (!availableAt(o, load)) return false;
    return true;
  }

  // An mma's operands: each [K, one output side] (the rows, or the accumulator's column dim),
  // staged (see the stage rule at the top).
  std::string checkMma(const Op* op, const ir::Region* r) {
    (void)r;
    if (op->dims.size() != 1) return fail(op, "more than one contracted dim");
    if (op->mma_policy.partitions != 0) return fail(op, "a partitioned order (partitions(P))");
    if (op->mma_policy.bf16_dot) return fail(op, "the bf16 dot order (bf16_dot)");
    if (op->mma_policy.bf16_pairs) return fail(op, "the bf16 pairs order (bf16_pairs)");
    const std::string& kd = op->dims[0];
    const ir::Dim& column = op->results[0]->type.dims.back();
    bool sideRows[2] = {false, false};
    for (int i = 0; i < 2; ++i) {
      const Value* x = op->operands[i];
      const ir::Type& t = x->type;
      const int kAt = t.findDim(kd);
      if (kAt < 0) return fail(op, fmt::format("operand %{} lacks the contracted dim {}", x->name, kd));
      BlockStage s;
      s.mma = op;
      s.operand = i;
      s.k_dim = kd;
      s.k_extent = t.dims[kAt].extent;
      for (const ir::Dim& d : t.dims)
        if (d.name != kd) s.out_dims.push_back(d.name);
      if (s.out_dims.size() == 1 && s.out_dims[0] == column.name) {
        s.out_extent = column.extent;
      } else {
        std::vector<std::string> rows;
        for (const BlockDim& y : b_.ys) rows.push_back(y.name);
        if (s.out_dims != rows)
          return fail(op, fmt::format("operand %{} : {} is not [{}, the rows or column {}]", x->name, ir::toString(t),
                                      kd, column.name));
        for (const ir::Dim& d : t.dims)
          if (d.name != kd && d.extent != b_.ys[b_.rowDim(d.name)].extent)
            return fail(op, fmt::format("operand %{} : {} has a row dim at another extent", x->name, ir::toString(t)));
        s.rows = true;
        s.out_extent = b_.extent_y;
      }
      sideRows[i] = s.rows;
      s.pitch = s.out_extent + 4;
      const Op* def = x->def;
      std::vector<const Op*> folded;
      int loadSide = 1;
      if (const Op* sel = maskedLoad(x, folded, loadSide)) {
        s.mask = sel;
        s.mask_keeps_load = loadSide == 1;
        def = sel->operands[loadSide]->def;
      }
      // A load every use of which is an mma operand (one stage, shared by the mmas that read it
      // alike), or the load a folded select masks.
      if (!(def && def->kind == OpKind::Load && (s.mask || uses_[x->id] == mmaUses_[x->id]))) {
        // A computed operand: the threads' register tile put into the stage before the mma.
        if (!def || def->results.size() != 1 || !distributable(t) || !s.rows || !b_.columnDim(kd) ||
            t.dims[kAt].extent != b_.columnDim(kd)->extent || kAt + 1 != static_cast<int>(t.rank()))
          return fail(op, fmt::format("operand %{} is neither a load used by the mma alone nor a computed [rows, "
                                      "column] tile",
                                      x->name));
        s.registers = true;
      }
      if (auto it = staged_.find(def); it != staged_.end()) {
        const BlockStage& o = it->second;
        if (s.registers || o.registers || s.mask || o.mask || o.rows != s.rows || o.k_dim != s.k_dim ||
            o.out_dims != s.out_dims || o.k_extent != s.k_extent)
          return fail(op, fmt::format("operand %{} is an operand of another mma too, read otherwise", x->name));
        mmas_.push_back(op);
        continue;  // the first mma's stage serves this one too
      }
      staged_[def] = s;
      folded_.insert(folded.begin(), folded.end());
    }
    if (sideRows[0] == sideRows[1]) return fail(op, "both operands carry the same output side");
    if (std::find(mmas_.begin(), mmas_.end(), op) == mmas_.end()) mmas_.push_back(op);
    for (const Value* v : {op->operands[2], op->results[0]})
      if (auto e = checkValue(op, v); !e.empty()) return e;
    return "";
  }

  std::string sizeGrid() {
    // With an mma, rows first (at most mma_threads_y: a row operand's values serve a thread's
    // whole row of accumulators), then columns; without, columns first (coalesced accesses).
    int64_t columns = 0;  // the column dims' common divisor
    for (const BlockDim& x : b_.xs) columns = std::gcd(columns, x.extent);
    // The most threads: the knob gpu_threads, else the model's block_threads; with an mma and at
    // least a block per multiprocessor, only as many as give a thread of the largest output tile
    // a full microtile (fewer threads, each reading a row and a column operand value per step for
    // more accumulators), at least mma_min_block_threads. (H200, paired: big prefill 0.86,
    // gemm 1024^3 0.94; with fewer blocks than SMs, more threads per block were faster.)
    int64_t most = p_.knobs.gpu_threads > 0 ? p_.knobs.gpu_threads : m_.block_threads;
    int64_t programs = 1;
    for (int64_t e : k_.root()->extents) programs *= std::max<int64_t>(1, e);
    // Without an mma and with fewer blocks than SMs, up to few_blocks_threads: more warps of a
    // block keep more loads in flight (H200, paired: softmax 33x5000 0.86 and 5x7000 0.83 with
    // 512 threads against 256, layernorm 19x3000 0.93; 1024 no better).
    if (p_.knobs.gpu_threads == 0 && staged_.empty() && programs < m_.multiprocessors)
      most = std::max(most, m_.few_blocks_threads);
    if (p_.knobs.gpu_threads == 0 && !staged_.empty() && programs >= m_.multiprocessors) {
      int64_t widest = 1;
      for (const BlockDim& x : b_.xs) widest = std::max(widest, x.extent);
      const int64_t full = std::bit_ceil(static_cast<uint64_t>(
          std::max<int64_t>(1, b_.extent_y * widest / std::max<int64_t>(1, m_.microtile_elements))));
      most = std::clamp<int64_t>(static_cast<int64_t>(full), std::min(m_.mma_min_block_threads, most), most);
    }
    if (!staged_.empty()) {
      b_.threads_y = largestPowerOfTwoDividing(b_.extent_y, std::min(m_.mma_threads_y, most));
      b_.threads_x = largestPowerOfTwoDividing(columns, most / b_.threads_y);
      // Rows of another extent (a GQA group of 3 or 7 query heads): as many threads along Y as
      // the largest divisor allows, when the block is then more threads and whole warps (every
      // shuffle's warp full). H200, tail 1,6,2,1,2053,80,96: 3 x 32 threads instead of 1 x 32.
      // (A row of threads at least a warp where the columns allow, past the most unless the knob
      // gpu_threads set it.)
      const int64_t ty = largestDivisor(b_.extent_y, std::min(m_.mma_threads_y, most));
      const int64_t tx = largestPowerOfTwoDividing(
          columns, p_.knobs.gpu_threads > 0 ? most / ty : std::max(most / ty, m_.warp_threads));
      if (ty > b_.threads_y && ty * tx > b_.threads_y * b_.threads_x && (ty * tx) % m_.warp_threads == 0)
        b_.threads_y = ty, b_.threads_x = tx;
    } else {
      // Columns first (coalesced accesses). Where element-wise ops compute values of the rows
      // alone (a split's merge: each row's rescale factors, repeated by every thread of a row)
      // and nothing reduces along the columns, a row's threads only as many as give each a group
      // of adjacent columns (one 16-byte access), the rest along the rows, when that fills a warp.
      const bool rows_first = row_ops_ > 0 && reductions_.empty() && columns > 1 && !b_.ys.empty();
      if (rows_first)
        rowsFor(largestPowerOfTwoDividing(columns, std::max<int64_t>(1, columns / m_.shared_vector_lanes)), most);
      if (!rows_first || b_.threads_x * b_.threads_y < m_.warp_threads)
        rowsFor(largestPowerOfTwoDividing(columns, most), most);
      // Columns with no power-of-two split to speak of (33 = 3 x 11) and too few threads for a
      // warp: the columns' largest divisor instead (33 threads along a row), the rows' largest
      // power of two or divisor with what is left. A row's threads then need not lie in one warp
      // segment, so its reductions go through shared memory (shuffles need threads_x | 32).
      if (b_.threads_x * b_.threads_y < m_.warp_threads) {
        const int64_t tx = largestDivisor(columns, most);
        const int64_t ty =
            std::max(largestPowerOfTwoDividing(b_.extent_y, most / tx), largestDivisor(b_.extent_y, most / tx));
        if (tx * ty > b_.threads_x * b_.threads_y) b_.threads_x = tx, b_.threads_y = ty;
      }
    }
    b_.threads = b_.threads_x * b_.threads_y;
    // With at most a block per SM, a thread may take every register its block leaves it (the
    // register file over the block's warps, whole granules, at most thread_registers), stated to
    // ptxas: left to itself it aims for several blocks per SM (a 96-thread block got 168
    // registers and spilled; H200, paired: the 3-row tail decode 28.5 -> 20.8 us). With more
    // blocks, ptxas's choice (stated there, gemm took more registers and one block per SM: 1024^3
    // 3-5% slower).
    if (programs <= m_.multiprocessors) b_.registers = m_.blockThreadRegisters(b_.threads);
    if (b_.threads < m_.warp_threads)
      return fmt::format("a grid of {} x {} threads (the {} give less than a warp)", b_.threads_y, b_.threads_x,
                         programDims());
    b_.micro_y = b_.extent_y / b_.threads_y;
    b_.group_y = std::gcd(b_.micro_y, m_.shared_vector_lanes);
    for (BlockDim& x : b_.xs) {
      x.micro = x.extent / b_.threads_x;
      x.group = std::gcd(x.micro, m_.shared_vector_lanes);
      // Groups of one where a reduction over this dim in P partitions could then fold each
      // partition in one thread (threads_x divides P; the shuffles gather P partials, not every
      // column).
      for (const Op* op : reductions_)
        if (op->reduce_policy.kind != ir::ReducePolicy::Kind::Ordered && op->dims.size() == 1 &&
            op->dims[0] == x.name && b_.threads_x <= m_.warp_threads &&
            partitions(op->reduce_policy) % b_.threads_x == 0 &&
            partitions(op->reduce_policy) % (b_.threads_x * x.group) != 0)
          x.group = 1;
      if (b_.micro_y * x.micro > m_.microtile_elements)
        return fmt::format("{} x {} elements of a tile per thread (the target model's most: {})", b_.micro_y, x.micro,
                           m_.microtile_elements);
    }
    b_.model = m_.name;
    return "";
  }

  // Without an mma: `tx` threads along the columns and the rows' largest power of two within
  // `most` (or their largest divisor, where that gives whole warps) along the rows.
  void rowsFor(int64_t tx, int64_t most) {
    b_.threads_x = tx;
    b_.threads_y = largestPowerOfTwoDividing(b_.extent_y, most / tx);
    if (const int64_t ty = largestDivisor(b_.extent_y, most / tx);
        ty > b_.threads_y && (ty * tx) % m_.warp_threads == 0)
      b_.threads_y = ty;
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

  // A double-buffered stage cp.async can fill (see placeStages): f32 elements copied as they
  // are, +0 where the load's fill or a masked load's select gives it.
  bool asyncCopyable(const Op* load, const BlockStage& s) const {
    auto plusZero = [](double c) { return c == 0.0 && !std::signbit(c); };
    if (!p_.knobs.gpu_async_copy || load->operands[0]->type.elem != ir::Elem::F32) return false;
    if (!plusZero(load->fconst)) return false;
    if (!s.mask) return true;
    const Op* loop = load->parent->parent;
    const Op* other = s.mask->operands[s.mask_keeps_load ? 2 : 1]->def;  // a Const (BlockPlanner::maskedLoad)
    if (!plusZero(other->fconst)) return false;
    std::function<bool(const Value*)> early = [&](const Value* v) {
      if (v->type.isScalar()) return earlyComputable(v, loop);
      if (v->def->kind == OpKind::Iota || v->def->kind == OpKind::Const) return true;
      for (const Value* o : v->def->operands)
        if (!early(o)) return false;
      return true;
    };
    return early(s.mask->operands[0]);
  }

  // An async stage's 16-byte copies (BlockStage::wide): a K-inner stage, or one of K lines whose
  // single out dim is the view's fastest, its extents and the stage's pitch multiples of 4 (so
  // a group of 4 lies in one line of both and wholly inside or outside the view), and a mask, if
  // any, that does not vary along that dim (one condition for the group).
  bool wideCopies(const Op* load, const BlockStage& s) const {
    if (s.k_inner) return true;
    if (!p_.knobs.gpu_wide_copies || s.rows || s.out_dims.size() != 1 || load->access.empty() ||
        load->access.back().name != s.out_dims[0])
      return false;
    if (s.out_extent % 4 != 0 || s.pitch % 4 != 0 || load->operands[0]->type.dims.back().extent % 4 != 0) return false;
    if (!s.mask) return true;
    const std::string& fast = s.out_dims[0];
    std::function<bool(const Value*)> varies = [&](const Value* v) {
      if (v == load->results[0] || v->type.isScalar()) return false;
      const Op* d = v->def;
      if (d->kind == OpKind::Iota) return d->dims[0] == fast;
      if (d->kind == OpKind::Const) return false;
      for (const Value* o : d->operands)
        if (varies(o)) return true;
      return false;
    };
    return !varies(s.mask->operands[0]);
  }

  std::string placeStages() {
    // A loaded column stage whose view has K as its fastest dim, read one element of a line at
    // a time (group 1), is kept K-inner: the view's lines as they lie in memory (16-byte copies,
    // no transpose), read 4 K steps per vector; its pitch K + 4 or K + 8, whichever is an odd
    // number of 16-byte units (the lines of a warp's 8 consecutive columns then start in 8
    // different groups of banks). That needs K and the view's last extent multiples of 4 and no
    // mask; otherwise such a stage (rows or columns) keeps K lines with an odd pitch, so that
    // its transposing fill (consecutive threads, consecutive K lines) writes 32 different banks.
    for (auto& [op, s] : staged_) {
      if (s.registers || op->kind != OpKind::Load || op->access.empty() || op->access.back().name != s.k_dim) continue;
      const int64_t group = s.rows ? b_.group_y : b_.columnDim(s.out_dims[0])->group;
      if (group != 1) continue;
      if (!s.rows && !s.mask && s.k_extent % 4 == 0 && op->operands[0]->type.dims.back().extent % 4 == 0) {
        s.k_inner = true;
        s.pitch = s.k_extent / 4 % 2 == 0 ? s.k_extent + 4 : s.k_extent + 8;
      } else {
        s.pitch = s.out_extent | 1;
      }
    }
    std::set<const Op*> loops;
    for (auto& [op, s] : staged_) {
      if (s.registers) continue;
      const Op* loop = op->parent->parent;
      bool early = loop && loop->kind == OpKind::Serial;
      for (const ir::Index& ix : op->indices)
        if (early && ix.value && !earlyComputable(ix.value, loop)) early = false;
      // A trip early is too early for a view the loop stores to.
      if (early)
        ir::walk(loop->regions[0], [&](const Op* o) {
          if (o->kind == OpKind::Store && o->operands[0] == op->operands[0]) early = false;
        });
      if (early) {
        s.buffers = 2;
        loops.insert(loop);
      }
    }
    // Early stages of an f32 view read with fill +0 (masked to +0, the mask known a trip early)
    // are filled by cp.async (knob gpu_async_copy): the next trip's copies take no registers.
    for (auto& [op, s] : staged_)
      if (s.buffers == 2 && asyncCopyable(op, s)) s.async = true, s.wide = wideCopies(op, s);
    // Loops whose loaded stages are not all early keep single buffers; so do loops whose next
    // trip's tiles would take more registers per thread than a microtile (they stay live across
    // the trip: a few threads prefetching large stages spill).
    std::map<const Op*, int64_t> prefetched;  // by loop: registers per thread
    for (auto& [op, s] : staged_) {
      if (s.registers) continue;
      if (s.buffers == 1 && op->parent->parent) loops.erase(op->parent->parent);
      if (s.buffers == 2 && !s.async)
        prefetched[op->parent->parent] += (s.k_extent * s.out_extent + b_.threads - 1) / b_.threads;
    }
    for (auto& [loop, regs] : prefetched)
      if (regs > m_.microtile_elements) loops.erase(loop);
    for (auto& [op, s] : staged_)
      if (!loops.count(op->parent->parent)) s.buffers = 1, s.async = false;
    // Reductions over a column dim whose threads lie in one warp go by shuffles; the others
    // through the scratch area.
    for (const Op* op : reductions_) {
      const Value* x = op->operands[0];
      if (op->dims.size() == 1 && x->type.rank() >= 1 && x->type.dims.back().name == op->dims[0] &&
          b_.columnDim(op->dims[0]) && b_.threads_x <= m_.warp_threads && m_.warp_threads % b_.threads_x == 0) {
        b_.shuffle_reductions.insert(op);
        continue;
      }
      const int64_t lines = op->results[0]->type.numElements();
      const int64_t parts =
          op->reduce_policy.kind == ir::ReducePolicy::Kind::Ordered ? 1 : partitions(op->reduce_policy);
      scratch_ = std::max(scratch_, x->type.numElements() + lines + lines * parts);
    }
    // Stages in program order (so that the PTX does not depend on pointer values). A stage
    // loaded (or computed) in the body of a serial loop at the program's top level is read only
    // there, so the stages of different such loops (run one after the other) share memory: each
    // loop's from the same offset, after the stages of the rest of the program. The emitter
    // puts a barrier before a double-buffered loop's first copies (BlockEmitter::emitLoop).
    std::vector<const Op*> order;
    ir::walk(k_.root()->regions[0], [&](const Op* op) {
      if (staged_.count(op)) order.push_back(op);
    });
    auto loopOf = [&](const Op* op) -> const Op* {
      const Op* loop = op->parent->parent;
      return loop && loop->kind == OpKind::Serial && loop->parent == k_.root()->regions[0] ? loop : nullptr;
    };
    auto place = [&](const Op* op, int64_t& at) {  // at: the next stage's float offset, 16-byte aligned
      BlockStage& s = staged_[op];
      s.offset = at;
      at += (s.buffers * s.floats() + 3) / 4 * 4;
    };
    auto layout = [&] {  // floats of the stages; sets their offsets
      int64_t at = 0;
      for (const Op* op : order)
        if (!loopOf(op)) place(op, at);
      std::map<const Op*, int64_t> cursor;
      int64_t most = at;
      for (const Op* op : order)
        if (const Op* loop = loopOf(op)) {
          int64_t& c = cursor.try_emplace(loop, at).first->second;
          place(op, c);
          most = std::max(most, c);
        }
      return most;
    };
    // The shared memory of a block: two blocks' share of an SM (double-buffered stages where they
    // fit, else single); where even single buffers pass it, what one block per SM may take
    // (double-buffered where they fit, else single). Knob gpu_blocks_per_sm fixes the share.
    const int64_t two = m_.shared_bytes_per_block;
    const int64_t one = std::max(m_.shared_bytes_one_block, two);
    const int64_t per_sm = p_.knobs.gpu_blocks_per_sm;
    const std::map<const Op*, BlockStage> doubled = staged_;
    const std::set<const Op*> doubled_loops = loops;
    auto fits = [&](int64_t budget) { return (layout() + scratch_) * 4 <= budget; };
    auto single = [&] {
      for (auto& [op, s] : staged_) s.buffers = 1, s.async = false;
      loops.clear();
    };
    int64_t budget = per_sm == 1 ? one : two;
    if (!fits(budget)) single();
    if (per_sm == 0 && !fits(budget)) {
      budget = one;
      staged_ = doubled, loops = doubled_loops;
      if (!fits(budget)) single();
    }
    int64_t at = layout();
    b_.scratch_offset = at;
    b_.scratch_floats = scratch_;
    at += scratch_;
    if (at * 4 > budget)
      return fmt::format("its stages and reduction scratch take {} bytes of shared memory (a block's: {})", at * 4,
                         budget);
    // One block per SM: its threads may take every register (as with a block per SM, sizeGrid).
    if (budget > two) b_.registers = m_.blockThreadRegisters(b_.threads);
    b_.shared_bytes = at * 4;
    b_.shared_budget = budget;
    b_.dynamic_shared = b_.shared_bytes > m_.static_shared_bytes;
    b_.stages = staged_;
    b_.folded = folded_;
    for (const Op* op : order)
      if (loops.count(op->parent->parent) &&
          std::find(b_.prefetch_loops.begin(), b_.prefetch_loops.end(), op->parent->parent) == b_.prefetch_loops.end())
        b_.prefetch_loops.push_back(op->parent->parent);
    if (p_.knobs.gpu_early_copies) earlyCopies();
    prefetchLoads();
    stepMmas();
    p_.block = b_;
    return "";
  }

  // BlockPlan::early_copies: for a top-level loop with cp.async stages, the earliest op of the
  // program before which its first trip's copies can be issued: after the ops defining every
  // value their origins, masks and the loop's start read (through the body's scalar ops), after
  // the loop before it (whose stages its buffers may share) and after any store to their views.
  void earlyCopies() {
    const ir::Region* top = k_.root()->regions[0];
    std::map<const Op*, int> at;  // top-level op -> position
    for (size_t i = 0; i < top->ops.size(); ++i) at[top->ops[i]] = static_cast<int>(i);
    auto position = [&](const Value* v) {  // of the top-level op defining v (-1: the program's inputs)
      if (v->origin != Value::Origin::OpResult) return -1;
      const Op* d = v->def;
      while (d && d->parent != top) d = d->parent->parent;
      return d ? at.at(d) : -1;
    };
    for (const Op* loop : b_.prefetch_loops) {
      if (loop->parent != top) continue;
      const ir::Region* body = loop->regions[0];
      std::vector<const Op*> async;
      for (const Op* o : body->ops)
        if (b_.stages.count(o) && b_.stages.at(o).async) async.push_back(o);
      if (async.empty()) continue;
      int earliest = -1;
      std::set<const Value*> seen;
      std::function<void(const Value*)> need = [&](const Value* v) {
        if (!v || !seen.insert(v).second || v == body->args[0]) return;
        if (v->origin == Value::Origin::OpResult && v->def->parent == body) {
          for (const Value* o : v->def->operands) need(o);  // the body's scalar, iota, const and element-wise ops
          return;
        }
        earliest = std::max(earliest, position(v));
      };
      if (loop->indices[0].value) need(loop->indices[0].value);
      std::set<const Value*> views;
      for (const Op* o : async) {
        for (const ir::Index& ix : o->indices) need(ix.value);
        if (const Op* m = b_.stages.at(o).mask) need(m->operands[0]);
        views.insert(o->operands[0]);
      }
      const int here = at.at(loop);
      for (int i = 0; i < here; ++i) {
        bool after = top->ops[i]->kind == OpKind::Serial;
        auto stores = [&](const Op* o) { return o->kind == OpKind::Store && views.count(o->operands[0]) > 0; };
        after = after || stores(top->ops[i]);
        for (const ir::Region* r : top->ops[i]->regions) ir::walk(r, [&](const Op* o) { after = after || stores(o); });
        if (after) earliest = std::max(earliest, i);
      }
      if (earliest + 1 < here) b_.early_copies[loop] = top->ops[earliest + 1];
    }
  }

  // A serial loop without double-buffered stages whose body's plain loads (not staged) have
  // origins the loop can compute early and views it does not store to runs its trips in batches
  // of kLoadDepth (when the loads' elements per thread times the batch fit a microtile):
  // the batch's loads are issued together at its start, so its trips wait for one round trip to
  // memory, not one each (a loop of short trips, like a split's merge, is otherwise a chain of
  // load latencies). The trips past the last whole batch run one by one.
  void prefetchLoads() {
    constexpr int64_t kLoadDepth = 8;
    ir::walk(k_.root()->regions[0], [&](const Op* loop) {
      if (loop->kind != OpKind::Serial) return;
      if (std::find(b_.prefetch_loops.begin(), b_.prefetch_loops.end(), loop) != b_.prefetch_loops.end()) return;
      const ir::Region* body = loop->regions[0];
      std::set<int> stored;
      ir::walk(body, [&](const Op* o) {
        if (o->kind == OpKind::Store) stored.insert(o->operands[0]->index);
      });
      std::vector<const Op*> loads;
      int64_t elements = 0;
      for (const Op* op : body->ops) {
        if (op->kind != OpKind::Load || staged_.count(op) || stored.count(op->operands[0]->index)) continue;
        bool early = true;
        for (const ir::Index& ix : op->indices)
          if (ix.value && !earlyComputable(ix.value, loop)) early = false;
        if (!early) continue;
        loads.push_back(op);
        elements += b_.elementsPerThread(op->results[0]->type);
      }
      // Only whole batches of kLoadDepth: with many elements per trip (many rows per thread) a
      // short batch held more live values than it saved waits (an H200: a 7-row merge took
      // twice as long in batches of 3).
      if (loads.empty() || elements == 0 || kLoadDepth * elements > m_.microtile_elements) return;
      // (Batches of 16 where they fit, H200 paired: decode 1,32,8,1,4096,128,128 24.0 us against
      // 23.7, 1,8,2,1,2053,80,96 19.4 against 18.9, a 7-row decode 32.0 against 33.7: not taken.)
      for (const Op* op : loads) b_.load_prefetch[op] = kLoadDepth;
    });
  }

  // An mma's K steps per trip of its loop: all of them up to k_unroll, else the largest power
  // of two up to 8 dividing K whose row and column values (read from the stages ahead of the
  // products, so that the reads of one step overlap the products of another) take at most 96
  // registers. (H100, paired, run O: 96 against 48 took 0.96 of the time for causal prefill
  // 1,16,4,384,384,128,128, 0.99 for 1,16,4,1024,1024,64,64 and 2,12,4,77,300,64,64, 1.00 for
  // big prefill, with fewer registers: 232 against 254, 168 against 254; 160 and 320 no better.)
  void stepMmas() {
    constexpr int64_t kMostSteps = 8, kStepRegisters = 96;
    for (const Op* mma : mmas_) {
      if (b_.mma_steps.count(mma)) continue;
      const int64_t K = mma->operands[0]->type.dims[mma->operands[0]->type.findDim(mma->dims[0])].extent;
      if (K <= b_.k_unroll) {
        b_.mma_steps[mma] = K;
        continue;
      }
      const BlockDim* x = b_.columnDim(mma->results[0]->type.dims.back().name);
      int64_t u = 1;
      while (u * 2 <= kMostSteps && K % (u * 2) == 0 && u * 2 * (b_.micro_y + x->micro) <= kStepRegisters) u *= 2;
      // A K-inner operand is read 4 steps at a time: trips of at least 4 (K is a multiple of 4).
      for (const Value* operand : {mma->operands[0], mma->operands[1]})
        if (const Op* def = b_.stagedDef(operand); def && b_.stages.at(def).k_inner) u = std::max<int64_t>(u, 4);
      b_.mma_steps[mma] = u;
      if (p_.knobs.gpu_read_ahead) b_.read_ahead.insert(mma);
    }
  }

  const ir::Kernel& k_;
  Plan& p_;
  const target::Model& m_;
  BlockPlan b_;
  std::map<int, int> uses_;
  std::map<int, int> mmaUses_;              // uses as an mma's a or b
  std::vector<const Op*> mmas_;             // program order
  std::set<const Op*> folded_;              // BlockPlan::folded
  std::map<const Op*, BlockStage> staged_;  // by the op making the staged value
  int64_t scratch_ = 0;                     // floats of the largest reduction's scratch
  std::vector<const Op*> reductions_;
  int64_t row_ops_ = 0;  // element-wise ops whose result has the rows' dims alone
};

}  // namespace

std::string planBlock(const ir::Kernel& kernel, Plan& p) {
  return BlockPlanner(kernel, p).run();
}

}  // namespace kiln::plan

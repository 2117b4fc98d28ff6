// The Plan: every decision about how a verified kernel maps onto the machine. Lowering,
// resource analysis and the work counts all read this one object; none re-decides.
// Expects: a kernel that passed ir::verify, and validated knobs.
// Guarantees: either a complete Plan, or an error naming the knob / limit that failed.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "plan/knobs.h"

namespace kiln::plan {

// How a tile value exists at run time (DESIGN.md, "Value representations").
enum class Rep : uint8_t {
  SSA,       // one SIMD register per element; constant index free, runtime index = SELECT chain
  Snapshot,  // private per-worker array written once at definition; runtime loops
  Recipe,    // single-use pure expression recomputed at its consumer
  Splat,     // a constant: one register for every element
};
const char* repName(Rep r);

struct MmaPlan {
  int64_t outputs = 0;  // elements of acc
  int64_t k = 0;        // contraction length
  bool contraction_rolled = false;
  std::string rolled_reason;  // why K is (not) unrolled
  int64_t output_block = 1;   // R actually used
  int64_t output_block_requested = 1;
  std::string output_block_reason;                   // why R fell back, empty when R is as requested
  int64_t region_work = 0;                           // outputs x K-updates x (2 + operand ranks)
  std::vector<std::string> operand_representations;  // a, b, acc
  bool indexable_snapshot = false;                   // an operand was given an indexable snapshot for the rolled K
  bool select_chain = false;                         // an SSA operand is read at the runtime K through a SELECT chain
};

struct ReducePlan {
  int64_t contributions = 0;
  int64_t partitions = 1;  // 1 for ordered
  bool rolled = false;     // contributions walked by a runtime loop
};

struct Work {
  // Per execution of each op, summed over the ops of one program (loop bodies counted once).
  int64_t multiply_adds = 0;
  int64_t operand_loads = 0;
  int64_t k_loop_iterations = 0;
  // The same, multiplied by the static trip counts of enclosing loops; nullopt = a bound is
  // only known at run time (unmodeled).
  std::optional<int64_t> multiply_adds_per_program;
};

// ---- The lane realization (local_lanes = W): one program over the W lanes (DESIGN.md,
// "Where speed comes from"). Every tile value's layout puts its last dim along the lanes.
enum class LaneRep : uint8_t {
  Scalar,   // rank 0: one scalar register
  Vectors,  // rows x chunks vectors in registers (SSA), read at constant indices only
  Panel,    // rows x chunks vectors in a private stack array: read at runtime indices
  Recipe,   // recomputed at its consumer, vector by vector
  Splat,    // a constant
  Direct,   // a load read from its view at each use: no store can intervene, so no copy
};
const char* laneRepName(LaneRep r);

struct Layout {
  LaneRep rep = LaneRep::Scalar;
  std::string lane_dim;  // the dim along the lanes ("" for rank 0)
  int64_t rows = 1;      // product of the other dims' extents
  int64_t chunks = 1;    // vectors per row: ceil(lane extent / W)
  int slot = -1;         // Panel: storage slot
  bool large = false;    // defined by a runtime loop over its vectors (rows x chunks > cap)
  // Walked by a runtime loop over its rows (`large`), its chunks unrolled inside up to
  // LanePlan::max_unrolled_chunks, else by a second, inner loop (`chunk_loop`).
  bool chunk_loop = false;
  // Panel of a bf16 view's load whose one reader is a bf16_pairs mma's lane operand on VDPBF16PS
  // (LaneMma::dpbf16): stored as the instruction's operand, rows 2t and 2t + 1 as one row of
  // 32-bit words (row 2t's bf16 in the low half, 2t + 1's in the high; an odd last row's high
  // half +0), so the mma loads each pair's vector as it is (docs/backend.md, "bf16 pair panels").
  bool pair_words = false;
  int64_t vectors() const { return rows * chunks; }
  int64_t slotVectors() const { return pair_words ? (rows + 1) / 2 * chunks : vectors(); }
  // Copies of a per-vector body in the code of one walk over this layout.
  int64_t walkCopies() const { return large ? (chunk_loop ? 1 : chunks) : rows * chunks; }
  int64_t walkLoops() const { return large ? (chunk_loop ? 2 : 1) : 0; }
};

// An explicit layout change: `value` re-laid with `to_lane_dim` along the lanes (a transposed
// panel), made once for `at`: right before it, or, when `value` is defined outside the loops
// around `at` (e.g. a query tile read by every KV block), right after `value`'s definition
// (`after`), so a loop reuses one panel instead of transposing it again on every trip.
// The kinds of layout change: a transpose; or the bf16 words of a bf16_pairs mma's broadcast
// operand on VDPBF16PS contracted along its own lane dim (`Bf16Words`: each row's values rounded
// to bf16 once, their 16-bit words in lane order, so a pair of contributions is one 32-bit
// broadcast where each register tile would round both values per pair and row).
enum class ConversionKind { Transpose, Bf16Words };
const char* toString(ConversionKind kind);  // "transpose" | "bf16_words"

struct Conversion {
  const ir::Op* at = nullptr;
  const ir::Op* after = nullptr;  // hoisted: emitted after this op (value's definition); null: before `at`
  bool fused = false;             // consumed in registers by its mma (LaneMma::fused_transpose): no panel
  const ir::Value* value = nullptr;
  ConversionKind kind = ConversionKind::Transpose;
  std::string to_lane_dim;
  int64_t rows = 0, chunks = 0;
  int slot = -1;
  // W x W blocks to transpose: (x's rows without the new lane dim) x blocks of it x x's chunks;
  // walked by one runtime loop when more than LanePlan::max_unrolled_transposes (`rolled`).
  int64_t iterations = 0;
  bool rolled = false;
  // Read straight from its view (a Direct load): a copy of the transpose for a tile wholly
  // inside its view (plain loads) and the guarded copy for edges.
  bool edge_copy = false;
  // bf16 as 32-bit words (`words`; the copy for tiles inside their view): a whole chunk of x's
  // lane dim is W/2 words (two adjacent elements each) of each of W values of L, loaded two
  // values of L to a vector and transposed within the vectors' halves: (W/2) log2(W/2)
  // shuffles where a W x W transpose takes W log2 W, none to widen, and half the registers;
  // then a word's low half shifted up and its high half with the low bits cleared are its two
  // elements widened exactly. `word_chunks` whole chunks per row of x; `word_iterations` such
  // blocks (a runtime loop when `word_rolled`), then `tail_iterations` W x W transposes of the
  // tile's partial last chunk (`tail_rolled`). A fused transpose (LaneMma::fused_transpose)
  // reads its whole K chunks the same way.
  // `word_unpack`: those transposes by 4-lane unpacks and 128-bit lane selections (knob
  // word_transposes=unpack, W = 8 or 16), not by transposeInRegisters' swaps.
  bool words = false, word_unpack = false;
  int64_t word_chunks = 0, word_iterations = 0, tail_iterations = 0;
  bool word_rolled = false, tail_rolled = false;
  // A transpose for a bf16_pairs mma on VDPBF16PS whose contracted dim is the new rows (x's
  // last dim, its only other dim of extent above 1): stored as the instruction's operand, rows
  // 2t and 2t + 1 as one row of 32-bit words (as Layout::pair_words; an odd last row's high half
  // +0), so the mma loads each pair's vector as it is (bf16 K in decode's q.k^T).
  bool pair_words = false;
  // The panel's size in W-lane 32-bit vectors.
  int64_t slotVectors(int64_t w) const {
    if (kind == ConversionKind::Bf16Words) return (rows * chunks * w / 2 + w - 1) / w;
    return pair_words ? (rows + 1) / 2 * chunks : rows * chunks;
  }
};

// How the lane realization runs an mma: an outer product over the accumulator's lane dim, a
// scalar accumulator, a dot product along K (a partitioned order whose partitions the lanes
// hold), or element by element (a partitioned order the lanes cannot hold).
// How a domain's programs meet the W lanes of a vector (knob local_lanes): a packet of W
// programs, one per lane (local_lanes = 1, codegen/packets/), or one program over all the
// lanes (local_lanes = W, codegen/lanes/).
enum class Realization { Packets, Lanes, Block };
const char* toString(Realization r);  // "packets" | "lanes" | "block"

enum class MmaForm { OuterProduct, Scalar, Dot, Elements, Amx };
const char* toString(MmaForm form);  // "outer_product" | "scalar" | "dot" | "elements" | "amx"

struct LaneMma {
  MmaForm form = MmaForm::OuterProduct;
  std::string lane_dim;                // acc's lane dim (outer product)
  int conversion[2] = {-1, -1};        // per operand a, b: index into conversions (-1 = none)
  bool broadcast[2] = {false, false};  // operand read as a scalar per K step, splat over the lanes
  // A lane operand without the accumulator's row dims (attention's V for P.V): each of its
  // vectors is read once per K step and shared by every row of a register tile.
  bool row_shared[2] = {false, false};
  int64_t block_rows = 1, block_chunks = 1;  // register tile of accumulators
  int64_t blocks = 0;
  bool k_rolled = true;  // K walked by a loop per register tile (else unrolled)
  std::string k_reason;
  // The transposed operand is not stored as a panel: per lane chunk of the accumulator, W x W
  // blocks are loaded, transposed in registers and consumed at once by that chunk's rows (few
  // rows, as decode attention's Q·Kᵀ); K still ascends for every accumulator element.
  bool fused_transpose = false;
  // A fused transpose's chunks of the accumulator's lane dim per step: their rows' FMA chains
  // interleave (2 where the registers hold both chunks' transposed words, else 1).
  int64_t fused_group = 1;
  bool k_loop = false;  // a runtime K loop is emitted (k_rolled and more than one K step / K block)
  // Operands read straight from their views (Direct, not converted): the mma's code twice, a
  // copy for tiles wholly inside their views and the guarded copy.
  bool edge_copy = false;
  // Full register tiles walked by a runtime loop over tiles (every value they read is
  // addressable at a runtime row); register values on the way are copied to the stack first
  // (`spilled`, one private array each per copy of the code).
  bool tiles_rolled = false;
  int64_t full_tiles = 0;
  std::vector<const ir::Value*> spilled;
  // The AMX form with b[n, k] as the instruction's A operand (its rows as they are, no word
  // transposes) and a's few rows (at most 16) as its B: c's transpose in the C tiles.
  bool amx_b_first = false;
  // The outer product in the bf16 dot order with each chain's step on VDPBF16PS (knob
  // avx512_bf16): one product per lane, the other of its pair -0 x +0 (docs/backend.md).
  bool dpbf16 = false;
};

struct LaneReduce {
  bool horizontal = false;         // the lane dim is reduced
  bool vector_partitions = false;  // unordered_tree with P a multiple of W: lanes hold partitions
  bool rolled = false;             // contributions walked by a loop (else unrolled)
  bool loop = false;               // a runtime loop is emitted per fold (rolled, more than one step)
};

// A serial/pipeline loop's carried panels yielded from another carried panel of the same loop
// (a swap): staged through a private temporary so that no copy reads overwritten storage.
struct LaneLoop {
  std::vector<size_t> staged;    // carried indices
  std::vector<size_t> in_place;  // carried indices whose next value is written in the carried panel
};
inline bool inPlace(const LaneLoop& lo, size_t i) {
  return std::find(lo.in_place.begin(), lo.in_place.end(), i) != lo.in_place.end();
}

enum class LaneAccess : uint8_t { Vector, Gather };

// What the code of one program holds (each loop body once; both copies of an edge split):
// predicted from the plan's decisions (src/plan/lane_code.cpp), realized by counting the
// emitted LLVM IR before optimisation (codegen/lower.cpp); tests hold them equal. Memory
// counts are in W-lane vectors of view memory (a 16-lane load split into two 8-lane pieces
// on AVX2 is one); private panels are not memory here.
struct LaneCode {
  int64_t vector_loads = 0, vector_stores = 0, gathers = 0, scatters = 0;
  int64_t fmas = 0;      // vector llvm.fma (fused mma steps)
  int64_t shuffles = 0;  // two-source W-lane permutations (in-register transposes)
  int64_t loops = 0, allocas = 0;
  bool operator==(const LaneCode&) const = default;
};

// A load from a view larger than the target's L2 inside a serial loop: each of its vectors
// that starts a cache line also prefetches the line `elements` further on (the next tile
// along the tile's outermost dim, where the loop's next trip reads; docs/realization.md).
struct LanePrefetch {
  int64_t elements = 0;
  std::string reason;
};

struct LanePlan {
  std::vector<Layout> layout;  // by Value::id
  std::vector<Conversion> conversions;
  std::map<const ir::Op*, LaneMma> mma;
  std::map<const ir::Op*, LaneReduce> reduce;
  std::map<const ir::Op*, LaneAccess> access;      // load / store
  std::map<const ir::Op*, LaneLoop> loops;         // serial / pipeline
  std::map<const ir::Op*, LanePrefetch> prefetch;  // load
  std::vector<int64_t> slot_vectors;               // per storage slot
  std::vector<ir::Elem> slot_elem;
  int64_t vector_cap = 32;      // Vectors rep up to this many vectors
  std::string model;            // the target model's name (target/model.h)
  int64_t accumulators = 20;    // register tile budget of an outer-product mma (the model's)
  int64_t max_tile_chunks = 4;  // vector chunks per row of that tile (the model's)
  // f32 lanes of one hardware vector register for the `isa` knob (AVX2 8, AVX-512 16; native:
  // this host's). A W-lane vector wider than this is split by the emitter where LLVM's own
  // split is wrong (masked loads, see lane_memory.cpp).
  int64_t register_lanes = 16;
  int64_t max_unrolled_chunks = 8;      // a large layout's chunks unrolled per row up to this many
  int64_t max_unrolled_transposes = 4;  // a conversion's W x W blocks unrolled up to this many
  LaneCode code;                        // predicted
};

// ---- The GPU block realization (target nvptx, knob gpu_realization; src/plan/block.cpp,
// docs/gpu.md "Thread blocks"): one program per thread block. The program's tile values have
// their dims among rows (Y: one or more dims, flattened row-major into one row index) and
// columns (X: one or more dims, e.g. an attention program's keys n and value columns dv; a tile
// has at most one, last). Each tile is spread over a threads_y x threads_x grid of the block's
// threads: thread (ty, tx) holds micro_y rows x (its X dim's) micro columns, in groups of
// `group` adjacent ones, the groups of one thread `threads x group` apart (row r of the thread:
// (r / gy)·threads_y·gy + ty·gy + r mod gy). A tile without rows (or columns) is held by every
// thread of that grid line; a tile with some of the row dims holds, per row of the thread, its
// element at that row's coordinates. Each mma operand goes to shared memory (a stage) and is
// read from there by every thread, K ascending: a load (in the mma's loop or before it), or a
// computed tile put there from the threads' registers. A stage in a serial loop whose origin
// the next trip can compute early is double-buffered: the loads of trip i+1 are in flight while
// trip i multiplies.
struct BlockDim {
  std::string name;
  int64_t extent = 1;
  int64_t micro = 1, group = 1;  // columns (X): a thread's elements along it and their groups
};

struct BlockStage {
  const ir::Op* mma = nullptr;
  int operand = 0;                    // 0: a, 1: b
  std::string k_dim;                  // the contracted dim
  std::vector<std::string> out_dims;  // the accumulator's dims it carries: the rows', or one column dim
  bool rows = false;                  // it carries the rows
  bool registers = false;             // a computed operand, put from the threads' registers before the mma
  // A masked load (`select(cond, load, c)` or `select(cond, c, load)`, the mma's operand): the
  // select, applied to each element as it is put into the stage, its condition computed there
  // from the element's coordinates (iota, constants, scalars available at the load).
  const ir::Op* mask = nullptr;
  bool mask_keeps_load = true;  // the select's load is its operand 1 (taken where the condition holds)
  // Double-buffered and filled by cp.async (global to shared, no registers): an f32 view, fill
  // +0 (a masked load's select gives +0 too); the elements outside the view or masked are
  // copied as zeros (src-size 0).
  bool async = false;
  int64_t k_extent = 0, out_extent = 0;
  // K contiguous: the stage holds out_extent lines of K elements (a K-major view's rows as they
  // lie in memory: filled by 16-byte copies), read 4 K steps at a time; else K lines of the
  // output side (the layout above).
  bool k_inner = false;
  // An async stage filled by 16-byte copies of 4 elements adjacent in both the view and the
  // stage (a K-inner stage's K steps, or a K line's out elements where the out dim is the
  // view's fastest), where the view's base and the origin along that dim allow (checked at
  // each trip; element by element otherwise).
  bool wide = false;
  int64_t pitch = 0;    // floats per line in shared memory (the line's elements plus padding)
  int64_t offset = 0;   // float offset of buffer 0 in the block's shared array
  int64_t buffers = 1;  // 2: double-buffered
  int64_t floats() const { return (k_inner ? out_extent : k_extent) * pitch; }  // one buffer's
};

struct BlockPlan {
  std::string model;  // the target model's name
  int64_t threads = 0, threads_y = 1, threads_x = 1;
  // Registers a thread may take, stated to ptxas (.maxnreg); 0: ptxas's own choice.
  int64_t registers = 0;
  std::vector<BlockDim> ys;  // the rows' dims, outermost first (empty: tiles of columns only)
  std::vector<BlockDim> xs;  // the column dims
  int64_t extent_y = 1, micro_y = 1, group_y = 1;
  // By the op that makes the staged value: its load, or the op computing a register stage.
  std::map<const ir::Op*, BlockStage> stages;
  // Ops folded into a stage's fill (a masked load's select and its condition's tile ops): never
  // held in registers, never emitted on their own.
  std::set<const ir::Op*> folded;
  // The op whose stage holds an mma operand: its def, or the load a folded select masks.
  const ir::Op* stagedDef(const ir::Value* operand) const;
  std::vector<const ir::Op*> prefetch_loops;  // serial loops whose stages are double-buffered
  // Knob gpu_early_copies: a top-level loop with cp.async stages -> the op of the program
  // before which its first trip's copies are issued (the earliest point where their origins
  // and masks are known, after the loop before it and any store to their views), so that they
  // are in flight while the program loads its other stages (a decode's Q).
  std::map<const ir::Op*, const ir::Op*> early_copies;
  // Plain loads of a serial loop's body read this many trips at a time (the loop runs its trips
  // in batches of that many, each batch's loads first).
  std::map<const ir::Op*, int64_t> load_prefetch;
  // Reductions go through a scratch area of shared memory after the stages (floats): the
  // operand's tile, line by line (a line: one element of the result, row-major over the kept
  // dims; contributions row-major over the reduced dims), then the init per line, then each
  // line's partitions (1 when ordered).
  int64_t scratch_offset = 0, scratch_floats = 0;
  // Reductions over a column dim held by the threads of one warp segment: by shuffles, each
  // thread of a row folding the row in the IR's order (plan.h above; block_emitter.cpp).
  std::set<const ir::Op*> shuffle_reductions;
  int64_t shared_bytes = 0;
  // The shared memory the stages were planned in: two blocks' share of an SM, or one block's
  // (knob gpu_blocks_per_sm; the target model's shared_bytes_per_block / shared_bytes_one_block).
  int64_t shared_budget = 0;
  bool dynamic_shared = false;                 // more than a block may declare statically: sized at launch
  int64_t k_unroll = 16;                       // an mma's K steps unrolled up to this many (else a loop)
  std::map<const ir::Op*, int64_t> mma_steps;  // by mma: K steps per trip of its loop (all: unrolled)
  // Knob gpu_read_ahead: mmas whose loop reads the next trip's values before this trip's products.
  std::set<const ir::Op*> read_ahead;

  int rowDim(const std::string& name) const;                 // index in ys, or -1
  const BlockDim* columnDim(const std::string& name) const;  // nullptr when not a column dim
  // A tile's share of each thread: whether it has row dims (micro_y rows), its column dim (its
  // last dim, when a column dim: that dim's micro columns), its elements per thread.
  bool hasRows(const ir::Type& t) const;
  const BlockDim* columnOf(const ir::Type& t) const;
  int64_t elementsPerThread(const ir::Type& t) const;
  // A tile none of whose dims is a row or column dim (a length read as `[one:1]`, a varlen
  // batch's offsets): every thread holds all of it (loads, constants, iota, element-wise ops,
  // ordered or integer reductions, extracts; block.cpp).
  bool whole(const ir::Type& t) const;
  bool wholeOp(const ir::Op* op) const;  // an operand or result is whole
};

struct Plan {
  Knobs knobs;  // effective values
  int64_t num_programs = 0;
  int64_t num_blocks = 0;
  std::vector<int> root_axis_order;        // domain axes, outermost first
  std::vector<bool> root_axis_descending;  // per domain axis: walked from its last index down
  // Why root_axis_order is not as written ("" when it is, or when the knob set it).
  std::string program_order_reason;
  std::vector<int64_t> root_extents;

  std::vector<Rep> rep;                   // by Value::id
  std::vector<bool> uniform;              // by Value::id: same value in every lane of a packet
  std::vector<int> storage_of;            // by Value::id: snapshot storage slot (-1 = none)
  std::vector<int64_t> storage_elements;  // per storage slot: elements (per lane)
  std::map<const ir::Op*, MmaPlan> mma;
  std::map<const ir::Op*, ReducePlan> reduce;
  // Serial/pipeline loops: carried snapshots yielded from another carried snapshot of the same
  // loop (a swap), staged through a private temporary by a copy loop (local_lanes = 1).
  std::map<const ir::Op*, std::vector<size_t>> staged_carries;

  int64_t snapshot_bytes_per_worker = 0;
  int64_t snapshot_allocas = 0;  // predicted private arrays in the packet body
  int64_t runtime_loops = 0;     // predicted loops in the packet body (IR loops, not dynamic)
  Work work;
  // Set when the plan lowered max_unrolled_tile_elements (knobs holds the value in effect).
  std::string unrolled_tile_cap_reason;
  Realization realization = Realization::Packets;
  LanePlan lanes;   // filled when realization == Realization::Lanes
  BlockPlan block;  // filled when realization == Realization::Block
  // Target nvptx: why the block realization was not taken ("" when it was, or on a CPU).
  std::string block_not_taken;

  Rep repOf(const ir::Value* v) const { return rep[v->id]; }
  bool isUniform(const ir::Value* v) const { return uniform[v->id]; }
  // True when elements of this tile are produced by unrolled code (SSA) rather than loops.
  bool unrolled(const ir::Value* v) const { return rep[v->id] != Rep::Snapshot; }
  // A tile of this many elements is walked by a runtime loop (the size rule of SSA vs snapshot).
  bool largeTile(int64_t elements) const {
    return knobs.max_unrolled_tile_elements != 0 && elements > knobs.max_unrolled_tile_elements;
  }
};

// The GPU launch of one root domain (knob target=nvptx; docs/gpu.md). A call of the program
// body runs one program in the lane realization, one packet of W programs with local_lanes = 1.
// Its lanes are spread over `threads_per_program` threads (W: a segment of a warp, lane l in
// thread l; 1: the W-lane vectors are one thread's registers). Threads past `threads` return
// at once. Blocks of one warp while that gives at least 4 blocks per multiprocessor of an H200
// (132), else of 128 threads. The block realization: one block of BlockPlan::threads per program.
struct GpuLaunch {
  int64_t programs_per_thread = 1;  // programs per call of the body
  int64_t threads_per_program = 1;  // threads per call of the body
  int64_t threads = 0;              // ceil(programs / programs_per_thread) * threads_per_program
  int64_t threads_per_block = 32;
  int64_t grid = 0;                  // thread blocks: ceil(threads / threads_per_block)
  int64_t dynamic_shared_bytes = 0;  // the block realization's shared memory when sized at launch
};
GpuLaunch gpuLaunch(const Plan& p, int64_t threads_per_program);

// The block realization's decisions (src/plan/block.cpp): "" and `p.block` filled when every op
// of the program has a block form, else the first reason it has not. Called by buildPlan.
std::string planBlock(const ir::Kernel& kernel, Plan& p);

// The lane realization's decisions (src/plan/lanes.cpp); called by buildPlan.
std::optional<std::string> planLanes(const ir::Kernel& kernel, Plan& p);
// The code those decisions make (src/plan/lane_code.cpp); called by planLanes.
LaneCode predictLaneCode(const ir::Kernel& kernel, const Plan& p);

// Builds the plan. Error: a message naming the knob or limit (e.g. max_local_bytes).
std::optional<std::string> buildPlan(const ir::Kernel& kernel, const Knobs& knobs, Plan& out);

}  // namespace kiln::plan

// TileIR: the typed, printable program Kiln compiles.
// Expects: nothing (no LLVM, no machine knowledge).
// Guarantees: a Kernel owns every Op, Value and Region it references; pointers stay valid
// for the Kernel's lifetime.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::ir {

// A source position: FILE:LINE:COL for text input, the DSL call site for C++ input.
struct Loc {
  std::string file;
  int line = 0;
  int col = 0;
};

// Element types. F32 is the compute type; I64 is the index type; I1 is the compare result.
// Tiles hold f32, i64 or i1. Views hold f32, 16-bit floats (f16, bf16: a load converts to an
// f32 tile exactly, a store rounds to nearest even; docs/ir.md, "16-bit views") or integers
// (i32, i64: lengths, positions, block tables), which a load widens to an i64 tile and a store
// narrows (docs/ir.md, "Integer views").
enum class Elem : uint8_t { F32, I64, I1, F16, BF16, I32 };
std::string_view elemName(Elem e);
// Bytes of one element in a view (f32, i32: 4; i64: 8; f16, bf16: 2; i1: 1).
int64_t elemBytes(Elem e);
// An integer view's element type (i32 or i64).
inline bool isIntegerStorage(Elem e) {
  return e == Elem::I32 || e == Elem::I64;
}
// A 16-bit float view's element type (f16 or bf16): loads give f32, stores take f32.
inline bool isHalfStorage(Elem e) {
  return e == Elem::F16 || e == Elem::BF16;
}

// A named dimension. Broadcast and contraction match dims by name, never by position.
struct Dim {
  std::string name;
  int64_t extent = 0;
  bool operator==(const Dim&) const = default;
};

// Either a tile (named dims, rank 0 = scalar) or a tensor view (static row-major shape;
// view dims carry no names).
struct Type {
  enum class Kind : uint8_t { Tile, View };
  Kind kind = Kind::Tile;
  Elem elem = Elem::F32;
  std::vector<Dim> dims;

  static Type scalar(Elem e) { return Type{Kind::Tile, e, {}}; }
  static Type tile(Elem e, std::vector<Dim> d) { return Type{Kind::Tile, e, std::move(d)}; }
  static Type view(Elem e, const std::vector<int64_t>& shape);

  bool isView() const { return kind == Kind::View; }
  bool isTile() const { return kind == Kind::Tile; }
  bool isScalar() const { return kind == Kind::Tile && dims.empty(); }
  int rank() const { return static_cast<int>(dims.size()); }
  int64_t numElements() const;               // product of extents (1 for rank 0)
  int findDim(std::string_view name) const;  // index of the named dim, or -1
  std::vector<int64_t> shape() const;
  bool operator==(const Type&) const = default;
};
// Canonical text: "f32", "f32[m:4, n:16]", "i64", "view<f32>[1, 8, 1, 80]".
std::string toString(const Type& t);

enum class OpKind : uint8_t {
  // structure
  Parallel,  // root domain: region args = program indices (i64), extents static
  Serial,    // loop with carried values
  Pipeline,  // a serial loop whose body carries stage markers
  Yield,     // terminator of a loop body: the next carried values
  Stage,     // stage marker inside a pipeline body (no semantics beyond ordering info)
  // memory
  Load,   // tile from a view at an origin, out-of-range elements read `fill`
  Store,  // tile into a view at an origin, out-of-range elements are not written
  // values
  Const,      // splat of a literal over the result type
  Iota,       // index along one dim of the result (i64)
  Broadcast,  // operand dims (by name) into the result dims
  Reduce,     // fold named dims with an op and a policy; operands: x, init
  Mma,        // operands: a, b, acc; contracts named dims
  Extract,    // one element at constant or runtime indices -> rank 0
  Cast,       // element type conversion
  Select,     // operands: cond (i1), a, b
  Cmp,        // predicate -> i1
  // unary
  Neg,
  Abs,
  Exp,
  Log,
  Sqrt,
  Rsqrt,
  Tanh,
  Erf,
  // binary
  Add,
  Sub,
  Mul,
  Div,
  Max,
  Min,
};
std::string_view opName(OpKind k);
bool isUnary(OpKind k);
bool isBinary(OpKind k);
bool isLoop(OpKind k);  // Serial or Pipeline
// Unary, binary, cmp, select or cast: each result element from the operands' elements at its coords.
bool isElementwise(OpKind k);

enum class CmpPred : uint8_t { LT, LE, GT, GE, EQ, NE };
std::string_view cmpName(CmpPred p);

enum class ReduceKind : uint8_t { Add, Max, Min, Mul };
std::string_view reduceName(ReduceKind k);

struct ReducePolicy {
  enum class Kind : uint8_t { Ordered, UnorderedTree };
  Kind kind = Kind::Ordered;
  int partitions = 0;  // UnorderedTree only: 0 = take the `reduction_partitions` knob
  bool operator==(const ReducePolicy&) const = default;
};

struct MmaPolicy {
  bool allow_reassociation = false;
  bool allow_fma = false;
  // Every K step is one fused multiply-add rounded once (c = fma(a, b, c)), still in ascending
  // K order: exact and reproducible, like MUL then ADD, but a different (more accurate) result.
  bool fused = false;
  // Partitioned order (`partitions(P)`, P in 1..16; 0 = ascending K): contribution k goes to
  // partition k mod P; each partition starts from its first product a*b and folds its later
  // contributions in ascending k (MUL then ADD, or one FMA when fused); then acc is merged with
  // partitions 0..min(P, K)-1 in order, ((acc + p0) + p1) + ... — the order a dot product
  // across P lanes executes, defined independently of the machine.
  int partitions = 0;
  // The bf16 dot order (`bf16_dot`, docs/ir.md, MMA): operands rounded to bf16, K in blocks of
  // 32, per block two chains of fused steps (even and odd k) from +0, then acc + (even + odd);
  // subnormal operands and results flushed to zero. Exclusive of every other flag.
  bool bf16_dot = false;
  // The bf16 pairs order (`bf16_pairs`, docs/ir.md, MMA; AVX512-BF16's VDPBF16PS): operands
  // rounded to bf16, one chain from the accumulator over the contributions in pairs (k+1, then
  // k), each step one fused multiply-add; subnormal operands and results flushed to zero.
  // Exclusive of every other flag.
  bool bf16_pairs = false;
  bool operator==(const MmaPolicy&) const = default;
};

// Either bf16 order: operands rounded to bf16 and flushed, fused steps flushed.
inline bool bf16Order(const MmaPolicy& p) {
  return p.bf16_dot || p.bf16_pairs;
}

// The K contributions an mma's element path folds per round: P for `partitions(P)`, 32 (one
// block) for `bf16_dot`, 2 (one pair) for `bf16_pairs`, 0 for ascending K.
inline int64_t mmaRound(const MmaPolicy& p) {
  return p.bf16_dot ? 32 : p.bf16_pairs ? 2 : p.partitions;
}

struct Op;
struct Region;

// An integer parameter's stated inclusive range (`%n: i64 in [1, 600]`, `%lens: view<i32>[8]
// in [0, 2048]`): a launch refuses an argument (an element of an integer view) outside it.
struct IntRange {
  int64_t lo = 0, hi = 0;
  bool ascending = false;  // an integer view's elements never decrease (`in [lo, hi] ascending`)
  bool contains(int64_t v) const { return v >= lo && v <= hi; }
  bool operator==(const IntRange&) const = default;
};

struct Value {
  enum class Origin : uint8_t { Param, RegionArg, OpResult, Workspace };
  int id = 0;        // unique within the kernel
  std::string name;  // text name without '%'
  Type type;
  Origin origin = Origin::OpResult;
  Op* def = nullptr;         // OpResult: the defining op
  Region* region = nullptr;  // RegionArg: the region whose arg this is
  int index = 0;             // result index / arg index / param index / workspace index
  Loc loc;
  std::optional<IntRange> range;  // Param of type i64 or an integer view: its stated range
};

// A root domain axis whose extent is given at launch (docs/ir.md, "Runtime extents"):
// ceil(param / divisor) of an i64 scalar parameter with a stated range; the op's `extents`
// entry for the axis holds its maximum, ceil(range.hi / divisor), which plans are made for.
struct RuntimeExtent {
  Value* param = nullptr;  // null: the axis is static
  int64_t divisor = 1;
  bool runtime() const { return param != nullptr; }
  // The extent for an argument `value` of `param` (within its range, so >= 0).
  int64_t at(int64_t value) const { return (value + divisor - 1) / divisor; }
  // The maximum the plan is made for: at(range.hi), at least 1 (a range the verifier refuses
  // still gets a legal extent, so the verifier's message is the one reported).
  int64_t maximum() const { return param && param->range ? std::max<int64_t>(at(param->range->hi), 1) : 1; }
};

// An index operand: a literal, or a rank-0 i64 value (value != nullptr).
struct Index {
  Value* value = nullptr;
  int64_t constant = 0;
  bool isConstant() const { return value == nullptr; }
};

struct Region {
  Op* parent = nullptr;
  std::vector<Value*> args;
  std::vector<Op*> ops;
};

struct Op {
  OpKind kind = OpKind::Const;
  Loc loc;
  std::vector<Value*> operands;
  std::vector<Value*> results;
  std::vector<Region*> regions;
  Region* parent = nullptr;  // the region this op sits in

  // Attributes (which ones are meaningful depends on `kind`).
  double fconst = 0.0;                         // Const (f32), Load fill
  int64_t iconst = 0;                          // Const (i64 / i1), Stage number
  std::vector<Index> indices;                  // Load/Store origin (one per view dim), Extract indices,
                                               // Serial/Pipeline bounds {lower, upper, step}
  std::vector<Dim> access;                     // Load/Store: per view dim, name:extent, or name "" = squeezed
  std::vector<int64_t> extents;                // Parallel: domain extents (a runtime extent's maximum)
  std::vector<RuntimeExtent> runtime_extents;  // Parallel: per axis, or empty (all static)
  std::vector<std::string> dims;               // Reduce: reduced dims; Mma: contracted dims; Iota: {dim}
  CmpPred pred = CmpPred::LT;
  ReduceKind reduce = ReduceKind::Add;
  ReducePolicy reduce_policy;
  MmaPolicy mma_policy;
};

struct Param {
  Value* value = nullptr;  // type: View or scalar (i64 / f32)
};

// A kernel: parameters, workspaces and a body region holding one or more root Parallel ops
// (its phases, run in order; docs/ir.md, "Phases and workspaces").
struct Kernel {
  std::string name;
  Loc loc;
  std::vector<Value*> params;
  // f32 views that Kiln allocates for one launch, zero-filled before the first phase; not
  // arguments of the call. Origin::Workspace, index = position here.
  std::vector<Value*> workspaces;
  Region* body = nullptr;

  // Arenas. Everything above points into these.
  std::vector<std::unique_ptr<Value>> values;
  std::vector<std::unique_ptr<Op>> ops;
  std::vector<std::unique_ptr<Region>> regions;

  Value* newValue(std::string name, Type type, Value::Origin origin, Loc loc);
  Op* newOp(OpKind kind, Loc loc);
  Region* newRegion(Op* parent);

  // The first root parallel op, or nullptr if the body has none.
  Op* root() const;
  // Every root parallel op (phase), in order.
  std::vector<Op*> roots() const;
  // Some root domain has an extent given at launch.
  bool runtimeExtents() const;
  // More than one phase, or any workspace: launched as a sequence of single-phase kernels.
  bool phased() const { return !workspaces.empty() || roots().size() > 1; }
  // Params that some Store writes (outputs) / that some Load reads (inputs), in param order.
  std::vector<Value*> outputs() const;
  std::vector<Value*> inputs() const;
};

// Phase `phase` of `kernel` as a kernel of its own, for planning and lowering one root domain:
// a deep copy of that root op, with the parameters followed by the workspaces as parameters
// (index params.size() + i), so the lowered code finds workspace i in argument slot
// params.size() + i. Locations are kept. Expects a verified kernel and phase < roots().size().
std::unique_ptr<Kernel> phaseKernel(const Kernel& kernel, size_t phase);

// Visit every op in program order (pre-order, regions in order).
template <class F>
void walk(const Region* r, F&& f) {
  for (Op* op : r->ops) {
    f(op);
    for (Region* sub : op->regions) walk(sub, f);
  }
}

}  // namespace kiln::ir

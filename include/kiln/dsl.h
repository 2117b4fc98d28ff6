// kiln::dsl — write TileIR kernels in C++.
//
// A kernel is specialised per shape: extents are C++ integers at build time. Every call
// builds TileIR through ir::Builder and records its C++ call site (std::source_location) as
// the op's position, so a type error points at the line that made it. Errors never abort:
// they accumulate, and finish() returns either a verified kernel or the diagnostics.
//
//   KernelBuilder kb("scale_exp");
//   View x = kb.view("x", {1000}), y = kb.view("y", {1000});
//   kb.parallel({{"p", 63}}, [&](Idx p) {
//     Tile t = load(x, {p * 16}, {{"n", 16}});
//     store(exp(t) * 2.0, y, {p * 16}, {{"n", 16}});
//   });
//   BuildResult r = kb.finish();  // r.kernel, or r.diagnostics
//
// The DSL holds no semantics the IR lacks: operators on tiles insert explicit `broadcast`
// ops (by dim name) and `const` ops for literals, nothing else. See docs/dsl.md.
#pragma once

#include <array>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <source_location>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace kiln::ir {
struct Kernel;
struct Value;
struct Op;
struct Region;
struct Diagnostic;
}  // namespace kiln::ir

namespace kiln::dsl {

using SrcLoc = std::source_location;

inline constexpr double inf = std::numeric_limits<double>::infinity();

// A named tile dimension, or one axis of the parallel domain. A domain axis may take its
// extent at launch (docs/ir.md, "Runtime extents"): runtimeAxis() below.
struct Dim {
  std::string name;
  int64_t extent = 0;
  ir::Value* runtime = nullptr;  // domain axes only: the i64 parameter giving the extent
  int64_t divisor = 1;           // the extent is ceil(runtime / divisor)
};

// An integer view's element type, and a parameter's stated inclusive range (docs/ir.md).
enum class IntElem { I32, I64 };
// A float view's storage (docs/ir.md, "16-bit views"): loads convert each element to f32
// exactly, stores round f32 to the type (round to nearest even).
enum class FloatElem { F32, F16, BF16 };
// Its name as the IR, the library's options and `kiln peers` spell it: "f32", "f16", "bf16".
inline const char* floatElemName(FloatElem e) {
  return e == FloatElem::F16 ? "f16" : e == FloatElem::BF16 ? "bf16" : "f32";
}
// The element named `name` (one of those three), or false.
inline bool floatElemNamed(std::string_view name, FloatElem& out) {
  for (FloatElem e : {FloatElem::F32, FloatElem::F16, FloatElem::BF16})
    if (name == floatElemName(e)) {
      out = e;
      return true;
    }
  return false;
}
struct Range {
  int64_t lo = 0, hi = 0;
  bool ascending = false;  // an integer view's elements never decrease (FlashAttention's cu_seqlens)
};

// One entry of a load/store access list: a named tile dim, or `_` (a squeezed view dim).
struct Squeeze {};
inline constexpr Squeeze _{};
struct Access {
  Access(Squeeze) {}
  Access(std::string name, int64_t extent) : name(std::move(name)), extent(extent) {}
  Access(const Dim& d) : name(d.name), extent(d.extent) {}
  std::string name;  // empty: squeezed (extent 1)
  int64_t extent = 1;
};

// Reduction order (docs/ir.md, Reductions).
struct ReduceOrder {
  bool tree = false;
  int partitions = 0;  // tree only; 0 = the `reduction_partitions` knob
};
inline constexpr ReduceOrder ordered{};
constexpr ReduceOrder unorderedTree(int partitions = 0) {
  return ReduceOrder{true, partitions};
}

// MMA policy flags (docs/ir.md, MMA). The default is precise.
struct MmaFlags {
  bool allow_reassociation = false;
  bool allow_fma = false;
  bool fused = false;  // one fused multiply-add per K step, rounded once (exact, reproducible)
  // 1..16: the partitioned order of docs/ir.md (contribution k in partition k mod P, then the
  // accumulator merges the partitions in order), which vector lanes run as a dot product; 0:
  // ascending K.
  int partitions = 0;
  // The bf16 dot order of docs/ir.md (operands rounded to bf16, blocks of 32 in two chains,
  // flushes): Intel AMX's TDPBF16PS arithmetic, which AVX-512 code on an AMX host runs on tiles.
  // Alone: no other flag with it.
  bool bf16_dot = false;
  // The bf16 pairs order of docs/ir.md (operands rounded to bf16, one chain over the
  // contributions in pairs, k+1 before k, flushes): AVX512-BF16's VDPBF16PS arithmetic, one
  // instruction per pair on a CPU that has it. Alone: no other flag with it.
  bool bf16_pairs = false;
};
inline constexpr MmaFlags fusedMma{false, false, true};

class KernelBuilder;
namespace detail {
struct Internal;
}

// A handle to a tile value. Copying it copies the handle. A Tile whose op failed to build
// (ok() == false) can still be used: ops on it build nothing and add no second diagnostic.
class Tile {
 public:
  Tile() = default;
  bool ok() const { return value_ != nullptr; }
  ir::Value* value() const { return value_; }
  KernelBuilder* builder() const { return kb_; }
  int rank() const;
  std::vector<Dim> dims() const;
  int64_t extent(std::string_view dim) const;  // -1 when the tile has no such dim
  std::string type() const;                    // "f32[m:4, n:16]"
  std::string name() const;
  // Gives the value a readable name in the IR (uniquified); returns the same tile.
  Tile as(std::string name) const;

 protected:
  Tile(KernelBuilder* kb, ir::Value* v) : kb_(kb), value_(v) {}
  friend struct detail::Internal;
  KernelBuilder* kb_ = nullptr;
  ir::Value* value_ = nullptr;
};

// An index: a rank-0 i64 tile (program coordinates, loop variables, index arithmetic).
class Idx : public Tile {
 public:
  Idx() = default;
  Idx as(std::string name) const;

 private:
  Idx(KernelBuilder* kb, ir::Value* v) : Tile(kb, v) {}
  friend struct detail::Internal;
};

// A kernel parameter holding a tensor in memory (static row-major shape).
class View {
 public:
  View() = default;
  ir::Value* value() const { return value_; }
  KernelBuilder* builder() const { return kb_; }
  std::vector<int64_t> shape() const;

 private:
  View(KernelBuilder* kb, ir::Value* v) : kb_(kb), value_(v) {}
  friend struct detail::Internal;
  KernelBuilder* kb_ = nullptr;
  ir::Value* value_ = nullptr;
};

// An operand of an elementwise op: a tile, or a literal that becomes a `const` of the other
// operand's element type. It also records where the expression was written, because C++
// operators cannot take a defaulted std::source_location.
class Operand {
 public:
  Operand(const Tile& t, SrcLoc loc = SrcLoc::current()) : tile(t), loc(loc) {}
  template <std::floating_point F>
  Operand(F v, SrcLoc loc = SrcLoc::current()) : literal(static_cast<double>(v)), is_literal(true), loc(loc) {}
  template <std::integral I>
  Operand(I v, SrcLoc loc = SrcLoc::current())
      : literal(static_cast<double>(v)),
        int_literal(static_cast<int64_t>(v)),
        is_literal(true),
        is_int(true),
        loc(loc) {}

  Tile tile;
  double literal = 0.0;
  int64_t int_literal = 0;
  bool is_literal = false;
  bool is_int = false;
  SrcLoc loc;
};

// An operand of index arithmetic: an Idx or an integer.
class IdxOperand {
 public:
  IdxOperand(const Idx& i, SrcLoc loc = SrcLoc::current()) : idx(i), loc(loc) {}
  template <std::integral I>
  IdxOperand(I v, SrcLoc loc = SrcLoc::current()) : constant(static_cast<int64_t>(v)), is_constant(true), loc(loc) {}

  Idx idx;
  int64_t constant = 0;
  bool is_constant = false;
  SrcLoc loc;
};

// A load/store origin entry or a loop bound: an Idx or an integer literal.
class IdxArg {
 public:
  IdxArg(const Idx& i) : idx(i) {}
  template <std::integral I>
  IdxArg(I v) : constant(static_cast<int64_t>(v)), is_constant(true) {}

  Idx idx;
  int64_t constant = 0;
  bool is_constant = false;
};

// A loop's induction variable: its name and (optionally) its step, e.g. "kb" or {"kb", 2}.
struct LoopVar {
  LoopVar(const char* name) : name(name) {}
  LoopVar(std::string name, int64_t step = 1) : name(std::move(name)), step(step) {}
  std::string name;
  int64_t step = 1;
};

// A loop-carried value: its initial tile, optionally with the name its running value gets.
struct Carry {
  Carry(const Tile& init) : init(init) {}
  Carry(std::string name, const Tile& init) : name(std::move(name)), init(init) {}
  std::string name;
  Tile init;
};

using Tiles = std::vector<Tile>;

// The product of KernelBuilder::finish(): a verified kernel, or the diagnostics saying why not.
struct BuildResult {
  BuildResult();
  ~BuildResult();
  BuildResult(BuildResult&&) noexcept;
  BuildResult& operator=(BuildResult&&) noexcept;

  std::unique_ptr<ir::Kernel> kernel;       // set iff there is no diagnostic
  std::vector<ir::Diagnostic> diagnostics;  // "FILE:LINE:COL: error: ..." via message()
  explicit operator bool() const { return kernel != nullptr; }
  std::string message() const;  // every diagnostic, one per line
};

namespace detail {
// Open region of a parallel op or a loop; restores the insertion point when it goes away.
class Scope {
 public:
  Scope(KernelBuilder* kb, ir::Op* op, ir::Region* saved, std::size_t carried, SrcLoc loc)
      : kb_(kb), op_(op), saved_(saved), count_(carried), loc_(loc) {}
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;
  ~Scope();
  bool ok() const { return op_ != nullptr; }
  std::vector<Idx> indices() const;  // the parallel coordinates, or the loop variable
  Tiles carried() const;             // loop-carried values inside the body
  Tiles close(const Tiles* next);    // emits the yield (when next is set); returns the results

 private:
  KernelBuilder* kb_;
  ir::Op* op_;
  ir::Region* saved_;
  std::size_t count_;  // carried values (= loop results)
  SrcLoc loc_;
  bool closed_ = false;
};

template <std::size_t>
using TileAt = Tile;
template <std::size_t>
using IdxAt = Idx;
template <class>
inline constexpr bool kAlwaysFalse = false;

template <class F, std::size_t... I>
constexpr bool invocableWithIdx(std::index_sequence<I...>) {
  return std::is_invocable_v<F&, IdxAt<I>...>;
}
// How many Idx arguments a parallel body takes (0: none of 1..8).
template <class F, std::size_t N = 1>
constexpr std::size_t parallelArity() {
  if constexpr (N > 8) {
    return 0;
  } else if constexpr (invocableWithIdx<F>(std::make_index_sequence<N>{})) {
    return N;
  } else {
    return parallelArity<F, N + 1>();
  }
}
template <class F, std::size_t... I>
void callWithIdx(F& f, const std::vector<Idx>& ix, std::index_sequence<I...>) {
  f(ix[I]...);
}

template <class F, std::size_t... I>
decltype(auto) callLoopBody(F& f, const Idx& iv, const Tiles& c, std::index_sequence<I...>) {
  constexpr std::size_t N = sizeof...(I);
  if constexpr (std::is_invocable_v<F&, Idx, TileAt<I>...>) {
    return f(iv, c[I]...);
  } else if constexpr (std::is_invocable_v<F&, Idx, std::array<Tile, N>>) {
    return f(iv, std::array<Tile, N>{c[I]...});
  } else if constexpr (std::is_invocable_v<F&, Idx, Tiles>) {
    return f(iv, c);
  } else {
    static_assert(kAlwaysFalse<F>, "a loop body takes (Idx iv, Tile carried...) and returns the next carried values");
  }
}

template <class R>
Tiles toTiles(R&& r) {
  using T = std::remove_cvref_t<R>;
  if constexpr (std::is_same_v<T, Tiles>) {
    return std::forward<R>(r);
  } else if constexpr (std::is_convertible_v<T, Tile>) {
    return Tiles{Tile(r)};
  } else {
    return Tiles(std::begin(r), std::end(r));  // std::array<Tile, N> and the like
  }
}

enum class Bin : uint8_t { Add, Sub, Mul, Div, Max, Min, Lt, Le, Gt, Ge, Eq, Ne };
Tile binary(Bin op, const Operand& a, const Operand& b, SrcLoc loc);
}  // namespace detail

class KernelBuilder {
 public:
  explicit KernelBuilder(std::string name, SrcLoc loc = SrcLoc::current());
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  // Parameters, in the order declared.
  View view(std::string name, std::vector<int64_t> shape, SrcLoc loc = SrcLoc::current());
  // A float view stored as f32, f16 or bf16 (its tiles are f32 either way).
  View view(std::string name, std::vector<int64_t> shape, FloatElem elem, SrcLoc loc = SrcLoc::current());
  // An integer view (elem i32 or i64: lengths, positions, block tables), optionally with a
  // stated range every launch checks each element against.
  View intView(std::string name, std::vector<int64_t> shape, IntElem elem, std::optional<Range> range = {},
               SrcLoc loc = SrcLoc::current());
  Tile scalarF32(std::string name, SrcLoc loc = SrcLoc::current());
  Idx scalarI64(std::string name, SrcLoc loc = SrcLoc::current());
  // An i64 parameter with a stated range (checked by every launch): a length, a row count.
  Idx scalarI64(std::string name, Range range, SrcLoc loc = SrcLoc::current());
  // A domain axis whose extent is ceil(param / divisor) at launch; `param` is an i64 parameter
  // with a stated range [lo >= 0, hi], and the axis's maximum is ceil(hi / divisor).
  Dim runtimeAxis(std::string name, const Idx& param, int64_t divisor = 1, SrcLoc loc = SrcLoc::current());
  // A workspace: an f32 view Kiln allocates for each launch (zero-filled before the first
  // phase), not an argument of the call. Phases pass partial results through workspaces.
  View workspace(std::string name, std::vector<int64_t> shape, SrcLoc loc = SrcLoc::current());

  // A root domain (a phase): body(Idx...) runs once, building the program of every domain
  // point. Calling parallel() again adds a phase that runs after the previous one has ended.
  template <class F>
  void parallel(const std::vector<Dim>& domain, F&& body, SrcLoc loc = SrcLoc::current()) {
    detail::Scope s = openParallel(domain, loc);
    if (!s.ok()) return;
    std::vector<Idx> ix = s.indices();
    if constexpr (std::is_invocable_v<F&, std::vector<Idx>>) {
      body(ix);
    } else {
      constexpr std::size_t n = detail::parallelArity<F>();
      static_assert(n > 0, "a parallel body takes one Idx per domain axis, or a std::vector<Idx>");
      if (ix.size() == n) {
        detail::callWithIdx(body, ix, std::make_index_sequence<n>{});
      } else {
        error("parallel-arity",
              "the parallel body takes " + std::to_string(n) + " indices but the domain has " +
                  std::to_string(ix.size()) + " axes",
              loc);
      }
    }
  }

  // serial / pipeline loops `for iv = lower; iv < upper; iv += step`. With carried values,
  // body(Idx iv, Tile c0, Tile c1, ...) returns the next values (Tiles, std::array or a Tile)
  // and the loop returns the final ones:
  //   auto [m, l] = kb.serial("kb", 0, n, {m0, l0}, [&](Idx kb, Tile m, Tile l) -> Tiles {...});
  template <std::size_t N, class F>
  std::array<Tile, N> serial(LoopVar iv, IdxArg lower, IdxArg upper, const Carry (&init)[N], F&& body,
                             SrcLoc loc = SrcLoc::current()) {
    return loop<N>(false, std::move(iv), lower, upper, init, body, loc);
  }
  template <class F>
  void serial(LoopVar iv, IdxArg lower, IdxArg upper, F&& body, SrcLoc loc = SrcLoc::current()) {
    loop0(false, std::move(iv), lower, upper, body, loc);
  }
  template <std::size_t N, class F>
  std::array<Tile, N> pipeline(LoopVar iv, IdxArg lower, IdxArg upper, const Carry (&init)[N], F&& body,
                               SrcLoc loc = SrcLoc::current()) {
    return loop<N>(true, std::move(iv), lower, upper, init, body, loc);
  }
  template <class F>
  void pipeline(LoopVar iv, IdxArg lower, IdxArg upper, F&& body, SrcLoc loc = SrcLoc::current()) {
    loop0(true, std::move(iv), lower, upper, body, loc);
  }
  // Stage marker inside a pipeline body (scheduling intent only).
  void stage(int64_t n, SrcLoc loc = SrcLoc::current());

  // Constants and index tiles.
  Tile full(const std::vector<Dim>& dims, double value, SrcLoc loc = SrcLoc::current());  // f32
  Tile zeros(const std::vector<Dim>& dims, SrcLoc loc = SrcLoc::current());               // f32
  Tile fullI64(const std::vector<Dim>& dims, int64_t value, SrcLoc loc = SrcLoc::current());
  Idx index(int64_t value, SrcLoc loc = SrcLoc::current());  // an i64 scalar const
  Tile iota(const std::vector<Dim>& dims, const std::string& along, SrcLoc loc = SrcLoc::current());

  // Reports a user error (e.g. an unsupported shape) at `loc`.
  void error(std::string code, std::string message, SrcLoc loc = SrcLoc::current());
  bool hasErrors() const;

  // Verifies the kernel; returns it, or every diagnostic recorded so far. Call once.
  BuildResult finish();

  struct Impl;  // src/dsl/impl.h

 private:
  detail::Scope openParallel(const std::vector<Dim>& domain, SrcLoc loc);
  detail::Scope openLoop(bool pipeline, const LoopVar& iv, IdxArg lower, IdxArg upper, const std::vector<Carry>& c,
                         SrcLoc loc);

  template <std::size_t N, class F>
  std::array<Tile, N> loop(bool pipeline, LoopVar iv, IdxArg lower, IdxArg upper, const Carry (&init)[N], F& body,
                           SrcLoc loc) {
    detail::Scope s = openLoop(pipeline, iv, lower, upper, std::vector<Carry>(init, init + N), loc);
    Tiles out;
    if (s.ok()) {
      Tiles next =
          detail::toTiles(detail::callLoopBody(body, s.indices()[0], s.carried(), std::make_index_sequence<N>{}));
      out = s.close(&next);
    } else {
      out = s.close(nullptr);
    }
    std::array<Tile, N> r;
    for (std::size_t i = 0; i < N && i < out.size(); ++i) r[i] = out[i];
    return r;
  }
  template <class F>
  void loop0(bool pipeline, LoopVar iv, IdxArg lower, IdxArg upper, F& body, SrcLoc loc) {
    detail::Scope s = openLoop(pipeline, iv, lower, upper, {}, loc);
    if (s.ok()) body(s.indices()[0]);
    s.close(nullptr);
  }

  friend struct detail::Internal;
  friend class detail::Scope;
  std::unique_ptr<Impl> impl_;
};

// ---- elementwise operators (insert broadcast-by-name and literal consts) ----
Tile operator+(const Operand& a, const Operand& b);
Tile operator-(const Operand& a, const Operand& b);
Tile operator*(const Operand& a, const Operand& b);
Tile operator/(const Operand& a, const Operand& b);
Tile operator-(const Operand& a);
Tile& operator+=(Tile& a, const Operand& b);
Tile& operator-=(Tile& a, const Operand& b);
Tile& operator*=(Tile& a, const Operand& b);
Tile& operator/=(Tile& a, const Operand& b);

// Index arithmetic stays an Idx. `/` truncates toward zero (docs/ir.md).
Idx operator+(const Idx& a, const IdxOperand& b);
Idx operator-(const Idx& a, const IdxOperand& b);
Idx operator*(const Idx& a, const IdxOperand& b);
Idx operator/(const Idx& a, const IdxOperand& b);
Idx operator+(int64_t a, const IdxOperand& b);
Idx operator-(int64_t a, const IdxOperand& b);
Idx operator*(int64_t a, const IdxOperand& b);
Idx operator/(int64_t a, const IdxOperand& b);

template <class T>
concept TileLike = std::derived_from<std::remove_cvref_t<T>, Tile>;
template <class T>
concept OperandLike = TileLike<T> || std::is_arithmetic_v<std::remove_cvref_t<T>>;

// max/min and comparisons (result i1); at least one side is a tile.
#define KILN_DSL_BINARY_FN(fn, op)                                                                       \
  template <OperandLike A, OperandLike B>                                                                \
  requires(TileLike<A> || TileLike<B>) Tile fn(const A& a, const B& b, SrcLoc loc = SrcLoc::current()) { \
    return detail::binary(detail::Bin::op, Operand(a, loc), Operand(b, loc), loc);                       \
  }
KILN_DSL_BINARY_FN(max, Max)
KILN_DSL_BINARY_FN(min, Min)
KILN_DSL_BINARY_FN(lt, Lt)
KILN_DSL_BINARY_FN(le, Le)
KILN_DSL_BINARY_FN(gt, Gt)
KILN_DSL_BINARY_FN(ge, Ge)
KILN_DSL_BINARY_FN(eq, Eq)
KILN_DSL_BINARY_FN(ne, Ne)
#undef KILN_DSL_BINARY_FN

// Unary math (f32; neg/abs also i64).
Tile exp(const Tile& x, SrcLoc loc = SrcLoc::current());
Tile log(const Tile& x, SrcLoc loc = SrcLoc::current());
Tile sqrt(const Tile& x, SrcLoc loc = SrcLoc::current());
Tile rsqrt(const Tile& x, SrcLoc loc = SrcLoc::current());
Tile tanh(const Tile& x, SrcLoc loc = SrcLoc::current());
Tile erf(const Tile& x, SrcLoc loc = SrcLoc::current());
Tile abs(const Tile& x, SrcLoc loc = SrcLoc::current());

// cond ? a : b elementwise; operands broadcast by name, literals take the other's type.
Tile select(const Tile& cond, const Operand& a, const Operand& b, SrcLoc loc = SrcLoc::current());
// Element type conversions (docs/ir.md, Arithmetic).
Tile toF32(const Tile& x, SrcLoc loc = SrcLoc::current());
Tile toI64(const Tile& x, SrcLoc loc = SrcLoc::current());
Tile toI1(const Tile& x, SrcLoc loc = SrcLoc::current());
// Explicit broadcast to `dims` (every dim of x must be among them, same extent).
Tile broadcast(const Tile& x, const std::vector<Dim>& dims, SrcLoc loc = SrcLoc::current());
// One element, rank 0.
Tile extract(const Tile& x, const std::vector<IdxArg>& indices, SrcLoc loc = SrcLoc::current());
// The same, of an i64 tile (an integer view's load), as an index.
Idx extractIndex(const Tile& x, const std::vector<IdxArg>& indices, SrcLoc loc = SrcLoc::current());
// min / max of indices.
Idx minIndex(const Idx& a, const IdxOperand& b);
Idx maxIndex(const Idx& a, const IdxOperand& b);

// Reductions over named dims; `init` is a tile of the result's type, a scalar, or a literal.
Tile reduceSum(const Tile& x, const std::vector<std::string>& dims, const Operand& init, ReduceOrder order = ordered,
               SrcLoc loc = SrcLoc::current());
Tile reduceMax(const Tile& x, const std::vector<std::string>& dims, const Operand& init, ReduceOrder order = ordered,
               SrcLoc loc = SrcLoc::current());
Tile reduceMin(const Tile& x, const std::vector<std::string>& dims, const Operand& init, ReduceOrder order = ordered,
               SrcLoc loc = SrcLoc::current());
Tile reduceProd(const Tile& x, const std::vector<std::string>& dims, const Operand& init, ReduceOrder order = ordered,
                SrcLoc loc = SrcLoc::current());

// acc + sum over `contract` of a*b (dims matched by name; docs/ir.md, MMA).
Tile mma(const Tile& a, const Tile& b, const Tile& acc, const std::vector<std::string>& contract, MmaFlags flags = {},
         SrcLoc loc = SrcLoc::current());

// Memory: one origin entry and one access entry per view dim; out-of-range elements read
// `fill` (load) or are not written (store).
Tile load(const View& view, const std::vector<IdxArg>& origin, const std::vector<Access>& access, double fill = 0.0,
          SrcLoc loc = SrcLoc::current());
void store(const Tile& tile, const View& view, const std::vector<IdxArg>& origin, const std::vector<Access>& access,
           SrcLoc loc = SrcLoc::current());

}  // namespace kiln::dsl

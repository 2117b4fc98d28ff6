// Private to generate.cpp and generate_ops.cpp: the Gen class, split by idea across the two files.
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <set>

#include "fuzz/generate.h"
#include "fuzz/rng.h"
#include "ir/diag.h"
#include "ir/parser.h"
#include "ir/verifier.h"

namespace kiln::fuzz::detail {

using ir::Elem;
using Shape = std::vector<int>;  // indices into Gen::dims_, in tile order

constexpr int64_t kMaxTileElements = 260;  // e.g. 17 x 15; interpretation stays fast
constexpr int kMaxOps = 36;
constexpr int64_t kMaxWork = 24000;  // elements produced, times the enclosing loop trips
// The block family's tiles: a warp of threads or more over the rows and a column (the block
// form refuses fewer), e.g. 16 x 128; the work grows with them.
constexpr int64_t kMaxBlockTileElements = 2048;
constexpr int64_t kMaxBlockWork = 400000;
constexpr int kMaxViews = 7;
constexpr int kMaxLoopDepth = 2;

struct Val {
  std::string name;  // with '%'
  Elem elem;
  Shape dims;
  int scope;
  bool carried;  // a loop's carried value or induction variable: preferred when reusing
};

struct View {
  std::string name;
  std::vector<int64_t> shape;
  int root_rank;  // stored views: the leading dims are the root domain (0 for input views)
};

class Gen {
 public:
  Gen(uint64_t seed, Family family) : seed_(seed), rng_(seed), block_(family == Family::Block) {}

  Program run();

 private:
  struct DimInfo {
    std::string name;
    int64_t extent;
  };

  // ---- dims and shapes

  void pickDims();

  // The block family: rows_ (1 or 2 dims), cols_ (1 or 2), free_ (contracted dims of the mmas'
  // loaded operands, never in another value), and the opening statements that fix the rows
  // and columns as the block planner reads them (an mma per column dim, or a load of the rows
  // and the one column).
  void pickBlockDims();
  void blockAnchors();
  std::string blockReduce(const Shape& s, int depth);
  std::string blockMma(const Shape& s, int depth);
  bool isBlockAccumulator(const Shape& s) const;

  int64_t elems(const Shape& s) const;

  // A random ordered subset of the dims (rank 0..maxRank) within kMaxTileElements.
  Shape randomShape(int maxRank, const Shape& exclude = {});

  template <class T>
  void shuffle(std::vector<T>& v) {
    for (size_t i = v.size(); i > 1; --i)
      std::swap(v[i - 1], v[static_cast<size_t>(rng_.below(static_cast<int64_t>(i)))]);
  }

  std::string typeText(Elem e, const Shape& s) const;

  // ---- emission

  void line(const std::string& text);

  // Stores up to `max` f32 values of the current region that nothing reads, so that what the
  // program computes reaches memory instead of being dead code the compiler drops.
  void storeUnused(int max);

  std::string fresh() { return fmt::format("%v{}", counter_++); }

  bool exhausted() const { return ops_ >= kMaxOps || work_ >= (block_ ? kMaxBlockWork : kMaxWork); }

  int64_t maxTile() const { return block_ ? kMaxBlockTileElements : kMaxTileElements; }

  std::string emit(const std::string& rhs, Elem e, const Shape& s, bool pooled = true);

  std::optional<std::string> reuse(Elem e, const Shape& s, int num, int den);

  std::string f32Literal();

  // A rank-0 i64 index: a literal in [lo, hi], or (when allowed) a runtime value.
  std::string index(int64_t lo, int64_t hi, bool runtime = true);

  // A rank-0 i64 value known only at run time: a program or loop index, the %n parameter, or
  // a little arithmetic on one.
  std::string runtimeScalar();

  // ---- values

  std::string f32(const Shape& s, int depth);

  std::string i64(const Shape& s, int depth);

  std::string i1(const Shape& s, int depth);

  std::string broadcast(Elem e, const Shape& s, int depth);

  std::string reduce(Elem e, const Shape& s, int depth);
  std::string reduceInit(const Shape& s, int depth);  // an f32 reduction's init, of shape s

  std::string mma(const Shape& s, int depth);

  std::string extract(Elem e, int depth);

  // ---- memory

  std::string load(const Shape& s, bool pooled = true);

  int64_t raggedExtent(int64_t e);

  // Origins and access entries of the view dims from `first` on: s's dims in order at sorted
  // positions, the other positions squeezed.
  void accessEntries(const View& v, int first, const Shape& s, std::vector<std::string>& origin,
                     std::vector<std::string>& access);

  void store(const Shape& s, int depth) { storeValue(f32(s, depth), s); }

  void storeValue(const std::string& value, const Shape& s);

  // ---- structure

  void statementList(int n);

  // A serial or pipeline loop; returns a result of type (e, s) (carried along with others).
  std::string loop(Elem e, const Shape& s, int depth);

  uint64_t seed_;
  Rng rng_;
  bool specials_ = false;
  std::vector<DimInfo> dims_;
  std::vector<View> views_;
  std::vector<int64_t> root_ext_;
  std::vector<std::string> root_ivs_;
  std::vector<std::string> lines_;
  std::vector<Val> pool_;
  int indent_ = 2;
  int scope_ = 0;
  int counter_ = 0;
  int ops_ = 0;
  int64_t work_ = 0;
  int64_t trips_ = 1;
  int loop_depth_ = 0;
  bool use_n_ = false;
  bool use_s_ = false;
  std::set<std::string> used_;
  bool block_ = false;
  bool block_mmas_ = false;  // the block family's program has mmas (else one column dim, no mma)
  Shape rows_, cols_, free_;
};

}  // namespace kiln::fuzz::detail

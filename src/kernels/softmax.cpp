// Row softmax in the DSL; see softmax.h.
#include "kernels/softmax.h"

#include <algorithm>

#include "kernels/rows.h"

namespace kiln::kernels {

using namespace kiln::dsl;

BuildResult softmax(int64_t rows, int64_t cols, int64_t block_rows, int64_t chunk, bool runtime_rows, FloatElem io,
                    ReduceOrder order, bool per_column, int64_t parts, int64_t width, bool three_passes) {
  KernelBuilder kb("softmax");
  if (rows < 1 || cols < 1 || block_rows < 1 || chunk < 1) {
    kb.error("bad-shape", "softmax needs rows, cols, block_rows and chunk >= 1");
    return kb.finish();
  }
  const int64_t nChunks = cols / chunk + (cols % chunk != 0);  // (chunk may be INT64_MAX)
  if (parts > 1 && (runtime_rows || nChunks < 2)) {
    kb.error("bad-shape", "softmax: rows in parts need a static row count and at least two column chunks");
    return kb.finish();
  }
  if (three_passes && (parts > 1 || nChunks < 2)) {
    kb.error("bad-shape", "softmax: three passes need rows of at least two column chunks, not in parts");
    return kb.finish();
  }
  View x = kb.view("x", {rows, cols}, io);
  View y = kb.view("y", {rows, cols}, io);
  const Dim domain = rowBlocks(kb, rows, block_rows, runtime_rows);
  if (cols <= chunk) {
    const std::vector<Access> rc = {{"r", block_rows}, {"c", std::max(cols, width)}};
    kb.parallel({domain}, [&](Idx p) {
      Idx r0 = (p * block_rows).as("r0");
      Tile t = (width > cols ? load(x, {r0, 0}, rc, -inf) : load(x, {r0, 0}, rc)).as("x_t");
      Tile e = exp(t - reduceMax(t, {"c"}, -inf, order).as("row_max")).as("e");
      store((e / reduceSum(e, {"c"}, 0.0, order).as("row_sum")).as("y_t"), y, {r0, 0}, rc);
    });
    return kb.finish();
  }
  const std::vector<Access> rc = {{"r", block_rows}, {"c", chunk}};
  const std::vector<Dim> cells = {{"r", block_rows}, {"c", chunk}};
  // Per column position over chunks [lo, hi): m = max(m, x), l = l e^(m_prev - m) + e^(x - m) (a
  // position that has seen only -inf keeps m = -inf, l = 0: m_safe makes both factors 0, never
  // NaN).
  auto runningPerColumn = [&](const Idx& r0, IdxArg lo, IdxArg hi) {
    Carry m0{"m", kb.full(cells, -inf)}, l0{"l", kb.zeros(cells)};
    return kb.serial("cc", lo, hi, {m0, l0}, [&](Idx cc, Tile mPrev, Tile lPrev) {
      Tile t = load(x, {r0, cc * chunk}, rc, -inf).as("x_t");
      Tile mNew = max(mPrev, t).as("m_new");
      Tile mSafe = select(eq(mNew, -inf), 0.0, mNew).as("m_safe");
      return Tiles{mNew, (lPrev * exp(mPrev - mSafe) + exp(t - mSafe)).as("l_new")};
    });
  };
  // Running values per column position (m, l) folded over the chunk in `order`: the max, and
  // the sum of l rescaled to it.
  auto foldColumns = [&](const Tile& m, const Tile& l, const char* maxName, const char* sumName) {
    Tile mx = reduceMax(m, {"c"}, -inf, order).as(maxName);
    Tile maxSafe = select(eq(mx, -inf), 0.0, mx).as("max_safe");
    return std::pair{mx, reduceSum((l * exp(m - maxSafe)).as("l_scaled"), {"c"}, 0.0, order).as(sumName)};
  };
  auto writeChunks = [&](const Idx& r0, IdxArg lo, IdxArg hi, const Tile& rowMax, const Tile& rowSum) {
    kb.serial("cc", lo, hi, [&](Idx cc) {
      Tile t = load(x, {r0, cc * chunk}, rc).as("x_t");
      store((exp(t - rowMax) / rowSum).as("y_t"), y, {r0, cc * chunk}, rc);
    });
  };
  if (parts > 1) {
    // Each row in S parts of `per` chunks (the last ragged), a program per (row block, part).
    // Phase 1: a part's max and sum (per-column running values over its chunks, then one
    // reduction each) into workspaces [rows, S]. Phase 2: every program reads its rows' S
    // partials as one chunk-wide tile (columns from S on read m = -inf, l = 0: they add
    // exactly nothing), reduces them to the row's max and sum, and writes its part.
    const int64_t per = (nChunks + std::min(parts, nChunks) - 1) / std::min(parts, nChunks);
    const int64_t S = (nChunks + per - 1) / per;
    if (S > chunk) {
      kb.error("bad-shape", "softmax: more row parts than columns in a chunk");
      return kb.finish();
    }
    View pm = kb.workspace("part_m", {rows, S});
    View pl = kb.workspace("part_l", {rows, S});
    auto bounds = [&](Idx s) {
      Idx lo = (s * per).as("lo");
      return std::pair{lo, ((lo + per) - ((s + 1) / S) * (S * per - nChunks)).as("hi")};
    };
    kb.parallel({domain, {"s", S}}, [&](Idx p, Idx s) {
      Idx r0 = (p * block_rows).as("r0");
      auto [lo, hi] = bounds(s);
      auto [m, l] = runningPerColumn(r0, lo, hi);
      auto [partMax, partSum] = foldColumns(m, l, "part_max", "part_sum");
      store(partMax, pm, {r0, s}, {{"r", block_rows}, _});
      store(partSum, pl, {r0, s}, {{"r", block_rows}, _});
    });
    kb.parallel({domain, {"s", S}}, [&](Idx p, Idx s) {
      Idx r0 = (p * block_rows).as("r0");
      auto [lo, hi] = bounds(s);
      auto [rowMax, rowSum] = foldColumns(load(pm, {r0, 0}, rc, -inf).as("m_parts"),
                                          load(pl, {r0, 0}, rc, 0.0).as("l_parts"), "row_max", "row_sum");
      writeChunks(r0, lo, hi, rowMax, rowSum);
    });
    return kb.finish();
  }
  if (three_passes) {
    // The max over the row; the sum of exp(x - max) against it (a row of only -inf: max_safe 0,
    // terms 0); the write.
    kb.parallel({domain}, [&](Idx p) {
      Idx r0 = (p * block_rows).as("r0");
      const std::vector<Dim> carried = per_column ? cells : std::vector<Dim>{{"r", block_rows}};
      Carry m0{"m", kb.full(carried, -inf)};
      auto [m] = kb.serial("cc", 0, nChunks, {m0}, [&](Idx cc, Tile mPrev) {
        Tile t = load(x, {r0, cc * chunk}, rc, -inf).as("x_t");
        return Tiles{
            (per_column ? max(mPrev, t) : max(mPrev, reduceMax(t, {"c"}, -inf, order).as("chunk_max"))).as("m_new")};
      });
      Tile rowMax = per_column ? reduceMax(m, {"c"}, -inf, order).as("row_max") : m;
      Tile maxSafe = select(eq(rowMax, -inf), 0.0, rowMax).as("max_safe");
      Carry l0{"l", kb.zeros(carried)};
      auto [l] = kb.serial("cc", 0, nChunks, {l0}, [&](Idx cc, Tile lPrev) {
        Tile e = exp(load(x, {r0, cc * chunk}, rc, -inf).as("x_t") - maxSafe).as("e");
        return Tiles{(lPrev + (per_column ? e : reduceSum(e, {"c"}, 0.0, order).as("chunk_sum"))).as("l_new")};
      });
      Tile rowSum = per_column ? reduceSum(l, {"c"}, 0.0, order).as("row_sum") : l;
      writeChunks(r0, 0, nChunks, rowMax, rowSum);
    });
    return kb.finish();
  }
  if (per_column) {
    kb.parallel({domain}, [&](Idx p) {
      Idx r0 = (p * block_rows).as("r0");
      auto [m, l] = runningPerColumn(r0, 0, nChunks);
      auto [rowMax, rowSum] = foldColumns(m, l, "row_max", "row_sum");
      writeChunks(r0, 0, nChunks, rowMax, rowSum);
    });
    return kb.finish();
  }
  kb.parallel({domain}, [&](Idx p) {
    Idx r0 = (p * block_rows).as("r0");
    Carry m0{"m", kb.full({{"r", block_rows}}, -inf)}, l0{"l", kb.zeros({{"r", block_rows}})};
    auto [m, l] = kb.serial("cc", 0, nChunks, {m0, l0}, [&](Idx cc, Tile mPrev, Tile lPrev) {
      // Columns past the end read -inf: they change neither the max nor the sum.
      Tile t = load(x, {r0, cc * chunk}, rc, -inf).as("x_t");
      Tile mNew = max(mPrev, reduceMax(t, {"c"}, -inf, order).as("chunk_max")).as("m_new");
      // While a row has seen only -inf, m is -inf; exp(t - 0) keeps its terms 0, never NaN.
      Tile mSafe = select(eq(mNew, -inf), 0.0, mNew).as("m_safe");
      Tile sum = reduceSum(exp(t - mSafe), {"c"}, 0.0, order).as("chunk_sum");
      return Tiles{mNew, (lPrev * exp(mPrev - mSafe) + sum).as("l_new")};
    });
    kb.serial("cc", 0, nChunks, [&](Idx cc) {
      Tile t = load(x, {r0, cc * chunk}, rc).as("x_t");
      store((exp(t - m) / l).as("y_t"), y, {r0, cc * chunk}, rc);
    });
  });
  return kb.finish();
}

}  // namespace kiln::kernels

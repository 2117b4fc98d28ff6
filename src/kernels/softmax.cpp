// Row softmax in the DSL; see softmax.h.
#include "kernels/softmax.h"

#include "kernels/rows.h"

namespace kiln::kernels {

using namespace kiln::dsl;

BuildResult softmax(int64_t rows, int64_t cols, int64_t block_rows, int64_t chunk, bool runtime_rows, FloatElem io,
                    ReduceOrder order, bool per_column) {
  KernelBuilder kb("softmax");
  if (rows < 1 || cols < 1 || block_rows < 1 || chunk < 1) {
    kb.error("bad-shape", "softmax needs rows, cols, block_rows and chunk >= 1");
    return kb.finish();
  }
  View x = kb.view("x", {rows, cols}, io);
  View y = kb.view("y", {rows, cols}, io);
  const Dim domain = rowBlocks(kb, rows, block_rows, runtime_rows);
  if (cols <= chunk) {
    const std::vector<Access> rc = {{"r", block_rows}, {"c", cols}};
    kb.parallel({domain}, [&](Idx p) {
      Idx r0 = (p * block_rows).as("r0");
      Tile t = load(x, {r0, 0}, rc).as("x_t");
      Tile e = exp(t - reduceMax(t, {"c"}, -inf, order).as("row_max")).as("e");
      store((e / reduceSum(e, {"c"}, 0.0, order).as("row_sum")).as("y_t"), y, {r0, 0}, rc);
    });
    return kb.finish();
  }
  const std::vector<Access> rc = {{"r", block_rows}, {"c", chunk}};
  const int64_t nChunks = (cols + chunk - 1) / chunk;
  if (per_column) {
    kb.parallel({domain}, [&](Idx p) {
      Idx r0 = (p * block_rows).as("r0");
      const std::vector<Dim> cells = {{"r", block_rows}, {"c", chunk}};
      Carry m0{"m", kb.full(cells, -inf)}, l0{"l", kb.zeros(cells)};
      // Per column position: m = max(m, x), l = l e^(m_prev - m) + e^(x - m) (a position that has
      // seen only -inf keeps m = -inf, l = 0: m_safe makes both factors 0, never NaN).
      auto [m, l] = kb.serial("cc", 0, nChunks, {m0, l0}, [&](Idx cc, Tile mPrev, Tile lPrev) {
        Tile t = load(x, {r0, cc * chunk}, rc, -inf).as("x_t");
        Tile mNew = max(mPrev, t).as("m_new");
        Tile mSafe = select(eq(mNew, -inf), 0.0, mNew).as("m_safe");
        return Tiles{mNew, (lPrev * exp(mPrev - mSafe) + exp(t - mSafe)).as("l_new")};
      });
      Tile rowMax = reduceMax(m, {"c"}, -inf, order).as("row_max");
      Tile maxSafe = select(eq(rowMax, -inf), 0.0, rowMax).as("max_safe");
      Tile rowSum = reduceSum((l * exp(m - maxSafe)).as("l_scaled"), {"c"}, 0.0, order).as("row_sum");
      kb.serial("cc", 0, nChunks, [&](Idx cc) {
        Tile t = load(x, {r0, cc * chunk}, rc).as("x_t");
        store((exp(t - rowMax) / rowSum).as("y_t"), y, {r0, cc * chunk}, rc);
      });
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

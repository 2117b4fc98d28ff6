// LayerNorm in the DSL; see layernorm.h.
#include "kernels/layernorm.h"

#include <algorithm>

namespace kiln::kernels {

using namespace kiln::dsl;

BuildResult layernorm(int64_t rows, int64_t cols, double eps, int64_t chunk, FloatElem io, ReduceOrder order,
                      bool per_column) {
  KernelBuilder kb("layernorm");
  if (rows < 1 || cols < 1 || chunk < 1) {
    kb.error("bad-shape", "layernorm needs rows, cols and chunk >= 1");
    return kb.finish();
  }
  const int64_t C = std::min(cols, chunk), nChunks = (cols + C - 1) / C;
  const bool ragged = cols % C != 0;
  View x = kb.view("x", {rows, cols}, io);
  View w = kb.view("w", {cols});
  View b = kb.view("b", {cols});
  View y = kb.view("y", {rows, cols}, io);
  const std::vector<Access> row = {_, {"c", C}};
  // per_column (several chunks): the loops sum per column position of the chunk (element-wise)
  // and reduce over the chunk once after each loop.
  const bool cells = per_column && nChunks > 1;
  const std::vector<Dim> acc = cells ? std::vector<Dim>{{"c", C}} : std::vector<Dim>{};
  auto fold = [&](const Tile& total, const Tile& part, const char* name) {
    return (cells ? total + part : total + reduceSum(part, {"c"}, 0.0, order)).as(name);
  };
  kb.parallel({{"r", rows}}, [&](Idx r) {
    auto [sumAcc] = kb.serial("cc", 0, nChunks, {Carry{"sum", kb.zeros(acc)}}, [&](Idx cc, Tile sum) {
      Tile t = load(x, {r, cc * C}, row).as("x_t");  // columns past the end read 0
      return fold(sum, t, "sum_next");
    });
    Tile sum = cells ? reduceSum(sumAcc, {"c"}, 0.0, order).as("row_sum") : sumAcc;
    Tile mean = (sum / static_cast<double>(cols)).as("mean");
    auto [sqAcc] = kb.serial("cc", 0, nChunks, {Carry{"sq", kb.zeros(acc)}}, [&](Idx cc, Tile sq) {
      Idx c0 = (cc * C).as("c0");
      Tile d = (load(x, {r, c0}, row) - mean).as("dev");
      Tile d2 = (d * d).as("dev_sq");
      if (ragged) d2 = select(lt(kb.iota({{"c", C}}, "c") + c0, cols), d2, 0.0).as("dev_sq_valid");
      return fold(sq, d2, "sq_next");
    });
    Tile sq = cells ? reduceSum(sqAcc, {"c"}, 0.0, order).as("row_sq") : sqAcc;
    Tile inv = rsqrt(sq / static_cast<double>(cols) + eps).as("inv_std");
    kb.serial("cc", 0, nChunks, [&](Idx cc) {
      Idx c0 = (cc * C).as("c0");
      Tile t = load(x, {r, c0}, row).as("x_t");
      Tile wt = load(w, {c0}, {{"c", C}}).as("w_t");
      Tile bt = load(b, {c0}, {{"c", C}}).as("b_t");
      store(((t - mean) * inv * wt + bt).as("y_t"), y, {r, c0}, row);
    });
  });
  return kb.finish();
}

}  // namespace kiln::kernels

// Row softmax in the DSL; see softmax.h.
#include "kernels/softmax.h"

namespace kiln::kernels {

using namespace kiln::dsl;

BuildResult softmax(int64_t rows, int64_t cols, int64_t block_rows) {
  KernelBuilder kb("softmax");
  if (rows < 1 || cols < 1 || block_rows < 1) {
    kb.error("bad-shape", "softmax needs rows, cols and block_rows >= 1");
    return kb.finish();
  }
  View x = kb.view("x", {rows, cols});
  View y = kb.view("y", {rows, cols});
  const std::vector<Access> rc = {{"r", block_rows}, {"c", cols}};
  kb.parallel({{"p", (rows + block_rows - 1) / block_rows}}, [&](Idx p) {
    Idx r0 = (p * block_rows).as("r0");
    Tile t = load(x, {r0, 0}, rc).as("x_t");
    Tile e = exp(t - reduceMax(t, {"c"}, -inf).as("row_max")).as("e");
    store((e / reduceSum(e, {"c"}, 0.0).as("row_sum")).as("y_t"), y, {r0, 0}, rc);
  });
  return kb.finish();
}

}  // namespace kiln::kernels

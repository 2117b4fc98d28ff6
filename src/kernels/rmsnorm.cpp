// RMSNorm in the DSL; see rmsnorm.h.
#include "kernels/rmsnorm.h"

namespace kiln::kernels {

using namespace kiln::dsl;

BuildResult rmsnorm(int64_t rows, int64_t cols, double eps, int64_t block_rows) {
  KernelBuilder kb("rmsnorm");
  if (rows < 1 || cols < 1 || block_rows < 1) {
    kb.error("bad-shape", "rmsnorm needs rows, cols and block_rows >= 1");
    return kb.finish();
  }
  View x = kb.view("x", {rows, cols});
  View w = kb.view("w", {cols});
  View y = kb.view("y", {rows, cols});
  const std::vector<Access> rc = {{"r", block_rows}, {"c", cols}};
  kb.parallel({{"p", (rows + block_rows - 1) / block_rows}}, [&](Idx p) {
    Idx r0 = (p * block_rows).as("r0");
    Tile t = load(x, {r0, 0}, rc).as("x_t");
    Tile meanSq = (reduceSum(t * t, {"c"}, 0.0) / static_cast<double>(cols)).as("mean_sq");
    Tile inv = rsqrt(meanSq + eps).as("inv_rms");
    Tile wt = load(w, {0}, {{"c", cols}}).as("w_t");
    store((t * inv * wt).as("y_t"), y, {r0, 0}, rc);
  });
  return kb.finish();
}

}  // namespace kiln::kernels

// RMSNorm in the DSL; see rmsnorm.h.
#include "kernels/rmsnorm.h"

#include "kernels/rows.h"

namespace kiln::kernels {

using namespace kiln::dsl;

BuildResult rmsnorm(int64_t rows, int64_t cols, double eps, int64_t block_rows, int64_t chunk, bool runtime_rows,
                    FloatElem io, ReduceOrder order, std::optional<FloatElem> out) {
  KernelBuilder kb("rmsnorm");
  if (rows < 1 || cols < 1 || block_rows < 1 || chunk < 1) {
    kb.error("bad-shape", "rmsnorm needs rows, cols, block_rows and chunk >= 1");
    return kb.finish();
  }
  View x = kb.view("x", {rows, cols}, io);
  View w = kb.view("w", {cols});
  View y = kb.view("y", {rows, cols}, out.value_or(io));
  const Dim domain = rowBlocks(kb, rows, block_rows, runtime_rows);
  if (cols <= chunk) {
    const std::vector<Access> rc = {{"r", block_rows}, {"c", cols}};
    kb.parallel({domain}, [&](Idx p) {
      Idx r0 = (p * block_rows).as("r0");
      Tile t = load(x, {r0, 0}, rc).as("x_t");
      Tile meanSq = (reduceSum(t * t, {"c"}, 0.0, order) / static_cast<double>(cols)).as("mean_sq");
      Tile inv = rsqrt(meanSq + eps).as("inv_rms");
      Tile wt = load(w, {0}, {{"c", cols}}).as("w_t");
      store((t * inv * wt).as("y_t"), y, {r0, 0}, rc);
    });
    return kb.finish();
  }
  const std::vector<Access> rc = {{"r", block_rows}, {"c", chunk}};
  const int64_t nChunks = (cols + chunk - 1) / chunk;
  kb.parallel({domain}, [&](Idx p) {
    Idx r0 = (p * block_rows).as("r0");
    auto [ss] = kb.serial("cc", 0, nChunks, {Carry{"ss", kb.zeros({{"r", block_rows}})}}, [&](Idx cc, Tile ss) {
      Tile t = load(x, {r0, cc * chunk}, rc).as("x_t");  // columns past the end read 0
      return (ss + reduceSum(t * t, {"c"}, 0.0, order)).as("ss_next");
    });
    Tile inv = rsqrt(ss / static_cast<double>(cols) + eps).as("inv_rms");
    kb.serial("cc", 0, nChunks, [&](Idx cc) {
      Tile t = load(x, {r0, cc * chunk}, rc).as("x_t");
      Tile wt = load(w, {cc * chunk}, {{"c", chunk}}).as("w_t");
      store((t * inv * wt).as("y_t"), y, {r0, cc * chunk}, rc);
    });
  });
  return kb.finish();
}

}  // namespace kiln::kernels

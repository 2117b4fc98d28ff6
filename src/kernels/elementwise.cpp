// GELU in the DSL; see elementwise.h.
#include "kernels/elementwise.h"

namespace kiln::kernels {

using namespace kiln::dsl;

BuildResult gelu(int64_t n, int64_t block) {
  KernelBuilder kb("gelu");
  if (n < 1 || block < 1) {
    kb.error("bad-shape", "gelu needs n >= 1 and block >= 1");
    return kb.finish();
  }
  View x = kb.view("x", {n});
  View y = kb.view("y", {n});
  kb.parallel({{"p", (n + block - 1) / block}}, [&](Idx p) {
    Idx o = (p * block).as("o");
    Tile t = load(x, {o}, {{"e", block}}).as("x_t");
    Tile inner = ((t + t * t * t * 0.044715) * 0.7978845608028654).as("inner");  // sqrt(2/pi)
    store((t * 0.5 * (tanh(inner) + 1.0)).as("y_t"), y, {o}, {{"e", block}});
  });
  return kb.finish();
}

}  // namespace kiln::kernels

// GELU and SwiGLU in the DSL; see elementwise.h.
#include "kernels/elementwise.h"

#include <algorithm>

namespace kiln::kernels {

using namespace kiln::dsl;

BuildResult gelu(int64_t n, int64_t block, GeluForm form, FloatElem io) {
  KernelBuilder kb("gelu");
  if (n < 1 || block < 1) {
    kb.error("bad-shape", "gelu needs n >= 1 and block >= 1");
    return kb.finish();
  }
  View x = kb.view("x", {n}, io);
  View y = kb.view("y", {n}, io);
  kb.parallel({{"p", (n + block - 1) / block}}, [&](Idx p) {
    Idx o = (p * block).as("o");
    Tile t = load(x, {o}, {{"e", block}}).as("x_t");
    if (form == GeluForm::Erf) {
      store((t * 0.5 * (erf(t * 0.7071067811865476) + 1.0)).as("y_t"), y, {o}, {{"e", block}});  // 1/sqrt(2)
      return;
    }
    Tile inner = ((t + t * t * t * 0.044715) * 0.7978845608028654).as("inner");  // sqrt(2/pi)
    store((t * 0.5 * (tanh(inner) + 1.0)).as("y_t"), y, {o}, {{"e", block}});
  });
  return kb.finish();
}

BuildResult swiglu(int64_t rows, int64_t cols, int64_t block, bool runtime_rows, FloatElem io,
                   std::optional<FloatElem> out) {
  KernelBuilder kb("swiglu");
  if (rows < 1 || cols < 1 || block < 1) {
    kb.error("bad-shape", "swiglu needs rows, cols and block >= 1");
    return kb.finish();
  }
  const int64_t C = std::min(cols, block);
  View gate = kb.view("gate", {rows, cols}, io);
  View up = kb.view("up", {rows, cols}, io);
  View y = kb.view("y", {rows, cols}, out.value_or(io));
  const std::vector<Access> row = {_, {"c", C}};
  const Dim rowDim = runtime_rows ? kb.runtimeAxis("r", kb.scalarI64("rows", Range{0, rows})) : Dim{"r", rows};
  kb.parallel({rowDim, {"cb", (cols + C - 1) / C}}, [&](Idx r, Idx cb) {
    Idx c0 = (cb * C).as("c0");
    Tile g = load(gate, {r, c0}, row).as("g");
    Tile silu = (g / (exp(-g) + 1.0)).as("silu");
    store((silu * load(up, {r, c0}, row)).as("y_t"), y, {r, c0}, row);
  });
  return kb.finish();
}

}  // namespace kiln::kernels

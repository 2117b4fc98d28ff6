// The hand-written attention for AVX2 + FMA: 8 f32 lanes, 16 vector registers (native_v256.h
// sizes the tiles so that accumulators, operands and a broadcast fit). Compiled with -mavx2
// -mfma -mf16c (CMakeLists.txt); called only after native.cpp checked the CPU (F16C too, for
// f16 K/V).
#include "peers/native.h"
#include "peers/native_kernel.h"
#include "peers/native_v256.h"

namespace kiln::peers::native_detail {

const IsaKernels* avx2Table() {
  static constexpr IsaKernels table = Kernels<V256, V256>::table("avx2");
  return &table;
}

}  // namespace kiln::peers::native_detail

// The interpreter's executor: runs compiled Steps over an environment of tile buffers.
// F is the representation of f32 values: float (strict-FP32) or double (FP64).
// Expects: Steps compiled from a verified kernel; one view buffer per view parameter with the
// view's element count. Guarantees: programs run one after another in row-major order of the
// root domain; every op follows docs/ir.md exactly in the arithmetic of F.
#pragma once

#include <cstdint>
#include <vector>

#include "host/data.h"
#include "interp/interp.h"
#include "interp/steps.h"

namespace kiln::interp::detail {

template <class F>
class Machine {
 public:
  // `views[i]` is the buffer of parameter i (null for scalars and integer views), then of
  // workspace j at params + j; `ints[i]` the elements of integer view i (else null); scalars
  // come from `params`. run() runs one root domain (a phase).
  Machine(const ir::Kernel& kernel, const std::vector<host::ParamData>& params, std::vector<std::vector<F>*> views,
          std::vector<std::vector<int64_t>*> ints, int default_partitions);
  void run(const Step& root);

 private:
  struct Buf {
    std::vector<F> f;        // f32 elements
    std::vector<int64_t> i;  // i64 and i1 (0/1) elements
  };

  void runRegion(const std::vector<Step>& steps);
  void exec(const Step& s);
  void execLoop(const Step& s);
  void execLoad(const Step& s);
  void execStore(const Step& s);
  void execConst(const Step& s);
  void execUnary(const Step& s);
  void execBinary(const Step& s);
  void execCmp(const Step& s);
  void execSelect(const Step& s);
  void execCast(const Step& s);
  void execReduce(const Step& s);
  void execMma(const Step& s);
  void execExtract(const Step& s);

  Buf& slot(const ir::Value* v) { return env_[v->id]; }
  int64_t index(const ir::Index& ix) { return ix.isConstant() ? ix.constant : env_[ix.value->id].i[0]; }

  std::vector<Buf> env_;
  size_t bufferOf(const AccessPlan& p) const { return p.workspace ? num_params_ + p.param : p.param; }

  std::vector<std::vector<F>*> views_;
  std::vector<std::vector<int64_t>*> ints_;
  size_t num_params_;
  int default_partitions_;
};

extern template class Machine<float>;
extern template class Machine<double>;

}  // namespace kiln::interp::detail

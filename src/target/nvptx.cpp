// An NVIDIA GPU (sm_90a): PTX text through LLVM's NVPTX backend (docs/gpu.md). A thread holds one
// lane of each vector (or, with gpu_lanes=registers, scalars), so W-lane accesses are never split
// into register-wide pieces; scattered accesses are per-thread stores.
#include "jit/compile.h"
#include "llvm/IR/Module.h"
#include "target/targets.h"

namespace kiln::target {

int64_t NvptxTarget::registerLanes(const std::string& isa, int64_t w) const {
  (void)isa;
  return w;
}

int64_t NvptxTarget::accumulators(int64_t w) const {
  return w == 16 ? 20 : 12;
}

bool NvptxTarget::hasScatter(const std::string& isa) const {
  (void)isa;
  return true;
}

llvm::Expected<jit::CompiledObject> NvptxTarget::emit(std::unique_ptr<llvm::Module> module,
                                                      const jit::JitOptions& options) const {
  return jit::compileToPtx(std::move(module), options);
}

nlohmann::json NvptxTarget::reportFacts(const std::string& isa, const jit::CompiledObject& object) const {
  (void)isa;
  return {{"name", name()},
          {"triple", jit::kPtxTriple},
          {"arch", jit::kPtxArch},
          {"ptx_version", jit::ptxVersion(object.object_bytes)},
          {"llvm_version", jit::hostTarget().llvm_version}};
}

}  // namespace kiln::target

// The host CPU (x86-64): an ELF object through the JIT's O2 pipeline; the `isa` knob picks the
// instruction set (jit::targetCpu).
#include "target/targets.h"

#include "host/isa.h"
#include "jit/compile.h"
#include "llvm/IR/Module.h"

namespace kiln::target {

int64_t CpuTarget::registerLanes(const std::string& isa, int64_t w) const {
  (void)w;
  if (isa == "avx2") return 8;
  if (isa == "avx512") return 16;
  return host::cpuHasAvx512() ? 16 : 8;  // native: this CPU
}

int64_t CpuTarget::accumulators(int64_t w) const {
  return w == 16 ? 20 : 12;
}

bool CpuTarget::hasScatter(const std::string& isa) const {
  return isa == "avx512" || (isa == "native" && host::cpuHasAvx512());
}

llvm::Expected<jit::CompiledObject> CpuTarget::emit(std::unique_ptr<llvm::Module> module,
                                                    const jit::JitOptions& options) const {
  return jit::compileToObject(std::move(module), options);
}

nlohmann::json CpuTarget::reportFacts(const std::string& isa, const jit::CompiledObject& object) const {
  (void)object;
  const jit::HostTarget& host = jit::hostTarget();
  return {{"name", name()},
          {"triple", host.triple},
          {"cpu", jit::targetCpu(isa).cpu},
          {"isa", isa},
          {"llvm_version", host.llvm_version}};
}

}  // namespace kiln::target

// The host CPU (x86-64): an ELF object through the JIT's O2 pipeline; the `isa` knob picks the
// instruction set (jit::targetCpu).
#include "target/targets.h"

#include <fstream>
#include <string>

#include "host/isa.h"
#include "jit/compile.h"
#include "llvm/IR/Module.h"

namespace kiln::target {

namespace {

// The size of this CPU's level-`level` data (or unified) cache in bytes, from sysfs; 0 when the
// OS does not say.
int64_t cacheBytes(int level) {
  for (int i = 0; i < 8; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    std::ifstream lv(dir + "level"), ty(dir + "type"), sz(dir + "size");
    int l = 0;
    std::string type, size;
    if (!(lv >> l) || !(ty >> type) || !(sz >> size)) break;
    if (l != level || type == "Instruction") continue;
    int64_t n = 0;
    size_t used = 0;
    try {
      n = std::stoll(size, &used);
    } catch (...) {
      return 0;
    }
    const char unit = used < size.size() ? size[used] : ' ';
    return unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : n;
  }
  return 0;
}

// x86-64 with AVX2 + FMA: 16 ymm registers of 8 lanes. A register tile of 12 accumulators
// (6 rows x 2 vectors, BLIS's and oneDNN brgemm's AVX2 shape) leaves its row's 2 vectors of
// the lane operand and one broadcast: 15 of 16. The 8 x 8 transpose fits beside 4 rows.
Model avx2Model() {
  Model m;
  m.name = "x86-64 AVX2 (16 ymm)";
  m.isa = "avx2";
  m.register_lanes = 8;
  m.vector_registers = 16;
  m.packet_width = 8;
  m.accumulator_registers = 12;
  m.max_tile_chunk_registers = 2;
  m.transpose_lanes = 8;
  m.scatter = false;
  m.prefetch = true;
  m.unaligned_vector_loads = true;
  m.fma_ports = 2;
  m.l1d_bytes = cacheBytes(1);
  m.l2_bytes = cacheBytes(2);
  return m;
}

// x86-64-v4 AVX-512: 32 zmm registers of 16 lanes; 20 accumulators (e.g. 5 rows x 4 vectors)
// leave 12 for operands; the 16 x 16 transpose fits beside 8 rows; scatter instructions.
Model avx512Model() {
  Model m;
  m.name = "x86-64 AVX-512 (32 zmm)";
  m.isa = "avx512";
  m.register_lanes = 16;
  m.vector_registers = 32;
  m.packet_width = 16;
  m.accumulator_registers = 20;
  m.max_tile_chunk_registers = 4;
  m.transpose_lanes = 16;
  m.scatter = true;
  m.scatter_min_bytes = 4;  // vpscatter/vpgather: 32- and 64-bit elements, none of 16 bits
  m.prefetch = true;
  m.unaligned_vector_loads = true;
  m.fma_ports = 2;
  m.l1d_bytes = cacheBytes(1);
  m.l2_bytes = cacheBytes(2);
  return m;
}

}  // namespace

const Model& CpuTarget::model(const std::string& isa) const {
  static const Model avx2 = avx2Model(), avx512 = avx512Model();
  if (isa == "avx2") return avx2;
  if (isa == "avx512") return avx512;
  return host::cpuHasAvx512() ? avx512 : avx2;  // native: this CPU
}

llvm::Expected<jit::CompiledObject> CpuTarget::emit(std::unique_ptr<llvm::Module> module,
                                                    const jit::JitOptions& options) const {
  return jit::compileToObject(std::move(module), options);
}

nlohmann::json CpuTarget::reportFacts(const std::string& isa, const jit::CompiledObject& object) const {
  const jit::HostTarget& host = jit::hostTarget();
  return {{"name", name()},
          {"triple", host.triple},
          {"cpu", jit::targetCpu(isa).cpu},
          {"tune_cpu", object.tune_cpu},
          {"isa", isa},
          {"model", model(isa).toJson()},
          {"llvm_version", host.llvm_version}};
}

}  // namespace kiln::target

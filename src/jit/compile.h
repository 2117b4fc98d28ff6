// Compile: one LLVM module → one ELF relocatable object for the host CPU, through the O2
// pipeline. Expects a module implementing the runtime ABI (src/runtime/abi.h); guarantees
// that the bytes returned are exactly what Session::load runs (nothing is recompiled).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "llvm/Support/Error.h"

namespace llvm {
class Module;
}

namespace kiln::jit {

struct JitOptions {
  // false (precise): no FP contraction (AllowFPOpFusion Strict), IEEE semantics kept.
  // true: contraction into FMA anywhere (AllowFPOpFusion Fast). Infinities and NaNs keep
  // their meaning (kernels mask with -inf); reassociation comes from instruction flags.
  bool fast_math = false;
  // Also print the optimised module as assembly (CompiledObject::assembly), from a copy
  // codegen'd the same way as the object; for `kiln compile --emit=asm`.
  bool emit_assembly = false;
  // Instruction set: "native" (the host's CPU name and features), "avx2" (x86-64-v3) or
  // "avx512" (x86-64-v4). Any of them compiles on any host; running needs the CPU to have it
  // (cannotRunHere, checked by Session::load).
  std::string isa = "native";
  // The CPU model LLVM schedules and tunes for ("tune-cpu" on every function): "generic", the
  // level of the code's instruction set (tuneCpu), or "host", this CPU's own. The instructions
  // the code may use are the isa's either way.
  std::string tune_cpu = "generic";
};

// The machine code is generated for: the host's triple, CPU name and features (e.g.
// "+avx512f,..."), detected once per process.
struct HostTarget {
  std::string triple;
  std::string cpu;
  std::string features;      // sorted, comma-separated "+name" / "-name"
  std::string llvm_version;  // LLVM_VERSION_STRING
};
const HostTarget& hostTarget();

// The CPU an `isa` compiles for: "native" → the host's CPU name and features; "avx2" →
// x86-64-v3 and "avx512" → x86-64-v4 (features empty: the level's own). Other names: cpu "".
struct TargetCpu {
  std::string cpu;
  std::string features;
};
TargetCpu targetCpu(const std::string& isa);

// The CPU model code for `isa` is tuned for under tune_cpu "generic" (the level of its
// instructions: x86-64-v4 for AVX-512 code, x86-64-v3 for AVX2 code; native: this CPU's level,
// KILN_HOST_WITHOUT_AVX512 respected) or "host" (this CPU's model, e.g. znver5). Other: "".
std::string tuneCpu(const std::string& isa, const std::string& tune_cpu);

// Why code compiled for `isa` cannot run in this process (its CPU lacks the ISA, or
// KILN_HOST_WITHOUT_AVX512 says so: host/isa.h), naming the ISA and the CPU; nullopt when it can.
std::optional<std::string> cannotRunHere(const std::string& isa);

// Registers the native target, its asm printer and parser; thread-safe, idempotent.
void initializeNativeTarget();

struct CompiledObject {
  std::string object_bytes;      // ELF relocatable object
  std::string object_sha256;     // lowercase hex of object_bytes
  int instructions_pre_opt = 0;  // as handed in (after verification)
  int instructions_post_opt = 0;
  int basic_blocks_post_opt = 0;
  double compile_ms = 0.0;  // verify + O2 + codegen
  // "O2", or the reduced pipeline a very large function gets instead, and why (compile.cpp).
  std::string pipeline = "O2";
  std::string tune_cpu;  // the CPU model LLVM scheduled and tuned for (tuneCpu)
  std::string assembly;  // AT&T text, only with JitOptions::emit_assembly
};

// Sets the module's triple and data layout for the host, verifies it, runs
// buildPerModuleDefaultPipeline(O2) (loop and SLP vectorisation on, as clang -O2), counts
// instructions (before and after O2) and basic blocks (after) of the defined functions, and emits the object (PIC,
// small code model). An invalid module or a codegen failure is an error, not an abort.
llvm::Expected<CompiledObject> compileToObject(std::unique_ptr<llvm::Module> module, const JitOptions& options);

// Target nvptx (docs/gpu.md): the module → PTX text for NVIDIA sm_90a (triple
// nvptx64-nvidia-cuda) through LLVM's NVPTX backend, after the same O2 pipeline and under the
// same floating-point options (precise: no contraction, so PTX arithmetic carries `.rn` and
// ptxas fuses nothing). object_bytes holds the PTX, and so does assembly with emit_assembly;
// object_sha256 is the PTX's. `isa` is not read.
llvm::Expected<CompiledObject> compileToPtx(std::unique_ptr<llvm::Module> module, const JitOptions& options);

// What a PTX text declares per function (an `.entry` kernel or a `.func` it calls): virtual
// registers by PTX type (".f32" -> 41 for `.reg .f32 %f<41>;`), the per-thread local memory of
// its stack (`__local_depot` bytes) and its `.shared` bytes. Virtual registers are an upper
// bound of what ptxas allocates; the device's own figures come from the driver (kiln-replay).
struct PtxFunction {
  std::string name;
  bool entry = false;
  std::vector<std::pair<std::string, int64_t>> registers;  // in order of declaration
  int64_t local_bytes = 0;
  int64_t shared_bytes = 0;
};
std::vector<PtxFunction> ptxFunctions(const std::string& ptx);
// The `.version` of a PTX text ("8.0"), or "" when it has none.
std::string ptxVersion(const std::string& ptx);

// The GPU the PTX is generated for.
inline constexpr const char* kPtxTriple = "nvptx64-nvidia-cuda";
inline constexpr const char* kPtxArch = "sm_90a";

// How many times compileToObject ran in this process (replay tests check it stays 0).
int64_t compilationsInThisProcess();

}  // namespace kiln::jit

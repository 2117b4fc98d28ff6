// Lowering: LLVM IR from (TileIR, Plan). It consumes the plan and never re-decides.
// Expects: a verified kernel and the Plan built for it.
// Guarantees: a module exporting the runtime ABI (src/runtime/abi.h): kiln_blocks,
// kiln_launch, kiln_num_blocks, kiln_num_phases, kiln_phase_ends, kiln_abi_version; precise math unless the plan's
// knobs say fast_math; and the realized facts (instruction counts, allocas, loops, clone decision).
#pragma once

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"
#include "plan/plan.h"

namespace kiln::codegen {

// What the lowering realized for one root domain (phase), for checking the plan and reporting.
struct LoweredPhase {
  int64_t body_instructions = 0;  // the masked packet body (or the lane program), before optimisation
  // Full-packet clone: not_requested | over_budget | no_full_packet | selected | not_applicable
  std::string full_packet_decision;
  int64_t full_body_instructions = 0;  // the clone, when selected
  // What the emitted (pre-optimisation) body realizes, for checking the plan.
  int64_t realized_allocas = 0;
  int64_t realized_loops = 0;
  // The lane realization: what the emitted program's code holds (plan::LaneCode), counted in
  // the LLVM IR before optimisation.
  bool lanes = false;
  plan::LaneCode lane_code;
  // Target nvptx (docs/gpu.md): the phase's kernel entry (kGpuEntryPrefix + phase).
  struct GpuEntry {
    std::string name;
    int64_t threads_per_program = 1;  // W: the lanes spread over threads; 1: one thread runs a program
    std::string not_spread;           // why the lanes stay in one thread's registers ("" when spread)
    // Knob gpu_dependent_launch (phases after the first): launched with programmatic stream
    // serialization, the entry waits (griddepcontrol.wait) until the phase before has finished.
    bool waits_for_previous = false;
    // ... (phases before the last): the entry lets the next phase's launch begin
    // (griddepcontrol.launch_dependents) as soon as every block of this one has started.
    bool triggers_next = false;
  };
  std::optional<GpuEntry> gpu_entry;
};

struct Lowered {
  std::unique_ptr<llvm::Module> module;
  int64_t instructions_pre_opt = 0;  // whole module
  int64_t basic_blocks_pre_opt = 0;
  std::vector<LoweredPhase> phases;  // one per root domain, in launch order
};

// One root domain of a kernel and its plan: the kernel itself when it is not phased, else
// ir::phaseKernel(kernel, i).
struct Phase {
  const ir::Kernel* kernel = nullptr;
  const plan::Plan* plan = nullptr;
};

// The PTX entry of phase i of a kernel compiled for target nvptx: "kiln_phase" + i.
inline constexpr const char* kGpuEntryPrefix = "kiln_phase";

// What a lane program's emitted code holds (plan::LaneCode), for W-lane vectors.
plan::LaneCode realizedLaneCode(const llvm::Function& program, int64_t w);

// The one lowering entry: `kernel` as written and its N >= 1 phases with their plans. A kernel
// that is not phased (ir::Kernel::phased) becomes the module of its one domain, whose
// kiln_blocks is that domain's block loop; a phased kernel's kiln_blocks dispatches the
// concatenated block ranges (phase i's blocks follow phase i-1's), each phase's functions
// prefixed "kiln_phaseI_". On a target with GPU entries (target=nvptx), each phase becomes a
// PTX kernel entry (void kiln_phaseI(ptr params), params as in runtime/abi.h) whose GPU thread
// g runs the program body on programs [g·P, g·P + P) (plan::gpuLaunch), instead of the CPU's
// block loop and entry points.
std::optional<std::string> lower(const ir::Kernel& kernel, const std::vector<Phase>& phases, llvm::LLVMContext& ctx,
                                 Lowered& out);

// Name of the block that heads every loop the lowering emits (counted by tests and reports).
inline constexpr const char* kLoopHeaderName = "kiln.loop";

}  // namespace kiln::codegen

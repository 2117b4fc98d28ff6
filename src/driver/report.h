// The realization report (docs/backend.md, "The realization report"): one shape for every
// kernel. Kernel-wide: knobs, kernel, domain (phases, blocks), workspaces,
// snapshot_bytes_per_worker (the largest phase's), llvm, compile_ms, object, target, precision,
// gpu (target nvptx), cache. `phases[]`, one per root domain (N >= 1): its plan (domain, mma,
// reductions, realization, lanes, representations, resources, work) and what the lowering
// realized for it (resources.realized_*, full_packet, lanes.code_per_program.realized).
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "codegen/lower.h"
#include "ir/ir.h"
#include "jit/compile.h"
#include "plan/knobs.h"

namespace kiln::driver {

// Every knob by name, numbers as numbers.
nlohmann::json knobsJson(const plan::Knobs& k);

// The report up to planning (also `--emit plan`): the kernel-wide facts and each phase's plan.
nlohmann::json planReport(const ir::Kernel& kernel, const std::vector<codegen::Phase>& phases);

// Adds what the lowering and the object realized to a planReport: per phase, the realized
// loops and private arrays, the full-packet decision and the lane code; the module's
// instruction counts, the compile time `ms`, the object's digest, the target's facts.
void addRealized(const std::vector<codegen::Phase>& phases, const codegen::Lowered& lowered,
                 const jit::CompiledObject& obj, double ms, nlohmann::json& report);

// Where a full compilation's report says the plan predicted other code than the lowering
// emitted: loops and private arrays (every realization), and the lane realization's
// code counts (vector loads, gathers, FMAs, shuffles, ...), per phase. nullopt: they agree (or
// the report holds no realized facts: a stage before lowering). Used by tests and the
// differential fuzzer.
std::optional<std::string> planDisagreesWithCode(const nlohmann::json& report);

}  // namespace kiln::driver

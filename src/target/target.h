// The target seam: what Kiln compiles for, behind one interface chosen once from the `target`
// knob (target::of). The planner reads a target's facts from its model (target/model.h), the lowering asks whether
// programs become GPU entries, and the driver has it emit the module (an ELF object or PTX) and describe itself in the
// report. No other file compares the target's name; a new target is a new class in this folder.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "llvm/Support/Error.h"
#include "target/kind.h"
#include "target/model.h"

namespace llvm {
class Module;
}

namespace kiln::jit {
struct CompiledObject;
struct JitOptions;
}  // namespace kiln::jit

namespace kiln::plan {
struct Knobs;
}

namespace kiln::target {

class Target {
 public:
  virtual ~Target() = default;
  virtual Kind kind() const = 0;
  // The knob value that names it ("cpu", "nvptx").
  virtual const char* name() const = 0;

  // ---- facts the planner reads
  // The target model for the `isa` knob (native: this host's): register lanes and count, the
  // register tile's budget, cheap transposes, scatter, FMA ports, caches (target/model.h).
  virtual const Model& model(const std::string& isa) const = 0;

  // ---- lowering and emission
  // Root domains become GPU kernel entries (one thread per packet or per program lane), not the
  // CPU ABI's block functions.
  virtual bool gpuEntries() const = 0;
  // The optimised module as this target's code (ELF object or PTX text).
  virtual llvm::Expected<jit::CompiledObject> emit(std::unique_ptr<llvm::Module> module,
                                                   const jit::JitOptions& options) const = 0;
  // Why the emitted code is refused under `knobs` (e.g. larger than the target's driver takes in
  // reasonable time), as a message naming the knobs; nothing when it is accepted.
  virtual std::optional<std::string> refuse(const jit::CompiledObject& object, const plan::Knobs& knobs) const {
    (void)object;
    (void)knobs;
    return std::nullopt;
  }
  // The report's "target" object.
  virtual nlohmann::json reportFacts(const std::string& isa, const jit::CompiledObject& object) const = 0;
};

// The target a knob value names, chosen once; nullptr for a name no target has.
const Target* byName(const std::string& name);
const Target& of(Kind kind);
// "cpu|nvptx": the legal knob values, for the knob table.
const char* names();

}  // namespace kiln::target

// compile(): the pipeline, top to bottom — verify → plan → lower → optimise → emit — and the
// realization report of what it did. load(): a captured object into a runnable kernel.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "driver/report.h"
#include "host/data.h"
#include "ir/ir.h"
#include "jit/object_file.h"
#include "plan/knobs.h"
#include "plan/plan.h"
#include "runtime/runtime.h"

namespace kiln::driver {

enum class Stage { Ir, Plan, Llvm, Asm, Obj, Report };

struct Compilation {
  std::vector<plan::Plan> plans;  // one per phase; empty when the object came from the cache (from_cache)
  bool from_cache = false;
  std::string llvm_text;  // the lowered module before optimisation (Stage::Llvm)
  std::string assembly;   // Stage::Asm
  std::string object;     // the ELF object (what runs)
  nlohmann::json report;  // the realization report (driver/report.h)
};

// The object cache compile() consults for full compilations (Stage::Obj and Stage::Report):
// keyed by the kernel's TileIR text, the requested knobs (threads aside: it does not change the
// object), the target CPU and features, LLVM's version and this build of Kiln
// (docs/cache.md). Null (the default): no cache. The report says `cache: hit|miss|off`.
// Process-wide; set it before compiling from several threads.
void setObjectCache(std::shared_ptr<jit::ObjectCache> cache);

// How the object names what it exports. The default ("kiln_") is what the JIT loads; an object
// for linking into a program of one's own (`kiln compile --emit obj --header`, docs/api.md)
// takes a prefix of its own so several kernels link into one program: PREFIX + "blocks",
// "launch", "num_blocks", "num_phases", "phase_ends", "abi_version".
struct ExportOptions {
  std::string symbol_prefix = "kiln_";
};

// nullopt when `prefix` is a legal symbol prefix (a C identifier); else a sentence saying why not.
std::optional<std::string> checkSymbolPrefix(const std::string& prefix);

// Runs the pipeline up to `until` (Stage::Plan stops after planning, Stage::Llvm after
// lowering; Obj/Asm/Report run everything). Error: one message naming what failed.
std::optional<std::string> compile(const ir::Kernel& kernel, const plan::Knobs& knobs, Compilation& out,
                                   Stage until = Stage::Report, const ExportOptions& exports = {});

// The parameter signature the runtime checks launches against.
std::vector<runtime::ParamSpec> signature(const ir::Kernel& kernel);
// The runtime's element type of a view of element type `e` (f32 for anything not stored otherwise).
runtime::ViewElem runtimeElem(ir::Elem e);

// Links an object (fresh or captured) and wraps it for launching with `threads` workers;
// compiles nothing. `isa` is the knob the object was compiled with: an object this host's CPU
// cannot run is refused here, naming the ISA and the CPU (jit::cannotRunHere).
std::optional<std::string> load(const std::string& object, const ir::Kernel& kernel, const std::string& isa,
                                int threads, std::unique_ptr<runtime::LoadedKernel>& out);

// Launches on host data. With `guarded`, every view is copied into a buffer with canary zones
// that are checked after the launch (a corrupted guard is an error naming the parameter).
// Views that alias (the same ParamData index listed twice) are not supported here; the
// runtime API supports aliasing directly.
std::optional<std::string> run(const runtime::LoadedKernel& kernel, std::vector<host::ParamData>& params, bool guarded,
                               runtime::KilnLaunchRecord* record = nullptr);

// The arguments of a launch on host data, for launching many times (kiln tune): views whose
// memory is not f32 (16-bit floats, integers) packed into bytes held here, f32 views pointing
// at the ParamData's elements. `unpack` copies the packed views back into the ParamData.
class LaunchArgs {
 public:
  std::optional<std::string> pack(const runtime::LoadedKernel& kernel, std::vector<host::ParamData>& params);
  const std::vector<runtime::Arg>& args() const { return args_; }
  void unpack(std::vector<host::ParamData>& params) const;

 private:
  std::vector<runtime::ParamSpec> sig_;
  std::vector<std::string> packed_;  // by parameter: its bytes, or empty (not packed)
  std::vector<runtime::Arg> args_;
};

}  // namespace kiln::driver

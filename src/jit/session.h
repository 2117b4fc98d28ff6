// Session: a captured object loaded into an ORC LLJIT, ready to run. Expects ELF bytes (from
// compileToObject, or read back from a .o in a fresh process); compiles nothing, so the code
// that runs is exactly the object captured. The session keeps the code mapped.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "llvm/Support/Error.h"
#include "runtime/abi.h"
#include "runtime/runtime.h"

namespace llvm::orc {
class LLJIT;
}

namespace kiln::jit {

class Session {
 public:
  // Links `object_bytes` (copied) into a fresh LLJIT for the host and resolves the ABI
  // symbols (kiln_blocks, kiln_launch, kiln_num_blocks, kiln_phase_blocks, kiln_abi_version;
  // kiln_num_phases and
  // kiln_phase_ends when present). A malformed
  // object, a missing or unresolvable symbol, or another ABI version is an error; so is an
  // object compiled for an `isa` this host cannot run (cannotRunHere), before anything links.
  static llvm::Expected<std::unique_ptr<Session>> load(std::string object_bytes, const std::string& isa);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // The address of a symbol the object defines (or the process exports); null when absent.
  void* lookup(const char* name);

  runtime::BlocksFn blocks() const { return blocks_; }
  runtime::LaunchFn launch() const { return launch_; }
  int64_t numBlocks() const { return num_blocks_; }
  // End block of each phase (kiln_phase_ends; {numBlocks()} for a one-phase object).
  const std::vector<int64_t>& phaseEnds() const { return phase_ends_; }
  runtime::PhaseBlocksFn phaseBlocks() const { return phase_blocks_; }
  const std::string& objectSha256() const { return object_sha256_; }

 private:
  Session();
  std::unique_ptr<llvm::orc::LLJIT> jit_;
  runtime::BlocksFn blocks_ = nullptr;
  runtime::LaunchFn launch_ = nullptr;
  int64_t num_blocks_ = 0;
  std::vector<int64_t> phase_ends_;
  runtime::PhaseBlocksFn phase_blocks_ = nullptr;
  std::string object_sha256_;
};

// The runtime's handle on a session's code: its entry points, with the session as owner.
runtime::KernelEntry kernelEntry(std::shared_ptr<Session> session);

}  // namespace kiln::jit

// A captured object loaded for native launches on the calling thread: its kiln_launch entry,
// guarded buffers holding the parameters, and the params array that points into them (built
// once, before any timing). Shared by capture (one launch) and replay (timed batches).
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/capture.h"
#include "jit/session.h"
#include "runtime/abi.h"
#include "runtime/guard.h"

namespace kiln::bench {

struct NativeKernel {
  std::shared_ptr<jit::Session> session;  // keeps the code mapped
  runtime::LaunchFn launch = nullptr;
  std::vector<ParamInfo> params;
  std::unique_ptr<runtime::GuardedArgs> buffers;
  std::vector<int64_t> i64s;  // scalar values the params array points at (stable addresses)
  std::vector<float> f32s;
  std::vector<void*> pointers;                 // the params array handed to kiln_launch
  std::vector<std::vector<float>> workspaces;  // after the parameters in `pointers`
  std::vector<std::string> initial;            // per parameter: the view's bytes before a launch
  std::vector<std::string> expected;           // per parameter: the captured output's bytes (outputs only)
  runtime::KilnLaunchRecord record;

  // One launch through the native entry (resets the record, runs every block).
  void run() { launch(pointers.data(), &record); }
};

// Links `object` (compiles nothing) and prepares the buffers from `initial` (one entry per
// parameter: a view's bytes, as the archive holds them) and zero-filled workspaces of the given
// sizes.
std::optional<std::string> prepareNative(const std::string& object, const std::string& isa,
                                         const std::vector<ParamInfo>& params, std::vector<std::string> initial,
                                         NativeKernel& out, const std::vector<int64_t>& workspaces = {});

// Puts every view back to its initial value (outputs included).
void resetViews(NativeKernel& k);

// The validation of the protocol: every output bit-equal to `expected`, every other view
// bit-equal to its initial value, every scalar unchanged, every guard byte intact. nullopt when
// all hold; otherwise one sentence naming the first problem of each kind.
std::optional<std::string> checkState(const NativeKernel& k);

}  // namespace kiln::bench

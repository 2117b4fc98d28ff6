// Phase 2, replay: load each captured object from the archive (no compiler involved) and time
// its native entry (kiln_launch: launch-record reset and every block) on the calling thread,
// pinned to one CPU. Buffers, the params array and the expected outputs are prepared before
// any timing; the runtime, the JIT, the thread pool, allocation and checking are outside the
// timed batches.
// Per case: cycles of A,B,B,A; per visit a warmup, a calibrated repetition count, then the
// samples. Validation (checkState) after the warmup, after calibration and after every sample
// batch; the first failure ends the case, which is recorded as failed with the reason.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/archive.h"
#include "bench/capture.h"
#include "bench/experiment.h"
#include "bench/samples.h"

namespace kiln::bench {

struct NativeKernel;

// Where a validation happens, for progress and test hooks.
struct VisitPoint {
  std::string case_id;
  int visit = 0;  // 0-based index within the case
  int arm = 0;
  std::string after;  // "warmup", "calibration", "sample N"
};

struct ReplayOptions {
  int cpu = -1;  // -1: the last CPU this thread may run on
  // Called after each visit (visits done, visits planned, seconds since the replay began).
  std::function<void(int64_t, int64_t, double)> progress;
  // Test hook: called right before each validation, with the kernel's live buffers (a test
  // corrupts them to check that failures are recorded).
  std::function<void(const VisitPoint&, NativeKernel&)> before_validation;
};

// nullopt when the replay thread can be pinned to `cpu` (-1: the default choice).
std::optional<std::string> checkCpu(int cpu);

// Runs phase 2 over every case whose captures both succeeded (`captures[case][arm]`).
std::optional<std::string> replay(const Experiment& e, const Archive& archive,
                                  const std::vector<std::array<CaptureRecord, 2>>& captures,
                                  const ReplayOptions& options, Replay& out);

}  // namespace kiln::bench

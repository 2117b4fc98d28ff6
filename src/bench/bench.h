// runBench(): the whole protocol into a new archive folder, in this order —
//   plan.json (before the first capture) → phase 1, capture (every case × arm) →
//   phase 2, replay (from the archived objects) → samples.json, results.json, table.md,
//   chart.svg, environment.json → SHA256SUMS over every file.
// docs/bench.md describes the protocol, the archive and what the audit re-checks.
#pragma once

#include <optional>
#include <string>

#include "bench/experiment.h"
#include "bench/replay.h"
#include "bench/results.h"

namespace kiln::bench {

struct BenchOptions {
  ReplayOptions replay;
  // Called after each capture (captures done, captures planned).
  std::function<void(int64_t, int64_t)> capture_progress;
};

struct BenchOutcome {
  Results results;
  std::string table;  // table.md
};

// An error only when nothing trustworthy can be written: an invalid experiment, an existing
// `out_dir`, an I/O failure, a CPU that cannot be pinned. Failing cases are results.
std::optional<std::string> runBench(const Experiment& e, const std::string& out_dir, const BenchOptions& options,
                                    BenchOutcome& out);

}  // namespace kiln::bench

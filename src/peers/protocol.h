// The timing protocol of `kiln peers`, the same discipline as `kiln bench`:
// 1. calibration, per implementation: warmup calls for warmup_s, then the time of one call t
//    (best of up to three); repetitions per sample reps = max(1, round(target_s / t)).
// 2. budget: samples per visit start at `samples` and visits at `visits`; while the estimated
//    timing time of the shape exceeds budget_s, the implementation with the longest visit
//    loses a sample (down to min_samples), then every implementation loses a visit (down to
//    min_visits). Slow calls thus get 1 repetition per sample and fewer samples and visits.
// 3. visits: round v visits every implementation once, in the order rotated by v; each visit
//    waits gap_s, warms up for warmup_s (skipped when one call lasts more than 10 x warmup_s:
//    its own first microseconds warm the caches), then takes its samples.
// Cold caches (cold_caches, `kiln peers --caches cold`): every timed call, calibration's
// included, is preceded by evictCaches() (impl.h), untimed; a sample is then one call, visits
// have no warm-up, and the budget counts each eviction's time.
// 4. statistics: a visit's time is the median of its samples; the implementation's time is
//    the median of its visit medians; min/max are over all its samples; the ratio against
//    the baseline is the median of the per-round ratios of visit medians (paired, never a
//    division of two medians), with their min and max.
#pragma once

#include <cstddef>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "peers/impl.h"

namespace kiln::peers {

struct ProtocolOptions {
  double warmup_s = 0.030;
  double target_s = 0.015;
  int samples = 7;
  int visits = 6;
  int min_samples = 3;
  int min_visits = 3;
  double budget_s = 45.0;  // per shape, for the visits (calibration and checks come on top)
  // Idle time before each visit. Multi-threaded libraries leave workers spinning after a call
  // (OpenBLAS for about 2^28 cycles, OpenMP briefly); a gap lets them sleep before the next
  // implementation runs. runPeers sets 0.15 s when threads > 1.
  double gap_s = 0.0;
  bool cold_caches = false;  // empty the caches before every timed call (above)

  static ProtocolOptions quick();  // warmup 5 ms, target 2 ms, 3 samples, 3 visits, budget 5 s
};

struct Measured {
  bool timed = false;
  std::string error;    // why timing stopped, if it did
  double call_s = 0.0;  // calibration's time of one call
  int reps = 1;
  int samples = 0;
  std::vector<std::vector<double>> visits;  // seconds per call, per sample, per visit
  std::vector<double> visit_medians;
  double median_s = 0.0, min_s = 0.0, max_s = 0.0;
  std::vector<double> ratios;  // per round, visit median / baseline's visit median
  double ratio = 0.0, ratio_min = 0.0, ratio_max = 0.0;
  bool has_ratio = false;
};

struct ProtocolRun {
  int visits = 0;
  double evict_s = 0.0;         // cold caches: the time of one eviction (evictCaches), else 0
  std::size_t evict_bytes = 0;  // and the bytes it reads
  double estimated_s = 0.0;     // the budget estimate that chose samples and visits
  double elapsed_s = 0.0;
};

// Times `impls` (all prepared and checked); `baseline` indexes the one ratios are taken
// against, or -1. `progress` (optional) receives one short line per round.
ProtocolRun runProtocol(const std::vector<Impl*>& impls, int baseline, const ProtocolOptions& options,
                        std::vector<Measured>& out, const std::function<void(const std::string&)>& progress = {});

double median(std::vector<double> values);

}  // namespace kiln::peers

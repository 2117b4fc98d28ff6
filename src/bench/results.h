// results.json: per case the two arms (median µs, visit medians), the paired B/A ratios with
// median, min and max, and the validation record; totals. A pure function of the plan, the
// capture records and samples.json, so that the audit recomputes it byte for byte.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <optional>
#include <string>
#include <vector>

#include "bench/capture.h"
#include "bench/experiment.h"
#include "bench/samples.h"
#include "bench/statistics.h"

namespace kiln::bench {

struct ArmResult {
  std::string name;
  std::vector<double> visit_medians_us;  // complete visits, in the order they ran
  std::optional<double> median_us;       // median of visit medians; only for a validated case
};

struct CaseResult {
  std::string id;
  std::string label;
  bool ok = false;
  std::string reason;  // why the case failed
  std::array<ArmResult, 2> arms;
  std::vector<double> paired_ratios;  // B/A, two per complete cycle
  std::optional<Range> ratio;         // only for a validated case
  int64_t visits = 0;                 // visits run
  int64_t samples = 0;                // samples taken
  int64_t validations = 0;
  int64_t validations_failed = 0;
  std::array<bool, 2> oracle_pass = {false, false};
};

struct Results {
  std::string experiment;
  std::vector<CaseResult> cases;
  Totals planned;
  Totals done;  // captures that succeeded; visits and samples taken
  int64_t compilations_during_replay = 0;
  bool all_validated = false;
};

Results computeResults(const Experiment& e, const std::vector<std::array<CaptureRecord, 2>>& captures,
                       const Replay& replay);

nlohmann::ordered_json toJson(const Results& r);

}  // namespace kiln::bench

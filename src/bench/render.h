// The human-readable views of a result: table.md (the seed's table plus code-shape columns)
// and chart.svg (the paired ratio per case with its range, and a line at 1.0). Pure functions
// of the plan, the results and the realization reports, byte-deterministic, so that the audit
// re-renders them and compares bytes.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <string>
#include <vector>

#include "bench/experiment.h"
#include "bench/results.h"

namespace kiln::bench {

// What the table shows of one realization report.
struct CodeShape {
  bool known = false;             // false: no report (the capture failed before compiling)
  std::string full_packet;        // the decision, e.g. "selected", "over_budget"
  int64_t body_instructions = 0;  // pre-optimisation packet body
  int64_t basic_blocks = 0;       // after O2
  int64_t snapshot_bytes = 0;     // per worker
};
CodeShape codeShape(const nlohmann::json& report);

// The requested value of a knob in (case, arm), as the table prints it ("on", "4").
std::string knobText(const Case& c, const Arm& a, const std::string& knob);

// `shapes[case][arm]`.
std::string renderTable(const Experiment& e, const Results& r, const std::vector<std::array<CodeShape, 2>>& shapes);
std::string renderChart(const Experiment& e, const Results& r);

}  // namespace kiln::bench

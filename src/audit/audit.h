// The offline audit of a bench archive. It loads no native code and runs no compiler: it
// verifies SHA256SUMS; re-derives every capture's inputs from the seed and the FP64 reference
// from the archived inputs (kernels::libraryReference, plain C++) and re-checks every archived
// output against it; recomputes every statistic of results.json from samples.json (with the
// bench's statistics functions) and re-renders table.md and chart.svg, comparing bytes; and
// checks the counts against plan.json. It trusts no number it did not re-derive.
// Guarantees: the same report for the same archive on every run and machine (fixed order, no
// paths, no timestamps, no values that depend on the machine's libm).
#pragma once

#include <string>
#include <vector>

namespace kiln::audit {

struct Check {
  std::string name;
  bool pass = false;
  std::string detail;
};

struct Report {
  std::string experiment;  // empty when plan.json is unusable
  std::vector<Check> checks;
  bool pass() const;
};

Report auditArchive(const std::string& dir);

// The report as JSON text: fixed key order, 2-space indent, trailing newline.
std::string reportText(const Report& r);

}  // namespace kiln::audit

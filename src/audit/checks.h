// The audit's checks, grouped by what they read. Each appends its Check entries to the report
// in a fixed order (the report's bytes must not depend on anything but the archive).
#pragma once

#include <array>
#include <vector>

#include "audit/audit.h"
#include "bench/archive.h"
#include "bench/capture.h"
#include "bench/experiment.h"
#include "bench/render.h"
#include "bench/samples.h"

namespace kiln::audit {

struct Context {
  explicit Context(const std::string& dir) : archive(dir) {}
  bench::Archive archive;
  bool plan_ok = false;
  bench::Experiment experiment;
  bool captures_ok = false;  // every capture.json parsed
  std::vector<std::array<bench::CaptureRecord, 2>> captures;
  std::vector<std::array<bench::CodeShape, 2>> shapes;
  bool samples_ok = false;
  bench::Replay replay;
};

// A file read and parsed as JSON; false (with `why`) when unreadable or malformed.
bool readJson(const bench::Archive& a, const std::string& rel, nlohmann::json& out, std::string& why);

void checkManifest(Context& c, Report& r);
void checkPlan(Context& c, Report& r);
void checkEnvironment(Context& c, Report& r);
void checkCaptures(Context& c, Report& r);  // four checks per capture: identity, inputs, reference, outputs
void checkSamples(Context& c, Report& r);
void checkResults(Context& c, Report& r);  // results, counts, table, chart, validation

}  // namespace kiln::audit

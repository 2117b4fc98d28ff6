// The audit's checks of what was measured: samples.json (structure, protocol order, every
// sample's µs from its batch time), and everything derived from it — results.json, the counts
// against plan.json, table.md and chart.svg — recomputed and compared byte for byte.
#include <fmt/format.h>

#include "audit/checks.h"
#include "bench/render.h"
#include "bench/results.h"
#include "bench/statistics.h"

namespace kiln::audit {
namespace {

// nullopt when one case's visits follow the protocol; else the first deviation.
std::optional<std::string> checkCaseVisits(const bench::Experiment& e, const bench::CaseReplay& cr,
                                           const std::array<bench::CaptureRecord, 2>& caps) {
  const bench::Protocol& p = e.protocol;
  const std::string where = "case " + cr.id + ": ";
  if (cr.status == "not_run") {
    if (!cr.visits.empty()) return where + "not run, yet visits are recorded";
    if (caps[0].ok && caps[1].ok) return where + "not run although both captures succeeded";
    if (cr.reason.empty()) return where + "not run without a reason";
    return std::nullopt;
  }
  if (cr.status != "ok" && cr.status != "failed") return where + "unknown status '" + cr.status + "'";
  if (!caps[0].ok || !caps[1].ok) return where + "replayed although a capture failed";
  if (static_cast<int64_t>(cr.visits.size()) > static_cast<int64_t>(p.cycles) * 4) return where + "too many visits";
  for (size_t vi = 0; vi < cr.visits.size(); ++vi) {
    const bench::Visit& v = cr.visits[vi];
    const std::string at = where + "visit " + std::to_string(vi + 1) + ": ";
    if (v.cycle != static_cast<int>(vi / 4) || v.position != static_cast<int>(vi % 4) ||
        v.arm != bench::kAbba[v.position])
      return at + "out of the A,B,B,A order";
    const bool calibrated = v.validations.size() >= 2;
    if (v.warmup_launches < 1 || v.warmup_ns < 0 || (calibrated && (v.calibration_reps < 1 || v.reps < 1)))
      return at + "warmup or calibration counts out of range";
    if (static_cast<int>(v.samples.size()) > p.samples) return at + "more samples than planned";
    for (size_t si = 0; si < v.samples.size(); ++si) {
      const bench::Sample& s = v.samples[si];
      if (s.reps != v.reps || s.batch_ns <= 0) return at + "sample " + std::to_string(si + 1) + " has bad counts";
      if (s.us != bench::sampleMicros(s.batch_ns, s.reps))
        return at + "sample " + std::to_string(si + 1) + ": us is not batch_ns / 1000 / reps";
    }
    // Validations: after warmup, after calibration, after every sample; only the last may fail.
    std::vector<std::string> expected = {"warmup", "calibration"};
    for (size_t si = 1; si <= v.samples.size(); ++si) expected.push_back("sample " + std::to_string(si));
    const bool failed_here = !v.validations.empty() && !v.validations.back().ok;
    const bool failed_early = failed_here && v.validations.size() < expected.size();
    if (v.validations.size() != expected.size() && !failed_early)
      return at + "validations do not follow warmup, calibration and every sample batch";
    for (size_t k = 0; k < v.validations.size(); ++k) {
      if (v.validations[k].after != expected[k]) return at + "validation " + std::to_string(k + 1) + " is misplaced";
      const bool last = k + 1 == v.validations.size();
      if (!v.validations[k].ok && !last) return at + "the replay went on after a failed validation";
      if (v.validations[k].ok != v.validations[k].reason.empty()) return at + "a validation's reason disagrees";
    }
    const bool complete = v.complete(p.samples);
    const bool last_visit = vi + 1 == cr.visits.size();
    if (!complete && !last_visit) return at + "incomplete, yet the case went on";
    if (!complete && cr.status != "failed") return at + "incomplete in a case marked ok";
  }
  if (cr.status == "ok" && static_cast<int64_t>(cr.visits.size()) != static_cast<int64_t>(p.cycles) * 4)
    return where + "marked ok with " + std::to_string(cr.visits.size()) + " visits";
  if (cr.status == "failed" && cr.reason.empty()) return where + "failed without a reason";
  if (cr.status == "ok" && !cr.reason.empty()) return where + "ok with a failure reason";
  return std::nullopt;
}

}  // namespace

void checkSamples(Context& c, Report& r) {
  Check k{"samples: samples.json follows the protocol; every sample re-derived from its batch time", false, ""};
  Check comp{"replay: no compilation during replay", false, ""};
  nlohmann::json j;
  std::string why, text;
  if (!c.plan_ok || !c.captures_ok) {
    k.detail = comp.detail = "not checked: plan.json or a capture.json is unusable";
  } else if (!readJson(c.archive, "samples.json", j, why)) {
    k.detail = comp.detail = why;
  } else if (auto e = bench::fromJson(j, c.experiment, c.replay)) {
    k.detail = comp.detail = *e;
  } else if (c.archive.read("samples.json", text) || text != bench::jsonText(bench::toJson(c.replay, c.experiment))) {
    k.detail = comp.detail = "samples.json is not in the canonical form the bench writes";
  } else {
    const bench::Experiment& e = c.experiment;
    std::optional<std::string> problem;
    if (c.replay.cases.size() != e.cases.size()) problem = "samples.json lists another number of cases";
    for (size_t ci = 0; !problem && ci < e.cases.size(); ++ci) {
      if (c.replay.cases[ci].id != e.cases[ci].id)
        problem = "case " + std::to_string(ci + 1) + " is not the planned one";
      else
        problem = checkCaseVisits(e, c.replay.cases[ci], c.captures[ci]);
    }
    int64_t samples = 0;
    for (const auto& cr : c.replay.cases)
      for (const auto& v : cr.visits) samples += static_cast<int64_t>(v.samples.size());
    k.pass = c.samples_ok = !problem;
    k.detail = problem ? *problem
                       : std::to_string(samples) + " samples in protocol order, each equal to batch_ns / 1000 / reps";
    comp.pass = c.replay.compilations == 0;
    comp.detail = std::to_string(c.replay.compilations) + " compilations while timing (objects loaded, not compiled)";
  }
  r.checks.push_back(std::move(k));
  r.checks.push_back(std::move(comp));
}

void checkResults(Context& c, Report& r) {
  Check results{"results: results.json recomputed from samples.json", false, ""};
  Check counts{"counts: captures, visits and samples as planned", false, ""};
  Check table{"table: table.md re-rendered", false, ""};
  Check chart{"chart: chart.svg re-rendered", false, ""};
  Check valid{"validation: every case validated", false, ""};
  if (!c.samples_ok) {
    for (Check* k : {&results, &counts, &table, &chart, &valid}) {
      k->detail = "not checked: samples.json is unusable";
      r.checks.push_back(std::move(*k));
    }
    return;
  }
  const bench::Experiment& e = c.experiment;
  const bench::Results rec = bench::computeResults(e, c.captures, c.replay);
  auto compare = [&](Check& k, const std::string& file, const std::string& expected, const std::string& what) {
    std::string text;
    if (auto err = c.archive.read(file, text)) {
      k.detail = *err;
      return;
    }
    k.pass = text == expected;
    k.detail = k.pass ? what : file + " differs from the recomputation";
  };
  int64_t ratios = 0;
  for (const auto& cr : rec.cases) ratios += static_cast<int64_t>(cr.paired_ratios.size());
  compare(results, "results.json", bench::jsonText(bench::toJson(rec)),
          fmt::format("every median, visit median and paired ratio ({} ratios) recomputed; bytes equal", ratios));
  compare(table, "table.md", bench::renderTable(e, rec, c.shapes), "bytes equal to the re-rendered table");
  compare(chart, "chart.svg", bench::renderChart(e, rec), "bytes equal to the re-rendered chart");

  const bench::Totals& d = rec.done;
  const bench::Totals& p = rec.planned;
  counts.pass = d.captures == p.captures && d.visits == p.visits && d.samples == p.samples;
  counts.detail = fmt::format("captures {}/{}, visits {}/{}, samples {}/{}", d.captures, p.captures, d.visits, p.visits,
                              d.samples, p.samples);
  valid.pass = rec.all_validated;
  std::string failed;
  for (const auto& cr : rec.cases)
    if (!cr.ok) failed += (failed.empty() ? "" : "; ") + cr.id + ": " + cr.reason;
  valid.detail = valid.pass
                     ? std::to_string(rec.cases.size()) + " of " + std::to_string(rec.cases.size()) + " cases validated"
                     : "failed cases: " + failed;
  for (Check* k : {&results, &counts, &table, &chart, &valid}) r.checks.push_back(std::move(*k));
}

}  // namespace kiln::audit

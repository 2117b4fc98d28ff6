#include "bench/results.h"

namespace kiln::bench {
namespace {

nlohmann::ordered_json optionalNumber(const std::optional<double>& v) {
  return v ? nlohmann::ordered_json(*v) : nlohmann::ordered_json(nullptr);
}

}  // namespace

Results computeResults(const Experiment& e, const std::vector<std::array<CaptureRecord, 2>>& captures,
                       const Replay& replay) {
  Results r;
  r.experiment = e.name;
  r.planned = plannedTotals(e);
  r.compilations_during_replay = replay.compilations;
  r.all_validated = true;
  for (size_t ci = 0; ci < e.cases.size(); ++ci) {
    const Case& c = e.cases[ci];
    CaseResult cr;
    cr.id = c.id;
    cr.label = c.label;
    for (int a = 0; a < 2; ++a) {
      cr.arms[a].name = e.arms[a].name;
      const CaptureRecord& cap = captures[ci][a];
      r.done.captures += cap.ok ? 1 : 0;
      cr.oracle_pass[a] = !cap.oracle.empty();
      for (const OracleOutput& o : cap.oracle) cr.oracle_pass[a] = cr.oracle_pass[a] && o.pass;
    }
    const CaseReplay* rep = ci < replay.cases.size() && replay.cases[ci].id == c.id ? &replay.cases[ci] : nullptr;
    cr.ok = rep && rep->status == "ok";
    if (!rep)
      cr.reason = "no replay record";
    else if (!cr.ok)
      cr.reason = rep->reason;
    std::vector<double> in_order;  // visit medians of complete visits, in visit order
    bool all_complete = rep != nullptr;
    if (rep) {
      for (const Visit& v : rep->visits) {
        ++cr.visits;
        cr.samples += static_cast<int64_t>(v.samples.size());
        for (const Validation& val : v.validations) {
          ++cr.validations;
          cr.validations_failed += val.ok ? 0 : 1;
        }
        if (!v.complete(e.protocol.samples)) {
          all_complete = false;
          continue;
        }
        std::vector<double> us;
        for (const Sample& s : v.samples) us.push_back(s.us);
        const double m = *median(us);
        in_order.push_back(m);
        cr.arms[v.arm].visit_medians_us.push_back(m);
      }
    }
    if (cr.ok && (!all_complete || cr.visits != static_cast<int64_t>(e.protocol.cycles) * 4)) {
      cr.ok = false;
      cr.reason = "incomplete: " + std::to_string(cr.visits) + " visits recorded";
    }
    if (all_complete) cr.paired_ratios = pairedRatios(in_order);
    if (cr.ok) {
      for (int a = 0; a < 2; ++a) cr.arms[a].median_us = median(cr.arms[a].visit_medians_us);
      cr.ratio = range(cr.paired_ratios);
    }
    r.done.visits += cr.visits;
    r.done.samples += cr.samples;
    r.all_validated = r.all_validated && cr.ok;
    r.cases.push_back(std::move(cr));
  }
  r.all_validated = r.all_validated && r.compilations_during_replay == 0;
  return r;
}

nlohmann::ordered_json toJson(const Results& r) {
  nlohmann::ordered_json j;
  j["format"] = "kiln-bench-results/1";
  j["experiment"] = r.experiment;
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const CaseResult& c : r.cases) {
    nlohmann::ordered_json arms = nlohmann::ordered_json::array();
    for (const ArmResult& a : c.arms)
      arms.push_back(
          {{"name", a.name}, {"median_us", optionalNumber(a.median_us)}, {"visit_medians_us", a.visit_medians_us}});
    nlohmann::ordered_json paired;
    paired["ratio"] = c.arms[1].name + "/" + c.arms[0].name;
    paired["ratios"] = c.paired_ratios;
    paired["median"] = optionalNumber(c.ratio ? std::optional<double>(c.ratio->median) : std::nullopt);
    paired["min"] = optionalNumber(c.ratio ? std::optional<double>(c.ratio->min) : std::nullopt);
    paired["max"] = optionalNumber(c.ratio ? std::optional<double>(c.ratio->max) : std::nullopt);
    cases.push_back({{"case", c.id},
                     {"label", c.label},
                     {"status", c.ok ? "validated" : "failed"},
                     {"reason", c.reason},
                     {"arms", arms},
                     {"paired", paired},
                     {"validation",
                      {{"oracle_at_capture", {{c.arms[0].name, c.oracle_pass[0]}, {c.arms[1].name, c.oracle_pass[1]}}},
                       {"replay_checks", c.validations},
                       {"replay_checks_failed", c.validations_failed},
                       {"checks",
                        "outputs bit-equal to the capture, inputs unchanged, guard bytes intact; after "
                        "warmup, after calibration, after every sample batch"}}},
                     {"visits", c.visits},
                     {"samples", c.samples}});
  }
  j["cases"] = cases;
  j["totals"] = {{"captures", r.done.captures}, {"visits", r.done.visits}, {"samples", r.done.samples}};
  j["planned"] = {{"captures", r.planned.captures}, {"visits", r.planned.visits}, {"samples", r.planned.samples}};
  j["compilations_during_replay"] = r.compilations_during_replay;
  j["all_validated"] = r.all_validated;
  return j;
}

}  // namespace kiln::bench

// table.md: one row per case — the seed's columns (case, P, R, A µs, B µs, paired B/A, range)
// followed by the code shape of both arms — and the notes that say how to read it.
#include <fmt/format.h>

#include "bench/render.h"

namespace kiln::bench {
namespace {

std::string micros(const std::optional<double>& v) {
  return v ? fmt::format("{:.3f}", *v) : "—";
}

std::string shapeCell(const CodeShape& s) {
  return s.known ? fmt::format("{} ({})", s.full_packet, s.body_instructions) : "—";
}

std::string intCell(const CodeShape& s, int64_t v) {
  return s.known ? std::to_string(v) : "—";
}

// "on" when both arms agree, "off/on" (A/B) when the arms differ.
std::string bothArms(const Experiment& e, const Case& c, const std::string& knob) {
  const std::string a = knobText(c, e.arms[0], knob), b = knobText(c, e.arms[1], knob);
  return a == b ? a : a + "/" + b;
}

}  // namespace

CodeShape codeShape(const nlohmann::json& report) {
  CodeShape s;
  auto num = [&](const nlohmann::json& j) -> int64_t { return j.is_number_integer() ? j.get<int64_t>() : -1; };
  if (!report.is_object()) return s;
  // A kernel of one phase: its full-packet facts (at the top level in reports before every
  // kernel was N >= 1 phases, so that older archives read the same); several: unknown.
  const nlohmann::json* phase = &report;
  if (!report.contains("full_packet")) {
    if (!report.contains("phases") || !report["phases"].is_array() || report["phases"].size() != 1) return s;
    phase = &report["phases"][0];
  }
  if (!phase->contains("full_packet")) return s;
  s.known = true;
  const nlohmann::json& fp = (*phase)["full_packet"];
  s.full_packet = fp.contains("decision") && fp["decision"].is_string() ? fp["decision"].get<std::string>() : "?";
  s.body_instructions = fp.contains("body_instructions") ? num(fp["body_instructions"]) : -1;
  s.basic_blocks =
      report.contains("llvm") && report["llvm"].contains("basic_blocks") ? num(report["llvm"]["basic_blocks"]) : -1;
  s.snapshot_bytes = report.contains("snapshot_bytes_per_worker") ? num(report["snapshot_bytes_per_worker"]) : -1;
  return s;
}

std::string knobText(const Case& c, const Arm& a, const std::string& knob) {
  plan::Knobs k;
  if (resolveKnobs(c, a, k)) return "?";
  return k.get(knob);
}

std::string renderTable(const Experiment& e, const Results& r, const std::vector<std::array<CodeShape, 2>>& shapes) {
  const std::string A = e.arms[0].name, B = e.arms[1].name;
  std::string t = fmt::format("# {}\n\n", e.name);
  if (!e.description.empty()) t += e.description + "\n\n";
  t += fmt::format(
      "| case | P | R | {A} µs | {B} µs | paired {B}/{A} | range | {A} full packet (body instr) | {B} full packet "
      "(body instr) | {A} basic blocks | {B} basic blocks | {A} snapshot B/worker | {B} snapshot B/worker |\n",
      fmt::arg("A", A), fmt::arg("B", B));
  t += "|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|---:|---:|\n";
  std::string failures;
  for (size_t ci = 0; ci < e.cases.size() && ci < r.cases.size(); ++ci) {
    const Case& c = e.cases[ci];
    const CaseResult& cr = r.cases[ci];
    const std::array<CodeShape, 2>& s = shapes[ci];
    std::string ratio = "—", span = "—";
    if (cr.ratio) {
      ratio = fmt::format("{:.4f}", cr.ratio->median);
      span = fmt::format("{:.4f}–{:.4f}", cr.ratio->min, cr.ratio->max);
    }
    if (!cr.ok) ratio = "FAILED";
    t += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n",
                     c.held_out ? c.label + " (held out)" : c.label, bothArms(e, c, "full_packet"),
                     bothArms(e, c, "mma_output_block"), micros(cr.arms[0].median_us), micros(cr.arms[1].median_us),
                     ratio, span, shapeCell(s[0]), shapeCell(s[1]), intCell(s[0], s[0].basic_blocks),
                     intCell(s[1], s[1].basic_blocks), intCell(s[0], s[0].snapshot_bytes),
                     intCell(s[1], s[1].snapshot_bytes));
    if (!cr.ok) failures += fmt::format("- `{}` FAILED: {}\n", c.id, cr.reason);
  }
  const int pairs = e.protocol.cycles * 2;
  t += fmt::format(
      "\nTimes: median of the {} visit medians of each arm ({} samples per visit). Ratio: median of the {} paired "
      "ratios ({} visit / adjacent {} visit in each A,B,B,A cycle); range: their min–max, not a confidence interval. "
      "Never divide the two time columns. Native-entry host wall time on one pinned thread (steady_clock), not "
      "cycles. P: full_packet requested; R: mma_output_block requested (A/B when the arms differ).\n",
      e.protocol.cycles * 2, e.protocol.samples, pairs, B, A);
  t += fmt::format("\nTotals: captures {}/{}, visits {}/{}, samples {}/{}; compilations during replay: {}; {}.\n",
                   r.done.captures, r.planned.captures, r.done.visits, r.planned.visits, r.done.samples,
                   r.planned.samples, r.compilations_during_replay,
                   r.all_validated ? "every case validated" : "NOT every case validated");
  if (!failures.empty()) t += "\nFailed cases (kept, not re-run):\n\n" + failures;
  return t;
}

}  // namespace kiln::bench

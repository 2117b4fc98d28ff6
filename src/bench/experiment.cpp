#include "bench/experiment.h"

#include <cmath>
#include <set>

namespace kiln::bench {
namespace {

bool legalName(const std::string& s) {
  if (s.empty() || s.size() > 64 || s[0] == '.' || s[0] == '-') return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) return false;
  return true;
}

nlohmann::ordered_json settingsJson(const KnobSettings& s) {
  nlohmann::ordered_json j = nlohmann::ordered_json::array();
  for (const auto& [k, v] : s) j.push_back({k, v});
  return j;
}

std::optional<std::string> settingsFrom(const nlohmann::json& j, KnobSettings& out) {
  if (!j.is_array()) return "knob settings must be an array of [name, value] pairs";
  for (const auto& p : j) {
    if (!p.is_array() || p.size() != 2 || !p[0].is_string() || !p[1].is_string())
      return "knob settings must be an array of [name, value] pairs";
    out.emplace_back(p[0].get<std::string>(), p[1].get<std::string>());
  }
  return std::nullopt;
}

std::optional<std::string> applySettings(const KnobSettings& s, plan::Knobs& k) {
  for (const auto& [name, value] : s)
    if (auto e = k.set(name, value)) return e;
  return std::nullopt;
}

}  // namespace

Totals plannedTotals(const Experiment& e) {
  Totals t;
  const auto cases = static_cast<int64_t>(e.cases.size());
  t.captures = cases * 2;
  t.visits = cases * e.protocol.cycles * 4;
  t.samples = t.visits * e.protocol.samples;
  return t;
}

std::optional<std::string> validate(const Experiment& e) {
  if (!legalName(e.name)) return "experiment name '" + e.name + "' must be 1-64 characters of [A-Za-z0-9_.-]";
  if (e.arms[0].name == e.arms[1].name) return "the two arms need different names (both are '" + e.arms[0].name + "')";
  for (const Arm& a : e.arms)
    if (!legalName(a.name)) return "arm name '" + a.name + "' must be 1-64 characters of [A-Za-z0-9_.-]";
  if (e.cases.empty()) return "an experiment needs at least one case";
  std::set<std::string> ids;
  for (const Case& c : e.cases) {
    if (!legalName(c.id)) return "case id '" + c.id + "' must be 1-64 characters of [A-Za-z0-9_.-]";
    if (!ids.insert(c.id).second) return "case id '" + c.id + "' appears twice";
    for (const Arm& a : e.arms) {
      plan::Knobs k;
      if (auto err = resolveKnobs(c, a, k)) return "case '" + c.id + "', arm '" + a.name + "': " + *err;
    }
  }
  const Protocol& p = e.protocol;
  if (p.cycles < 1 || p.cycles > 100) return "cycles must be 1..100";
  if (p.samples < 1 || p.samples > 1000) return "samples per visit must be 1..1000";
  if (!(p.warmup_ms >= 0 && p.warmup_ms <= 60000)) return "warmup must be 0..60000 ms";
  if (!(p.target_ms > 0 && p.target_ms <= 60000)) return "the sample target must be in (0, 60000] ms";
  if (!(p.atol >= 0 && p.rtol >= 0 && std::isfinite(p.atol) && std::isfinite(p.rtol)))
    return "tolerances must be finite and >= 0";
  return std::nullopt;
}

std::optional<std::string> resolveKnobs(const Case& c, const Arm& a, plan::Knobs& out) {
  out = plan::Knobs{};
  if (auto e = applySettings(c.knobs, out)) return e;
  return applySettings(a.knobs, out);
}

std::optional<std::string> parseArm(const std::string& text, Arm& out) {
  out = Arm{};
  const auto colon = text.find(':');
  out.name = text.substr(0, colon);
  if (!legalName(out.name))
    return "--arm '" + text + "': the name before ':' must be 1-64 characters of [A-Za-z0-9_.-]";
  if (colon == std::string::npos) return std::nullopt;
  std::string rest = text.substr(colon + 1);
  size_t start = 0;
  while (start < rest.size()) {
    size_t comma = rest.find(',', start);
    if (comma == std::string::npos) comma = rest.size();
    const std::string item = rest.substr(start, comma - start);
    const auto eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      return "--arm '" + text + "': expected NAME:knob=value,knob=value, got '" + item + "'";
    out.knobs.emplace_back(item.substr(0, eq), item.substr(eq + 1));
    start = comma + 1;
  }
  plan::Knobs k;
  if (auto e = applySettings(out.knobs, k)) return "--arm '" + text + "': " + *e;
  return std::nullopt;
}

nlohmann::ordered_json toJson(const Experiment& e) {
  nlohmann::ordered_json j;
  j["format"] = "kiln-bench-plan/1";
  j["experiment"] = e.name;
  j["description"] = e.description;
  j["quick"] = e.quick;
  nlohmann::ordered_json arms = nlohmann::ordered_json::array();
  for (const Arm& a : e.arms) arms.push_back({{"name", a.name}, {"knobs", settingsJson(a.knobs)}});
  j["arms"] = arms;
  nlohmann::ordered_json cases = nlohmann::ordered_json::array();
  for (const Case& c : e.cases) {
    nlohmann::ordered_json opts = nlohmann::ordered_json::object();
    for (const auto& [k, v] : c.request.options) opts[k] = v;
    cases.push_back({{"id", c.id},
                     {"label", c.label},
                     {"kernel", c.request.name},
                     {"shape", c.request.shape},
                     {"options", opts},
                     {"knobs", settingsJson(c.knobs)},
                     {"held_out", c.held_out}});
  }
  j["cases"] = cases;
  const Protocol& p = e.protocol;
  j["protocol"] = {
      {"order", "A,B,B,A"},
      {"cycles", p.cycles},
      {"samples_per_visit", p.samples},
      {"warmup_ms", p.warmup_ms},
      {"target_ms", p.target_ms},
      {"seed", p.seed},
      {"atol", p.atol},
      {"rtol", p.rtol},
      {"time", "median of visit medians"},
      {"ratio", "B/A: median of the paired ratios, two per cycle (each B visit over its adjacent A visit)"}};
  const Totals t = plannedTotals(e);
  j["planned"] = {{"captures", t.captures}, {"visits", t.visits}, {"samples", t.samples}};
  return j;
}

std::optional<std::string> fromJson(const nlohmann::json& j, Experiment& out) {
  out = Experiment{};
  try {
    if (j.at("format") != "kiln-bench-plan/1") return "plan.json: unknown format";
    out.name = j.at("experiment").get<std::string>();
    out.description = j.at("description").get<std::string>();
    out.quick = j.at("quick").get<bool>();
    const auto& arms = j.at("arms");
    if (!arms.is_array() || arms.size() != 2) return "plan.json: 'arms' must list exactly two arms";
    for (size_t i = 0; i < 2; ++i) {
      out.arms[i].name = arms[i].at("name").get<std::string>();
      if (auto e = settingsFrom(arms[i].at("knobs"), out.arms[i].knobs)) return "plan.json: " + *e;
    }
    for (const auto& c : j.at("cases")) {
      Case k;
      k.id = c.at("id").get<std::string>();
      k.label = c.at("label").get<std::string>();
      k.request.name = c.at("kernel").get<std::string>();
      k.request.shape = c.at("shape").get<std::string>();
      for (const auto& [name, v] : c.at("options").items()) k.request.options[name] = v.get<std::string>();
      if (auto e = settingsFrom(c.at("knobs"), k.knobs)) return "plan.json: " + *e;
      k.held_out = c.at("held_out").get<bool>();
      out.cases.push_back(std::move(k));
    }
    const auto& p = j.at("protocol");
    out.protocol.cycles = p.at("cycles").get<int>();
    out.protocol.samples = p.at("samples_per_visit").get<int>();
    out.protocol.warmup_ms = p.at("warmup_ms").get<double>();
    out.protocol.target_ms = p.at("target_ms").get<double>();
    out.protocol.seed = p.at("seed").get<uint64_t>();
    out.protocol.atol = p.at("atol").get<double>();
    out.protocol.rtol = p.at("rtol").get<double>();
  } catch (const nlohmann::json::exception& e) {
    return std::string("plan.json: ") + e.what();
  }
  if (auto e = validate(out)) return "plan.json: " + *e;
  return std::nullopt;
}

std::string jsonText(const nlohmann::ordered_json& j) {
  // Messages from elsewhere (LLVM, the OS) may hold bytes that are not UTF-8: replace them
  // rather than fail to write the archive.
  return j.dump(2, ' ', false, nlohmann::ordered_json::error_handler_t::replace) + "\n";
}

}  // namespace kiln::bench

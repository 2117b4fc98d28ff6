#include "audit/audit.h"

#include <nlohmann/json.hpp>

#include <filesystem>
#include <map>
#include <set>

#include "audit/checks.h"
#include "bench/environment.h"
#include "host/data.h"

namespace kiln::audit {
namespace {

// "a, b, c (and N more)": at most `limit` names, in the order given.
std::string listSome(const std::vector<std::string>& names, size_t limit = 8) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < limit; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > limit) s += " (and " + std::to_string(names.size() - limit) + " more)";
  return s;
}

}  // namespace

bool Report::pass() const {
  if (checks.empty()) return false;
  for (const Check& c : checks)
    if (!c.pass) return false;
  return true;
}

bool readJson(const bench::Archive& a, const std::string& rel, nlohmann::json& out, std::string& why) {
  std::string text;
  if (auto e = a.read(rel, text)) {
    why = *e;
    return false;
  }
  out = nlohmann::json::parse(text, nullptr, false);
  if (out.is_discarded()) {
    why = rel + " is not valid JSON";
    return false;
  }
  return true;
}

void checkManifest(Context& c, Report& r) {
  Check k{"manifest: SHA256SUMS covers every file and every digest matches", false, ""};
  std::string text;
  std::vector<bench::SumEntry> entries;
  if (auto e = c.archive.read(bench::kSumsFile, text)) {
    k.detail = *e;
  } else if (auto e2 = bench::parseSums(text, entries)) {
    k.detail = "SHA256SUMS: " + *e2;
  } else {
    std::vector<std::string> odd;
    const std::vector<std::string> files = bench::listFiles(c.archive.root(), &odd);
    std::set<std::string> listed;
    std::vector<std::string> missing, mismatched, unlisted;
    for (const bench::SumEntry& s : entries) {
      listed.insert(s.path);
      std::string bytes;
      if (s.path == bench::kSumsFile || c.archive.read(s.path, bytes))
        missing.push_back(s.path);
      else if (host::sha256Hex(bytes.data(), bytes.size()) != s.sha256)
        mismatched.push_back(s.path);
    }
    for (const std::string& f : files)
      if (f != bench::kSumsFile && !listed.count(f)) unlisted.push_back(f);
    std::string d;
    if (!mismatched.empty()) d += "digest mismatch: " + listSome(mismatched) + "; ";
    if (!missing.empty()) d += "listed but missing: " + listSome(missing) + "; ";
    if (!unlisted.empty()) d += "not listed: " + listSome(unlisted) + "; ";
    if (!odd.empty()) d += "not regular files: " + listSome(odd) + "; ";
    k.pass = d.empty();
    k.detail = k.pass ? std::to_string(entries.size()) + " files, every digest matches" : d.substr(0, d.size() - 2);
  }
  r.checks.push_back(std::move(k));
}

void checkPlan(Context& c, Report& r) {
  Check k{"plan: plan.json is a valid, canonical experiment", false, ""};
  nlohmann::json j;
  std::string why, text;
  if (!readJson(c.archive, "plan.json", j, why)) {
    k.detail = why;
  } else if (auto e = bench::fromJson(j, c.experiment)) {
    k.detail = *e;
  } else if (c.archive.read("plan.json", text) || text != bench::jsonText(bench::toJson(c.experiment))) {
    k.detail = "plan.json is not in the canonical form the bench writes";
  } else {
    const bench::Totals t = bench::plannedTotals(c.experiment);
    k.pass = c.plan_ok = true;
    k.detail = "experiment " + c.experiment.name + ": " + std::to_string(c.experiment.cases.size()) + " cases, arms " +
               c.experiment.arms[0].name + " / " + c.experiment.arms[1].name + "; planned " +
               std::to_string(t.captures) + " captures, " + std::to_string(t.visits) + " visits, " +
               std::to_string(t.samples) + " samples";
    r.experiment = c.experiment.name;
  }
  r.checks.push_back(std::move(k));
}

void checkEnvironment(Context& c, Report& r) {
  Check k{"environment: environment.json records the machine and the build", false, ""};
  nlohmann::json j;
  std::string why;
  if (!readJson(c.archive, "environment.json", j, why)) {
    k.detail = why;
  } else if (!j.is_object()) {
    k.detail = "environment.json is not an object";
  } else {
    std::vector<std::string> absent;
    for (const std::string& key : bench::environmentKeys())
      if (!j.contains(key)) absent.push_back(key);
    k.pass = absent.empty();
    k.detail = k.pass ? "every field present (provenance: recorded, not re-verifiable offline)"
                      : "missing: " + listSome(absent);
  }
  r.checks.push_back(std::move(k));
}

Report auditArchive(const std::string& dir) {
  Report r;
  Context c(dir);
  std::error_code ec;
  if (!std::filesystem::is_directory(dir, ec)) {
    r.checks.push_back({"archive: the folder exists", false, "not a directory"});
    return r;
  }
  // A malformed file is a failed check, never a crash: a JSON value of an unexpected type
  // throws inside a check, and ends the audit with that check failed.
  using Step = void (*)(Context&, Report&);
  for (Step step : {checkManifest, checkPlan, checkEnvironment, checkCaptures, checkSamples, checkResults}) {
    try {
      step(c, r);
    } catch (const std::exception& e) {
      r.checks.push_back({"audit: archive readable", false, std::string("malformed archive: ") + e.what()});
      return r;
    }
  }
  return r;
}

std::string reportText(const Report& r) {
  nlohmann::ordered_json j;
  j["format"] = "kiln-audit/1";
  j["experiment"] = r.experiment.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(r.experiment);
  nlohmann::ordered_json checks = nlohmann::ordered_json::array();
  int64_t passed = 0;
  for (const Check& c : r.checks) {
    checks.push_back({{"check", c.name}, {"pass", c.pass}, {"detail", c.detail}});
    passed += c.pass ? 1 : 0;
  }
  j["checks"] = checks;
  j["summary"] = {
      {"checks", r.checks.size()}, {"passed", passed}, {"failed", static_cast<int64_t>(r.checks.size()) - passed}};
  j["verdict"] = r.pass() ? "pass" : "fail";
  return bench::jsonText(j);
}

}  // namespace kiln::audit

// The audit's per-capture checks: identity (object digest, report, planned knobs, parameters),
// inputs (re-derived from the seed), reference (recomputed in FP64 from the archived inputs)
// and outputs (every archived output against the recomputed reference).
#include <fmt/format.h>

#include <cmath>
#include <map>
#include <set>

#include "audit/checks.h"
#include "host/data.h"
#include "kernels/registry.h"

namespace kiln::audit {
namespace {

// The archived reference may differ from a recomputation on another machine by the last bits
// of libm's exp; nothing else may differ.
constexpr double kReferenceTolerance = 1e-12;

bool sameClass(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  if (std::isinf(a) || std::isinf(b)) return a == b;
  return true;
}

Check failed(Check k, std::string detail) {
  k.detail = std::move(detail);
  return k;
}

struct CaseData {
  std::string build_error;  // empty when the kernel was rebuilt
  std::unique_ptr<ir::Kernel> kernel;
  std::vector<host::ParamData> inputs;  // regenerated from the seed
};

// identity: digests agree, the report's knobs are the planned ones, the parameters are the
// rebuilt kernel's.
Check identity(const Context& c, const bench::Case& cs, const bench::Arm& arm, const bench::CaptureRecord& rec,
               const CaseData& data, const std::string& dir) {
  Check k{"capture " + cs.id + "/" + arm.name + ": identity", false, ""};
  if (!rec.ok && rec.object_sha256.empty()) {
    k.pass = true;
    k.detail = "recorded as failed before an object existed (" + rec.reason + ")";
    return k;
  }
  std::string object;
  if (auto e = c.archive.read(dir + "/kernel.o", object)) return failed(k, *e);
  const std::string digest = host::sha256Hex(object.data(), object.size());
  if (digest != rec.object_sha256 || static_cast<int64_t>(object.size()) != rec.object_bytes)
    return failed(k, "kernel.o does not match the digest and size in capture.json");
  nlohmann::json report;
  std::string why;
  if (!readJson(c.archive, dir + "/report.json", report, why)) return failed(k, why);
  if (!report.contains("object") || report["object"].value("sha256", "") != digest)
    return failed(k, "report.json names another object digest");
  plan::Knobs knobs;
  if (auto e = bench::resolveKnobs(cs, arm, knobs)) return failed(k, *e);
  std::set<std::string> planned;
  for (const auto& s : cs.knobs) planned.insert(s.first);
  for (const auto& s : arm.knobs) planned.insert(s.first);
  for (const std::string& name : planned) {
    const nlohmann::json& v = report["knobs"][name];
    const std::string got = v.is_number_integer() ? std::to_string(v.get<int64_t>())
                            : v.is_string()       ? v.get<std::string>()
                                                  : v.dump();
    // A planned `auto` is the planner's to resolve: the report holds its effective value; so is a
    // cap on unrolled tiles that the plan lowered and said why (report "unrolled_tile_cap").
    bool lowered = false;
    if (name == "max_unrolled_tile_elements") {
      lowered = report.contains("unrolled_tile_cap");  // where reports before phases[] for every kernel had it
      if (report.contains("phases") && report["phases"].is_array())
        for (const auto& ph : report["phases"]) lowered = lowered || ph.contains("unrolled_tile_cap");
    }
    if (got != knobs.get(name) && knobs.get(name) != "auto" && !lowered)
      return failed(k, "report.json: knob " + name + " = " + got + ", the plan set " + knobs.get(name));
  }
  if (!data.kernel) return failed(k, "cannot rebuild the kernel: " + data.build_error);
  const auto& params = data.kernel->params;
  if (params.size() != rec.params.size()) return failed(k, "capture.json lists another parameter count");
  for (size_t i = 0; i < params.size(); ++i) {
    const bench::ParamInfo& p = rec.params[i];
    bool match = p.name == params[i]->name && (p.kind == runtime::ParamKind::View) == params[i]->type.isView();
    if (match && p.kind == runtime::ParamKind::View)
      match = p.shape == params[i]->type.shape() && p.elem == params[i]->type.elem;
    if (!match) return failed(k, "parameter " + std::to_string(i) + " differs from the rebuilt kernel");
  }
  std::vector<int64_t> workspaces;
  for (const ir::Value* w : data.kernel->workspaces) workspaces.push_back(w->type.numElements());
  if (workspaces != rec.workspaces) return failed(k, "capture.json lists other workspaces than the rebuilt kernel");
  k.pass = true;
  k.detail = "object " + digest.substr(0, 16) + "… (" + std::to_string(object.size()) +
             " bytes) matches capture.json and report.json; planned knobs in effect";
  return k;
}

// The archived views' values (float views' in `data`, integer views' in `ints`); error names
// the file.
std::optional<std::string> readViews(const Context& c, const std::string& dir, const bench::CaptureRecord& rec,
                                     std::string (*file)(const bench::ParamInfo&), bool outputs_only,
                                     std::vector<host::ParamData>& out) {
  out.assign(rec.params.size(), {});
  for (size_t i = 0; i < rec.params.size(); ++i) {
    const bench::ParamInfo& p = rec.params[i];
    if (p.kind != runtime::ParamKind::View || (outputs_only && !p.output)) continue;
    std::string bytes;
    if (auto e = c.archive.read(dir + "/" + file(p), bytes)) return e;
    if (auto e = bench::valuesOfView(p, bytes, out[i])) return dir + "/" + file(p) + ": " + *e;
  }
  return std::nullopt;
}

Check inputs(const Context& c, const bench::Case& cs, const bench::Arm& arm, const bench::CaptureRecord& rec,
             const CaseData& data, const std::string& dir, std::vector<host::ParamData>& archived) {
  Check k{"capture " + cs.id + "/" + arm.name + ": inputs re-derived from the seed", false, ""};
  archived.clear();
  if (!data.kernel || data.inputs.size() != rec.params.size()) {
    if (!rec.ok && rec.params.empty()) {
      k.pass = true;
      k.detail = "recorded as failed before inputs existed (" + rec.reason + ")";
      return k;
    }
    return failed(k, "cannot regenerate the inputs: " + data.build_error);
  }
  std::vector<host::ParamData> views;
  if (auto e = readViews(c, dir, rec, bench::inputFile, false, views)) return failed(k, *e);
  int64_t elements = 0;
  archived.resize(rec.params.size());
  for (size_t i = 0; i < rec.params.size(); ++i) {
    const bench::ParamInfo& p = rec.params[i];
    archived[i].i64 = p.i64;
    archived[i].f32 = p.f32;
    archived[i].data = std::move(views[i].data);
    archived[i].ints = std::move(views[i].ints);
    const host::ParamData& want = data.inputs[i];
    const bool same = p.kind == runtime::ParamKind::View
                          ? host::compareBitexact(archived[i].data, want.data).mismatches == 0 &&
                                archived[i].data.size() == want.data.size() && archived[i].ints == want.ints
                          : archived[i].i64 == want.i64 &&
                                std::bit_cast<uint32_t>(archived[i].f32) == std::bit_cast<uint32_t>(want.f32);
    if (!same) {
      archived.clear();
      return failed(k, "parameter '" + p.name + "' differs from makeInputs(seed " +
                           std::to_string(c.experiment.protocol.seed) + ")");
    }
    elements += static_cast<int64_t>(archived[i].data.size() + archived[i].ints.size());
  }
  k.pass = true;
  k.detail = std::to_string(elements) + " view elements bit-equal to makeInputs(seed " +
             std::to_string(c.experiment.protocol.seed) + ")";
  return k;
}

Check reference(const Context& c, const bench::Case& cs, const bench::Arm& arm, const bench::CaptureRecord& rec,
                const std::string& dir, const std::vector<host::ParamData>& archived,
                std::vector<std::vector<double>>& recomputed, std::vector<std::vector<double>>& stored) {
  Check k{"capture " + cs.id + "/" + arm.name + ": FP64 reference recomputed", false, ""};
  recomputed.clear();
  stored.assign(rec.params.size(), {});
  bool any_reference = false;
  for (const bench::ParamInfo& p : rec.params)
    any_reference = any_reference || (p.output && c.archive.exists(dir + "/" + bench::referenceFile(p)));
  if (!rec.ok && !any_reference) {
    k.pass = true;
    k.detail = "recorded as failed before a reference existed (" + rec.reason + ")";
    return k;
  }
  if (archived.empty()) return failed(k, "no verified inputs to recompute from");
  if (auto e = kernels::libraryReference(cs.request, archived, recomputed)) return failed(k, *e);
  int64_t elements = 0;
  for (size_t i = 0; i < rec.params.size(); ++i) {
    const bench::ParamInfo& p = rec.params[i];
    if (!p.output) continue;
    std::string bytes;
    std::vector<double> ref;
    if (auto e = c.archive.read(dir + "/" + bench::referenceFile(p), bytes)) return failed(k, *e);
    if (auto e = bench::parseF64(bytes, p.elements(), ref)) return failed(k, bench::referenceFile(p) + ": " + *e);
    if (i >= recomputed.size() || recomputed[i].size() != ref.size())
      return failed(k, "the recomputed reference of '" + p.name + "' has another size");
    for (size_t j = 0; j < ref.size(); ++j) {
      const double a = ref[j], b = recomputed[i][j];
      const bool ok =
          sameClass(a, b) && (!std::isfinite(b) || std::abs(a - b) <= kReferenceTolerance * std::max(1.0, std::abs(b)));
      if (!ok)
        return failed(k, fmt::format("reference of '{}' differs from the recomputation at element {}", p.name, j));
    }
    elements += static_cast<int64_t>(ref.size());
    stored[i] = std::move(ref);
  }
  k.pass = true;
  k.detail = std::to_string(elements) + " reference elements equal the recomputation (within 1e-12 relative)";
  return k;
}

Check outputs(const Context& c, const bench::Case& cs, const bench::Arm& arm, const bench::CaptureRecord& rec,
              const std::string& dir, const std::vector<host::ParamData>& archived,
              const std::vector<std::vector<double>>& recomputed, const std::vector<std::vector<double>>& stored) {
  Check k{"capture " + cs.id + "/" + arm.name + ": outputs within tolerance of the FP64 reference", false, ""};
  const bench::Protocol& p = c.experiment.protocol;
  std::vector<host::ParamData> read;
  const bool have_outputs = !readViews(c, dir, rec, bench::outputFile, true, read);
  std::vector<std::vector<float>> outs(rec.params.size());
  for (size_t i = 0; have_outputs && i < rec.params.size(); ++i)
    if (rec.params[i].output) outs[i] = bench::oracleValues(rec.params[i], read[i]);
  if (!rec.ok && (!have_outputs || recomputed.empty())) {
    k.pass = true;
    k.detail = "recorded as failed before outputs existed (" + rec.reason + ")";
    return k;
  }
  if (!have_outputs) return failed(k, *readViews(c, dir, rec, bench::outputFile, true, read));
  if (recomputed.empty()) return failed(k, "no recomputed reference");
  // The kernel's own allowance beside atol + rtol·|ref|, as the capture applied it (gemm: its
  // K-term rounding bound), recomputed from the archived inputs.
  std::vector<std::vector<double>> allowance;
  if (auto e = kernels::libraryAllowance(cs.request, archived, allowance)) return failed(k, *e);
  auto extra = [&](size_t i) { return i < allowance.size() && !allowance[i].empty() ? &allowance[i] : nullptr; };
  int64_t elements = 0;
  std::string first_bad;
  for (size_t i = 0; i < rec.params.size(); ++i) {
    if (!rec.params[i].output) continue;
    const host::CompareResult cr =
        host::compareF64(outs[i], recomputed[i], p.atol, p.rtol, bench::oracleStorage(rec.params[i]), extra(i));
    if (!cr.pass && first_bad.empty())
      first_bad = fmt::format("output '{}' is outside the tolerance at element {}", rec.params[i].name, cr.first_bad);
    elements += static_cast<int64_t>(outs[i].size());
  }
  // capture.json's oracle record, re-derived from the archived outputs and reference.
  size_t next = 0;
  for (size_t i = 0; i < rec.params.size() && !rec.oracle.empty(); ++i) {
    if (!rec.params[i].output) continue;
    const host::CompareResult cr =
        host::compareF64(outs[i], stored[i], p.atol, p.rtol, bench::oracleStorage(rec.params[i]), extra(i));
    const bool same = next < rec.oracle.size() && rec.oracle[next].name == rec.params[i].name &&
                      rec.oracle[next].pass == cr.pass && rec.oracle[next].max_abs_err == cr.max_abs_err &&
                      rec.oracle[next].max_rel_err == cr.max_rel_err && rec.oracle[next].first_bad == cr.first_bad;
    if (!same)
      return failed(k, "capture.json's oracle record of '" + rec.params[i].name +
                           "' does not follow from the archived outputs and reference");
    ++next;
  }
  if (next != rec.oracle.size()) return failed(k, "capture.json's oracle record lists other outputs");
  const std::string tol = fmt::format("{:g} + {:g}·|ref|", p.atol, p.rtol);
  if (rec.ok) {
    k.pass = first_bad.empty();
    k.detail = k.pass ? std::to_string(elements) + " output elements within " + tol : first_bad;
  } else {
    // A capture recorded as failed by the oracle must really fail it; other failures after the
    // outputs were written are consistent either way.
    const bool oracle_failure = rec.reason.rfind("oracle:", 0) == 0;
    k.pass = !oracle_failure || !first_bad.empty();
    k.detail = k.pass ? "recorded as failed (" + rec.reason + "); the recomputation agrees"
                      : "recorded as an oracle failure, but every output is within " + tol;
  }
  return k;
}

}  // namespace

void checkCaptures(Context& c, Report& r) {
  if (!c.plan_ok) {
    r.checks.push_back({"captures", false, "not checked: plan.json is unusable"});
    return;
  }
  const bench::Experiment& e = c.experiment;
  c.captures.assign(e.cases.size(), {});
  c.shapes.assign(e.cases.size(), {});
  c.captures_ok = true;
  for (size_t ci = 0; ci < e.cases.size(); ++ci) {
    const bench::Case& cs = e.cases[ci];
    CaseData data;
    if (auto err = kernels::buildLibraryKernel(cs.request, data.kernel)) {
      data.build_error = *err;
      data.kernel.reset();
    } else if (auto err2 = host::makeInputs(*data.kernel, e.protocol.seed, {}, data.inputs)) {
      data.build_error = *err2;
      data.kernel.reset();
    }
    for (int a = 0; a < 2; ++a) {
      const bench::Arm& arm = e.arms[a];
      const std::string dir = bench::captureDir(cs, arm);
      bench::CaptureRecord& rec = c.captures[ci][a];
      nlohmann::json j;
      std::string why, text;
      Check record{"capture " + cs.id + "/" + arm.name + ": capture.json", false, ""};
      if (!readJson(c.archive, dir + "/capture.json", j, why)) {
        record.detail = why;
      } else if (auto err = bench::fromJson(j, rec)) {
        record.detail = "capture.json: " + *err;
      } else if (rec.case_id != cs.id || rec.arm != arm.name) {
        record.detail = "capture.json names another case or arm";
      } else if (c.archive.read(dir + "/capture.json", text) ||
                 text != bench::jsonText(bench::toJson(rec, e.protocol))) {
        record.detail = "capture.json is not in the canonical form the bench writes";
      } else {
        record.pass = true;
        record.detail = rec.ok ? "status ok" : "status failed: " + rec.reason;
      }
      const bool usable = record.pass;
      r.checks.push_back(std::move(record));
      if (!usable) {
        c.captures_ok = false;
        for (const char* what : {"identity", "inputs", "reference", "outputs"})
          r.checks.push_back({"capture " + cs.id + "/" + arm.name + ": " + what, false, "capture.json is unusable"});
        continue;
      }
      nlohmann::json report;
      if (readJson(c.archive, dir + "/report.json", report, why)) c.shapes[ci][a] = bench::codeShape(report);
      std::vector<host::ParamData> archived;
      std::vector<std::vector<double>> recomputed, stored;
      r.checks.push_back(identity(c, cs, arm, rec, data, dir));
      r.checks.push_back(inputs(c, cs, arm, rec, data, dir, archived));
      r.checks.push_back(reference(c, cs, arm, rec, dir, archived, recomputed, stored));
      r.checks.push_back(outputs(c, cs, arm, rec, dir, archived, recomputed, stored));
    }
  }
}

}  // namespace kiln::audit

#include "bench/capture.h"

#include <fmt/format.h>

#include <set>

#include "bench/native.h"
#include "driver/compile.h"
#include "host/data.h"
#include "host/storage.h"
#include "ir/printer.h"

namespace kiln::bench {
namespace {

const char* kindName(runtime::ParamKind k) {
  switch (k) {
    case runtime::ParamKind::View: return "view";
    case runtime::ParamKind::I64: return "i64";
    case runtime::ParamKind::F32: return "f32";
  }
  return "?";
}

// Writes capture.json and returns; `stage` and `message` make the failure reason.
std::optional<std::string> finish(const Archive& archive, const std::string& dir, CaptureRecord& rec, const Protocol& p,
                                  const std::string& stage = {}, const std::string& message = {}) {
  rec.ok = stage.empty();
  rec.reason = rec.ok ? std::string() : stage + ": " + message;
  return archive.write(dir + "/capture.json", jsonText(toJson(rec, p)));
}

}  // namespace

int64_t ParamInfo::elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string captureDir(const Case& c, const Arm& a) {
  return "captures/" + c.id + "/" + a.name;
}
std::string inputFile(const ParamInfo& p) {
  return "inputs/" + p.name + "." + std::string(ir::elemName(p.elem));
}
std::string outputFile(const ParamInfo& p) {
  return "outputs/" + p.name + "." + std::string(ir::elemName(p.elem));
}

std::optional<std::string> bytesOfView(const ParamInfo& p, const host::ParamData& data, std::string& out) {
  if (ir::isIntegerStorage(p.elem)) {
    if (static_cast<int64_t>(data.ints.size()) != p.elements()) return "integer view of the wrong size";
    out = host::integerBytes(data.ints, p.elem == ir::Elem::I32);
    return std::nullopt;
  }
  if (static_cast<int64_t>(data.data.size()) != p.elements()) return "view of the wrong size";
  if (ir::isHalfStorage(p.elem)) return host::halfBytes(data.data, p.elem == ir::Elem::BF16, out);
  out = f32Bytes(data.data);
  return std::nullopt;
}

std::optional<std::string> checkViewBytes(const ParamInfo& p, std::string_view bytes) {
  if (static_cast<int64_t>(bytes.size()) == p.elements() * p.elemBytes()) return std::nullopt;
  return fmt::format("{} bytes, expected {} ({} elements of {})", bytes.size(), p.elements() * p.elemBytes(),
                     p.elements(), ir::elemName(p.elem));
}

std::optional<std::string> valuesOfView(const ParamInfo& p, std::string_view bytes, host::ParamData& out) {
  if (auto e = checkViewBytes(p, bytes)) return e;
  if (ir::isIntegerStorage(p.elem))
    host::integersFromBytes(bytes.data(), bytes.size(), p.elem == ir::Elem::I32, out.ints);
  else if (ir::isHalfStorage(p.elem))
    host::halvesFromBytes(bytes.data(), bytes.size(), p.elem == ir::Elem::BF16, out.data);
  else
    return parseF32(bytes, p.elements(), out.data);
  return std::nullopt;
}

std::vector<float> oracleValues(const ParamInfo& p, const host::ParamData& values) {
  if (!ir::isIntegerStorage(p.elem)) return values.data;
  std::vector<float> v;
  for (int64_t x : values.ints) v.push_back(static_cast<float>(x));
  return v;
}

ir::Elem oracleStorage(const ParamInfo& p) {
  return ir::isHalfStorage(p.elem) ? p.elem : ir::Elem::F32;
}

std::string referenceFile(const ParamInfo& p) {
  return "reference/" + p.name + ".f64";
}

std::vector<runtime::ParamSpec> signatureOf(const std::vector<ParamInfo>& params) {
  std::vector<runtime::ParamSpec> sig;
  for (const ParamInfo& p : params) {
    if (p.kind == runtime::ParamKind::View)
      sig.push_back(runtime::ParamSpec::view(p.name, p.shape, driver::runtimeElem(p.elem)));
    else if (p.kind == runtime::ParamKind::I64)
      sig.push_back(runtime::ParamSpec::i64(p.name));
    else
      sig.push_back(runtime::ParamSpec::f32(p.name));
  }
  return sig;
}

std::optional<std::string> capture(const Experiment& e, size_t case_index, int arm, Archive& archive,
                                   CaptureRecord& rec) {
  const Case& c = e.cases[case_index];
  const Arm& a = e.arms[arm];
  const Protocol& p = e.protocol;
  const std::string dir = captureDir(c, a);
  rec = CaptureRecord{};
  rec.case_id = c.id;
  rec.arm = a.name;
  auto write = [&](const std::string& rel, std::string_view bytes) { return archive.write(dir + "/" + rel, bytes); };

  // The kernel, its parameters and the deterministic inputs.
  std::unique_ptr<ir::Kernel> kernel;
  if (auto err = kernels::buildLibraryKernel(c.request, kernel)) return finish(archive, dir, rec, p, "build", *err);
  if (auto err = write("kernel.tile", ir::print(*kernel))) return err;
  std::set<const ir::Value*> written, read;
  for (const ir::Value* v : kernel->outputs()) written.insert(v);
  for (const ir::Value* v : kernel->inputs()) read.insert(v);
  for (const ir::Value* v : kernel->params) {
    ParamInfo info;
    info.name = v->name;
    if (v->type.isView()) {
      info.shape = v->type.shape();
      info.elem = v->type.elem;
      info.output = written.count(v) > 0;
      if (info.output && read.count(v))
        return finish(archive, dir, rec, p, "build",
                      "view '" + v->name +
                          "' is both read and written by the kernel; repeated launches would change it, so it "
                          "cannot be timed by replay");
    } else {
      info.kind = v->type.elem == ir::Elem::I64 ? runtime::ParamKind::I64 : runtime::ParamKind::F32;
    }
    rec.params.push_back(std::move(info));
  }
  for (const ir::Value* w : kernel->workspaces) rec.workspaces.push_back(w->type.numElements());
  plan::Knobs knobs;
  if (auto err = resolveKnobs(c, a, knobs)) return finish(archive, dir, rec, p, "knobs", *err);
  std::vector<host::ParamData> inputs;
  if (auto err = host::makeInputs(*kernel, p.seed, {}, inputs)) return finish(archive, dir, rec, p, "inputs", *err);
  std::vector<std::string> initial(rec.params.size());
  for (size_t i = 0; i < rec.params.size(); ++i) {
    ParamInfo& info = rec.params[i];
    info.i64 = inputs[i].i64;
    info.f32 = inputs[i].f32;
    if (info.kind != runtime::ParamKind::View) continue;
    if (auto err = bytesOfView(info, inputs[i], initial[i]))
      return finish(archive, dir, rec, p, "inputs", "view '" + info.name + "': " + *err);
    if (auto err = write(inputFile(info), initial[i])) return err;
  }

  // The FP64 reference (plain C++, shares nothing with the compiled code).
  std::vector<std::vector<double>> reference;
  if (auto err = kernels::libraryReference(c.request, inputs, reference))
    return finish(archive, dir, rec, p, "reference", *err);
  for (size_t i = 0; i < rec.params.size(); ++i) {
    const ParamInfo& info = rec.params[i];
    if (!info.output) continue;
    if (i >= reference.size() || static_cast<int64_t>(reference[i].size()) != info.elements())
      return finish(archive, dir, rec, p, "reference", "no reference of the right size for output '" + info.name + "'");
    if (auto err = write(referenceFile(info), f64Bytes(reference[i]))) return err;
  }

  // Compile once; the object written is the object that runs.
  driver::Compilation comp;
  if (auto err = driver::compile(*kernel, knobs, comp)) return finish(archive, dir, rec, p, "compile", *err);
  rec.object_sha256 = host::sha256Hex(comp.object.data(), comp.object.size());
  rec.object_bytes = static_cast<int64_t>(comp.object.size());
  if (auto err = write("kernel.o", comp.object)) return err;
  if (auto err = write("report.json", jsonText(nlohmann::ordered_json(comp.report)))) return err;

  // One launch through the native entry, inside guard zones.
  NativeKernel native;
  if (auto err = prepareNative(comp.object, knobs.isa, rec.params, initial, native, rec.workspaces))
    return finish(archive, dir, rec, p, "load", *err);
  native.run();
  rec.packets_full = native.record.packets_full;
  rec.packets_masked = native.record.packets_masked;
  std::vector<std::vector<float>> got(rec.params.size());  // outputs' values, for the oracle
  for (size_t i = 0; i < rec.params.size(); ++i) {
    const ParamInfo& info = rec.params[i];
    if (!info.output) continue;
    const std::span<const std::byte> v = std::as_const(*native.buffers).viewBytes(i);
    native.expected[i].assign(reinterpret_cast<const char*>(v.data()), v.size());
    if (auto err = write(outputFile(info), native.expected[i])) return err;
    host::ParamData values;
    if (auto err = valuesOfView(info, native.expected[i], values))
      return finish(archive, dir, rec, p, "launch", "output '" + info.name + "': " + *err);
    got[i] = oracleValues(info, values);
  }
  if (auto err = checkState(native)) return finish(archive, dir, rec, p, "launch", *err);

  // The oracle: every output within atol + rtol * |ref| of the FP64 reference, plus the kernel's
  // own allowance where it has one (gemm: its K-term rounding bound, kernels::libraryAllowance).
  std::vector<std::vector<double>> allowance;
  if (auto err = kernels::libraryAllowance(c.request, inputs, allowance))
    return finish(archive, dir, rec, p, "reference", *err);
  std::string mismatch;
  for (size_t i = 0; i < rec.params.size(); ++i) {
    const ParamInfo& info = rec.params[i];
    if (!info.output) continue;
    const std::vector<double>* extra = i < allowance.size() && !allowance[i].empty() ? &allowance[i] : nullptr;
    host::CompareResult cr = host::compareF64(got[i], reference[i], p.atol, p.rtol, oracleStorage(info), extra);
    rec.oracle.push_back({info.name, cr.pass, cr.max_abs_err, cr.max_rel_err, cr.first_bad});
    if (!cr.pass && mismatch.empty())
      mismatch = fmt::format("output '{}' is outside the tolerance at element {}: got {}, FP64 reference {}", info.name,
                             cr.first_bad, got[i][cr.first_bad], reference[i][cr.first_bad]);
  }
  if (!mismatch.empty()) return finish(archive, dir, rec, p, "oracle", mismatch);
  return finish(archive, dir, rec, p);
}

nlohmann::ordered_json toJson(const CaptureRecord& r, const Protocol& p) {
  nlohmann::ordered_json j;
  j["format"] = "kiln-bench-capture/1";
  j["case"] = r.case_id;
  j["arm"] = r.arm;
  j["status"] = r.ok ? "ok" : "failed";
  j["reason"] = r.reason;
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  for (const ParamInfo& info : r.params) {
    nlohmann::ordered_json q;
    q["name"] = info.name;
    q["kind"] = kindName(info.kind);
    if (info.kind == runtime::ParamKind::View) {
      q["shape"] = info.shape;
      q["elem"] = std::string(ir::elemName(info.elem));
      q["role"] = info.output ? "output" : "input";
      q["input"] = inputFile(info);
      if (info.output) {
        q["output"] = outputFile(info);
        q["reference"] = referenceFile(info);
      }
    } else if (info.kind == runtime::ParamKind::I64) {
      q["value"] = info.i64;
    } else {
      q["value"] = static_cast<double>(info.f32);
    }
    params.push_back(q);
  }
  j["params"] = params;
  if (!r.workspaces.empty()) j["workspace_elements"] = r.workspaces;
  j["object"] = {{"file", "kernel.o"}, {"bytes", r.object_bytes}, {"sha256", r.object_sha256}};
  nlohmann::ordered_json oracle = nlohmann::ordered_json::array();
  for (const OracleOutput& o : r.oracle)
    oracle.push_back({{"name", o.name},
                      {"pass", o.pass},
                      {"max_abs_err", o.max_abs_err},
                      {"max_rel_err", o.max_rel_err},
                      {"first_bad", o.first_bad}});
  j["oracle"] = {{"atol", p.atol}, {"rtol", p.rtol}, {"outputs", oracle}};
  j["launch_record"] = {{"packets_full", r.packets_full}, {"packets_masked", r.packets_masked}};
  return j;
}

std::optional<std::string> fromJson(const nlohmann::json& j, CaptureRecord& out) {
  out = CaptureRecord{};
  try {
    if (j.at("format") != "kiln-bench-capture/1") return "unknown format";
    out.case_id = j.at("case").get<std::string>();
    out.arm = j.at("arm").get<std::string>();
    const std::string status = j.at("status").get<std::string>();
    if (status != "ok" && status != "failed") return "status must be ok or failed";
    out.ok = status == "ok";
    out.reason = j.at("reason").get<std::string>();
    for (const auto& q : j.at("params")) {
      ParamInfo info;
      info.name = q.at("name").get<std::string>();
      for (char ch : info.name)
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '.'))
          return "parameter name '" + info.name + "' is not a plain identifier";
      const std::string kind = q.at("kind").get<std::string>();
      if (kind == "view") {
        info.shape = q.at("shape").get<std::vector<int64_t>>();
        for (int64_t d : info.shape)
          if (d < 0 || d > (int64_t(1) << 32)) return "view '" + info.name + "' has a bad extent";
        info.output = q.at("role").get<std::string>() == "output";
        // Archives before typed views hold float32 views only and name no element type.
        const std::string elem = q.contains("elem") ? q.at("elem").get<std::string>() : "f32";
        bool known = false;
        for (ir::Elem e : {ir::Elem::F32, ir::Elem::F16, ir::Elem::BF16, ir::Elem::I32, ir::Elem::I64})
          if (ir::elemName(e) == elem) {
            info.elem = e;
            known = true;
          }
        if (!known) return "view '" + info.name + "' has an unknown element type '" + elem + "'";
      } else if (kind == "i64") {
        info.kind = runtime::ParamKind::I64;
        info.i64 = q.at("value").get<int64_t>();
      } else if (kind == "f32") {
        info.kind = runtime::ParamKind::F32;
        info.f32 = static_cast<float>(q.at("value").get<double>());
      } else {
        return "unknown parameter kind '" + kind + "'";
      }
      out.params.push_back(std::move(info));
    }
    if (j.contains("workspace_elements")) {
      out.workspaces = j.at("workspace_elements").get<std::vector<int64_t>>();
      for (int64_t n : out.workspaces)
        if (n < 1 || n > (int64_t(1) << 31)) return "a workspace has a bad element count";
    }
    out.object_sha256 = j.at("object").at("sha256").get<std::string>();
    out.object_bytes = j.at("object").at("bytes").get<int64_t>();
    for (const auto& o : j.at("oracle").at("outputs"))
      out.oracle.push_back({o.at("name").get<std::string>(), o.at("pass").get<bool>(),
                            o.at("max_abs_err").get<double>(), o.at("max_rel_err").get<double>(),
                            o.at("first_bad").get<int64_t>()});
    out.packets_full = j.at("launch_record").at("packets_full").get<int64_t>();
    out.packets_masked = j.at("launch_record").at("packets_masked").get<int64_t>();
  } catch (const nlohmann::json::exception& e) {
    return e.what();
  }
  return std::nullopt;
}

}  // namespace kiln::bench

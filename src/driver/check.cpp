#include "driver/check.h"

#include <fmt/format.h>

#include <memory>

#include "driver/compile.h"
#include "interp/interp.h"

namespace kiln::driver {

namespace {
// A kernel whose mma policies relax precision cannot be held to strict-FP32 bytes.
std::optional<std::string> relaxedPolicy(const ir::Kernel& kernel) {
  std::optional<std::string> found;
  ir::walk(kernel.body, [&](const ir::Op* op) {
    if (op->kind == ir::OpKind::Mma && !found && (op->mma_policy.allow_fma || op->mma_policy.allow_reassociation))
      found = fmt::format("{}:{}:{}", op->loc.file, op->loc.line, op->loc.col);
  });
  return found;
}
}  // namespace

std::optional<std::string> reference(const ir::Kernel& kernel, const plan::Knobs& knobs, const CheckOptions& options,
                                     std::vector<host::ParamData>& inputs, std::vector<std::vector<double>>& f64_views,
                                     std::vector<host::ParamData>& strict_views) {
  if (auto e = host::makeInputs(kernel, options.seed, options.scalar_args, inputs)) return e;
  for (const auto& [name, data] : options.views) {
    const ir::Value* param = nullptr;
    for (const ir::Value* p : kernel.params)
      if (p->name == name) param = p;
    if (!param || !param->type.isView()) return "no view parameter %" + name + " to take the given data";
    if (data.size() != inputs[param->index].data.size())
      return fmt::format("%{} has {} elements, the given data {}", name, inputs[param->index].data.size(), data.size());
    inputs[param->index].data = data;
  }
  for (const auto& [name, data] : options.int_views) {
    const ir::Value* param = nullptr;
    for (const ir::Value* p : kernel.params)
      if (p->name == name) param = p;
    if (!param || !param->type.isView() || !ir::isIntegerStorage(param->type.elem))
      return "no integer view parameter %" + name + " to take the given integers";
    if (data.size() != inputs[param->index].ints.size())
      return fmt::format("%{} has {} elements, the given data {}", name, inputs[param->index].ints.size(), data.size());
    inputs[param->index].ints = data;
  }
  interp::Options io;
  io.reduction_partitions = static_cast<int>(knobs.reduction_partitions);
  if (options.mode == CheckMode::F64 && options.f64_reference) {
    if (auto e = options.f64_reference(inputs, f64_views)) return e;
    for (const ir::Value* v : kernel.outputs())
      if (ir::isIntegerStorage(v->type.elem))
        return "an f64 reference gives f32 outputs; %" + v->name + " is an integer view";
    for (const ir::Value* v : kernel.outputs())
      if (static_cast<size_t>(v->index) >= f64_views.size() ||
          f64_views[v->index].size() != inputs[v->index].data.size())
        return "the f64 reference gave no result of the right size for %" + v->name;
    return std::nullopt;
  }
  if (options.mode == CheckMode::F64) {
    // strict_views keeps what the f64 run wrote into integer views (exact in either mode).
    strict_views = inputs;
    io.mode = interp::Mode::F64;
    return interp::evaluate(kernel, strict_views, io, &f64_views);
  }
  strict_views = inputs;
  io.mode = interp::Mode::StrictF32;
  return interp::evaluate(kernel, strict_views, io);
}

std::optional<std::string> check(const ir::Kernel& kernel, const plan::Knobs& knobs, const CheckOptions& options,
                                 CheckResult& out) {
  out = CheckResult{};
  if (options.mode == CheckMode::Bitexact) {
    if (knobs.fast_math)
      return "--check bitexact is refused under fast_math=on: fast math permits FMA and reassociation, so results "
             "need not match strict-FP32 bit for bit; use --check f64";
    if (auto at = relaxedPolicy(kernel))
      return fmt::format("--check bitexact is refused: the mma at {} allows reassociation or FMA; use --check f64",
                         *at);
  }
  std::vector<host::ParamData> inputs, strict;
  std::vector<std::vector<double>> f64;
  if (auto e = reference(kernel, knobs, options, inputs, f64, strict))
    return (options.mode == CheckMode::F64 && options.f64_reference ? "reference: " : "interpreter: ") + *e;

  std::vector<std::vector<double>> allowances;
  if (options.mode == CheckMode::F64 && options.f64_allowance)
    if (auto e = options.f64_allowance(inputs, allowances)) return "reference: " + *e;

  Compilation c;
  if (auto e = compile(kernel, knobs, c, Stage::Obj)) return e;
  out.compile_ms = c.report.value("compile_ms", 0.0);
  if (auto e = planDisagreesWithCode(c.report)) out.plan_vs_code = *e;
  if (c.report.contains("cache")) {
    out.cache = c.report["cache"].value("status", "off");
    out.cache_saved_ms = c.report["cache"].value("saved_ms", 0.0);
  }
  std::unique_ptr<runtime::LoadedKernel> loaded;
  if (auto e = load(c.object, kernel, knobs.isa, static_cast<int>(knobs.threads), loaded)) return e;
  std::vector<host::ParamData> got = inputs;
  runtime::KilnLaunchRecord record;
  if (auto e = run(*loaded, got, /*guarded=*/true, &record)) return e;
  out.packets_full = record.packets_full;
  out.packets_masked = record.packets_masked;

  out.pass = true;
  for (const ir::Value* v : kernel.outputs()) {
    OutputCheck oc;
    oc.name = v->name;
    const std::vector<float>& g = got[v->index].data;
    if (ir::isIntegerStorage(v->type.elem)) {
      // Integers are exact in every mode: every element equal to the interpreter's.
      host::BitexactResult r = host::compareInts(got[v->index].ints, strict[v->index].ints);
      oc.pass = r.pass;
      oc.mismatches = r.mismatches;
      oc.first_bad = r.first_bad;
    } else if (options.mode == CheckMode::F64) {
      const auto idx = static_cast<size_t>(v->index);
      const std::vector<double>* extra =
          idx < allowances.size() && !allowances[idx].empty() ? &allowances[idx] : nullptr;
      host::CompareResult r = host::compareF64(g, f64[v->index], options.atol, options.rtol, v->type.elem, extra);
      oc.pass = r.pass;
      oc.max_abs_err = r.max_abs_err;
      oc.max_rel_err = r.max_rel_err;
      oc.first_bad = r.first_bad;
      oc.mismatches = r.failing;
    } else {
      host::BitexactResult r = host::compareBitexact(g, strict[v->index].data);
      oc.pass = r.pass;
      oc.mismatches = r.mismatches;
      oc.first_bad = r.first_bad;
      host::CompareResult d = host::compareF64(
          g, std::vector<double>(strict[v->index].data.begin(), strict[v->index].data.end()), 0.0, 0.0);
      oc.max_abs_err = d.max_abs_err;
      oc.max_rel_err = d.max_rel_err;
    }
    out.pass = out.pass && oc.pass;
    out.max_abs_err = std::max(out.max_abs_err, oc.max_abs_err);
    out.max_rel_err = std::max(out.max_rel_err, oc.max_rel_err);
    out.outputs.push_back(oc);
  }
  out.native = std::move(got);
  return std::nullopt;
}

}  // namespace kiln::driver

// evaluate(): checks the arguments, sets up the views for the mode, runs the programs.
#include "interp/interp.h"
#include "host/storage.h"

#include <fmt/format.h>

#include "interp/machine.h"
#include "interp/steps.h"
#include "ir/range.h"

namespace kiln::interp {
namespace {

std::optional<std::string> checkArguments(const ir::Kernel& kernel, const std::vector<host::ParamData>& params,
                                          const Options& options) {
  if (!kernel.root() || kernel.root()->regions.empty())
    return fmt::format("kernel @{} has no root parallel op", kernel.name);
  if (params.size() != kernel.params.size())
    return fmt::format("kernel @{} takes {} parameters but {} were given", kernel.name, kernel.params.size(),
                       params.size());
  for (const ir::Value* p : kernel.params) {
    const std::string which = fmt::format("parameter '{}' (#{})", p->name, p->index);
    if (!p->type.isView()) {
      if (p->range)
        if (auto e = ir::rangeViolation(which, p->range->lo, p->range->hi, params[p->index].i64)) return e;
      continue;
    }
    const auto want = static_cast<size_t>(p->type.numElements());
    const bool integer = ir::isIntegerStorage(p->type.elem);
    const size_t got = integer ? params[p->index].ints.size() : params[p->index].data.size();
    if (got != want)
      return fmt::format("parameter %{} is {} ({} elements) but its data has {} {}elements", p->name,
                         ir::toString(p->type), want, got, integer ? "integer " : "");
    if (ir::isHalfStorage(p->type.elem))
      for (size_t i = 0; i < got; ++i) {
        const float x = params[p->index].data[i];
        if (x == x && host::bitsOf(host::roundToStorage(p->type.elem, x)) != host::bitsOf(x))
          return fmt::format("parameter %{} is {}: element {} = {} is not a value of {}", p->name,
                             ir::toString(p->type), i, x, ir::elemName(p->type.elem));
      }
    if (p->type.elem == ir::Elem::I32)
      for (size_t i = 0; i < got; ++i)
        if (params[p->index].ints[i] != static_cast<int32_t>(params[p->index].ints[i]))
          return fmt::format("parameter %{} is {}: element {} = {} is outside the i32 range", p->name,
                             ir::toString(p->type), i, params[p->index].ints[i]);
    if (p->range)
      for (size_t i = 0; i < got; ++i)
        if (auto e = ir::rangeViolation(which, p->range->lo, p->range->hi, params[p->index].ints[i],
                                        static_cast<int64_t>(i)))
          return e;
    if (p->range && p->range->ascending)
      for (size_t i = 1; i < got; ++i)
        if (auto e = ir::orderViolation(which, params[p->index].ints[i - 1], params[p->index].ints[i],
                                        static_cast<int64_t>(i)))
          return e;
  }
  if (options.reduction_partitions < 1 || options.reduction_partitions > 16)
    return fmt::format("reduction_partitions is {}; it must be in 1..16", options.reduction_partitions);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> evaluate(const ir::Kernel& kernel, std::vector<host::ParamData>& params,
                                    const Options& options, F64Views* f64_out) {
  if (auto err = checkArguments(kernel, params, options)) return err;
  std::vector<detail::Step> phases;
  for (const ir::Op* root : kernel.roots()) phases.push_back(detail::compileOp(*root));
  const size_t np = params.size();
  std::vector<std::vector<int64_t>*> ints(np, nullptr);
  for (const ir::Value* p : kernel.params)
    if (p->type.isView() && ir::isIntegerStorage(p->type.elem)) ints[p->index] = &params[p->index].ints;

  if (options.mode == Mode::StrictF32) {
    std::vector<std::vector<float>> workspaces;
    for (const ir::Value* w : kernel.workspaces) workspaces.emplace_back(w->type.numElements(), 0.0f);
    std::vector<std::vector<float>*> views(np + workspaces.size(), nullptr);
    for (const ir::Value* p : kernel.params)
      if (p->type.isView() && !ints[p->index]) views[p->index] = &params[p->index].data;
    for (size_t i = 0; i < workspaces.size(); ++i) views[np + i] = &workspaces[i];
    detail::Machine<float> machine(kernel, params, views, ints, options.reduction_partitions);
    for (const detail::Step& phase : phases) machine.run(phase);
    return std::nullopt;
  }

  std::vector<std::vector<double>> wide(np);
  std::vector<std::vector<double>> workspaces;
  for (const ir::Value* w : kernel.workspaces) workspaces.emplace_back(w->type.numElements(), 0.0);
  std::vector<std::vector<double>*> views(np + workspaces.size(), nullptr);
  for (const ir::Value* p : kernel.params) {
    if (!p->type.isView() || ints[p->index]) continue;
    const std::vector<float>& src = params[p->index].data;
    wide[p->index].assign(src.begin(), src.end());
    views[p->index] = &wide[p->index];
  }
  for (size_t i = 0; i < workspaces.size(); ++i) views[np + i] = &workspaces[i];
  detail::Machine<double> machine(kernel, params, views, ints, options.reduction_partitions);
  for (const detail::Step& phase : phases) machine.run(phase);
  for (const ir::Value* p : kernel.params) {
    if (!p->type.isView() || ints[p->index]) continue;
    std::vector<float>& dst = params[p->index].data;
    const std::vector<double>& src = wide[p->index];
    const ir::Elem elem = p->type.elem;  // a 16-bit view receives values of its type
    for (size_t i = 0; i < dst.size(); ++i) dst[i] = host::roundToStorage(elem, static_cast<float>(src[i]));
  }
  if (f64_out) *f64_out = std::move(wide);
  return std::nullopt;
}

}  // namespace kiln::interp

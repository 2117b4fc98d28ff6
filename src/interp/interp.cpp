// evaluate(): checks the arguments, sets up the views for the mode, runs the programs.
#include "interp/interp.h"

#include <fmt/format.h>

#include "interp/machine.h"
#include "interp/steps.h"

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
    if (!p->type.isView()) continue;
    const auto want = static_cast<size_t>(p->type.numElements());
    if (params[p->index].data.size() != want)
      return fmt::format("parameter %{} is {} ({} elements) but its data has {} elements", p->name,
                         ir::toString(p->type), want, params[p->index].data.size());
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

  if (options.mode == Mode::StrictF32) {
    std::vector<std::vector<float>> workspaces;
    for (const ir::Value* w : kernel.workspaces) workspaces.emplace_back(w->type.numElements(), 0.0f);
    std::vector<std::vector<float>*> views(np + workspaces.size(), nullptr);
    for (const ir::Value* p : kernel.params)
      if (p->type.isView()) views[p->index] = &params[p->index].data;
    for (size_t i = 0; i < workspaces.size(); ++i) views[np + i] = &workspaces[i];
    detail::Machine<float> machine(kernel, params, views, options.reduction_partitions);
    for (const detail::Step& phase : phases) machine.run(phase);
    return std::nullopt;
  }

  std::vector<std::vector<double>> wide(np);
  std::vector<std::vector<double>> workspaces;
  for (const ir::Value* w : kernel.workspaces) workspaces.emplace_back(w->type.numElements(), 0.0);
  std::vector<std::vector<double>*> views(np + workspaces.size(), nullptr);
  for (const ir::Value* p : kernel.params) {
    if (!p->type.isView()) continue;
    const std::vector<float>& src = params[p->index].data;
    wide[p->index].assign(src.begin(), src.end());
    views[p->index] = &wide[p->index];
  }
  for (size_t i = 0; i < workspaces.size(); ++i) views[np + i] = &workspaces[i];
  detail::Machine<double> machine(kernel, params, views, options.reduction_partitions);
  for (const detail::Step& phase : phases) machine.run(phase);
  for (const ir::Value* p : kernel.params) {
    if (!p->type.isView()) continue;
    std::vector<float>& dst = params[p->index].data;
    const std::vector<double>& src = wide[p->index];
    for (size_t i = 0; i < dst.size(); ++i) dst[i] = static_cast<float>(src[i]);
  }
  if (f64_out) *f64_out = std::move(wide);
  return std::nullopt;
}

}  // namespace kiln::interp

#include "fuzz/knob_grid.h"

#include <fmt/format.h>

#include "host/isa.h"
#include "ir/ir.h"
#include "target/target.h"

namespace kiln::fuzz {

KnobPoint randomKnobs(Rng& rng, const std::map<std::string, std::string>& pinned, const ir::Kernel* kernel,
                      bool block) {
  KnobPoint p;
  auto attempt = [&](const std::string& name, const std::string& value) {
    if (pinned.count(name)) return;
    if (!p.knobs.set(name, value)) p.assignments.push_back(name + "=" + value);
  };
  auto num = [](int64_t v) { return std::to_string(v); };
  std::string w =
      block ? rng.pick<std::string>({"4", "8", "8", "16"}) : rng.pick<std::string>({"1", "4", "8", "8", "16"});
  attempt("packet_width", w);
  // W as planned: the drawn width, a pinned one, or the target model's (auto).
  plan::Knobs resolved = p.knobs;
  if (auto it = pinned.find("packet_width"); it != pinned.end()) (void)resolved.set("packet_width", it->second);
  const int64_t pw =
      resolved.packet_width != 0 ? resolved.packet_width : target::of(resolved.target).model(resolved.isa).packet_width;
  attempt("block_size", num(pw * rng.pick<int64_t>({1, 2, 4, 8})));
  // local_lanes = W (one program across the lanes, the default realization) two times in
  // three; 1 (a lane per program, the seed's) otherwise.
  if (block)
    attempt("local_lanes", num(pw));
  else
    attempt("local_lanes", rng.chance(2, 3) ? num(pw) : "1");
  // One draw from all three on every host, so that the rest of the point is the same
  // everywhere; on a host that cannot run AVX-512 code (host/isa.h) avx512 becomes avx2.
  std::string isa = rng.pick<std::string>({"native", "avx2", "avx512"});
  if (isa == "avx512" && !host::cpuHasAvx512()) isa = "avx2";
  attempt("isa", isa);
  attempt("max_unrolled_tile_elements", num(rng.pick<int64_t>({0, 1, 4, 16, 64, 64, 256})));
  attempt("max_unrolled_mma_terms", num(rng.pick<int64_t>({0, 0, 1, 4, 8, 64})));
  attempt("mma_output_block", num(rng.pick<int64_t>({1, 2, 4})));
  attempt("max_unrolled_region_work", num(rng.pick<int64_t>({0, 64, 4096, 4096})));
  attempt("mma_indexable_snapshot", rng.chance(1, 2) ? "on" : "off");
  attempt("full_packet", rng.chance(1, 2) ? "on" : "off");
  attempt("full_packet_budget", num(rng.pick<int64_t>({0, 256, 4096, 1 << 20})));
  attempt("reduction_partitions", num(rng.range(1, 16)));
  attempt("fuse_recipes", rng.chance(3, 4) ? "on" : "off");
  attempt("threads", num(rng.pick<int64_t>({1, 1, 2})));
  attempt("fast_math", rng.chance(1, 6) ? "on" : "off");
  // The root domain flattened in another order (a permutation of its axis names) in half the
  // points; in the others the planner's own order: as written, or on a GPU the longest programs
  // first where gpu_heavy_first (drawn too) finds a rising axis (plan.cpp, orderHeavyFirst),
  // which a given order turns off.
  attempt("gpu_heavy_first", rng.chance(3, 4) ? "on" : "off");
  if (const ir::Op* root = kernel ? kernel->root() : nullptr;
      root && root->regions[0]->args.size() > 1 && rng.chance(1, 2)) {
    std::vector<std::string> axes;
    for (const ir::Value* a : root->regions[0]->args) axes.push_back(a->name);
    for (size_t i = axes.size(); i > 1; --i)
      std::swap(axes[i - 1], axes[static_cast<size_t>(rng.below(static_cast<int64_t>(i)))]);
    attempt("root_axis_order", fmt::format("{}", fmt::join(axes, ",")));
  }
  for (const auto& [name, value] : pinned) {
    if (auto e = p.knobs.set(name, value))
      throw std::invalid_argument(*e);  // the CLI validated pins first: this is a caller's bug
    p.assignments.push_back(name + "=" + value);
  }
  return p;
}

std::vector<std::string> gridIsas() {
  if (host::cpuHasAvx512()) return {"native", "avx2", "avx512"};
  return {"native", "avx2"};
}

bool precise(const ir::Kernel& kernel, const plan::Knobs& knobs) {
  if (knobs.fast_math) return false;
  bool relaxed = false;
  ir::walk(kernel.body, [&](const ir::Op* op) {
    relaxed =
        relaxed || (op->kind == ir::OpKind::Mma && (op->mma_policy.allow_fma || op->mma_policy.allow_reassociation));
  });
  return !relaxed;
}

}  // namespace kiln::fuzz

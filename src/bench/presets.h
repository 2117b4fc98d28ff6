// Named experiments. `seed-mma-roll` is the seed's six-case experiment (seed/SEED-EN.md):
// arms cap0 / cap8 (max_unrolled_mma_terms 0 / 8), everything else fixed as in the seed.
// `seed-mma-roll-indexable` is the seed's "next step": the same cases, cap8 with
// mma_indexable_snapshot off (A, the seed's SSA-keeping cap8) vs on (B); a separate experiment
// in its own archive.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "bench/experiment.h"

namespace kiln::bench {

struct PresetInfo {
  std::string name;
  std::string summary;
};
const std::vector<PresetInfo>& presets();

// The preset, with the full protocol (3 cycles, 7 samples, 30 ms warmup, 15 ms target) or,
// with `quick`, the short one (applyQuick).
std::optional<std::string> preset(const std::string& name, bool quick, Experiment& out);

// 1 cycle, 3 samples, 5 ms warmup, 2 ms sample target: the same checks, for CI and `make run`.
void applyQuick(Experiment& e);

}  // namespace kiln::bench

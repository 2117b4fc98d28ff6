// The knob grid of `kiln fuzz`: one random point per run, drawn from candidate values of every
// knob of interest. Expects: pinned knobs as name -> value (`--set`). Guarantees: every
// candidate goes through plan::Knobs::set, and a value the knob table rejects (an unknown knob
// such as `isa` today, an out-of-range value) is skipped, so candidates that become legal later
// join the grid without a change here; pinned knobs are applied last and always win.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "fuzz/rng.h"
#include "ir/ir.h"
#include "plan/knobs.h"

namespace kiln::fuzz {

struct KnobPoint {
  plan::Knobs knobs;
  std::vector<std::string> assignments;  // "name=value" of every knob that was set, in order
};

// `kernel` (optional) supplies the root domain's axis names for `root_axis_order`.
// `block`: the block family's points (generate.h): W of 4, 8 or 16 and local_lanes = W, the GPU's
// block form needing both.
KnobPoint randomKnobs(Rng& rng, const std::map<std::string, std::string>& pinned, const ir::Kernel* kernel = nullptr,
                      bool block = false);

// The ISAs the grid draws on this host: native, avx2 and, where the CPU runs it, avx512.
std::vector<std::string> gridIsas();

// True when results must equal strict-FP32 bit for bit: no fast_math and no mma that allows
// reassociation or FMA.
bool precise(const ir::Kernel& kernel, const plan::Knobs& knobs);

}  // namespace kiln::fuzz

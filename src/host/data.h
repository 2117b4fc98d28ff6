// Host data for a kernel's parameters: deterministic inputs, and output comparison.
// Shared by `kiln eval`, `kiln run`, the runtime tests and the bench harness.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace kiln::host {

// The value of one kernel parameter.
struct ParamData {
  std::vector<float> data;  // view: row-major elements (size = numElements of the view)
  int64_t i64 = 0;          // i64 scalar parameter
  float f32 = 0.0f;         // f32 scalar parameter
};

// Deterministic inputs (docs/cli.md, "Inputs"): every view that the kernel loads gets
// uniform values in [-1, 1) on a 2^-23 grid from a SplitMix64 stream seeded by (seed, param
// index); views only stored to start as zeros; f32 scalars get one draw of the same stream;
// i64 scalars are 0. `overrides` (name -> value) sets scalar parameters by name.
// Returns an error message for an override naming no scalar parameter or a malformed value.
std::optional<std::string> makeInputs(const ir::Kernel& kernel, uint64_t seed,
                                      const std::map<std::string, std::string>& overrides,
                                      std::vector<ParamData>& out);

}  // namespace kiln::host

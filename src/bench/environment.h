// environment.json: what the numbers were measured on and with — CPU model and flags, the
// kernel, load averages before and after, LLVM version, compiler and flags, kiln's git commit
// and dirty flag, the sha256 of the running binary, the pinned CPU, a timestamp. Provenance
// only: the audit checks that it is present and well-formed, it cannot re-verify a machine.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <string>
#include <vector>

namespace kiln::bench {

// The 1, 5 and 15 minute load averages (from /proc/loadavg; -1 when unreadable).
std::array<double, 3> loadAverages();

// Everything but the "after" values; call before the first capture.
nlohmann::ordered_json environmentBefore();
// Adds the load averages after the replay and the pinned CPU.
void environmentAfter(nlohmann::ordered_json& env, int pinned_cpu);

// Keys environment.json must have (the audit's check).
const std::vector<std::string>& environmentKeys();

}  // namespace kiln::bench

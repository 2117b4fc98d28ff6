// A fuzz campaign (`kiln fuzz`): generate programs, run each differentially under a random knob
// point, shrink every failure and write its reproducer. Also the replay of one reproducer.
// Expects: pinned knobs already validated by the caller. Guarantees: deterministic from the
// seed (program texts, knob points, inputs; only the time limit can end a run earlier);
// progress lines on `log`; a failure never ends the campaign.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "fuzz/differential.h"
#include "fuzz/generate.h"
#include "plan/knobs.h"

namespace kiln::fuzz {

struct CampaignOptions {
  uint64_t seed = 1;
  int64_t programs = 100;
  double time_limit_s = 0;                    // 0 = none; checked between programs
  std::map<std::string, std::string> pinned;  // --set
  std::string out_dir = "fuzz-out";           // reproducers (created on the first failure)
  double shrink_seconds = 60;                 // per failure
  int timeout_s = 30;                         // CPU seconds per run (4x in wall time: a hang)
  Family family = Family::Any;                // which programs (generate.h) and knob points (knob_grid.h)
};

struct Failure {
  int64_t program = 0;
  uint64_t program_seed = 0;
  Outcome outcome;
  std::string file;  // the reproducer, or "" when it could not be written
};

struct CampaignResult {
  int64_t programs = 0;  // generated and run
  int64_t runs = 0;      // native compile + run
  int64_t passed = 0;
  int64_t mismatches = 0;
  int64_t crashes = 0;
  int64_t errors = 0;  // a run that failed cleanly where it should not (interpreter, compile bug, guard)
  int64_t refused = 0;
  int64_t generator_bugs = 0;
  double seconds = 0;
  std::vector<Failure> failures;
  std::map<std::string, int64_t> refusals;  // reason -> count
  bool failed() const { return mismatches + crashes + errors + generator_bugs > 0; }
  nlohmann::ordered_json json(uint64_t seed) const;
};

CampaignResult runCampaign(const CampaignOptions& options, std::ostream& log);

// A reproducer's run: knobs and inputs as its .knobs file gives them ("--set k=v",
// "--input-seed N", "--specials", one per line).
struct Replay {
  plan::Knobs knobs;
  std::vector<std::string> assignments;  // the "--set" lines, as NAME=VALUE
  InputConfig inputs;
};
std::optional<std::string> readReplayOptions(const std::string& path, Replay& out);

// The knob point (drawn from the program's seed `ps`, pinned knobs applied) and the inputs that
// a campaign runs program `p` under; `kiln fuzz --emit-programs` writes them beside the program.
Replay campaignRun(const CampaignOptions& options, uint64_t ps, const Program& p);

// Shrinks a reproducer that still fails with `failure` (its knobs, its inputs, then its text) as
// a campaign does; `replay` is updated to what is left. Returns the shrunk text.
std::string shrinkReplay(const std::string& text, Replay& replay, const Outcome& failure,
                         const CampaignOptions& options, std::ostream& log);

// Writes FILE.tile (with `header` comment lines above the text) and FILE.knobs.
bool writeReplay(const std::string& tilePath, const std::string& header, const std::string& text, const Replay& replay);

}  // namespace kiln::fuzz

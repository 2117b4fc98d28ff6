#include "fuzz/campaign.h"

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>

#include "fuzz/generate.h"
#include "fuzz/knob_grid.h"
#include "fuzz/rng.h"
#include "fuzz/shrink.h"
#include "ir/parser.h"

namespace kiln::fuzz {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Failures are the same when the verdict and the reason's first clause ("bitexact",
// "compile", "signal 11 (...)") agree: shrinking keeps the kind of failure, not its numbers.
std::string reasonClass(const Outcome& o) {
  if (o.verdict == Verdict::Crash) return o.reason;
  return o.reason.substr(0, o.reason.find(':'));
}

bool sameFailure(const Outcome& a, const Outcome& b) {
  return a.verdict == b.verdict && reasonClass(a) == reasonClass(b);
}

plan::Knobs knobsOf(const std::vector<std::string>& assignments) {
  plan::Knobs k;
  for (const std::string& a : assignments) (void)k.setAssignment(a);
  return k;
}

struct Repro {
  std::vector<std::string> assignments;
  InputConfig inputs;
  std::string text;
};

// Knobs back to their defaults one by one, plain inputs, then the program itself.
Repro shrinkFailure(const std::string& text, const Repro& start, const Outcome& failure, const CampaignOptions& options,
                    std::ostream& log) {
  Repro r = start;
  auto fails = [&](const ir::Kernel& k, const std::vector<std::string>& as, const InputConfig& in) {
    return sameFailure(differential(k, knobsOf(as), in, true, options.timeout_s), failure);
  };
  ir::DiagEngine diag;
  if (failure.reason.rfind("timeout", 0) == 0) {
    log << "fuzz:   (a timeout is not shrunk: every attempt could take the whole timeout)\n";
    r.text = text;
    return r;
  }
  auto start_time = Clock::now();
  {
    auto k = ir::parseKernel(text, "fuzz.tile", diag);
    if (k) {
      for (size_t i = 0; i < r.assignments.size();) {
        const std::string name = r.assignments[i].substr(0, r.assignments[i].find('='));
        if (options.pinned.count(name)) {
          ++i;
          continue;
        }
        auto fewer = r.assignments;
        fewer.erase(fewer.begin() + static_cast<long>(i));
        if (fails(*k, fewer, r.inputs))
          r.assignments = fewer;
        else
          ++i;
      }
      InputConfig plain{0, false};
      if ((r.inputs.seed != 0 || r.inputs.specials) && fails(*k, r.assignments, plain)) r.inputs = plain;
    }
  }
  ShrinkOptions so;
  so.max_seconds = std::max(1.0, options.shrink_seconds - since(start_time));
  ShrinkStats stats;
  const plan::Knobs knobs = knobsOf(r.assignments);
  r.text = shrink(
      text,
      [&](const ir::Kernel& k) {
        return sameFailure(differential(k, knobs, r.inputs, true, options.timeout_s), failure);
      },
      so, &stats);
  log << fmt::format("fuzz:   shrunk in {:.1f} s: {} attempts, {} kept; {} knob(s) left\n", since(start_time),
                     stats.attempts, stats.kept, r.assignments.size());
  return r;
}

std::string writeRepro(const CampaignOptions& o, int64_t n, uint64_t programSeed, const Repro& r,
                       const Outcome& outcome, const std::string& original) {
  std::error_code ec;
  std::filesystem::create_directories(o.out_dir, ec);
  const std::string base = fmt::format("{}/fuzz-{}-{}", o.out_dir, o.seed, n);
  Replay replay{knobsOf(r.assignments), r.assignments, r.inputs};
  bool ok = writeReplay(base + ".tile",
                        fmt::format("# kiln fuzz --seed {}: program {} (program seed {:#x}), shrunk\n# {}: {}\n"
                                    "# replay: kiln fuzz --replay {}.tile   (knobs and inputs from {}.knobs)\n",
                                    o.seed, n, programSeed, verdictName(outcome.verdict), outcome.reason, base, base),
                        r.text, replay);
  std::ofstream reason(base + ".reason");
  reason << verdictName(outcome.verdict) << ": " << outcome.reason << "\n";
  std::ofstream orig(base + ".orig.tile");
  orig << original;
  if (!ok || !reason || !orig) return "";
  return base + ".tile";
}

}  // namespace

nlohmann::ordered_json CampaignResult::json(uint64_t seed) const {
  nlohmann::ordered_json j;
  j["seed"] = seed;
  j["programs"] = programs;
  j["runs"] = runs;
  j["passed"] = passed;
  j["mismatches"] = mismatches;
  j["crashes"] = crashes;
  j["errors"] = errors;
  j["refused"] = refused;
  j["generator_bugs"] = generator_bugs;
  j["seconds"] = std::round(seconds * 1000) / 1000;
  j["isas"] = gridIsas();
  nlohmann::ordered_json fs = nlohmann::ordered_json::array();
  for (const Failure& f : failures)
    fs.push_back({{"program", f.program},
                  {"program_seed", fmt::format("{:#x}", f.program_seed)},
                  {"verdict", verdictName(f.outcome.verdict)},
                  {"reason", f.outcome.reason},
                  {"reproducer", f.file}});
  j["failures"] = fs;
  j["refusals"] = refusals;
  return j;
}

Replay campaignRun(const CampaignOptions& o, uint64_t ps, const Program& p) {
  Rng rng(ps ^ 0x4B4E4F42ull);
  auto pinned = o.pinned;
  if (p.specials && !pinned.count("fast_math")) pinned["fast_math"] = "off";
  // The block family's programs exist for the GPU's block form, which local_lanes=1 turns off.
  KnobPoint kp = randomKnobs(rng, pinned, p.kernel.get(), o.family == Family::Block);
  return {kp.knobs, kp.assignments, {ps, p.specials}};
}

CampaignResult runCampaign(const CampaignOptions& o, std::ostream& log) {
  CampaignResult res;
  const auto start = Clock::now();
  for (int64_t n = 0; n < o.programs; ++n) {
    if (o.time_limit_s > 0 && since(start) >= o.time_limit_s) {
      log << fmt::format("fuzz: time limit of {} s reached after {} programs\n", o.time_limit_s, n);
      break;
    }
    const uint64_t ps = programSeed(o.seed, static_cast<uint64_t>(n));
    ++res.programs;
    Program p;
    if (auto e = generate(ps, p, o.family)) {
      ++res.generator_bugs;
      log << fmt::format("fuzz: program {}: {}\n", n, *e);
      Failure f;
      f.program = n;
      f.program_seed = ps;
      f.outcome = {Verdict::Error, "generator bug"};
      res.failures.push_back(f);
      continue;
    }
    Replay run = campaignRun(o, ps, p);
    KnobPoint kp{run.knobs, run.assignments};
    Outcome out = differential(*p.kernel, kp.knobs, run.inputs, true, o.timeout_s);
    ++res.runs;
    switch (out.verdict) {
      case Verdict::Pass: ++res.passed; break;
      case Verdict::Refused: {
        ++res.refused;
        // Tallied without value names, which differ from program to program.
        static const std::regex value(R"(%[A-Za-z0-9_.]+)");
        std::string key = std::regex_replace(out.reason, value, "%_").substr(0, 160);
        ++res.refusals[key];
        break;
      }
      case Verdict::Mismatch:
      case Verdict::Error:
      case Verdict::Crash: {
        (out.verdict == Verdict::Mismatch ? res.mismatches
         : out.verdict == Verdict::Crash  ? res.crashes
                                          : res.errors)++;
        log << fmt::format("fuzz: program {} (seed {:#x}): {}: {}\n", n, ps, verdictName(out.verdict), out.reason);
        Repro start{kp.assignments, run.inputs, p.text};
        Repro r = shrinkFailure(p.text, start, out, o, log);
        Failure f{n, ps, out, writeRepro(o, n, ps, r, out, p.text)};
        log << fmt::format("fuzz:   reproducer: {}\n", f.file.empty() ? "(could not be written)" : f.file);
        res.failures.push_back(f);
        break;
      }
    }
    if ((n + 1) % 25 == 0)
      log << fmt::format("fuzz: {} programs, {} failures, {} refused, {:.1f} s\n", n + 1, res.failures.size(),
                         res.refused, since(start));
  }
  res.seconds = since(start);
  return res;
}

std::string shrinkReplay(const std::string& text, Replay& replay, const Outcome& failure,
                         const CampaignOptions& options, std::ostream& log) {
  Repro r = shrinkFailure(text, {replay.assignments, replay.inputs, text}, failure, options, log);
  replay.assignments = r.assignments;
  replay.knobs = knobsOf(r.assignments);
  replay.inputs = r.inputs;
  return r.text;
}

bool writeReplay(const std::string& tilePath, const std::string& header, const std::string& text,
                 const Replay& replay) {
  std::ofstream tile(tilePath);
  tile << header << text;
  std::string base = tilePath.ends_with(".tile") ? tilePath.substr(0, tilePath.size() - 5) : tilePath;
  std::ofstream knobs(base + ".knobs");
  for (const std::string& a : replay.assignments) knobs << "--set " << a << "\n";
  if (replay.inputs.seed != 0) knobs << "--input-seed " << replay.inputs.seed << "\n";
  if (replay.inputs.specials) knobs << "--specials\n";
  return static_cast<bool>(tile) && static_cast<bool>(knobs);
}

std::optional<std::string> readReplayOptions(const std::string& path, Replay& out) {
  std::ifstream in(path);
  if (!in) return fmt::format("cannot read '{}'", path);
  int lineNo = 0;
  for (std::string line; std::getline(in, line);) {
    ++lineNo;
    if (line.empty() || line[0] == '#') continue;
    auto where = [&] { return fmt::format("{}:{}", path, lineNo); };
    if (line.rfind("--set ", 0) == 0) {
      if (auto e = out.knobs.setAssignment(line.substr(6))) return where() + ": " + *e;
      out.assignments.push_back(line.substr(6));
    } else if (line.rfind("--input-seed ", 0) == 0) {
      try {
        out.inputs.seed = std::stoull(line.substr(13));
      } catch (...) {
        return where() + ": --input-seed needs an unsigned integer";
      }
    } else if (line == "--specials") {
      out.inputs.specials = true;
    } else {
      return where() + ": expected '--set NAME=VALUE', '--input-seed N' or '--specials', got '" + line + "'";
    }
  }
  return std::nullopt;
}

}  // namespace kiln::fuzz

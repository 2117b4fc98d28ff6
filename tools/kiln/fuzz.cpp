// `kiln fuzz --programs N --seed S [--time-limit SEC] [--set k=v]... [--out DIR]`: the random-program
// differential tester (docs/fuzz.md). `kiln fuzz --replay FILE.tile` reruns one reproducer with
// the knobs and inputs of FILE.knobs.
#include <filesystem>
#include <iostream>

#include "command.h"
#include "fuzz/campaign.h"
#include "fuzz/generate.h"
#include "fuzz/knob_grid.h"
#include "ir/printer.h"
#include "jit/compile.h"

namespace kiln::cli {

Command addFuzz(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "fuzz", "Differential testing: random programs, interpreter vs native code under random knobs");
  struct Args {
    fuzz::CampaignOptions campaign;
    std::vector<std::string> sets;
    std::string replay;
    bool shrink = false;
    std::string emit_programs;
    std::string family = "any";
  };
  auto a = std::make_shared<Args>();
  app->add_option("--programs", a->campaign.programs, "Programs to generate and run (default 100)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 40));
  app->add_option("--seed", a->campaign.seed, "Seed of the whole run (default 1): same seed, same programs")
      ->check(seedValidator());
  app->add_option("--time-limit", a->campaign.time_limit_s,
                  "Stop starting new programs after SEC seconds (default 0: no limit); shrinking may add to it")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--set", a->sets, "Pin a knob for every run, NAME=VALUE (repeatable); the others are drawn");
  app->add_option("--out", a->campaign.out_dir, "Directory for reproducers (default fuzz-out)");
  app->add_option("--shrink-seconds", a->campaign.shrink_seconds, "Time budget to shrink one failure (default 60)")
      ->check(CLI::NonNegativeNumber);
  app->add_option("--timeout", a->campaign.timeout_s,
                  "CPU seconds one run may use before it counts as a crash (default 30; a run still going after 4x "
                  "that in wall time is a hang)")
      ->check(CLI::Range(1, 3600));
  app->add_option("--replay", a->replay,
                  "Rerun one reproducer FILE.tile with the knobs and inputs of FILE.knobs (beside it, if present)");
  app->add_flag("--shrink", a->shrink,
                "With --replay: shrink a reproducer that still fails into FILE.shrunk.tile and FILE.shrunk.knobs");
  app->add_option("--family", a->family,
                  "Which programs: any (default: every construct) or block (the GPU's block form: rows and a column "
                  "dim, mmas over one contracted dim, f32 reductions; local_lanes=W; docs/fuzz.md)")
      ->check(CLI::IsMember({"any", "block"}));
  app->add_option("--emit-programs", a->emit_programs,
                  "Run nothing: write the campaign's programs as DIR/fuzz-SEED-N.tile with the knob point and inputs "
                  "each would run under in FILE.knobs (e.g. for a GPU replay: scripts/gpu/fuzz-capture.sh)");
  app->footer(
      "Prints progress on stderr and a JSON summary on stdout. Exit codes: 0 no failure, 1 a mismatch, crash, "
      "error or generator bug (reproducers in --out), or a replay that still fails.");
  return {app, [a] {
            a->campaign.family = *fuzz::familyNamed(a->family);
            plan::Knobs probe;
            for (const std::string& s : a->sets) {
              if (auto e = probe.setAssignment(s)) {
                std::cerr << "kiln fuzz: error: " << *e << '\n';
                return 1;
              }
              auto eq = s.find('=');
              a->campaign.pinned[s.substr(0, eq)] = s.substr(eq + 1);
            }
            // Every program runs: a pinned ISA this host cannot run is refused before the first.
            if (a->emit_programs.empty())
              if (auto why = jit::cannotRunHere(probe.isa)) {
                std::cerr << "kiln fuzz: error: --set isa=" << probe.isa << ": " << *why << '\n';
                return 2;
              }
            if (!a->replay.empty()) {
              std::unique_ptr<ir::Kernel> kernel = loadKernel(a->replay);
              if (!kernel) return 1;
              fuzz::Replay r;
              std::string knobsFile = a->replay;
              if (knobsFile.size() > 5 && knobsFile.ends_with(".tile")) knobsFile.resize(knobsFile.size() - 5);
              knobsFile += ".knobs";
              if (std::filesystem::exists(knobsFile))
                if (auto e = fuzz::readReplayOptions(knobsFile, r)) {
                  std::cerr << "kiln fuzz: error: " << *e << '\n';
                  return 1;
                }
              for (const auto& [name, value] : a->campaign.pinned) {
                (void)r.knobs.set(name, value);
                r.assignments.push_back(name + "=" + value);
              }
              fuzz::Outcome o = fuzz::differential(*kernel, r.knobs, r.inputs, true, a->campaign.timeout_s);
              nlohmann::ordered_json j;
              j["file"] = a->replay;
              j["check"] = fuzz::precise(*kernel, r.knobs) ? "bitexact" : "f64";
              j["verdict"] = fuzz::verdictName(o.verdict);
              j["reason"] = o.reason;
              const bool failed = o.verdict != fuzz::Verdict::Pass && o.verdict != fuzz::Verdict::Refused;
              if (a->shrink && failed) {
                std::string text = fuzz::shrinkReplay(ir::print(*kernel), r, o, a->campaign, std::cerr);
                std::string out = knobsFile.substr(0, knobsFile.size() - 6) + ".shrunk.tile";
                if (!fuzz::writeReplay(out,
                                       "# kiln fuzz --replay " + a->replay + " --shrink\n# " +
                                           fuzz::verdictName(o.verdict) + ": " + o.reason + "\n",
                                       text, r)) {
                  std::cerr << "kiln fuzz: error: cannot write " << out << '\n';
                  return 1;
                }
                j["shrunk"] = out;
              }
              std::cout << j.dump(2) << '\n';
              return failed ? 1 : 0;
            }
            if (!a->emit_programs.empty()) {
              std::error_code ec;
              std::filesystem::create_directories(a->emit_programs, ec);
              for (int64_t n = 0; n < a->campaign.programs; ++n) {
                const uint64_t ps = fuzz::programSeed(a->campaign.seed, static_cast<uint64_t>(n));
                fuzz::Program p;
                if (auto e = fuzz::generate(ps, p, a->campaign.family)) {
                  std::cerr << "kiln fuzz: program " << n << ": " << *e << '\n';
                  return 1;
                }
                const fuzz::Replay r = fuzz::campaignRun(a->campaign, ps, p);
                const std::string out =
                    a->emit_programs + "/fuzz-" + std::to_string(a->campaign.seed) + "-" + std::to_string(n) + ".tile";
                if (!fuzz::writeReplay(out,
                                       "# kiln fuzz --seed " + std::to_string(a->campaign.seed) + ": program " +
                                           std::to_string(n) + "\n",
                                       p.text, r)) {
                  std::cerr << "kiln fuzz: error: cannot write " << out << '\n';
                  return 1;
                }
              }
              std::cout << a->campaign.programs << " programs in " << a->emit_programs << '\n';
              return 0;
            }
            fuzz::CampaignResult r = fuzz::runCampaign(a->campaign, std::cerr);
            std::cout << r.json(a->campaign.seed).dump(2) << '\n';
            return r.failed() ? 1 : 0;
          }};
}

}  // namespace kiln::cli

// `kiln tune --kernel NAME --shape S [options] [--budget SEC]`: search the library's and the
// planner's legal candidates for this kernel and shape, time each against the default with the
// paired protocol, keep a winner only when its whole ratio range is below 1, and record the
// result in the tuning database (src/tune, docs/tune.md).
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <iomanip>
#include <iostream>

#include <fmt/format.h>

#include "command.h"
#include "jit/compile.h"
#include "kernel_source.h"
#include "knob_options.h"
#include "tune/tune.h"

namespace kiln::cli {

Command addTune(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "tune", "Find a faster block / split / vector width for a library kernel and shape; record it for later runs");
  struct Args {
    KernelSource source;
    KnobOptions knobs;
    double budget = 60;
    int cycles = 3;
    uint64_t seed = 0;
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  a->source.add(app);
  a->knobs.add(app);
  app->add_option("--budget", a->budget, "Seconds the search may take (default 60); candidates past it are skipped")
      ->check(CLI::Range(0.1, 86400.0));
  app->add_option("--cycles", a->cycles, "A,B,B,A cycles per candidate (default 3)")->check(CLI::Range(1, 50));
  app->add_option("--seed", a->seed, "Seed of the deterministic inputs")->check(seedValidator());
  app->add_flag("--json", a->json, "Print the result as JSON");
  app->footer(
      "A library kernel (--kernel NAME --shape S) is searched over blocks, KV split and vector width; a .tile "
      "FILE over the vector width and the realization (knobs only). The database is $KILN_TUNE_DB, else tuning.json in "
      "the "
      "object cache's directory (docs/cache.md); see docs/tune.md. Exit codes: 0 done (a winner or not), 1 an "
      "error.");
  return {app, [a] {
            std::unique_ptr<ir::Kernel> kernel = a->source.load("tune");  // a bad request is reported
            if (!kernel) return 1;
            tune::TuneOptions o;
            if (a->source.isLibrary())
              o.request = a->source.request();
            else
              o.file = kernel.get();
            if (!a->knobs.apply(o.knobs, "tune")) return 1;
            o.budget_s = a->budget;
            o.cycles = a->cycles;
            o.seed = a->seed;
            const bool tty = ::isatty(2);
            tune::TuneResult r;
            auto progress = [&](int done, int total, const std::string& label) {
              const int width = 24, filled = total ? done * width / total : width;
              std::cerr << (tty ? "\r" : "") << "tune: [" << std::string(filled, '#')
                        << std::string(width - filled, '.') << "] " << done << "/" << total << " " << label
                        << (tty ? "\033[K" : "\n") << std::flush;
            };
            if (auto e = tune::run(o, r, progress)) {
              std::cerr << (tty ? "\n" : "") << "kiln tune: error: " << *e << '\n';
              return 1;
            }
            if (tty) std::cerr << '\n';
            const tune::CandidateResult& best = r.chosen ? r.candidates[*r.chosen] : r.candidates[0];
            tune::Entry entry;
            entry.choice = best.choice;
            entry.record = {{"kernel", o.file ? o.file->name : o.request.name},
                            {"shape", o.file ? std::string("(.tile ") + a->source.file + ")" : o.request.shape},
                            {"options", o.request.options},
                            {"threads", o.knobs.threads},
                            {"label", best.choice.label()},
                            {"ratio", best.ratio},
                            {"ratio_min", best.ratio_min},
                            {"ratio_max", best.ratio_max},
                            {"pairs", best.pairs},
                            {"candidates", r.candidates.size()},
                            {"seconds", r.seconds},
                            {"cpu", jit::hostTarget().cpu},
                            {"date", [] {
                               char buf[32];
                               std::time_t t = std::time(nullptr);
                               std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&t));
                               return std::string(buf);
                             }()}};
            const std::optional<std::string> stored = tune::store(r.key, entry);
            if (a->json) {
              nlohmann::ordered_json j;
              j["key"] = r.key;
              j["seconds"] = r.seconds;
              j["budget_s"] = o.budget_s;
              j["chosen"] = best.choice.label();
              nlohmann::ordered_json cs = nlohmann::ordered_json::array();
              for (const tune::CandidateResult& c : r.candidates)
                cs.push_back({{"choice", c.choice.label()},
                              {"status", c.status},
                              {"ratio", c.ratio},
                              {"ratio_min", c.ratio_min},
                              {"ratio_max", c.ratio_max},
                              {"pairs", c.pairs},
                              {"measurements", c.measurements},
                              {"detail", c.detail}});
              j["candidates"] = cs;
              j["database"] = stored ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(tune::databasePath());
              std::cout << j.dump(2) << '\n';
            } else {
              std::cout << "candidate                              status                          ratio (min-max)\n";
              for (const tune::CandidateResult& c : r.candidates) {
                std::string ratio = c.pairs ? fmt::format("{:.3f} ({:.3f}-{:.3f})", c.ratio, c.ratio_min, c.ratio_max)
                                            : (c.status == "default" ? "1" : "-");
                std::cout << fmt::format("{:<38} {:<31} {}\n", c.choice.label(), c.status, ratio);
                if (!c.detail.empty()) std::cout << "    " << c.detail << '\n';
              }
              std::cout << fmt::format("{} in {:.1f} s (budget {:.0f} s{})\n",
                                       r.chosen ? "chosen: " + best.choice.label()
                                                : std::string("the default stays: no candidate's whole range is "
                                                              "below 1"),
                                       r.seconds, o.budget_s, r.budget_exhausted ? ", some candidates skipped" : "");
              if (!stored) std::cout << "recorded in " << tune::databasePath() << '\n';
            }
            if (stored) std::cerr << "kiln tune: warning: not recorded: " << *stored << '\n';
            return 0;
          }};
}

}  // namespace kiln::cli

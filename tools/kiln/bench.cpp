// `kiln bench`: the paired A/B benchmark into a new archive folder (src/bench, docs/bench.md).
//   kiln bench --preset seed-mma-roll --out DIR [--quick]
//   kiln bench --kernel NAME --shape S [kernel options] [--set k=v]... --arm A:k=v,... --arm B:k=v,... --out DIR
#include <unistd.h>

#include <cstdio>
#include <iostream>

#include "bench/bench.h"
#include "bench/presets.h"
#include "command.h"
#include "kernel_source.h"

namespace kiln::cli {

Command addBench(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "bench", "Paired A/B benchmark of planner settings: capture, native replay, archive (see docs/bench.md)");
  struct Args {
    std::string preset;
    KernelSource source;
    std::vector<std::string> sets;
    std::vector<std::string> arms;
    std::string out;
    bool quick = false;
    std::string name = "custom";
    int cycles = 0, samples = 0;
    double warmup_ms = -1, target_ms = -1;
    uint64_t seed = 0;
    int cpu = -1;
    bool held_out = false;
  };
  auto a = std::make_shared<Args>();
  std::string preset_names;
  for (const bench::PresetInfo& p : bench::presets()) preset_names += "\n  " + p.name + ": " + p.summary;
  app->add_option("--preset", a->preset, "A named experiment:" + preset_names);
  a->source.add(app);
  // Library kernels only (a case is rebuilt by name for the audit): no FILE positional; one
  // given is refused by name (below) rather than as an unexpected argument.
  if (CLI::Option* file = app->get_option_no_throw("FILE")) app->remove_option(file);
  app->get_option("--kernel")->description("A library kernel (see `kiln kernels`); bench takes no .tile file");
  app->allow_extras();
  app->add_option("--set", a->sets, "A knob for both arms, NAME=VALUE (repeatable; general form only)");
  app->add_option("--arm", a->arms,
                  "An arm, NAME:knob=value,knob=value (exactly two; the first is A, the ratio's denominator)");
  app->add_option("--out", a->out, "The archive folder to create; an existing one is refused")->required();
  app->add_flag("--quick", a->quick, "Short protocol: 1 cycle, 3 samples, 5 ms warmup, 2 ms sample target");
  app->add_option("--name", a->name, "Experiment name in the general form (default custom)");
  app->add_option("--cycles", a->cycles, "A,B,B,A cycles per case (default 3; quick 1)")->check(CLI::Range(1, 100));
  app->add_option("--samples", a->samples, "Samples per visit (default 7; quick 3)")->check(CLI::Range(1, 1000));
  app->add_option("--warmup-ms", a->warmup_ms, "Warmup per visit (default 30; quick 5)")
      ->check(CLI::Range(0.0, 60000.0));
  app->add_option("--target-ms", a->target_ms, "Sample batch target (default 15; quick 2)")
      ->check(CLI::Range(0.001, 60000.0));
  app->add_option("--seed", a->seed, "Seed of the deterministic inputs (default 0)")->check(seedValidator());
  app->add_option("--cpu", a->cpu, "CPU to pin the replay thread to (default: the last allowed one)")
      ->check(CLI::Range(0, 4095));
  app->add_flag("--held-out", a->held_out, "Mark the case as held out (declared in plan.json; general form)");
  app->footer(
      "Prints the table (also DIR/table.md). Exit codes: 0 every case validated, 1 a case failed (it is in the "
      "archive with its reason) or the bench could not run, 2 usage error.");
  return {
      app, [a, app] {
        auto fail = [](const std::string& m) {
          std::cerr << "kiln bench: error: " << m << '\n';
          return 1;
        };
        if (const std::vector<std::string> extra = app->remaining(); !extra.empty()) {
          std::cerr
              << "kiln bench: error: '" << extra[0]
              << "': bench times library kernels only (each case is rebuilt by name for kiln audit); give "
                 "--kernel NAME --shape S, or time a .tile file's knobs against its default with kiln tune FILE\n";
          return 2;
        }
        bench::Experiment e;
        if (!a->preset.empty()) {
          if (a->source.isLibrary() || !a->arms.empty() || !a->sets.empty())
            return fail("--preset fixes the kernels and arms; it takes no --kernel, --arm or --set");
          if (auto err = bench::preset(a->preset, a->quick, e)) return fail(*err);
        } else {
          if (!a->source.isLibrary()) return fail("give --preset NAME, or --kernel NAME --shape S with two --arm");
          if (a->arms.size() != 2)
            return fail("give exactly two --arm NAME:knob=value,... (A then B), got " + std::to_string(a->arms.size()));
          e.name = a->name;
          e.description = "kiln bench --kernel " + a->source.kernel + " --shape " + a->source.shape;
          for (int i = 0; i < 2; ++i)
            if (auto err = bench::parseArm(a->arms[i], e.arms[i])) return fail(*err);
          bench::Case c;
          c.request = a->source.request();
          c.id = c.request.name;
          c.label = c.request.name + " " + c.request.shape;
          c.held_out = a->held_out;
          for (const std::string& s : a->sets) {
            const auto eq = s.find('=');
            if (eq == std::string::npos || eq == 0) return fail("--set expects NAME=VALUE, got '" + s + "'");
            c.knobs.emplace_back(s.substr(0, eq), s.substr(eq + 1));
          }
          e.cases.push_back(std::move(c));
          if (a->quick) bench::applyQuick(e);
          std::unique_ptr<ir::Kernel> check;
          if (auto err = kernels::buildLibraryKernel(e.cases[0].request, check)) return fail(*err);
        }
        if (a->cycles > 0) e.protocol.cycles = a->cycles;
        if (a->samples > 0) e.protocol.samples = a->samples;
        if (a->warmup_ms >= 0) e.protocol.warmup_ms = a->warmup_ms;
        if (a->target_ms > 0) e.protocol.target_ms = a->target_ms;
        e.protocol.seed = a->seed;
        if (auto err = bench::validate(e)) return fail(*err);

        bench::BenchOptions options;
        options.replay.cpu = a->cpu;
        if (isatty(STDERR_FILENO)) {
          options.capture_progress = [](int64_t done, int64_t total) {
            std::fprintf(stderr, "\rkiln bench: captures %lld/%lld", static_cast<long long>(done),
                         static_cast<long long>(total));
            if (done == total) std::fputc('\n', stderr);
          };
          options.replay.progress = [](int64_t done, int64_t total, double seconds) {
            std::fprintf(stderr, "\rkiln bench: visits %lld/%lld, %.1f s", static_cast<long long>(done),
                         static_cast<long long>(total), seconds);
            if (done == total) std::fputc('\n', stderr);
          };
        }
        bench::BenchOutcome outcome;
        if (auto err = bench::runBench(e, a->out, options, outcome)) return fail(*err);
        std::cout << outcome.table << "\narchive: " << a->out << " (check it with: kiln audit " << a->out << ")\n";
        return outcome.results.all_validated ? 0 : 1;
      }};
}

}  // namespace kiln::cli

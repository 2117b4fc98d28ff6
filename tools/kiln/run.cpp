// `kiln run FILE|--kernel NAME --shape S --check f64|bitexact`: compile, run natively on the
// deterministic inputs of `kiln eval` (inside guard zones), compare with the interpreter (or a
// library kernel's FP64 reference), print the verdict.
#include <iomanip>
#include <iostream>
#include <map>

#include <nlohmann/json.hpp>

#include "command.h"
#include "driver/check.h"
#include "kernel_source.h"
#include "knob_options.h"
#include "npy_options.h"

namespace kiln::cli {

Command addRun(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("run", "Compile and run a kernel natively; check it against the interpreter");
  struct Args {
    KernelSource source;
    KnobOptions knobs;
    NpyOptions npy;
    uint64_t seed = 0;
    std::vector<std::string> scalar_args;
    std::string check = "f64";
    bool json = false;
  };
  auto a = std::make_shared<Args>();
  a->source.add(app);
  a->knobs.add(app);
  a->npy.add(app);
  app->add_option("--seed", a->seed, "Seed of the deterministic inputs (as for kiln eval)")->check(seedValidator());
  app->add_option("--arg", a->scalar_args,
                  "Scalar parameter value, NAME=VALUE, or an integer view's elements, NAME=V1,V2,... (repeatable)");
  app->add_option("--check", a->check,
                  "f64: |got - ref| <= 5e-5 + 5e-5*|ref| against the FP64 interpreter (a --kernel: against the "
                  "library's FP64 reference; gemm also allows 2 sqrt(K) u (|A||B|)[i,j], docs/kernels.md); bitexact: "
                  "identical bytes to the strict-f32 interpreter (precise mode "
                  "only)")
      ->check(CLI::IsMember({"f64", "bitexact"}));
  app->add_flag("--json", a->json, "Print the verdict as JSON");
  app->footer("Exit codes: 0 the check passed, 1 a mismatch or an error.");
  return {app, [a] {
            plan::Knobs knobs;
            if (!a->knobs.apply(knobs, "run")) return 1;
            a->source.applyTuning(knobs, a->knobs.sets);
            a->source.setTarget(knobs);
            std::unique_ptr<ir::Kernel> kernel = a->source.load("run");
            if (!kernel) return 1;
            a->source.applyTuning(*kernel, knobs, a->knobs.sets);
            driver::CheckOptions opts;
            opts.mode = a->check == "bitexact" ? driver::CheckMode::Bitexact : driver::CheckMode::F64;
            opts.seed = a->seed;
            a->source.configure(opts);
            if (!parseArgOptions(a->scalar_args, opts.scalar_args, "run")) return 1;
            if (!a->npy.load(*kernel, "run", opts.views, opts.int_views, opts.scalar_args)) return 1;
            driver::CheckResult r;
            if (auto e = driver::check(*kernel, knobs, opts, r)) {
              std::cerr << "kiln run: error: " << *e << (e->back() == '\n' ? "" : "\n") << a->source.hint(*e);
              return 1;
            }
            if (!a->npy.store(*kernel, "run", r.native)) return 1;
            if (a->json) {
              nlohmann::ordered_json j;
              j["check"] = a->check;
              j["pass"] = r.pass;
              j["max_abs_err"] = r.max_abs_err;
              j["max_rel_err"] = r.max_rel_err;
              nlohmann::ordered_json outs = nlohmann::ordered_json::array();
              for (const driver::OutputCheck& o : r.outputs)
                outs.push_back({{"name", o.name},
                                {"pass", o.pass},
                                {"max_abs_err", o.max_abs_err},
                                {"max_rel_err", o.max_rel_err},
                                {"mismatches", o.mismatches},
                                {"first_bad", o.first_bad}});
              j["outputs"] = outs;
              j["packets"] = {{"full", r.packets_full}, {"masked", r.packets_masked}};
              j["compile"] = {{"ms", r.compile_ms}, {"cache", r.cache}};
              j["tuning"] = {{"source", a->source.tuning}, {"choice", a->source.tuned_label}};
              if (r.cache == "hit") j["compile"]["saved_ms"] = r.cache_saved_ms;
              std::map<std::string, std::string> choices;
              if (a->source.isLibrary() && !kernels::libraryChoices(a->source.request(), choices))
                j["library"] = choices;
              std::cout << j.dump() << '\n';
            } else {
              std::cout << "check " << a->check << ": " << (r.pass ? "PASS" : "FAIL") << "  max_abs_err "
                        << std::setprecision(6) << r.max_abs_err << "  max_rel_err " << r.max_rel_err << '\n';
              for (const driver::OutputCheck& o : r.outputs)
                if (!o.pass)
                  std::cout << "  output %" << o.name << ": first mismatch at element " << o.first_bad << ", "
                            << o.mismatches
                            << (a->check == "bitexact" ? " elements differ" : " elements out of tolerance") << '\n';
              std::cout << std::fixed << std::setprecision(1) << "compile " << r.compile_ms << " ms, cache " << r.cache;
              if (r.cache == "hit") std::cout << " (" << r.cache_saved_ms << " ms saved)";
              if (a->source.tuning == "tuned") std::cout << ", tuned: " << a->source.tuned_label;
              if (a->source.tuning == "user")
                std::cout << ", tuned choice (" << a->source.tuned_label << ") overridden by the given options";
              std::cout << '\n';
            }
            return r.pass ? 0 : 1;
          }};
}

}  // namespace kiln::cli

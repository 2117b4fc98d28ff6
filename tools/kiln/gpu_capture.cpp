// `kiln gpu-capture --archive DIR --case NAME FILE|--kernel NAME --shape S`: one case of a GPU
// archive for kiln-replay (docs/gpu.md): the CPU run checked bit for bit against the
// interpreter and against the FP64 oracle, the PTX of the same kernel for target nvptx, and the
// expected output bytes.
#include <iostream>

#include "command.h"
#include "driver/gpu_capture.h"
#include "kernel_source.h"
#include "knob_options.h"

namespace kiln::cli {

Command addGpuCapture(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "gpu-capture", "Capture a kernel for an NVIDIA GPU: PTX, inputs' digests and the CPU's checked output bytes");
  struct Args {
    KernelSource source;
    KnobOptions knobs;
    std::string archive;
    std::string case_name;
    uint64_t seed = 0;
    double flops = 0.0;
    std::vector<std::string> input_bits;
    std::vector<std::string> args;
    bool digest_only = false;
  };
  auto a = std::make_shared<Args>();
  a->source.add(app);
  a->knobs.add(app);
  app->add_option("--archive", a->archive, "The archive folder (created; the case is added to its index.txt)")
      ->required();
  app->add_option("--case", a->case_name, "The case's folder name (letters, digits, '.', '_', '-')")->required();
  app->add_option("--seed", a->seed, "Seed of the deterministic inputs (as for kiln eval)")->check(seedValidator());
  app->add_option("--flops", a->flops, "Useful floating-point operations of one launch (for the replay's GFLOP/s)");
  app->add_option("--input-bits", a->input_bits,
                  "NAME=HEX: view<f32> NAME holds every 32-bit pattern from HEX on (element e: HEX + e), "
                  "not generated values (a conversion sweep)");
  app->add_option("--arg", a->args,
                  "NAME=VALUE: a scalar parameter's value, or an integer view's elements comma-separated "
                  "(lens=1,17,300), instead of generated ones (repeatable)");
  app->add_flag("--digest-only", a->digest_only,
                "Outputs travel as their FNV-1a digests only, without their bytes (outputs too large to carry)");
  app->footer("Exit codes: 0 captured, 1 an error or a CPU run that does not match the interpreter.");
  return {app, [a, app] {
            plan::Knobs knobs;
            if (!a->knobs.apply(knobs, "gpu-capture")) return 1;
            plan::Knobs gpu = knobs;  // the library sizes its programs for the GPU the case runs on
            gpu.target = target::Kind::Nvptx;
            a->source.setTarget(gpu);
            std::unique_ptr<ir::Kernel> kernel = a->source.load("gpu-capture");
            if (!kernel) return 1;
            driver::GpuCaptureOptions o;
            o.archive = a->archive;
            o.case_name = a->case_name;
            o.seed = a->seed;
            o.flops = a->flops;
            o.digest_only = a->digest_only;
            for (const std::string& b : a->input_bits) {
              const size_t eq = b.find('=');
              uint32_t base = 0;
              const std::string hex = eq == std::string::npos ? "" : b.substr(eq + 1);
              const bool ok = !hex.empty() && hex.size() <= 8 &&
                              hex.find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
              if (!ok || eq == 0) {
                std::cerr << "kiln gpu-capture: error: --input-bits " << b
                          << ": expected NAME=HEX (a view<f32> parameter and up to 8 hex digits)\n";
                return 1;
              }
              base = static_cast<uint32_t>(std::stoul(hex, nullptr, 16));
              o.bit_patterns[b.substr(0, eq)] = base;
            }
            a->source.configure(o.f64);
            if (!parseArgOptions(a->args, o.f64.scalar_args, "gpu-capture")) return 1;
            if (a->source.isLibrary()) {
              o.source = "library " + a->source.kernel + " --shape " + a->source.shape;
              for (const auto& [k, v] : a->source.request().options) o.source += " --" + k + " " + v;
            } else {
              o.source = "file " + a->source.file;
            }
            for (const std::string& s : a->knobs.sets) o.source += " --set " + s;
            for (const std::string& b : a->input_bits) o.source += " --input-bits " + b;
            for (const std::string& arg : a->args) o.source += " --arg " + arg;
            if (a->digest_only) o.source += " --digest-only";
            driver::GpuCaptureResult r;
            if (auto e = driver::captureGpuCase(*kernel, knobs, o, r)) {
              std::cerr << "kiln gpu-capture: error: " << *e << '\n';
              return 1;
            }
            if (!r.cpu_bitexact || !r.cpu_f64) {
              std::cerr << "kiln gpu-capture: error: case " << a->case_name << ": the CPU run "
                        << (!r.cpu_bitexact ? "differs from the strict-f32 interpreter" : "fails the FP64 check")
                        << "; nothing captured\n";
              return 1;
            }
            std::cout << "captured " << r.case_dir << ": CPU = interpreter bit for bit, "
                      << (r.f64_checked ? "FP64 check passed" : "no FP64 check (bit patterns)");
            if (!r.plan_vs_code.empty()) std::cout << " (plan vs code: " << r.plan_vs_code << ")";
            for (const auto& k : r.gpu_report["gpu"]["kernels"])
              std::cout << "; " << k["entry"].get<std::string>() << " grid " << k["grid"] << " x block " << k["block"];
            std::cout << '\n';
            return 0;
          }};
}

}  // namespace kiln::cli

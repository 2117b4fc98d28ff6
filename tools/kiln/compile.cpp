// `kiln compile FILE|--kernel NAME --shape S`: run the pipeline and print one stage (ir, plan,
// llvm, asm, obj) or the realization report; `--capture DIR` writes the exact object that is
// linked, plus the report; `--emit obj --out NAME.o --header NAME.h` writes an object and its C
// header for linking into a program of one's own (docs/api.md).
#include <filesystem>
#include <fstream>
#include <iostream>

#include "command.h"
#include "driver/c_header.h"
#include "driver/compile.h"
#include "ir/printer.h"
#include "jit/object_file.h"
#include "kernel_source.h"
#include "kernels/registry.h"
#include "knob_options.h"

namespace kiln::cli {

Command addCompile(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("compile", "Compile a kernel; print a stage or the realization report");
  struct Args {
    KernelSource source;
    std::string emit = "report";
    std::string output;
    std::string capture;
    std::string header;
    std::string symbol_prefix;
    KnobOptions knobs;
  };
  auto a = std::make_shared<Args>();
  a->source.add(app);
  app->add_option("--emit", a->emit,
                  "What to print: ir | plan | llvm | asm | obj | report | ptx (the PTX for an NVIDIA GPU: asm with "
                  "--set target=nvptx, which it implies)")
      ->check(CLI::IsMember({"ir", "plan", "llvm", "asm", "obj", "report", "ptx"}));
  app->add_option("-o,--output,--out", a->output, "Write the emitted stage to this file instead of stdout");
  app->add_option("--header", a->header,
                  "With --emit obj: also write this C header (entry points, shapes, a PREFIX_run function) for "
                  "linking the object into your own program");
  app->add_option("--symbol-prefix", a->symbol_prefix,
                  "With --header: the prefix of the object's symbols (default: the kernel's name and '_'), so "
                  "several kernels link into one program");
  app->add_option("--capture", a->capture,
                  "Write DIR/kernel.o (the exact object that runs), DIR/report.json and DIR/kernel.tile; DIR must "
                  "not exist");
  a->knobs.add(app);
  app->footer("Exit codes: 0 success, 1 invalid kernel, bad knob or failed compilation.");
  return {app, [a] {
            plan::Knobs knobs;
            const bool ptx = a->emit == "ptx";
            if (ptx) {
              knobs.target = target::Kind::Nvptx;
              a->emit = "asm";
            }
            if (!a->knobs.apply(knobs, "compile")) return 1;
            if (ptx && knobs.target != target::Kind::Nvptx) {
              std::cerr << "kiln compile: error: --emit ptx is the PTX of target=nvptx, but --set target="
                        << knobs.get("target") << " was given\n";
              return 1;
            }
            a->source.applyTuning(knobs, a->knobs.sets);
            a->source.setTarget(knobs);
            std::unique_ptr<ir::Kernel> kernel = a->source.load("compile");
            if (!kernel) return 1;
            a->source.applyTuning(*kernel, knobs, a->knobs.sets);
            static const std::map<std::string, driver::Stage> stages = {
                {"ir", driver::Stage::Ir},   {"plan", driver::Stage::Plan}, {"llvm", driver::Stage::Llvm},
                {"asm", driver::Stage::Asm}, {"obj", driver::Stage::Obj},   {"report", driver::Stage::Report}};
            driver::Stage stage = a->capture.empty() ? stages.at(a->emit) : driver::Stage::Report;
            driver::ExportOptions exports;
            if (!a->symbol_prefix.empty() && a->header.empty()) {
              std::cerr << "kiln compile: error: --symbol-prefix needs --header (an object for the JIT keeps "
                           "the kiln_ names)\n";
              return 1;
            }
            if (!a->header.empty()) {
              if (a->emit != "obj" || a->output.empty() || !a->capture.empty()) {
                std::cerr << "kiln compile: error: --header needs --emit obj and --out FILE.o (and no --capture)\n";
                return 1;
              }
              exports.symbol_prefix = a->symbol_prefix.empty() ? kernel->name + "_" : a->symbol_prefix;
              if (auto e = driver::checkSymbolPrefix(exports.symbol_prefix)) {
                std::cerr << "kiln compile: error: " << *e
                          << (a->symbol_prefix.empty() ? " (from the kernel's name; give --symbol-prefix)" : "")
                          << '\n';
                return 1;
              }
            }
            driver::Compilation c;
            if (auto e = driver::compile(*kernel, knobs, c, stage, exports)) {
              std::cerr << "kiln compile: error: " << *e << (e->back() == '\n' ? "" : "\n") << a->source.hint(*e);
              return 1;
            }
            if (!a->source.isLibrary())
              c.report["tuning"] = {{"source", a->source.tuning}, {"choice", a->source.tuned_label}};
            if (a->source.isLibrary()) {
              std::map<std::string, std::string> choices;
              if (!kernels::libraryChoices(a->source.request(), choices)) {
                c.report["library"] = {{"kernel", a->source.kernel},
                                       {"shape", a->source.shape},
                                       {"tuning", a->source.tuning},
                                       {"tuned_choice", a->source.tuned_label}};
                for (const auto& [k, v] : choices) c.report["library"][k] = v;
              }
            }
            if (!a->capture.empty()) {
              std::error_code ec;
              if (std::filesystem::exists(a->capture, ec)) {
                std::cerr << "kiln compile: error: capture directory '" << a->capture
                          << "' already exists; captures are never overwritten\n";
                return 1;
              }
              std::filesystem::create_directories(a->capture, ec);
              if (ec) {
                std::cerr << "kiln compile: error: cannot create '" << a->capture << "': " << ec.message() << '\n';
                return 1;
              }
              for (auto [name, bytes] : {std::pair<std::string, std::string>{"kernel.o", c.object},
                                         {"report.json", c.report.dump(2) + "\n"},
                                         {"kernel.tile", ir::print(*kernel)}})
                if (auto e = jit::writeFile(a->capture + "/" + name, bytes)) {
                  std::cerr << "kiln compile: error: " << *e << '\n';
                  return 1;
                }
              std::cout << "captured " << a->capture << "/kernel.o (" << c.object.size() << " bytes, sha256 "
                        << c.report["object"]["sha256"].get<std::string>() << ")\n";
              return 0;
            }
            std::string text;
            if (a->emit == "ir") text = ir::print(*kernel);
            if (a->emit == "plan") text = c.report.dump(2) + "\n";
            if (a->emit == "llvm") text = c.llvm_text;
            if (a->emit == "asm") text = c.assembly;
            if (a->emit == "obj") text = c.object;
            if (a->emit == "report") text = c.report.dump(2) + "\n";
            if (!a->output.empty()) {
              if (auto e = jit::writeFile(a->output, text)) {
                std::cerr << "kiln compile: error: " << *e << '\n';
                return 1;
              }
              if (!a->header.empty()) {
                const std::string object_name = std::filesystem::path(a->output).filename().string();
                if (auto e = jit::writeFile(
                        a->header, driver::cHeader(*kernel, knobs, exports.symbol_prefix, c.report, object_name))) {
                  std::cerr << "kiln compile: error: " << *e << '\n';
                  return 1;
                }
                std::cout << "wrote " << a->output << " (" << c.object.size() << " bytes, symbols "
                          << exports.symbol_prefix << "*) and " << a->header << '\n';
              }
              return 0;
            }
            std::cout << text;
            return 0;
          }};
}

}  // namespace kiln::cli

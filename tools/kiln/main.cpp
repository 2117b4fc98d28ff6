// kiln: the command-line driver. Each subcommand lives in its own file (check.cpp, ...);
// this file only registers them, parses the command line and dispatches.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "command.h"

int main(int argc, char** argv) {
  CLI::App app{"kiln: a tile-kernel compiler. Kernels are TileIR text files (.tile); see docs/cli.md.", "kiln"};
  app.require_subcommand(1);
  // In the order `kiln --help` lists them; a new subcommand is one more line here.
  const std::vector<kiln::cli::Command> commands = {
      kiln::cli::addCheck(app),       // check.cpp
      kiln::cli::addPrint(app),       // print.cpp
      kiln::cli::addEval(app),        // eval.cpp
      kiln::cli::addCompile(app),     // compile.cpp
      kiln::cli::addRun(app),         // run.cpp
      kiln::cli::addKernels(app),     // kernels.cpp
      kiln::cli::addBench(app),       // bench.cpp
      kiln::cli::addAudit(app),       // audit.cpp
      kiln::cli::addPeers(app),       // peers.cpp
      kiln::cli::addTune(app),        // tune.cpp
      kiln::cli::addFuzz(app),        // fuzz.cpp
      kiln::cli::addCache(app),       // cache.cpp
      kiln::cli::addGpuCapture(app),  // gpu_capture.cpp
  };
  app.footer("Exit codes: 0 success, 1 invalid input or failed evaluation, 2 usage error.");

  // CLI11 would call an unknown word a missing subcommand; name it instead.
  if (argc > 1 && argv[1][0] != '-') {
    bool known = false;
    for (const auto& c : commands) known = known || c.app->get_name() == argv[1];
    if (!known) {
      std::cerr << "kiln: unknown subcommand '" << argv[1] << "'\nRun with --help for more information.\n";
      return 2;
    }
  }

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);  // prints help, or the error on stderr
    return code == 0 ? 0 : 2;
  }

  try {
    for (const auto& c : commands) {
      if (!c.app->parsed()) continue;
      // The commands that compile reuse objects from the on-disk cache (kiln fuzz does not:
      // thousands of one-off kernels).
      const std::string name = c.app->get_name();
      if (name == "run" || name == "compile" || name == "gpu-capture" || name == "bench" || name == "peers" ||
          name == "tune")
        if (auto e = kiln::cli::useObjectCache()) {
          std::cerr << "kiln " << name << ": error: " << *e << '\n';
          return 1;
        }
      return c.run();
    }
  } catch (const std::exception& e) {
    std::cerr << "kiln: internal error: " << e.what() << '\n';
    return 1;
  }
  return 2;
}

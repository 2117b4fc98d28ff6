// The kiln CLI: one file per subcommand, registered in main.cpp.
// Each add* function declares its subcommand (name, one-line description, options) on the
// top-level app and returns the action to run when the user picked it. Actions return the
// process exit code: 0 success, 1 a problem with the input (diagnostics on stderr).
// Usage errors (unknown option, bad option value) are CLI11's and exit 2, see main.cpp.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "ir/ir.h"

namespace kiln::cli {

struct Command {
  CLI::App* app = nullptr;   // the subcommand, owned by the top-level app
  std::function<int()> run;  // called after parsing when `app` was chosen
};

Command addCheck(CLI::App& parent);
Command addPrint(CLI::App& parent);
Command addEval(CLI::App& parent);
Command addCompile(CLI::App& parent);
Command addRun(CLI::App& parent);
Command addKernels(CLI::App& parent);
Command addBench(CLI::App& parent);
Command addAudit(CLI::App& parent);
Command addPeers(CLI::App& parent);
Command addFuzz(CLI::App& parent);
Command addCache(CLI::App& parent);
Command addTune(CLI::App& parent);
Command addGpuCapture(CLI::App& parent);

// Turns on the on-disk object cache from the environment (docs/cache.md) for this process.
// Error: a bad KILN_CACHE_MAX_MB.
std::optional<std::string> useObjectCache();

// Parses and verifies the kernel in `path` ("-" reads stdin). On failure writes every
// diagnostic to stderr ("FILE:LINE:COL: error: MESSAGE [code]", one per line) and returns
// nullptr.
std::unique_ptr<ir::Kernel> loadKernel(const std::string& path);

// Validator for a 64-bit seed option: CLI11 wraps "-1" around and saturates 2^64, so accept
// only a plain decimal that fits in 0 .. 2^64-1.
CLI::Validator seedValidator();

// `--arg NAME=VALUE` options into `out` (name -> value text). On a malformed one writes
// "kiln COMMAND: error: ..." to stderr and returns false.
bool parseArgOptions(const std::vector<std::string>& args, std::map<std::string, std::string>& out,
                     const std::string& command);

}  // namespace kiln::cli

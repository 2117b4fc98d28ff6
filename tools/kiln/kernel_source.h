// Where a subcommand's kernel comes from: a .tile FILE (later also a library kernel).
#pragma once

#include <iostream>
#include <memory>
#include <string>

#include <CLI/CLI.hpp>

#include "command.h"

namespace kiln::cli {

struct KernelSource {
  std::string file;

  void add(CLI::App* app) { app->add_option("FILE", file, "The .tile kernel (\"-\" reads stdin)")->required(); }

  // The verified kernel, or nullptr after printing diagnostics.
  std::unique_ptr<ir::Kernel> load(const char* command) const { return loadKernel(file); }
};

}  // namespace kiln::cli

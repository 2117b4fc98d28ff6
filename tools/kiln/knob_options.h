// Options shared by the subcommands that compile: --set name=value (repeatable), --threads.
#pragma once

#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "plan/knobs.h"

namespace kiln::cli {

struct KnobOptions {
  std::vector<std::string> sets;
  int threads = 0;  // 0 = the knob's value

  void add(CLI::App* app) {
    std::string names;
    for (const plan::KnobInfo& k : plan::knobTable()) names += "\n  " + k.name + " (default " + k.default_value + ")";
    app->add_option("--set", sets, "Set a planner knob, NAME=VALUE (repeatable); knobs:" + names);
    app->add_option("--threads", threads, "Threads running blocks (same as --set threads=N)")
        ->check(CLI::Range(1, 256));
  }

  // Applies the options; prints the error (naming the knob and its range) and returns false.
  bool apply(plan::Knobs& knobs, const char* command) const {
    for (const std::string& s : sets)
      if (auto e = knobs.setAssignment(s)) {
        std::cerr << "kiln " << command << ": error: " << *e << '\n';
        return false;
      }
    if (threads > 0) knobs.threads = threads;
    return true;
  }
};

}  // namespace kiln::cli

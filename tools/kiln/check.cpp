// `kiln check FILE...`: parse and verify kernels; report every diagnostic.
#include <iostream>
#include <string>
#include <vector>

#include "command.h"

namespace kiln::cli {

Command addCheck(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("check", "Parse and verify .tile files; print 'FILE: ok' or the diagnostics");
  auto files = std::make_shared<std::vector<std::string>>();
  app->add_option("FILE", *files, ".tile files to check (\"-\" reads stdin)")->required();
  app->footer(
      "Prints 'FILE: ok' on stdout for each valid file. Every diagnostic of every invalid file\n"
      "goes to stderr as FILE:LINE:COL: error: MESSAGE [code]. Exit 0 when all files are valid,\n"
      "1 otherwise.");
  return {app, [files] {
            int failed = 0;
            for (const std::string& path : *files) {
              if (loadKernel(path)) {
                std::cout << path << ": ok\n";
              } else {
                ++failed;
              }
            }
            return failed == 0 ? 0 : 1;
          }};
}

}  // namespace kiln::cli

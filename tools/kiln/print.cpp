// `kiln print FILE`: the canonical text of a kernel (parse(print(k)) prints the same).
#include <iostream>
#include <string>

#include "command.h"
#include "ir/printer.h"

namespace kiln::cli {

Command addPrint(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("print", "Print a kernel in canonical text form");
  auto file = std::make_shared<std::string>();
  app->add_option("FILE", *file, ".tile file (\"-\" reads stdin)")->required();
  app->footer(
      "Writes the canonical text (types written out, one op per line) to stdout; printing\n"
      "that output again gives the same text. Exit 1 with diagnostics on stderr if invalid.");
  return {app, [file] {
            std::unique_ptr<ir::Kernel> kernel = loadKernel(*file);
            if (!kernel) return 1;
            std::string text = ir::print(*kernel);
            if (!text.empty() && text.back() != '\n') text += '\n';
            std::cout << text;
            return 0;
          }};
}

}  // namespace kiln::cli

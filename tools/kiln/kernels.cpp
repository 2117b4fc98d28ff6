// `kiln kernels`: list the library kernels (`--kernel NAME`), their --shape fields and options.
#include <iostream>

#include "command.h"
#include "kernels/registry.h"

namespace kiln::cli {

Command addKernels(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("kernels", "List the library kernels, their --shape fields and options");
  app->footer(
      "Use one with `kiln run --kernel NAME --shape S ...` or `kiln compile --kernel NAME ...`; see "
      "docs/kernels.md.");
  return {app, [] {
            for (const kernels::LibraryKernelInfo& k : kernels::libraryKernels()) {
              std::cout << k.name << "  --shape " << k.shape_fields << "\n  " << k.summary << '\n';
              size_t start = 0;
              while (start < k.options.size()) {
                size_t end = k.options.find('\n', start);
                if (end == std::string::npos) end = k.options.size();
                std::cout << "  " << k.options.substr(start, end - start) << '\n';
                start = end + 1;
              }
            }
            return 0;
          }};
}

}  // namespace kiln::cli

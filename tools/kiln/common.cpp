// Shared by the subcommands: read a kernel file and report its diagnostics.
#include <charconv>
#include <cstdint>
#include <iostream>
#include <iterator>

#include "command.h"
#include "ir/diag.h"
#include "ir/parser.h"

namespace kiln::cli {

std::unique_ptr<ir::Kernel> loadKernel(const std::string& path) {
  ir::DiagEngine diag;
  std::unique_ptr<ir::Kernel> kernel;
  if (path == "-") {
    std::string text{std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>()};
    kernel = ir::parseKernel(text, "<stdin>", diag);
  } else {
    kernel = ir::parseFile(path, diag);
  }
  if (kernel && !diag.hasErrors()) return kernel;
  for (const ir::Diagnostic& d : diag.all()) std::cerr << ir::format(d) << '\n';
  // The parser promises a diagnostic with every failure; never fail silently if it did not.
  if (!diag.hasErrors()) std::cerr << path << ":0:0: error: the kernel could not be read [internal]\n";
  return nullptr;
}

CLI::Validator seedValidator() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        uint64_t v = 0;
        auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
        const bool ok = !s.empty() && ec == std::errc() && end == s.data() + s.size();
        return ok ? "" : "expected an integer in 0 .. 2^64-1, got '" + s + "'";
      },
      "N");
}

bool parseArgOptions(const std::vector<std::string>& args, std::map<std::string, std::string>& out,
                     const std::string& command) {
  for (const std::string& a : args) {
    const size_t eq = a.find('=');
    if (eq == std::string::npos || eq == 0) {
      std::cerr << "kiln " << command << ": error: --arg expects NAME=VALUE, got '" << a << "'\n";
      return false;
    }
    out[a.substr(0, eq)] = a.substr(eq + 1);
  }
  return true;
}

}  // namespace kiln::cli

// libFuzzer target (`make fuzz-parser`, docs/fuzz.md): any bytes through parse -> verify ->
// print -> parse -> print. Checks the parser's contract (a verified kernel, or nullptr with at
// least one diagnostic; never a crash, a hang or a sanitizer report) and the printer's (its
// text parses back and prints identically). A broken contract aborts with the texts involved.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#include "ir/diag.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "ir/verifier.h"

namespace {

[[noreturn]] void broken(const char* what, const std::string& a, const std::string& b = {}) {
  std::fprintf(stderr, "parser_fuzzer: %s\n--- text\n%s\n--- other\n%s\n", what, a.c_str(), b.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  kiln::ir::DiagEngine diag;
  auto kernel = kiln::ir::parseKernel(text, "input.tile", diag);
  if (!kernel) {
    if (!diag.hasErrors()) broken("the parser failed without a diagnostic", text);
    return 0;
  }
  if (diag.hasErrors()) broken("the parser returned a kernel and a diagnostic", text, diag.str());
  kiln::ir::DiagEngine verifyDiag;
  if (!kiln::ir::verify(*kernel, verifyDiag)) broken("a parsed kernel does not verify", text, verifyDiag.str());
  const std::string printed = kiln::ir::print(*kernel);
  kiln::ir::DiagEngine again;
  auto reparsed = kiln::ir::parseKernel(printed, "printed.tile", again);
  if (!reparsed) broken("the printed kernel does not parse", printed, again.str());
  const std::string printedAgain = kiln::ir::print(*reparsed);
  if (printedAgain != printed) broken("print(parse(print(k))) differs from print(k)", printed, printedAgain);
  return 0;
}

// `kiln audit DIR`: re-verify a bench archive offline (no native code, no compiler) and print
// a deterministic JSON report (src/audit, docs/bench.md).
#include <iostream>

#include "audit/audit.h"
#include "command.h"

namespace kiln::cli {

Command addAudit(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand(
      "audit", "Re-verify a bench archive offline: digests, FP64 reference, statistics, counts (JSON report)");
  auto dir = std::make_shared<std::string>();
  app->add_option("DIR", *dir, "The archive folder written by kiln bench")->required();
  app->footer("Exit codes: 0 every check passed, 1 a check failed, 2 usage error.");
  return {app, [dir] {
            const audit::Report r = audit::auditArchive(*dir);
            std::cout << audit::reportText(r);
            return r.pass() ? 0 : 1;
          }};
}

}  // namespace kiln::cli

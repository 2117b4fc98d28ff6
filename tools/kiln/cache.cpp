// `kiln cache info|clear`: the on-disk object cache (docs/cache.md). Also the one place that
// turns the cache on for the commands that compile (useCacheFor, called by main.cpp).
#include <iomanip>
#include <iostream>

#include "command.h"
#include "driver/compile.h"
#include "jit/object_file.h"

namespace kiln::cli {

Command addCache(CLI::App& parent) {
  CLI::App* app = parent.add_subcommand("cache", "The on-disk object cache: where it is, how large, clear it");
  auto action = std::make_shared<std::string>();
  app->add_option("ACTION", *action, "info: directory, entries, bytes, cap; clear: remove every entry")
      ->required()
      ->check(CLI::IsMember({"info", "clear"}));
  app->footer(
      "The cache lives in $KILN_CACHE_DIR (\"off\": no cache), else $XDG_CACHE_HOME/kiln, else ~/.cache/kiln; "
      "$KILN_CACHE_MAX_MB caps it (default 512). Exit codes: 0 success, 1 a bad environment, 2 usage error.");
  return {app, [action] {
            std::unique_ptr<jit::DiskObjectCache> cache;
            if (auto e = jit::cacheFromEnvironment(cache)) {
              std::cerr << "kiln cache: error: " << *e << '\n';
              return 1;
            }
            if (!cache) {
              std::cout << "cache: off (KILN_CACHE_DIR=" << (std::getenv("KILN_CACHE_DIR") ? "off" : "unset, no HOME")
                        << ")\n";
              return 0;
            }
            if (*action == "clear") {
              const int64_t n = cache->clear();
              std::cout << "removed " << n << " entr" << (n == 1 ? "y" : "ies") << " from " << cache->dir() << '\n';
              return 0;
            }
            const jit::DiskObjectCache::Info i = cache->info();
            std::cout << "directory  " << cache->dir() << '\n'
                      << "entries    " << i.entries << '\n'
                      << "bytes      " << i.bytes << " (" << std::fixed << std::setprecision(1)
                      << static_cast<double>(i.bytes) / (1 << 20) << " MiB)\n"
                      << "cap        " << (cache->maxBytes() >> 20) << " MiB (KILN_CACHE_MAX_MB)\n"
                      << "build      " << jit::kilnBuildId() << '\n';
            return 0;
          }};
}

std::optional<std::string> useObjectCache() {
  std::unique_ptr<jit::DiskObjectCache> cache;
  if (auto e = jit::cacheFromEnvironment(cache)) return e;
  driver::setObjectCache(std::shared_ptr<jit::ObjectCache>(std::move(cache)));
  return std::nullopt;
}

}  // namespace kiln::cli

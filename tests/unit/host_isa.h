// Grid points a test cannot run on this host (an isa=avx512 point on a CPU without AVX-512, or
// under KILN_HOST_WITHOUT_AVX512): the test still compiles them, and says what it did not run,
// never silently: one line on stdout per point and one in BUILD/skipped-runs.txt, which
// `make test` prints at the end of the suite.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <optional>
#include <string>

#include "jit/compile.h"

namespace kiln::testhost {

// The sanitizer tree (cmake -DKILN_SANITIZE=ON defines KILN_SANITIZED for the tests). ASan and
// UBSan instrument Kiln's own code, not the code it generates: there a backend grid runs each
// kernel at one of its points, rotating over the kernels so that every point's path through the
// planner and lowering still runs; the release tree runs every point.
#ifdef KILN_SANITIZED
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

// Says that `what` was not run, and why.
inline void sayNotRun(const std::string& what, const std::string& why) {
  const std::string line = what + ": not run: " + why + "\n";
  std::fputs(("[ NOT RUN  ] " + line).c_str(), stdout);
#ifdef KILN_BINARY_DIR
  const int fd = ::open(KILN_BINARY_DIR "/skipped-runs.txt", O_WRONLY | O_CREAT | O_APPEND, 0644);
  if (fd >= 0) {
    (void)!::write(fd, line.data(), line.size());
    ::close(fd);
  }
#endif
}

// True when code for `isa` runs here; otherwise says so for `what` and returns false.
inline bool runsHere(const std::string& isa, const std::string& what) {
  const std::optional<std::string> why = jit::cannotRunHere(isa);
  if (why) sayNotRun(what, *why);
  return !why;
}

}  // namespace kiln::testhost

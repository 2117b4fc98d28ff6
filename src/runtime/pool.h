// The oneTBB pool that runs a loaded kernel's blocks. Its own file so that a ThreadSanitizer
// build can compile the oneTBB templates without instrumentation (CMakeLists.txt): they
// synchronize through the uninstrumented libtbb, which ThreadSanitizer cannot see, so their
// inlined code would be reported as racing with the library. run() states the hand-off to the
// workers and back to ThreadSanitizer itself (pool.cpp); the bodies it runs stay instrumented.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

namespace kiln::runtime {

class BlockPool {
 public:
  // threads >= 2 (1 runs on the caller, no pool). Workers get kWorkerStackBytes of stack.
  // Pools of the same thread count share one oneTBB arena, created once per process.
  explicit BlockPool(int threads);
  ~BlockPool();
  BlockPool(const BlockPool&) = delete;
  BlockPool& operator=(const BlockPool&) = delete;

  // body(begin, end) over the blocks of each phase in chunks of one block, on the pool's
  // threads (the calling thread takes part): phase i covers [phases[i].first, phases[i].second)
  // and starts when every chunk of phase i-1 has returned; returns when the last has run.
  void run(const std::vector<std::pair<int64_t, int64_t>>& phases, const std::function<void(int64_t, int64_t)>& body);

  // The threads oneTBB lets this pool's arena have (the caller's included): the count asked
  // for, since creating the pool raised the process's allowed parallelism to it (pool.cpp).
  int concurrency() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kiln::runtime

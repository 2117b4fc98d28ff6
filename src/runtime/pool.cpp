#include "runtime/pool.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <map>
#include <memory>
#include <mutex>

#include "runtime/runtime.h"

// ThreadSanitizer build: this file is not instrumented, so the hand-off to the workers and back
// is stated to ThreadSanitizer by hand: release before the tasks start, acquire in each task,
// release when it ends, acquire after the last one.
#if defined(KILN_TSAN_ANNOTATE)
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#define KILN_HAND_OFF_RELEASE(p) __tsan_release(p)
#define KILN_HAND_OFF_ACQUIRE(p) __tsan_acquire(p)
#else
#define KILN_HAND_OFF_RELEASE(p) ((void)(p))
#define KILN_HAND_OFF_ACQUIRE(p) ((void)(p))
#endif

namespace kiln::runtime {

namespace {

// Workers are created with this stack for as long as the process lives; see runtime.h.
void ensureWorkerStack() {
  static tbb::global_control stack(tbb::global_control::thread_stack_size, kWorkerStackBytes);
}

// One arena per thread count for the whole process, shared by every loaded kernel (oneTBB's
// workers themselves are process-wide): loading a kernel creates no threads.
std::shared_ptr<tbb::task_arena> sharedArena(int threads) {
  static std::mutex mutex;
  // Never destroyed: an arena must not outlive oneTBB's own teardown at exit.
  static auto* arenas = new std::map<int, std::shared_ptr<tbb::task_arena>>;
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<tbb::task_arena>& a = (*arenas)[threads];
  if (!a) {
    ensureWorkerStack();
    a = std::make_shared<tbb::task_arena>(threads);
  }
  return a;
}

}  // namespace

struct BlockPool::Impl {
  explicit Impl(int threads) : arena(sharedArena(threads)) {}
  std::shared_ptr<tbb::task_arena> arena;
};

BlockPool::BlockPool(int threads) : impl_(std::make_unique<Impl>(threads)) {}
BlockPool::~BlockPool() = default;

void BlockPool::run(const std::vector<int64_t>& phase_ends, const std::function<void(int64_t, int64_t)>& body) {
  void* sync = const_cast<void*>(static_cast<const void*>(&body));
  KILN_HAND_OFF_RELEASE(sync);
  // One entry into the arena for every phase: the workers that finish phase i find phase i+1's
  // blocks without going back to sleep in between.
  impl_->arena->execute([&] {
    int64_t start = 0;
    for (int64_t end : phase_ends) {
      if (end - start == 1) {
        body(start, end);
      } else if (end > start) {
        tbb::parallel_for(
            tbb::blocked_range<int64_t>(start, end, 1),
            [&](const tbb::blocked_range<int64_t>& range) {
              KILN_HAND_OFF_ACQUIRE(sync);
              body(range.begin(), range.end());
              KILN_HAND_OFF_RELEASE(sync);
            },
            tbb::simple_partitioner());
      }
      start = end;
    }
  });
  KILN_HAND_OFF_ACQUIRE(sync);
}

}  // namespace kiln::runtime

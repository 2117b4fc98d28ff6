#include "runtime/pool.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/info.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

#include <algorithm>
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

// oneTBB sizes its process-wide worker set once, to the machine's cores, and an arena asking
// for more gets only those ("The number of workers is currently limited to ..."): a kernel
// loaded with threads = 3 on 2 cores would run on 2. Kiln raises the process's allowed
// parallelism to the largest thread count any pool asked for (never below the cores), so every
// pool runs with the threads it names. Called under sharedArena's mutex.
int allowParallelism(int threads) {
  // Never destroyed, like the arenas.
  static tbb::global_control* control = nullptr;
  static int allowed = 0;
  const int want = std::max({threads, allowed, static_cast<int>(tbb::info::default_concurrency())});
  if (want > allowed) {
    // While both are alive the smaller value is in force; the old one goes right after.
    auto* raised = new tbb::global_control(tbb::global_control::max_allowed_parallelism, static_cast<size_t>(want));
    delete control;
    control = raised;
    allowed = want;
  }
  return static_cast<int>(tbb::global_control::active_value(tbb::global_control::max_allowed_parallelism));
}

// One arena per thread count for the whole process, shared by every loaded kernel (oneTBB's
// workers themselves are process-wide): loading a kernel creates no threads.
std::shared_ptr<tbb::task_arena> sharedArena(int threads, int& allowed) {
  static std::mutex mutex;
  // Never destroyed: an arena must not outlive oneTBB's own teardown at exit.
  static auto* arenas = new std::map<int, std::shared_ptr<tbb::task_arena>>;
  std::lock_guard<std::mutex> lock(mutex);
  allowed = allowParallelism(threads);
  std::shared_ptr<tbb::task_arena>& a = (*arenas)[threads];
  if (!a) {
    ensureWorkerStack();
    a = std::make_shared<tbb::task_arena>(threads);
  }
  return a;
}

}  // namespace

struct BlockPool::Impl {
  explicit Impl(int threads) : threads(threads), arena(sharedArena(threads, allowed)) {}
  int threads;
  int allowed = 0;
  std::shared_ptr<tbb::task_arena> arena;
};

BlockPool::BlockPool(int threads) : impl_(std::make_unique<Impl>(threads)) {}
BlockPool::~BlockPool() = default;

int BlockPool::concurrency() const {
  return std::min(impl_->threads, impl_->allowed);
}

void BlockPool::run(const std::vector<std::pair<int64_t, int64_t>>& phases,
                    const std::function<void(int64_t, int64_t)>& body) {
  void* sync = const_cast<void*>(static_cast<const void*>(&body));
  KILN_HAND_OFF_RELEASE(sync);
  // One entry into the arena for every phase: the workers that finish phase i find phase i+1's
  // blocks without going back to sleep in between.
  impl_->arena->execute([&] {
    for (const auto& [start, end] : phases) {
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
    }
  });
  KILN_HAND_OFF_ACQUIRE(sync);
}

}  // namespace kiln::runtime

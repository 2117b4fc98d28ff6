#include "runtime/pool.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/partitioner.h>
#include <oneapi/tbb/task_arena.h>

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

}  // namespace

struct BlockPool::Impl {
  explicit Impl(int threads) : arena((ensureWorkerStack(), threads)) {}
  tbb::task_arena arena;
};

BlockPool::BlockPool(int threads) : impl_(std::make_unique<Impl>(threads)) {}
BlockPool::~BlockPool() = default;

void BlockPool::run(int64_t blocks, const std::function<void(int64_t, int64_t)>& body) {
  void* sync = const_cast<void*>(static_cast<const void*>(&body));
  KILN_HAND_OFF_RELEASE(sync);
  impl_->arena.execute([&] {
    tbb::parallel_for(
        tbb::blocked_range<int64_t>(0, blocks, 1),
        [&](const tbb::blocked_range<int64_t>& range) {
          KILN_HAND_OFF_ACQUIRE(sync);
          body(range.begin(), range.end());
          KILN_HAND_OFF_RELEASE(sync);
        },
        tbb::simple_partitioner());
  });
  KILN_HAND_OFF_ACQUIRE(sync);
}

}  // namespace kiln::runtime

// Runtime: argument checks, aliasing, thread-count independence, worker stacks, guard zones.
// Kernels here are plain C++ functions with the ABI's BlocksFn signature: no JIT involved.
#include <gtest/gtest.h>
#include <pthread.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "runtime/guard.h"
#include "runtime/runtime.h"

namespace kiln::runtime {
namespace {

constexpr int64_t kBlockPrograms = 8;

// y[p] = x[p] * s + p over n programs, 8 programs per block.
template <int64_t N>
void scaleBlocks(void* const* params, int64_t begin, int64_t end, KilnLaunchRecord* record) {
  const float* x = static_cast<const float*>(params[0]);
  float* y = static_cast<float*>(params[1]);
  const float s = *static_cast<const float*>(params[2]);
  for (int64_t b = begin; b < end; ++b) {
    const int64_t last = std::min((b + 1) * kBlockPrograms, N);
    for (int64_t p = b * kBlockPrograms; p < last; ++p) y[p] = x[p] * s + static_cast<float>(p);
    (last - b * kBlockPrograms == kBlockPrograms ? record->packets_full : record->packets_masked) += 1;
  }
}

template <int64_t N>
LoadedKernel scaleKernel(int threads = 1) {
  KernelEntry entry;
  entry.blocks = &scaleBlocks<N>;
  entry.num_blocks = (N + kBlockPrograms - 1) / kBlockPrograms;
  return LoadedKernel(entry, {ParamSpec::view("x", {N}), ParamSpec::view("y", {N}), ParamSpec::f32("s")}, threads);
}

std::vector<float> iota(int64_t n) {
  std::vector<float> v(n);
  for (int64_t i = 0; i < n; ++i) v[i] = 0.25f * static_cast<float>(i) - 3.0f;
  return v;
}

TEST(RuntimeArgs, WrongCountNamesTheParameters) {
  LoadedKernel k = scaleKernel<37>();
  std::vector<float> x(37), y(37);
  std::vector<Arg> args = {Arg::view(x), Arg::view(y)};
  auto error = k.launch(args);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("3 parameters (x, y, s)"), std::string::npos) << *error;
  EXPECT_NE(error->find("got 2"), std::string::npos) << *error;
}

TEST(RuntimeArgs, NullBufferNamesTheParameter) {
  LoadedKernel k = scaleKernel<37>();
  std::vector<float> y(37);
  std::vector<Arg> args = {Arg::view(nullptr, 37 * 4), Arg::view(y), Arg::f32(2)};
  auto error = k.launch(args);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("'x'"), std::string::npos) << *error;
  EXPECT_NE(error->find("null"), std::string::npos) << *error;
}

TEST(RuntimeArgs, WrongByteSizeNamesParameterAndBothSizes) {
  LoadedKernel k = scaleKernel<37>();
  std::vector<float> x(37), y(36, -1.0f);
  std::vector<Arg> args = {Arg::view(x), Arg::view(y), Arg::f32(2)};
  auto error = k.launch(args);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("'y'"), std::string::npos) << *error;
  EXPECT_NE(error->find("144 bytes"), std::string::npos) << *error;
  EXPECT_NE(error->find("f32[37] needs 148 bytes"), std::string::npos) << *error;
  for (float v : y) EXPECT_EQ(v, -1.0f);  // nothing ran
}

TEST(RuntimeArgs, WrongKindNamesTheParameter) {
  LoadedKernel k = scaleKernel<37>();
  std::vector<float> x(37), y(37);
  std::vector<Arg> args = {Arg::view(x), Arg::view(y), Arg::i64(2)};
  auto error = k.launch(args);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("'s'"), std::string::npos) << *error;
  EXPECT_NE(error->find("is an f32 scalar, got an i64 scalar"), std::string::npos) << *error;
  args[2] = Arg::view(x);
  error = k.launch(args);
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("got a view"), std::string::npos) << *error;
}

TEST(RuntimeArgs, InputMayAliasOutput) {
  LoadedKernel k = scaleKernel<37>();
  std::vector<float> xy = iota(37);
  const std::vector<float> x = xy;
  std::vector<Arg> args = {Arg::view(xy), Arg::view(xy), Arg::f32(3.0f)};
  ASSERT_FALSE(k.launch(args));
  for (int64_t p = 0; p < 37; ++p) EXPECT_EQ(xy[p], x[p] * 3.0f + static_cast<float>(p));
}

TEST(RuntimeLaunch, RecordSumsBlocks) {
  LoadedKernel k = scaleKernel<37>(2);
  std::vector<float> x = iota(37), y(37);
  std::vector<Arg> args = {Arg::view(x), Arg::view(y), Arg::f32(2.0f)};
  KilnLaunchRecord record{99, 99};
  ASSERT_FALSE(k.launch(args, &record));
  EXPECT_EQ(record.packets_full, 4);
  EXPECT_EQ(record.packets_masked, 1);
}

TEST(RuntimeLaunch, OneAndTwoThreadsGiveIdenticalResults) {
  constexpr int64_t n = 100003;
  std::vector<float> x = iota(n), y1(n), y2(n, 7.0f);
  LoadedKernel k = scaleKernel<n>(1);
  KilnLaunchRecord r1, r2;
  ASSERT_FALSE(k.launch(std::vector<Arg>{Arg::view(x), Arg::view(y1), Arg::f32(1.5f)}, &r1));
  k.setThreads(2);
  ASSERT_FALSE(k.launch(std::vector<Arg>{Arg::view(x), Arg::view(y2), Arg::f32(1.5f)}, &r2));
  EXPECT_EQ(std::memcmp(y1.data(), y2.data(), n * sizeof(float)), 0);
  EXPECT_EQ(r1.packets_full, r2.packets_full);
  EXPECT_EQ(r1.packets_masked, r2.packets_masked);
  EXPECT_EQ(r1.packets_full, n / kBlockPrograms);
  EXPECT_EQ(r1.packets_masked, 1);
}

TEST(RuntimeLaunch, ZeroBlocksRunsNothing) {
  KernelEntry entry;
  entry.blocks = +[](void* const*, int64_t, int64_t, KilnLaunchRecord*) { ADD_FAILURE() << "ran a block"; };
  LoadedKernel k(entry, {}, 2);
  EXPECT_FALSE(k.launch({}));
}

// Each block uses 6 MiB of stack (more than oneTBB's 4 MiB default) and reports the stack
// size of the worker it ran on.
std::mutex stack_mutex;
std::set<size_t> worker_stacks;
std::thread::id caller;

void deepStackBlocks(void* const*, int64_t begin, int64_t end, KilnLaunchRecord*) {
  for (int64_t b = begin; b < end; ++b) {
    volatile char frame[6 << 20];
    for (size_t i = 0; i < sizeof frame; i += 4096) frame[i] = static_cast<char>(i);
    if (std::this_thread::get_id() != caller) {
      pthread_attr_t attr;
      size_t size = 0;
      pthread_getattr_np(pthread_self(), &attr);
      pthread_attr_getstacksize(&attr, &size);
      pthread_attr_destroy(&attr);
      std::lock_guard lock(stack_mutex);
      worker_stacks.insert(size);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

TEST(RuntimeLaunch, WorkersHaveLargeStacks) {
  caller = std::this_thread::get_id();
  KernelEntry entry;
  entry.blocks = &deepStackBlocks;
  entry.num_blocks = 64;
  LoadedKernel k(entry, {}, 2);
  ASSERT_FALSE(k.launch({}));
  if (worker_stacks.empty()) GTEST_SKIP() << "no block ran on a pool worker";
  for (size_t size : worker_stacks) EXPECT_GE(size, kWorkerStackBytes);
}

// A kernel with threads = T runs on T threads at once, also where T exceeds the cores (oneTBB
// alone would cap it at the cores): each of T blocks waits until all T have started, so the
// launch returns only if T threads ran them together. The wait is a deadlock guard (60 s), not
// a timing verdict.
std::atomic<int> arrived{0};
std::atomic<int> waiting_for{0};
std::atomic<bool> gave_up{false};
std::mutex ids_mutex;
std::set<std::thread::id> ids;

void rendezvousBlocks(void* const*, int64_t begin, int64_t end, KilnLaunchRecord*) {
  for (int64_t b = begin; b < end; ++b) {
    {
      std::lock_guard lock(ids_mutex);
      ids.insert(std::this_thread::get_id());
    }
    arrived.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (arrived.load() < waiting_for.load()) {
      if (std::chrono::steady_clock::now() > deadline) {
        gave_up = true;
        return;
      }
      std::this_thread::yield();
    }
  }
}

TEST(RuntimeLaunch, RunsOnTheThreadsItNames) {
  for (int threads : {2, 3, 4, 8}) {
    arrived = 0;
    waiting_for = threads;
    gave_up = false;
    ids.clear();
    KernelEntry entry;
    entry.blocks = &rendezvousBlocks;
    entry.num_blocks = threads;
    LoadedKernel k(entry, {}, threads);
    EXPECT_EQ(k.concurrency(), threads);
    ASSERT_FALSE(k.launch({}));
    EXPECT_FALSE(gave_up.load()) << "threads = " << threads << ": only " << ids.size() << " threads ran the blocks";
    EXPECT_EQ(static_cast<int>(ids.size()), threads) << "threads = " << threads;
  }
}

// Run only by `make test-tsan` (KILN_TSAN_EXPECT_RACE=1), which requires ThreadSanitizer to
// report it: two blocks, on two pool threads at once, write one int without synchronization. It
// shows that the suppressions in force (tests/tsan/suppressions.txt) hide no race in code that
// runs on oneTBB's workers.
int racy = 0;
std::atomic<int> race_arrived{0};

void racingBlocks(void* const*, int64_t begin, int64_t end, KilnLaunchRecord*) {
  for (int64_t b = begin; b < end; ++b) {
    race_arrived.fetch_add(1);
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (race_arrived.load() < 2 && std::chrono::steady_clock::now() < deadline) std::this_thread::yield();
    racy = racy + 1;
  }
}

TEST(RuntimeTsan, ARaceInABlockIsReported) {
  if (!std::getenv("KILN_TSAN_EXPECT_RACE")) GTEST_SKIP() << "run by make test-tsan, which expects a report";
  KernelEntry entry;
  entry.blocks = &racingBlocks;
  entry.num_blocks = 2;
  LoadedKernel k(entry, {}, 2);
  ASSERT_FALSE(k.launch({}));
}

// Writes y[N] (one past the end) or y[-1] (one before the start) besides the real work.
template <int64_t Offset>
void strayBlocks(void* const* params, int64_t begin, int64_t end, KilnLaunchRecord* record) {
  scaleBlocks<37>(params, begin, end, record);
  if (begin == 0) static_cast<float*>(params[1])[Offset] = 1.0f;
}

LoadedKernel strayKernel(BlocksFn blocks) {
  KernelEntry entry;
  entry.blocks = blocks;
  entry.num_blocks = 5;
  return LoadedKernel(entry, {ParamSpec::view("x", {37}), ParamSpec::view("y", {37}), ParamSpec::f32("s")});
}

TEST(RuntimeGuards, IntactForACorrectKernel) {
  LoadedKernel k = scaleKernel<37>(2);
  GuardedArgs guarded(k.params());
  const std::vector<float> x = iota(37);
  ASSERT_FALSE(guarded.setView(0, x));
  ASSERT_FALSE(guarded.setF32(2, 2.0f));
  ASSERT_FALSE(k.launch(guarded.args()));
  EXPECT_EQ(guarded.checkGuards(), std::nullopt);
  auto y = guarded.view(1);
  ASSERT_EQ(y.size(), 37u);
  for (int64_t p = 0; p < 37; ++p) EXPECT_EQ(y[p], x[p] * 2.0f + static_cast<float>(p));
  EXPECT_EQ(reinterpret_cast<uintptr_t>(y.data()) % 64, 0u);
}

TEST(RuntimeGuards, DetectWriteOnePastTheEnd) {
  LoadedKernel k = strayKernel(&strayBlocks<37>);
  GuardedArgs guarded(k.params());
  ASSERT_FALSE(k.launch(guarded.args()));
  auto error = guarded.checkGuards();
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("after parameter 'y' (#1)"), std::string::npos) << *error;
  EXPECT_NE(error->find("byte offset 0 past its end"), std::string::npos) << *error;
  EXPECT_EQ(error->find("'x'"), std::string::npos) << *error;
}

TEST(RuntimeGuards, DetectWriteBeforeTheStart) {
  LoadedKernel k = strayKernel(&strayBlocks<-1>);
  GuardedArgs guarded(k.params());
  ASSERT_FALSE(k.launch(guarded.args()));
  auto error = guarded.checkGuards();
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("before parameter 'y' (#1)"), std::string::npos) << *error;
  EXPECT_NE(error->find("nearest at byte offset -1 from its start"), std::string::npos) << *error;
}

TEST(RuntimeGuards, SetViewChecksSizeAndKind) {
  GuardedArgs guarded(std::vector<ParamSpec>{ParamSpec::view("x", {2, 3}), ParamSpec::i64("n")});
  auto error = guarded.setView(0, std::vector<float>(5));
  ASSERT_TRUE(error);
  EXPECT_NE(error->find("'x'"), std::string::npos) << *error;
  EXPECT_NE(error->find("f32[2,3] needs 24"), std::string::npos) << *error;
  EXPECT_TRUE(guarded.setView(1, {}));
  EXPECT_TRUE(guarded.setF32(1, 1.0f));
  EXPECT_FALSE(guarded.setI64(1, 42));
  EXPECT_EQ(guarded.args()[1].i64_value, 42);
}

}  // namespace
}  // namespace kiln::runtime

// Picks the ISA kernels for this CPU and runs work items on a fixed-size oneTBB arena.
#include "peers/native.h"

#include <oneapi/tbb/blocked_range.h>
#include <oneapi/tbb/global_control.h>
#include <oneapi/tbb/parallel_for.h>
#include <oneapi/tbb/task_arena.h>

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "host/isa.h"
#include "runtime/runtime.h"

namespace kiln::peers {

const IsaKernels* isaKernels(const std::string& which) {
  // The same answer as the JIT's (host/isa.h, KILN_HOST_WITHOUT_AVX512 included).
  const bool avx512 = host::cpuHasAvx512() && host::cpuHasAvx2();
  const bool avx2 = host::cpuHasAvx2();
  if (which == "avx512") return avx512 ? native_detail::avx512Table() : nullptr;
  if (which == "avx2") return avx2 ? native_detail::avx2Table() : nullptr;
  if (which != "auto") return nullptr;
  return avx512 ? native_detail::avx512Table() : avx2 ? native_detail::avx2Table() : nullptr;
}

struct ThreadTeam::Arena {
  explicit Arena(int threads) : arena(threads) {}
  tbb::task_arena arena;
};

ThreadTeam::ThreadTeam(int threads) : threads_(threads < 1 ? 1 : threads) {
  // The same worker stack as the Kiln runtime asks for: whichever creates the first worker
  // decides its stack size (runtime.h).
  static tbb::global_control stack(tbb::global_control::thread_stack_size, runtime::kWorkerStackBytes);
  if (threads_ > 1) arena_ = std::make_unique<Arena>(threads_);
}

ThreadTeam::~ThreadTeam() = default;

namespace {

float* scratchFor(int64_t floats) {
  thread_local std::vector<float> buffer;
  if (static_cast<int64_t>(buffer.size()) < floats + 16) buffer.resize(floats + 16);
  auto address = reinterpret_cast<uintptr_t>(buffer.data());
  return reinterpret_cast<float*>((address + 63) & ~uintptr_t{63});
}

// The L3 size as the kernel reports it (sysfs; glibc's sysconf misreads some VMs), else 32 MiB.
double lastLevelCacheBytes() {
  std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index3/size");
  double size = 0;
  std::string unit;
  if (in >> size) {
    in >> unit;
    size *= unit == "K" ? 1024.0 : unit == "M" ? 1024.0 * 1024.0 : 1.0;
  }
  return size > 0 ? size : 32.0 * (1 << 20);
}

}  // namespace

void ThreadTeam::run(int64_t n, int64_t scratch_floats, void (*call)(void*, int64_t, float*), void* fn) {
  if (!arena_) {
    float* scratch = scratchFor(scratch_floats);
    for (int64_t i = 0; i < n; ++i) call(fn, i, scratch);
    return;
  }
  arena_->arena.execute([&] {
    tbb::parallel_for(tbb::blocked_range<int64_t>(0, n, 1), [&](const tbb::blocked_range<int64_t>& r) {
      float* scratch = scratchFor(scratch_floats);
      for (int64_t i = r.begin(); i != r.end(); ++i) call(fn, i, scratch);
    });
  });
}

void nativeAttention(const IsaKernels& isa, ThreadTeam& team, const AttentionArgs& args) {
  static const double l3 = lastLevelCacheBytes();
  AttentionArgs a = args;
  const double elemBytes = a.kv == KvStorage::F32 ? 4.0 : 2.0;
  a.prefetch = elemBytes * a.B * a.Hkv * a.K * double(a.D + a.Dv) > l3 / 2;
  team.forEach(isa.items(a), isa.scratchFloats(a), [&](int64_t item, float* scratch) { isa.item(a, item, scratch); });
}

}  // namespace kiln::peers

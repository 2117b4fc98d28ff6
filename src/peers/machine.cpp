// Peak FMA throughput and read bandwidth, timed with the steady clock on plain std::threads
// (started once per trial; trials are long enough that starting them does not count).
#include "peers/machine.h"

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "peers/native.h"

namespace kiln::peers {
namespace {

using Clock = std::chrono::steady_clock;

double seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Runs fn(t) on `threads` threads (the calling thread is thread 0) and returns the wall time.
template <class Fn>
double together(int threads, Fn fn) {
  const auto t0 = Clock::now();
  std::vector<std::thread> others;
  for (int t = 1; t < threads; ++t) others.emplace_back(fn, t);
  fn(0);
  for (std::thread& th : others) th.join();
  return seconds(t0, Clock::now());
}

double fmaGflops(const IsaKernels& isa, int threads, int trials, double trial_s) {
  if (threads > 1) trial_s = std::max(trial_s, 0.01);  // starting threads must not count
  int64_t iterations = 1 << 14;
  for (;;) {  // calibrate on one thread
    const auto t0 = Clock::now();
    isa.fmaPeak(iterations);
    if (seconds(t0, Clock::now()) > trial_s / 4 || iterations > (int64_t{1} << 40)) break;
    iterations *= 2;
  }
  iterations *= 4;
  double best = 0.0;
  for (int t = 0; t < trials; ++t) {
    const double wall = together(threads, [&](int) { isa.fmaPeak(iterations); });
    const double flops = 2.0 * isa.lanes * kFmaAccumulators * double(iterations) * threads;
    best = std::max(best, flops / wall / 1e9);
  }
  return best;
}

}  // namespace

Peak measurePeak(int threads, int trials, double trial_s) {
  Peak p;
  if (const IsaKernels* k = isaKernels("avx512")) p.avx512_gflops = fmaGflops(*k, threads, trials, trial_s);
  if (const IsaKernels* k = isaKernels("avx2")) p.avx2_gflops = fmaGflops(*k, threads, trials, trial_s);
  return p;
}

double measureReadBandwidth(int64_t bytes, int threads, int trials, double trial_s) {
  const IsaKernels* isa = isaKernels("auto");
  if (!isa) return 0.0;
  if (threads > 1) trial_s = std::max(trial_s, 0.01);  // starting threads must not count
  const int64_t chunk = 8 * isa->lanes;                // readSum's unit
  const int64_t per_thread = std::max<int64_t>(chunk, (bytes / 4 / threads + chunk - 1) / chunk * chunk);
  std::vector<float> buffer(per_thread * threads + 16, 1.0f);
  float* base = reinterpret_cast<float*>((reinterpret_cast<uintptr_t>(buffer.data()) + 63) & ~uintptr_t{63});
  std::vector<float> sinks(threads * 16, 0.0f);  // one cache line per thread
  auto pass = [&](int t, int64_t passes) {
    float s = 0.0f;
    for (int64_t i = 0; i < passes; ++i) s += isa->readSum(base + t * per_thread, per_thread);
    sinks[t * 16] += s;
  };
  int64_t passes = 1;
  for (;;) {  // calibrate: passes per trial
    const double wall = together(threads, [&](int t) { pass(t, passes); });
    if (wall > trial_s / 4 || passes > (int64_t{1} << 30)) break;
    passes *= 2;
  }
  passes *= 4;
  double best = 0.0;
  for (int t = 0; t < trials; ++t) {
    const double wall = together(threads, [&](int th) { pass(th, passes); });
    best = std::max(best, 4.0 * per_thread * threads * double(passes) / wall / 1e9);
  }
  return best;
}

std::string loadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string a, b, c;
  in >> a >> b >> c;
  return a.empty() ? "?" : a + " " + b + " " + c;
}

MachineInfo machineInfo() {
  MachineInfo m;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("model name", 0) == 0) {
      m.cpu_model = line.substr(line.find(':') + 2);
      break;
    }
  if (m.cpu_model.empty()) m.cpu_model = "unknown CPU";
  m.logical_cpus = static_cast<int>(std::thread::hardware_concurrency());
  m.loadavg = loadAverage();
  char buf[32];
  const std::time_t now = std::time(nullptr);
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  m.date = buf;
  return m;
}

}  // namespace kiln::peers

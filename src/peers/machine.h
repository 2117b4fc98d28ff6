// The machine's limits, measured at run time: peak FP32 FMA throughput (AVX-512 and AVX2
// loops of kFmaAccumulators independent accumulators, on `threads` threads at once) and read
// bandwidth over a buffer of a given size; plus what the report says about the machine.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::peers {

struct Peak {
  double avx512_gflops = 0.0;  // 0 when the CPU lacks AVX-512
  double avx2_gflops = 0.0;
  double gflops() const { return avx512_gflops > avx2_gflops ? avx512_gflops : avx2_gflops; }
};

// Best of `trials` runs of about trial_s seconds each, all threads together. Many short
// trials: on a shared machine some of them run undisturbed.
Peak measurePeak(int threads, int trials = 40, double trial_s = 0.002);

// Read bandwidth in GB/s (1e9 bytes/s) streaming a buffer of `bytes` (rounded up to whole
// vectors), split among `threads` threads: best of `trials` runs of about trial_s seconds of
// repeated passes. The best, not the median: the roofline is the most the machine gave.
double measureReadBandwidth(int64_t bytes, int threads, int trials = 20, double trial_s = 0.004);

struct MachineInfo {
  std::string cpu_model;  // /proc/cpuinfo "model name"
  int logical_cpus = 0;
  std::string loadavg;  // /proc/loadavg, first three fields
  std::string date;     // UTC, ISO 8601
};
MachineInfo machineInfo();
std::string loadAverage();

}  // namespace kiln::peers

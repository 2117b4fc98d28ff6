// Threads: several threads compile and launch different kernels at once on the shared pool
// (kernels with threads=2 among them), one loaded kernel is launched from several threads at
// once, and a small bench capture + replay runs beside other launches. Every result must be
// the interpreter's bits. `make test-tsan` runs this file (with the runtime, JIT and bench
// tests) under ThreadSanitizer; `make test` runs it in the release and ASan builds.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "bench/bench.h"
#include "driver/check.h"
#include "driver/compile.h"
#include "host/data.h"
#include "interp/interp.h"
#include "kernels/registry.h"

namespace kiln {
namespace {

plan::Knobs knobs(std::initializer_list<std::string> sets) {
  plan::Knobs k;
  for (const std::string& s : sets) EXPECT_FALSE(k.setAssignment(s).has_value()) << s;
  return k;
}

std::unique_ptr<ir::Kernel> library(const std::string& name, const std::string& shape,
                                    std::map<std::string, std::string> options = {}) {
  std::unique_ptr<ir::Kernel> k;
  auto err = kernels::buildLibraryKernel({name, shape, std::move(options)}, k);
  EXPECT_FALSE(err.has_value()) << name << ": " << *err;
  return k;
}

// Different kernels and knob points, each compiled, launched and checked bitexact against the
// strict-FP32 interpreter from its own thread, all at once.
TEST(Concurrency, DifferentKernelsCompileAndRunAtOnce) {
  struct Job {
    std::unique_ptr<ir::Kernel> kernel;
    plan::Knobs knobs;
  };
  std::vector<Job> jobs;
  jobs.push_back({library("attention", "1,4,2,3,37,16,16", {{"fma", "unfused"}}), knobs({"threads=2"})});
  jobs.push_back({library("gemm", "19,23,17", {{"fma", "unfused"}}), knobs({"threads=2", "packet_width=8"})});
  jobs.push_back({library("rmsnorm", "13,40"), knobs({"threads=2", "local_lanes=1", "packet_width=8"})});
  jobs.push_back({library("softmax", "9,33"), knobs({"threads=1"})});
  jobs.push_back({library("rope", "5,3,16"), knobs({"threads=2", "isa=avx2"})});
  std::vector<std::string> failures(jobs.size());
  std::vector<std::thread> threads;
  for (size_t i = 0; i < jobs.size(); ++i)
    threads.emplace_back([&, i] {
      for (int round = 0; round < 2; ++round) {
        driver::CheckOptions o;
        o.mode = driver::CheckMode::Bitexact;
        o.seed = static_cast<uint64_t>(round);
        driver::CheckResult r;
        if (auto e = driver::check(*jobs[i].kernel, jobs[i].knobs, o, r)) {
          failures[i] = *e;
          return;
        }
        if (!r.pass) {
          failures[i] = "bitexact mismatch in round " + std::to_string(round);
          return;
        }
      }
    });
  for (std::thread& t : threads) t.join();
  for (size_t i = 0; i < jobs.size(); ++i) EXPECT_EQ(failures[i], "") << jobs[i].kernel->name;
}

// One loaded kernel (threads=2) launched from four threads at once, each on its own buffers:
// a loaded kernel is reusable across threads, and every launch gives the interpreter's bits.
TEST(Concurrency, OneKernelLaunchedFromSeveralThreads) {
  auto k = library("attention", "1,8,2,1,67,32,32", {{"fma", "unfused"}});
  ASSERT_TRUE(k);
  const plan::Knobs kn = knobs({"threads=2"});
  driver::Compilation c;
  ASSERT_FALSE(driver::compile(*k, kn, c, driver::Stage::Obj));
  std::unique_ptr<runtime::LoadedKernel> loaded;
  ASSERT_FALSE(driver::load(c.object, *k, kn.isa, 2, loaded));

  constexpr int kThreads = 4;
  std::vector<std::vector<host::ParamData>> inputs(kThreads), expected(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    ASSERT_FALSE(host::makeInputs(*k, static_cast<uint64_t>(t), {}, inputs[t]));
    expected[t] = inputs[t];
    interp::Options io;
    io.mode = interp::Mode::StrictF32;
    io.reduction_partitions = static_cast<int>(kn.reduction_partitions);
    ASSERT_FALSE(interp::evaluate(*k, expected[t], io).has_value());
  }
  std::atomic<int> bad{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        std::vector<host::ParamData> got = inputs[t];
        if (driver::run(*loaded, got, /*guarded=*/true, nullptr)) {
          ++bad;
          continue;
        }
        for (const ir::Value* v : k->outputs())
          if (!host::compareBitexact(got[v->index].data, expected[t][v->index].data).pass) ++bad;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(bad.load(), 0);
}

// The bench harness (capture: compile and check; replay: load the archived objects and time
// them) while another thread launches an already compiled kernel on the pool.
TEST(Concurrency, BenchReplayBesideOtherLaunches) {
  bench::Experiment e;
  e.name = "tsan";
  e.description = "test";
  e.arms = {bench::Arm{"one", {{"threads", "1"}}}, bench::Arm{"two", {{"threads", "2"}}}};
  bench::Case c;
  c.id = "gqa";
  c.label = c.id;
  c.request = {"attention", "1,4,2,1,40,16,16", {{"mask", "causal"}}};
  e.cases = {c};
  e.protocol.cycles = 1;
  e.protocol.samples = 2;
  e.protocol.warmup_ms = 0.2;
  e.protocol.target_ms = 0.2;

  std::string tmpl = (std::filesystem::temp_directory_path() / "kiln-concurrency-XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const std::filesystem::path dir = std::filesystem::path(tmpl) / "archive";

  // The side kernel is compiled before the bench starts: the bench checks that nothing in the
  // process compiles during its replay, so the side thread only launches.
  auto side_kernel = library("gemm", "24,40,12", {{"fma", "unfused"}});
  ASSERT_TRUE(side_kernel);
  driver::Compilation side_compiled;
  ASSERT_FALSE(driver::compile(*side_kernel, knobs({"threads=2"}), side_compiled, driver::Stage::Obj));
  std::unique_ptr<runtime::LoadedKernel> side_loaded;
  ASSERT_FALSE(driver::load(side_compiled.object, *side_kernel, "native", 2, side_loaded));
  std::vector<host::ParamData> side_inputs, side_expected;
  ASSERT_FALSE(host::makeInputs(*side_kernel, 3, {}, side_inputs));
  side_expected = side_inputs;
  interp::Options io;
  io.mode = interp::Mode::StrictF32;
  ASSERT_FALSE(interp::evaluate(*side_kernel, side_expected, io).has_value());

  std::atomic<bool> stop{false};
  std::string side_failure;
  int side_launches = 0;
  std::thread side([&] {
    while (!stop.load()) {
      std::vector<host::ParamData> got = side_inputs;
      if (auto err = driver::run(*side_loaded, got, /*guarded=*/true, nullptr)) side_failure = *err;
      for (const ir::Value* v : side_kernel->outputs())
        if (!host::compareBitexact(got[v->index].data, side_expected[v->index].data).pass)
          side_failure = "gemm beside the bench: bitexact mismatch";
      if (!side_failure.empty()) return;
      ++side_launches;
    }
  });
  bench::BenchOutcome out;
  auto err = bench::runBench(e, dir.string(), {}, out);
  stop = true;
  side.join();
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_TRUE(out.results.all_validated);
  EXPECT_EQ(out.results.compilations_during_replay, 0);
  EXPECT_EQ(side_failure, "");
  EXPECT_GT(side_launches, 0);
  std::filesystem::remove_all(tmpl);
}

}  // namespace
}  // namespace kiln

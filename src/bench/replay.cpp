#include "bench/replay.h"

#include <fmt/format.h>
#include <sched.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>

#include "bench/native.h"
#include "bench/statistics.h"
#include "host/data.h"
#include "jit/compile.h"

namespace kiln::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kMaxReps = int64_t(1) << 30;

int64_t nsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count();
}

// Pins the calling thread to one CPU for its lifetime; restores the previous mask after.
class Pin {
 public:
  explicit Pin(int want) {
    CPU_ZERO(&old_);
    if (sched_getaffinity(0, sizeof old_, &old_) != 0) return;
    int cpu = want;
    if (cpu < 0)
      for (int c = CPU_SETSIZE - 1; c >= 0 && cpu < 0; --c)
        if (CPU_ISSET(c, &old_)) cpu = c;
    if (cpu < 0 || cpu >= CPU_SETSIZE || !CPU_ISSET(cpu, &old_)) {
      error_ = fmt::format("cannot pin to CPU {}: not in this thread's affinity mask", want);
      return;
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) {
      error_ = fmt::format("cannot pin to CPU {}", cpu);
      return;
    }
    cpu_ = cpu;
  }
  ~Pin() {
    if (cpu_ >= 0) sched_setaffinity(0, sizeof old_, &old_);
  }
  Pin(const Pin&) = delete;
  Pin& operator=(const Pin&) = delete;
  int cpu() const { return cpu_; }
  const std::string& error() const { return error_; }

 private:
  cpu_set_t old_;
  int cpu_ = -1;
  std::string error_;
};

int64_t timeBatch(NativeKernel& k, int64_t reps) {
  const Clock::time_point t0 = Clock::now();
  for (int64_t r = 0; r < reps; ++r) k.run();
  return nsBetween(t0, Clock::now());
}

// The capture's object, inputs and outputs, read back from the archive (what replay runs is
// what the archive holds).
std::optional<std::string> loadCapture(const Archive& archive, const std::string& dir, const CaptureRecord& rec,
                                       NativeKernel& out) {
  std::string object;
  if (auto e = archive.read(dir + "/kernel.o", object)) return e;
  if (host::sha256Hex(object.data(), object.size()) != rec.object_sha256)
    return dir + "/kernel.o does not match the sha256 recorded at capture";
  std::vector<std::string> initial(rec.params.size());
  std::vector<std::string> expected(rec.params.size());
  // A view's file: its bytes as the kernel's memory holds them, of exactly the view's size.
  auto read = [&](const ParamInfo& p, const std::string& file, std::string& bytes) -> std::optional<std::string> {
    if (auto e = archive.read(dir + "/" + file, bytes)) return e;
    if (auto e = checkViewBytes(p, bytes)) return dir + "/" + file + ": " + *e;
    return std::nullopt;
  };
  for (size_t i = 0; i < rec.params.size(); ++i) {
    const ParamInfo& p = rec.params[i];
    if (p.kind != runtime::ParamKind::View) continue;
    if (auto e = read(p, inputFile(p), initial[i])) return e;
    if (p.output)
      if (auto e = read(p, outputFile(p), expected[i])) return e;
  }
  // The ISA the object was compiled for: the capture's report says (its knobs as they were).
  std::string report_text;
  if (auto e = archive.read(dir + "/report.json", report_text)) return e;
  const nlohmann::json report = nlohmann::json::parse(report_text, nullptr, false);
  if (report.is_discarded() || !report.contains("knobs") || !report["knobs"].contains("isa") ||
      !report["knobs"]["isa"].is_string())
    return dir + "/report.json names no knobs.isa";
  const std::string isa = report["knobs"]["isa"].get<std::string>();
  if (auto e = prepareNative(object, isa, rec.params, std::move(initial), out, rec.workspaces)) return e;
  out.expected = std::move(expected);
  return std::nullopt;
}

class CaseRunner {
 public:
  CaseRunner(const Experiment& e, const ReplayOptions& o, CaseReplay& out) : e_(e), options_(o), out_(out) {}

  // One visit; false when a validation failed (the case's reason is then set).
  bool visit(NativeKernel& k, int cycle, int position) {
    const Protocol& p = e_.protocol;
    Visit& v = out_.visits.emplace_back();
    v.cycle = cycle;
    v.position = position;
    v.arm = kAbba[position];
    const double warmup_ns = p.warmup_ms * 1e6;
    const double target_ns = p.target_ms * 1e6;
    resetViews(k);

    // Warmup: launches until the warmup time has passed (at least one).
    const Clock::time_point t0 = Clock::now();
    int64_t n = 0;
    int64_t elapsed = 0;
    do {
      k.run();
      ++n;
      elapsed = nsBetween(t0, Clock::now());
    } while (static_cast<double>(elapsed) < warmup_ns);
    v.warmup_launches = n;
    v.warmup_ns = elapsed;
    if (!validate(k, v, "warmup")) return false;

    // Calibration: a first guess from the warmup, one batch, then the count that reaches the
    // sample target at the measured rate.
    const double per_launch = std::max(1.0, static_cast<double>(elapsed) / static_cast<double>(n));
    int64_t reps = std::clamp<int64_t>(static_cast<int64_t>(std::ceil(target_ns / per_launch)), 1, kMaxReps);
    v.calibration_reps = reps;
    v.calibration_ns = timeBatch(k, reps);
    const double measured = std::max<double>(1.0, static_cast<double>(v.calibration_ns));
    v.reps = std::clamp<int64_t>(std::llround(static_cast<double>(reps) * target_ns / measured), 1, kMaxReps);
    if (!validate(k, v, "calibration")) return false;

    for (int s = 1; s <= p.samples; ++s) {
      const int64_t ns = timeBatch(k, v.reps);
      v.samples.push_back({ns, v.reps, sampleMicros(ns, v.reps)});
      if (!validate(k, v, "sample " + std::to_string(s))) return false;
    }
    return true;
  }

 private:
  bool validate(NativeKernel& k, Visit& v, const std::string& after) {
    const int index = static_cast<int>(out_.visits.size()) - 1;
    if (options_.before_validation) options_.before_validation({out_.id, index, v.arm, after}, k);
    Validation val{after, true, {}};
    if (auto problem = checkState(k)) {
      val.ok = false;
      val.reason = *problem;
      out_.status = "failed";
      out_.reason = fmt::format("visit {} (cycle {}, arm {}) after {}: {}", index + 1, v.cycle + 1, e_.arms[v.arm].name,
                                after, *problem);
    }
    v.validations.push_back(val);
    return val.ok;
  }

  const Experiment& e_;
  const ReplayOptions& options_;
  CaseReplay& out_;
};

}  // namespace

std::optional<std::string> checkCpu(int cpu) {
  Pin pin(cpu);
  if (!pin.error().empty()) return pin.error();
  return std::nullopt;
}

std::optional<std::string> replay(const Experiment& e, const Archive& archive,
                                  const std::vector<std::array<CaptureRecord, 2>>& captures,
                                  const ReplayOptions& options, Replay& out) {
  out = Replay{};
  Pin pin(options.cpu);
  if (!pin.error().empty()) return pin.error();
  out.cpu = pin.cpu();
  const int64_t compilations_before = jit::compilationsInThisProcess();
  const Clock::time_point start = Clock::now();
  const int64_t total = plannedTotals(e).visits;
  const int64_t per_case = static_cast<int64_t>(e.protocol.cycles) * 4;
  int64_t done = 0;
  auto progress = [&] {
    if (options.progress) options.progress(done, total, static_cast<double>(nsBetween(start, Clock::now())) * 1e-9);
  };

  for (size_t ci = 0; ci < e.cases.size(); ++ci) {
    const Case& c = e.cases[ci];
    CaseReplay& cr = out.cases.emplace_back();
    cr.id = c.id;
    const int64_t done_before = done;
    for (int a = 0; a < 2; ++a)
      if (!captures[ci][a].ok && cr.status == "ok") {
        cr.status = "not_run";
        cr.reason = "capture of arm " + e.arms[a].name + " failed: " + captures[ci][a].reason;
      }
    std::array<NativeKernel, 2> kernels;
    for (int a = 0; a < 2 && cr.status == "ok"; ++a)
      if (auto err = loadCapture(archive, captureDir(c, e.arms[a]), captures[ci][a], kernels[a])) {
        cr.status = "failed";
        cr.reason = "cannot load the capture of arm " + e.arms[a].name + ": " + *err;
      }
    CaseRunner runner(e, options, cr);
    for (int cycle = 0; cycle < e.protocol.cycles && cr.status == "ok"; ++cycle)
      for (int pos = 0; pos < 4 && cr.status == "ok"; ++pos) {
        runner.visit(kernels[kAbba[pos]], cycle, pos);
        ++done;
        progress();
      }
    if (done != done_before + per_case) {  // a case that stopped early counts as done
      done = done_before + per_case;
      progress();
    }
  }
  out.compilations = jit::compilationsInThisProcess() - compilations_before;
  return std::nullopt;
}

}  // namespace kiln::bench

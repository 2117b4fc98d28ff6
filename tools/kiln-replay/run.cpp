// The correctness pass (every case once, bit-exact compare) and the timed set (visits, hysteresis,
// health checks before and after).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>

#include "replay.h"

namespace kiln::replay {
namespace {

using gpu::Status;
using Clock = std::chrono::steady_clock;

constexpr int kWarmups = 2;
constexpr int kMinReps = 5;

double msSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

bool isNaN(uint32_t bits) {
  return (bits & 0x7fffffffu) > 0x7f800000u;
}

// A 16-bit float of `storage` (kF16 or kBF16) is a NaN.
bool isNaN16(uint16_t h, Storage storage) {
  if (storage == Storage::kBF16) return (h & 0x7F80) == 0x7F80 && (h & 0x7F) != 0;
  return (h & 0x7C00) == 0x7C00 && (h & 0x3FF) != 0;
}

// Compares an output's words with the expected ones (archive-format.md, "Kernel ABI"): per 32-bit
// word, or per 16-bit element (low half = even element) for 16-bit storage; NaN equals NaN of
// the same type. Counts mismatches into `o`.
void compareOutput(const std::vector<uint32_t>& got, const std::vector<uint32_t>& want, Storage storage,
                   OutputResult& o) {
  for (size_t w = 0; w < got.size(); ++w) {
    if (got[w] == want[w]) continue;
    if (storage == Storage::k32) {
      if (isNaN(got[w]) && isNaN(want[w])) continue;
      if (o.mismatches++ == 0) {
        o.first_mismatch = static_cast<int64_t>(w);
        o.got_bits = got[w];
        o.expected_bits = want[w];
      }
      continue;
    }
    for (int half = 0; half < 2; ++half) {
      const uint16_t g = static_cast<uint16_t>(got[w] >> (16 * half));
      const uint16_t x = static_cast<uint16_t>(want[w] >> (16 * half));
      if (g == x || (isNaN16(g, storage) && isNaN16(x, storage))) continue;
      if (o.mismatches++ == 0) {
        o.first_mismatch = static_cast<int64_t>(2 * w + half);
        o.got_bits = g;
        o.expected_bits = x;
      }
    }
  }
}

// Views not dumped (archive-format.md, "Replay"): INIT bits: and digest-only outputs (huge).
std::vector<bool> undumpedViews(const CaseSpec& spec) {
  std::vector<bool> skip(spec.params.size(), false);
  for (size_t i = 0; i < spec.params.size(); ++i) skip[i] = spec.params[i].bits_init;
  for (const Output& o : spec.outputs) {
    if (o.digest_only) skip[o.param] = true;
  }
  return skip;
}

// Writes raw float32 words (little-endian host) to DIR/CASE/NAME; warns on stderr when it cannot.
void dumpView(const std::string& dir, const std::string& file, const std::vector<uint32_t>& bits) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/" + file;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bits.data()), static_cast<std::streamsize>(bits.size() * 4));
  if (!out) std::cerr << "kiln-replay: warning: cannot write " << path << "\n";
}

// The device state of one case: its module and entries, one buffer per param and workspace, and
// the pointer table that every entry receives (archive-format.md, "Kernel ABI").
class CaseRun {
 public:
  CaseRun(const gpu::CudaDriver& driver, const CaseSpec& spec, std::vector<std::vector<uint32_t>> inputs)
      : driver_(driver), spec_(spec), inputs_(std::move(inputs)) {}

  // Loads the module, resolves the entries and reads their attributes (into result.phases),
  // allocates every buffer and uploads the pointer table.
  Status prepare(CaseResult& result) {
    const Clock::time_point t0 = Clock::now();
    Status s = module_.load(driver_, spec_.ptx);
    result.jit_ms = msSince(t0);
    result.jit_log = module_.jitInfoLog();
    if (!s.ok()) return s;
    for (size_t k = 0; k < spec_.phases.size(); ++k) {
      const Phase& phase = spec_.phases[k];
      gpu::CUfunction function = nullptr;
      if (s = module_.function(phase.entry, function); !s.ok()) return s;
      PhaseResult& pr = result.phases[k];
      if (s = driver_.attributes(function, pr.attributes); !s.ok()) return s;
      pr.have_attributes = true;
      if (phase.threads_per_block > static_cast<uint64_t>(pr.attributes.max_threads_per_block)) {
        return Status::failure(gpu::kNotACudaError,
                               "phase " + std::to_string(k) + " " + phase.entry + ": THREADS_PER_BLOCK " +
                                   std::to_string(phase.threads_per_block) + " exceeds the entry's limit of " +
                                   std::to_string(pr.attributes.max_threads_per_block) + " threads per block (" +
                                   std::to_string(pr.attributes.registers) + " registers per thread)");
      }
      if (phase.dynamic_shared_bytes > 0) {  // past the 48 KB a launch gets without asking
        s = driver_.allowDynamicShared(function, static_cast<int>(phase.dynamic_shared_bytes));
        if (!s.ok()) return annotate(s, "phase " + std::to_string(k) + " " + phase.entry);
      }
      functions_.push_back(function);
    }

    std::vector<uint64_t> table;
    params_.resize(spec_.params.size());
    for (size_t i = 0; i < spec_.params.size(); ++i) {
      const Param& p = spec_.params[i];
      const size_t bytes = p.kind == ParamKind::kView ? static_cast<size_t>(p.elements) * 4 : 8;
      if (s = params_[i].allocate(driver_, bytes); !s.ok()) return annotate(s, "param " + p.name);
      table.push_back(params_[i].ptr());
    }
    workspaces_.resize(spec_.workspaces.size());
    for (size_t j = 0; j < spec_.workspaces.size(); ++j) {
      if (s = workspaces_[j].allocate(driver_, static_cast<size_t>(spec_.workspaces[j]) * 4); !s.ok()) {
        return annotate(s, "workspace " + std::to_string(j));
      }
      table.push_back(workspaces_[j].ptr());
    }
    if (s = table_.allocate(driver_, table.size() * 8); !s.ok()) return annotate(s, "pointer table");
    return table_.upload(table.data(), table.size() * 8);
  }

  // Uploads every param's initial contents and zeroes the workspaces.
  Status resetInputs() const {
    Status s;
    for (size_t i = 0; i < spec_.params.size(); ++i) {
      const Param& p = spec_.params[i];
      if (p.kind == ParamKind::kView) {
        s = params_[i].upload(inputs_[i].data(), inputs_[i].size() * 4);
      } else {
        unsigned char scalar[8] = {};
        if (p.kind == ParamKind::kI64) std::memcpy(scalar, &p.i64, 8);
        if (p.kind == ParamKind::kF32) std::memcpy(scalar, &p.f32_bits, 4);
        s = params_[i].upload(scalar, 8);
      }
      if (!s.ok()) return annotate(s, "param " + p.name);
    }
    for (size_t j = 0; j < workspaces_.size(); ++j) {
      if (s = workspaces_[j].zero(); !s.ok()) return annotate(s, "workspace " + std::to_string(j));
    }
    return Status();
  }

  // Every phase in order on stream 0; does not wait. With `marks` (one event per phase), records
  // marks[k] after phase k.
  Status launchSequence(const std::vector<gpu::Event>* marks = nullptr) const {
    gpu::CUdeviceptr table = table_.ptr();
    void* args[] = {&table};
    for (size_t k = 0; k < functions_.size(); ++k) {
      const Phase& phase = spec_.phases[k];
      Status s = driver_.launch(functions_[k], static_cast<unsigned>(phase.grid),
                                static_cast<unsigned>(phase.threads_per_block), args,
                                static_cast<unsigned>(phase.dynamic_shared_bytes), nullptr, phase.dependent);
      if (!s.ok()) return annotate(s, "phase " + std::to_string(k) + " " + phase.entry);
      if (marks && k < marks->size()) {
        if (s = (*marks)[k].record(); !s.ok()) return s;
      }
    }
    return Status();
  }
  size_t phases() const { return functions_.size(); }

  Status download(size_t param, std::vector<uint32_t>& out) const {
    out.assign(static_cast<size_t>(spec_.params[param].elements), 0u);
    Status s = params_[param].download(out.data(), out.size() * 4);
    return s.ok() ? s : annotate(s, "param " + spec_.params[param].name);
  }

  const CaseSpec& spec() const { return spec_; }
  const std::vector<std::vector<uint32_t>>& inputs() const { return inputs_; }

 private:
  static Status annotate(const Status& s, const std::string& what) {
    return Status::failure(s.code(), s.message() + " (" + what + ")");
  }

  const gpu::CudaDriver& driver_;
  const CaseSpec& spec_;
  std::vector<std::vector<uint32_t>> inputs_;
  gpu::Module module_;
  std::vector<gpu::CUfunction> functions_;
  std::vector<gpu::DeviceBuffer> params_;
  std::vector<gpu::DeviceBuffer> workspaces_;
  gpu::DeviceBuffer table_;
};

// One case's correctness pass. Returns a failure for a CUDA error (result.status is set by the
// caller); a mismatch or an input digest mismatch is a result, not a failure. A passing case's
// device state is kept in `keep` for the timed set.
Status runCase(const gpu::CudaDriver& driver, const CaseSpec& spec, const Options& options, CaseResult& result,
               std::unique_ptr<CaseRun>& keep) {
  const std::string dump_dir = options.dump.empty() ? "" : options.dump + "/" + spec.name;
  std::vector<std::vector<uint32_t>> inputs;
  const std::vector<std::string> problems = makeInputs(spec, inputs);
  const std::vector<bool> undumped = undumpedViews(spec);
  if (!dump_dir.empty()) {
    for (size_t i = 0; i < spec.params.size(); ++i) {
      const Param& p = spec.params[i];
      if (p.kind != ParamKind::kView || undumped[i]) continue;
      if (!p.written) dumpView(dump_dir, p.name + ".f32", inputs[i]);
      if (p.written && p.random_init) dumpView(dump_dir, p.name + ".input.f32", inputs[i]);
    }
  }
  if (!problems.empty()) {
    result.status = "input_digest_mismatch";
    for (const std::string& p : problems) result.message += (result.message.empty() ? "" : "; ") + p;
    return Status();
  }

  auto run = std::make_unique<CaseRun>(driver, spec, std::move(inputs));
  Status s = run->prepare(result);
  if (s.ok()) s = run->resetInputs();
  if (s.ok()) s = run->launchSequence();
  if (s.ok()) s = driver.synchronize();
  if (!s.ok()) return s;

  size_t differing = 0;
  for (OutputResult& o : result.outputs) {
    const Output& spec_out =
        *std::find_if(spec.outputs.begin(), spec.outputs.end(), [&](const Output& x) { return x.name == o.name; });
    std::vector<uint32_t> got;
    if (s = run->download(spec_out.param, got); !s.ok()) return s;
    o.downloaded = true;
    o.gpu_digest = fnv1a64(got.data(), got.size() * 4);
    if (spec_out.digest_only) {  // bit-exact iff the digests agree; NaN payloads included
      if (o.gpu_digest != spec_out.digest) {
        o.mismatches = 1;  // how many differ is unknown
        o.message = "FNV-1a 64 of the GPU's bytes " + hex64(o.gpu_digest) + " differs from the manifest's " +
                    hex64(spec_out.digest);
      }
    } else {
      compareOutput(got, spec_out.expected, spec.params[spec_out.param].storage, o);
    }
    if (o.mismatches > 0) ++differing;
  }
  if (!dump_dir.empty()) {
    for (size_t i = 0; i < spec.params.size(); ++i) {
      if (spec.params[i].kind != ParamKind::kView || !spec.params[i].written || undumped[i]) continue;
      std::vector<uint32_t> got;
      if (s = run->download(i, got); !s.ok()) return s;
      dumpView(dump_dir, spec.params[i].name + ".f32", got);
    }
  }
  if (differing == 0) {
    result.status = "pass";
    keep = std::move(run);
  } else {
    result.status = "mismatch";
    result.message = std::to_string(differing) + " of " + std::to_string(result.outputs.size()) +
                     " outputs differ from the CPU's bytes";
    for (const OutputResult& o : result.outputs) {
      if (!o.message.empty()) result.message += "; " + o.name + ": " + o.message;
    }
  }
  return Status();
}

// After a CUDA failure: is the context still usable?
bool contextLost(const gpu::CudaDriver& driver, const Status& failure) {
  if (gpu::isContextLost(failure.code())) return true;
  return !driver.synchronize().ok();
}

// A one-thread kernel that spins for a number of GPU clock cycles, launched before a timed
// sequence's start event: the stream is busy while the host enqueues the start event, the
// phases and the stop event, so the events time the phases' kernels and not the host's launch
// latency (torch_peers.py does the same with torch.cuda._sleep).
constexpr uint64_t kBusyCycles = 200000;  // about 100 us at an H200's 1.98 GHz
constexpr const char* kBusyPtx = R"(.version 7.0
.target sm_70
.address_size 64
.visible .entry kiln_busy(.param .u64 kiln_busy_cycles)
{
	.reg .pred 	%p<2>;
	.reg .b64 	%rd<5>;
	ld.param.u64 	%rd1, [kiln_busy_cycles];
	mov.u64 	%rd2, %clock64;
$L_spin:
	mov.u64 	%rd3, %clock64;
	sub.s64 	%rd4, %rd3, %rd2;
	setp.lt.u64 	%p1, %rd4, %rd1;
	@%p1 bra 	$L_spin;
	ret;
}
)";

struct Busy {
  gpu::Module module;
  gpu::CUfunction function = nullptr;
  Status load(const gpu::CudaDriver& driver) {
    Status s = module.load(driver, kBusyPtx);
    if (s.ok()) s = module.function("kiln_busy", function);
    return s;
  }
  Status launch(const gpu::CudaDriver& driver) const {
    uint64_t cycles = kBusyCycles;
    void* args[] = {&cycles};
    return driver.launch(function, 1, 1, args);
  }
};

// One timed launch sequence: the busy kernel, then events around the launches; host wall time
// around everything.
Status timedSequence(const gpu::CudaDriver& driver, const Busy& busy, const CaseRun& run, const gpu::Event& start,
                     const gpu::Event& stop, double& kernel_ms, double& wall_ms) {
  const Clock::time_point t0 = Clock::now();
  Status s = busy.launch(driver);
  if (s.ok()) s = start.record();
  if (s.ok()) s = run.launchSequence();
  if (s.ok()) s = stop.record();
  if (s.ok()) s = stop.synchronize();
  wall_ms = msSince(t0);
  if (!s.ok()) return s;
  float ms = 0;
  s = gpu::Event::elapsedMs(start, stop, ms);
  kernel_ms = ms;
  return s;
}

// One launch sequence with an event after each phase: each phase's kernel time (ms), for
// locating time inside a multi-phase kernel (not used for the kernel time itself).
Status phaseSequence(const gpu::CudaDriver& driver, const Busy& busy, const CaseRun& run, const gpu::Event& start,
                     const std::vector<gpu::Event>& marks, std::vector<double>& phase_ms) {
  Status s = busy.launch(driver);
  if (s.ok()) s = start.record();
  if (s.ok()) s = run.launchSequence(&marks);
  if (s.ok() && !marks.empty()) s = marks.back().synchronize();
  phase_ms.clear();
  for (size_t k = 0; s.ok() && k < marks.size(); ++k) {
    float ms = 0;
    s = gpu::Event::elapsedMs(k == 0 ? start : marks[k - 1], marks[k], ms);
    phase_ms.push_back(ms);
  }
  return s;
}

std::string failingSteps(const Health& h) {
  std::string out;
  for (const HealthStep& step : h.steps) {
    if (!step.pass) out += (out.empty() ? "" : "; ") + step.name + ": " + step.message;
  }
  return out;
}

std::string fixed(double value, int digits) {
  char buffer[64];
  std::snprintf(buffer, sizeof(buffer), "%.*f", digits, value);
  return buffer;
}

// The timed set over the cases that passed (see the brief in docs/gpu/archive-format.md, "Replay").
void runTimingSet(const gpu::CudaDriver& driver, const std::vector<std::pair<CaseRun*, CaseResult*>>& timed,
                  const Options& options, TimingSet& set, bool& lost) {
  set.ran = true;
  set.hysteresis_limit = options.hysteresis;
  for (const auto& entry : timed) set.cases.push_back(entry.second->name);
  set.before = runHealth(driver);
  if (!set.before.pass) set.reasons.push_back("health check before the set failed: " + failingSteps(set.before));
  if (!driver.synchronize().ok()) {
    lost = true;
    set.reasons.push_back("context unusable after the health check");
    return;
  }
  if (timed.empty()) set.reasons.push_back("no case passed the correctness pass: nothing was timed");

  gpu::Event start, stop;
  Status events = start.create(driver);
  if (events.ok()) events = stop.create(driver);
  if (!events.ok()) set.reasons.push_back("cannot create the timing events: " + events.message());
  Busy busy;
  if (events.ok()) {
    events = busy.load(driver);
    if (!events.ok()) set.reasons.push_back("cannot load the busy kernel: " + events.message());
  }

  struct PerCase {
    int reps = 0;
    bool failed = false;
    std::vector<std::vector<double>> kernel_ms, wall_ms;  // per visit
    std::vector<std::vector<double>> phase_ms;            // per phase, every visit
  };
  std::vector<PerCase> per(timed.size());
  for (int v = 0; v < options.visits && !lost && events.ok(); ++v) {
    for (size_t c = 0; c < timed.size() && !lost; ++c) {
      PerCase& pc = per[c];
      if (pc.failed) continue;
      CaseRun& run = *timed[c].first;
      CaseResult& result = *timed[c].second;
      pc.kernel_ms.emplace_back();
      pc.wall_ms.emplace_back();
      // Views re-uploaded and workspaces zeroed once per visit, not between timed sequences.
      Status s = run.resetInputs();
      if (s.ok()) s = driver.synchronize();
      double kernel_ms = 0, wall_ms = 0;
      for (int w = 0; w < kWarmups && s.ok(); ++w)
        s = timedSequence(driver, busy, run, start, stop, kernel_ms, wall_ms);
      if (s.ok() && v == 0) {
        const double needed = std::ceil(options.min_visit_ms / std::max(wall_ms, 1e-3));
        const double reps = std::max<double>(kMinReps, needed);
        pc.reps = static_cast<int>(std::min<double>(reps, options.max_reps));
      }
      for (int r = 0; r < pc.reps && s.ok(); ++r) {
        s = timedSequence(driver, busy, run, start, stop, kernel_ms, wall_ms);
        if (s.ok()) {
          pc.kernel_ms.back().push_back(kernel_ms);
          pc.wall_ms.back().push_back(wall_ms);
        }
      }
      // Then a few sequences with an event between phases (per-phase times only).
      std::vector<gpu::Event> marks(run.phases());
      for (size_t k = 0; k < marks.size() && s.ok(); ++k) s = marks[k].create(driver);
      pc.phase_ms.resize(run.phases());
      for (int r = 0; r < std::min(pc.reps, 20) && s.ok(); ++r) {
        std::vector<double> ms;
        s = phaseSequence(driver, busy, run, start, marks, ms);
        for (size_t k = 0; s.ok() && k < ms.size(); ++k) pc.phase_ms[k].push_back(ms[k]);
      }
      if (!s.ok()) {
        pc.failed = true;
        result.timing_error = s.message();
        set.reasons.push_back(result.name + ": CUDA error while timing: " + s.message());
        lost = contextLost(driver, s);
        if (lost) set.reasons.push_back("context lost while timing " + result.name + "; the set was stopped");
      }
    }
  }

  // Per-case statistics and the hysteresis check.
  for (size_t c = 0; c < timed.size(); ++c) {
    PerCase& pc = per[c];
    CaseResult& result = *timed[c].second;
    if (pc.failed || pc.kernel_ms.empty()) continue;
    CaseTiming t;
    t.reps = pc.reps;
    std::vector<double> medians;
    for (size_t v = 0; v < pc.kernel_ms.size(); ++v) {
      const std::vector<double>& k = pc.kernel_ms[v];
      if (k.empty()) continue;
      VisitStats vs;
      vs.kernel_ms_median = median(k);
      vs.kernel_ms_min = *std::min_element(k.begin(), k.end());
      vs.kernel_ms_max = *std::max_element(k.begin(), k.end());
      vs.wall_ms_median = median(pc.wall_ms[v]);
      t.visits.push_back(vs);
      medians.push_back(vs.kernel_ms_median);
      t.kernel_ms.insert(t.kernel_ms.end(), k.begin(), k.end());
      t.wall_ms.insert(t.wall_ms.end(), pc.wall_ms[v].begin(), pc.wall_ms[v].end());
    }
    if (t.kernel_ms.empty()) continue;
    t.kernel_us_median = 1e3 * median(t.kernel_ms);
    t.kernel_us_min = 1e3 * *std::min_element(t.kernel_ms.begin(), t.kernel_ms.end());
    t.kernel_us_max = 1e3 * *std::max_element(t.kernel_ms.begin(), t.kernel_ms.end());
    t.wall_us_median = 1e3 * median(t.wall_ms);
    for (const std::vector<double>& ph : pc.phase_ms) t.phase_us_median.push_back(1e3 * median(ph));
    const double lo = *std::min_element(medians.begin(), medians.end());
    const double hi = *std::max_element(medians.begin(), medians.end());
    t.hysteresis_ratio = lo > 0 ? hi / lo : (hi > 0 ? INFINITY : 1.0);
    t.flagged = !(t.hysteresis_ratio <= options.hysteresis);
    if (t.flagged) {
      std::string list;
      for (double m : medians) list += (list.empty() ? "" : ", ") + fixed(1e3 * m, 2);
      set.reasons.push_back(result.name + ": visit medians vary by " + fixed(t.hysteresis_ratio, 3) + "x (limit " +
                            fixed(options.hysteresis, 3) + "x): " + list + " us");
    }
    result.timing = t;
  }

  if (lost) {
    HealthStep step;
    step.name = "all";
    step.message = "not run: the context was lost";
    set.after.steps.push_back(step);
  } else {
    set.after = runHealth(driver);
  }
  if (!set.after.pass) set.reasons.push_back("health check after the set failed: " + failingSteps(set.after));
  set.accepted = set.reasons.empty();
  for (const auto& entry : timed) {
    if (entry.second->timing) entry.second->timing->accepted = set.accepted && !entry.second->timing->flagged;
  }
}

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

void runReplay(const gpu::CudaDriver& driver, const Archive& archive, const Options& options, Report& report) {
  report.archive = archive.path;
  std::vector<const CaseSpec*> selected;
  for (const CaseSpec& spec : archive.cases) {
    if (options.cases.empty() ||
        std::find(options.cases.begin(), options.cases.end(), spec.name) != options.cases.end()) {
      selected.push_back(&spec);
    }
  }

  // Results first, so that pointers into report.cases stay valid.
  report.cases.resize(selected.size());
  for (size_t i = 0; i < selected.size(); ++i) {
    const CaseSpec& spec = *selected[i];
    CaseResult& r = report.cases[i];
    r.name = spec.name;
    r.source = spec.source;
    r.flops = spec.flops;
    r.bytes = spec.bytes;
    for (const Phase& phase : spec.phases) {
      PhaseResult pr;
      pr.entry = phase.entry;
      pr.programs = phase.programs;
      pr.threads_per_block = phase.threads_per_block;
      pr.grid = phase.grid;
      pr.dynamic_shared_bytes = phase.dynamic_shared_bytes;
      r.phases.push_back(pr);
    }
    for (const Output& o : spec.outputs) {
      OutputResult orr;
      orr.name = o.name;
      orr.elements = o.elements;
      orr.expected_digest = o.digest;
      orr.storage = spec.params[o.param].storage;
      orr.digest_only = o.digest_only;
      r.outputs.push_back(orr);
    }
  }

  // Correctness pass.
  std::vector<std::unique_ptr<CaseRun>> kept(selected.size());
  std::string lost_after;
  for (size_t i = 0; i < selected.size(); ++i) {
    CaseResult& r = report.cases[i];
    if (!lost_after.empty()) {
      r.status = "not_run";
      r.message = "context lost after " + lost_after;
      continue;
    }
    Status s = runCase(driver, *selected[i], options, r, kept[i]);
    if (!s.ok()) {
      r.status = "error";
      r.message = s.message();
      kept[i].reset();
      if (contextLost(driver, s)) {
        report.context_lost = true;
        lost_after = r.name;
        r.message += " [context lost]";
      }
    }
    std::cout << "[" << (i + 1) << "/" << selected.size() << "] " << r.name << ": " << r.status;
    if (r.jit_ms >= 0) std::cout << " (jit " << fixed(r.jit_ms, 1) << " ms)";
    if (!r.message.empty()) std::cout << ": " << r.message.substr(0, r.message.find('\n'));
    std::cout << std::endl;
  }

  // Timed set over the cases that passed.
  if (report.context_lost) {
    report.timing.hysteresis_limit = options.hysteresis;
    report.timing.reasons.push_back("context lost during the correctness pass (after " + lost_after +
                                    "): the timed set was not run");
    return;
  }
  std::vector<std::pair<CaseRun*, CaseResult*>> timed;
  for (size_t i = 0; i < selected.size(); ++i) {
    if (kept[i]) timed.emplace_back(kept[i].get(), &report.cases[i]);
  }
  std::cout << "timing " << timed.size() << " case(s): " << options.visits << " visit(s), >= " << options.min_visit_ms
            << " ms per case per visit, at most " << options.max_reps << " reps" << std::endl;
  bool lost = false;
  runTimingSet(driver, timed, options, report.timing, lost);
  report.context_lost = lost;
}

}  // namespace kiln::replay

#include "tune/tune.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <set>

#include "bench/statistics.h"
#include "driver/check.h"
#include "driver/compile.h"
#include "host/data.h"
#include "ir/printer.h"
#include "jit/compile.h"
#include "jit/object_file.h"
#include "target/target.h"

namespace kiln::tune {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The options tuning chooses; a user who gives one of them keeps it.
const std::set<std::string>& tunedOptions() {
  static const std::set<std::string> s = {"block", "split", "lanes"};
  return s;
}

std::string knobName(const std::string& assignment) {
  return assignment.substr(0, assignment.find('='));
}

// One kernel compiled and loaded, with its own copy of the inputs.
struct Runner {
  std::unique_ptr<ir::Kernel> owned;
  const ir::Kernel* kernel = nullptr;
  std::unique_ptr<runtime::LoadedKernel> loaded;
  std::vector<host::ParamData> params;
  driver::LaunchArgs args;  // 16-bit and integer views packed as the kernel takes them
  int64_t reps = 1;

  // A library request (file == nullptr) or a kernel from a .tile file.
  std::optional<std::string> prepare(const kernels::LibraryRequest& r, const ir::Kernel* file, const plan::Knobs& knobs,
                                     uint64_t seed) {
    if (file) {
      kernel = file;
    } else {
      if (auto e = kernels::buildLibraryKernel(r, owned)) return e;
      kernel = owned.get();
    }
    // An integer view's values (lengths, positions, a page table) are the caller's: generated
    // ones would time another workload (docs/tune.md).
    for (const ir::Value* p : kernel->params)
      if (p->type.isView() && ir::isIntegerStorage(p->type.elem))
        return fmt::format(
            "parameter '{}' is an integer view ({}): kiln tune times generated inputs, and its values "
            "(lengths, positions, a page table) are the caller's; tune the kernel without a KV cache or positions",
            p->name, ir::toString(p->type));
    driver::Compilation c;
    if (auto e = driver::compile(*kernel, knobs, c)) return "compile: " + *e;
    if (auto e = driver::load(c.object, *kernel, knobs.isa, static_cast<int>(knobs.threads), loaded))
      return "load: " + *e;
    if (auto e = host::makeInputs(*kernel, seed, {}, params)) return e;
    if (auto e = args.pack(*loaded, params)) return e;
    return loaded->checkArgs(args.args());
  }
  void launch() { (void)loaded->launch(args.args()); }

  // One visit: warmup, calibrate the batch to `sample_ms`, then `samples` batches; returns the
  // median time per launch in µs.
  double visit(double sample_ms, int samples) {
    const Clock::time_point w = Clock::now();
    int64_t n = 0;
    while (n < 2 || since(w) < 0.01) launch(), ++n;
    const double per = since(w) / static_cast<double>(n);
    reps = std::clamp<int64_t>(static_cast<int64_t>(sample_ms * 1e-3 / std::max(per, 1e-9)), 1, 1 << 20);
    std::vector<double> micros;
    for (int s = 0; s < samples; ++s) {
      const Clock::time_point t0 = Clock::now();
      for (int64_t i = 0; i < reps; ++i) launch();
      micros.push_back(
          bench::sampleMicros(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count(), reps));
    }
    return *bench::median(micros);
  }
};

kernels::LibraryRequest withChoice(kernels::LibraryRequest r, const Choice& c) {
  for (const auto& [k, v] : c.options) r.options[k] = v;
  return r;
}

std::optional<std::string> knobsWithChoice(const plan::Knobs& base, const Choice& c, plan::Knobs& out) {
  out = base;
  for (const std::string& a : c.knobs)
    if (auto e = out.setAssignment(a)) return e;
  return std::nullopt;
}

// The fields every tuning key ends with: the machine and the versions (docs/tune.md).
// The machine and the target model the code is made for (a choice tuned for AVX-512 code is
// not one for AVX2 code on the same machine).
std::string targetFields(const plan::Knobs& knobs) {
  const jit::HostTarget& h = jit::hostTarget();
  return "cpu=" + h.cpu + " " + h.features + "\nllvm=" + h.llvm_version + "\nkiln=" + jit::kilnVersion() +
         "\nmodel=" + target::of(knobs.target).model(knobs.isa).name + "\n";
}

}  // namespace

std::string Choice::label() const {
  std::string s;
  for (const auto& [k, v] : options) s += (s.empty() ? "" : ", ") + k + " " + v;
  for (const std::string& a : knobs) s += (s.empty() ? "" : ", ") + a;
  return s.empty() ? "default" : s;
}

nlohmann::json Choice::toJson() const {
  return {{"options", options}, {"knobs", knobs}};
}

std::optional<Choice> Choice::fromJson(const nlohmann::json& j) {
  try {
    Choice c;
    c.options = j.at("options").get<std::map<std::string, std::string>>();
    c.knobs = j.at("knobs").get<std::vector<std::string>>();
    for (const auto& [k, v] : c.options)
      if (!tunedOptions().count(k)) return std::nullopt;
    for (const std::string& a : c.knobs) {
      plan::Knobs probe;
      if (probe.setAssignment(a) || knobName(a) == "threads") return std::nullopt;
    }
    return c;
  } catch (const nlohmann::json::exception&) {
    return std::nullopt;
  }
}

namespace {

// The vector widths other than the target model's default (AVX-512: 8; AVX2: 16), as knobs.
// The knobs tried one at a time beside the default: the other vector widths, and on the CPU
// LLVM's scheduling for this CPU's own model where it is not the generic one (knob tune_cpu).
std::vector<std::string> otherKnobs(const plan::Knobs& knobs) {
  const int64_t w =
      knobs.packet_width != 0 ? knobs.packet_width : target::of(knobs.target).model(knobs.isa).packet_width;
  std::vector<std::string> out;
  for (int64_t o : {8, 16})
    if (o != w) out.push_back("packet_width=" + std::to_string(o));
  if (knobs.target == target::Kind::Cpu && knobs.tune_cpu == "generic" &&
      jit::tuneCpu(knobs.isa, "host") != jit::tuneCpu(knobs.isa, "generic"))
    out.push_back("tune_cpu=host");
  return out;
}

}  // namespace

std::optional<std::string> candidates(const kernels::LibraryRequest& request, const plan::Knobs& knobs,
                                      std::vector<Choice>& out) {
  out.clear();
  std::map<std::string, std::string> defaults;
  if (auto e = kernels::libraryChoices(request, defaults)) return e;
  out.push_back(Choice{});
  auto add = [&](Choice c) {
    for (const Choice& o : out)
      if (o.options == c.options && o.knobs == c.knobs) return;
    out.push_back(std::move(c));
  };
  if (request.name == "attention") {
    int64_t bq = 0, bk = 0;
    std::sscanf(defaults["block"].c_str(), "%ldx%ld", &bq, &bk);
    std::vector<int64_t> shape;
    for (size_t p = 0, q; p <= request.shape.size(); p = q + 1) {
      q = request.shape.find(',', p);
      if (q == std::string::npos) q = request.shape.size();
      shape.push_back(std::atoll(request.shape.substr(p, q - p).c_str()));
    }
    const int64_t Q = shape.size() == 7 ? shape[3] : 1;
    if (!request.options.count("block") && bq > 0 && bk > 0) {
      for (int64_t k : {32, 128})
        if (k != bk) add({{{"block", fmt::format("{}x{}", bq, k)}}, {}});
      if (Q > 1) {
        if (bq > 1) add({{{"block", fmt::format("{}x{}", bq / 2, bk)}}, {}});
        if (bq * 2 <= Q) add({{{"block", fmt::format("{}x{}", bq * 2, bk)}}, {}});
      }
    }
    if (!request.options.count("lanes") && defaults["heads"] == "stacked" && Q > 1) {
      // The other layout (docs/kernels.md, Lanes), with its own default blocks.
      const bool queries = defaults["lanes"].rfind("queries", 0) == 0;
      add({{{"lanes", queries ? "keys" : "queries"}}, {}});
    }
    if (!request.options.count("split") && defaults["heads"] == "stacked") {
      int64_t chunks = 0;
      if (std::sscanf(defaults["split"].c_str(), "%ld chunks", &chunks) == 1 && chunks > 1) {
        add({{{"split", "off"}}, {}});
        add({{{"split", std::to_string(chunks * 2)}}, {}});
        if (chunks / 2 > 1) add({{{"split", std::to_string(chunks / 2)}}, {}});
      } else if (Q == 1) {
        add({{{"split", "2"}}, {}});
        add({{{"split", "4"}}, {}});
      }
    }
  }
  for (const std::string& w : otherKnobs(knobs)) add({{}, {w}});
  return std::nullopt;
}

std::optional<std::string> run(const TuneOptions& o, TuneResult& out,
                               const std::function<void(int, int, const std::string&)>& progress) {
  out = TuneResult{};
  const Clock::time_point t0 = Clock::now();
  out.key = o.file ? tuningKey(*o.file, o.knobs) : tuningKey(o.request, o.knobs);
  std::vector<Choice> cands;
  if (o.file) {
    cands = {Choice{}};
    for (const std::string& w : otherKnobs(o.knobs)) cands.push_back(Choice{{}, {w}});
    cands.push_back(Choice{{}, {"local_lanes=1"}});
  } else if (auto e = candidates(o.request, o.knobs, cands))
    return e;
  const int total = static_cast<int>(cands.size());

  Runner base;
  if (auto e = base.prepare(o.request, o.file, o.knobs, o.seed)) return "the default does not run: " + *e;
  CandidateResult def;
  def.status = "default";
  def.ratio = def.ratio_min = def.ratio_max = 1.0;
  out.candidates.push_back(def);
  if (progress) progress(1, total, "default");

  double last = 0;
  for (size_t i = 1; i < cands.size(); ++i) {
    CandidateResult r;
    r.choice = cands[i];
    const double elapsed = since(t0);
    if (elapsed + std::max(last, 0.05) > o.budget_s) {
      r.status = "skipped (budget)";
      out.budget_exhausted = true;
      out.candidates.push_back(r);
      continue;
    }
    const Clock::time_point c0 = Clock::now();
    kernels::LibraryRequest req = withChoice(o.request, r.choice);
    plan::Knobs knobs;
    Runner cand;
    std::optional<std::string> err = knobsWithChoice(o.knobs, r.choice, knobs);
    if (!err) err = cand.prepare(req, o.file, knobs, o.seed);
    if (err) {
      r.status = "failed";
      r.detail = *err;
    } else {
      // Correct before timed: f64 against the library's FP64 reference; a .tile kernel
      // bitexact against the strict-FP32 interpreter (f64 when its policies or fast_math
      // refuse bitexact).
      driver::CheckOptions co;
      co.mode = o.file ? driver::CheckMode::Bitexact : driver::CheckMode::F64;
      co.seed = o.seed;
      if (!o.file)
        co.f64_reference = [&req](const std::vector<host::ParamData>& in, std::vector<std::vector<double>>& ref) {
          return kernels::libraryReference(req, in, ref);
        };
      co.f64_allowance = [&req](const std::vector<host::ParamData>& in, std::vector<std::vector<double>>& a) {
        return kernels::libraryAllowance(req, in, a);
      };
      driver::CheckResult cr;
      std::optional<std::string> checked = driver::check(*cand.kernel, knobs, co, cr);
      if (checked && o.file && checked->find("bitexact is refused") != std::string::npos) {
        co.mode = driver::CheckMode::F64;
        checked = driver::check(*cand.kernel, knobs, co, cr);
      }
      if (auto e = checked) {
        r.status = "failed";
        r.detail = *e;
      } else if (!cr.pass) {
        r.status = "wrong";
        r.detail = fmt::format("{} check failed: max_abs_err {:.3g}",
                               co.mode == driver::CheckMode::F64 ? "f64" : "bitexact", cr.max_abs_err);
      } else {
        // A,B,B,A per cycle. A candidate whose median is below 1 but whose range reaches 1 is
        // measured afresh with samples twice as long (less noise per visit) while the budget
        // allows, at most kRemeasures times; the last measurement decides (docs/tune.md).
        constexpr int kRemeasures = 3;
        double sample_ms = o.sample_ms;
        for (int attempt = 0;; ++attempt) {
          const Clock::time_point m0 = Clock::now();
          std::vector<double> visits;
          for (int c = 0; c < o.cycles; ++c) {
            visits.push_back(base.visit(sample_ms, o.samples));
            visits.push_back(cand.visit(sample_ms, o.samples));
            visits.push_back(cand.visit(sample_ms, o.samples));
            visits.push_back(base.visit(sample_ms, o.samples));
          }
          const std::vector<double> ratios = bench::pairedRatios(visits);
          const auto rg = bench::range(ratios);
          r.pairs = static_cast<int>(ratios.size());
          r.ratio = rg->median;
          r.ratio_min = rg->min;
          r.ratio_max = rg->max;
          r.measurements = attempt + 1;
          r.status = rg->max < 1.0 ? "kept" : rg->min >= 1.0 ? "slower" : "not faster (range reaches 1)";
          const bool straddles = rg->min < 1.0 && rg->max >= 1.0 && rg->median < 1.0;
          // The next measurement takes about twice this one.
          if (!straddles || attempt == kRemeasures || since(t0) + 2 * since(m0) > o.budget_s) break;
          sample_ms *= 2;
        }
      }
    }
    last = since(c0);
    out.candidates.push_back(r);
    if (progress) progress(static_cast<int>(i) + 1, total, r.choice.label());
  }
  for (size_t i = 1; i < out.candidates.size(); ++i)
    if (out.candidates[i].status == "kept" &&
        (!out.chosen || out.candidates[i].ratio < out.candidates[*out.chosen].ratio))
      out.chosen = i;
  out.seconds = since(t0);
  return std::nullopt;
}

std::string tuningKey(const kernels::LibraryRequest& request, const plan::Knobs& knobs) {
  std::string text = "kernel=" + request.name + "\nshape=" + request.shape + "\n";
  for (const auto& [k, v] : request.options)
    if (!tunedOptions().count(k)) text += "option " + k + "=" + v + "\n";
  text += "threads=" + std::to_string(knobs.threads) + "\n";
  text += targetFields(knobs);
  return host::sha256Hex(text.data(), text.size());
}

std::string tuningKey(const ir::Kernel& kernel, const plan::Knobs& knobs) {
  std::string text = "tile\n" + ir::print(kernel) + "threads=" + std::to_string(knobs.threads) + "\n";
  text += targetFields(knobs);
  return host::sha256Hex(text.data(), text.size());
}

std::string databasePath() {
  if (const char* p = std::getenv("KILN_TUNE_DB"); p && *p) return p;
  std::unique_ptr<jit::DiskObjectCache> cache;
  if (jit::cacheFromEnvironment(cache) || !cache) return "";
  return cache->dir() + "/tuning.json";
}

namespace {

nlohmann::json readDatabase(const std::string& path, bool warn) {
  std::string bytes;
  if (jit::readFile(path, bytes) || bytes.empty()) return nlohmann::json::object();  // none (yet)
  nlohmann::json j = nlohmann::json::parse(bytes, nullptr, false);
  if (j.is_discarded() || !j.is_object() || j.value("format", "") != "kiln-tuning/1" || !j.contains("entries") ||
      !j["entries"].is_object()) {
    if (warn) std::cerr << "kiln: warning: the tuning database " << path << " is not readable; ignoring it\n";
    return nlohmann::json::object();
  }
  return j;
}

}  // namespace

std::optional<Entry> lookup(const std::string& key) {
  const std::string path = databasePath();
  if (path.empty()) return std::nullopt;
  nlohmann::json db = readDatabase(path, true);
  if (!db.contains("entries") || !db["entries"].contains(key)) return std::nullopt;
  const nlohmann::json& e = db["entries"][key];
  auto choice = e.contains("choice") ? Choice::fromJson(e["choice"]) : std::nullopt;
  if (!choice) {
    std::cerr << "kiln: warning: tuning entry " << key.substr(0, 12) << "… in " << path
              << " is malformed; ignoring it\n";
    return std::nullopt;
  }
  return Entry{*choice, e};
}

std::optional<std::string> store(const std::string& key, const Entry& entry) {
  const std::string path = databasePath();
  if (path.empty()) return std::string("no tuning database: KILN_CACHE_DIR is off and KILN_TUNE_DB is unset");
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  nlohmann::json db = readDatabase(path, false);
  db["format"] = "kiln-tuning/1";
  nlohmann::json e = entry.record;
  e["choice"] = entry.choice.toJson();
  db["entries"][key] = e;
  std::random_device rd;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  if (auto err = jit::writeFile(tmp, db.dump(2) + "\n")) return err;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return "cannot write the tuning database " + path + ": " + ec.message();
  }
  return std::nullopt;
}

namespace {

std::string applyKnobs(const Entry& e, plan::Knobs& knobs, const std::vector<std::string>& user_knobs, bool applied) {
  for (const std::string& a : e.choice.knobs) {
    const std::string name = knobName(a);
    const bool set =
        std::any_of(user_knobs.begin(), user_knobs.end(), [&](const std::string& u) { return knobName(u) == name; });
    if (!set && !knobs.setAssignment(a)) applied = true;
  }
  if (e.choice.options.empty() && e.choice.knobs.empty()) return "tuned";  // the default won
  return applied ? "tuned" : "user";
}

}  // namespace

std::string applyTuned(kernels::LibraryRequest& request, plan::Knobs& knobs, const std::vector<std::string>& user_knobs,
                       std::optional<Entry>* found) {
  std::optional<Entry> e = lookup(tuningKey(request, knobs));
  if (found) *found = e;
  if (!e) return "default";
  bool applied = false;
  for (const auto& [k, v] : e->choice.options)
    if (!request.options.count(k)) request.options[k] = v, applied = true;
  return applyKnobs(*e, knobs, user_knobs, applied);
}

std::string applyTuned(const ir::Kernel& kernel, plan::Knobs& knobs, const std::vector<std::string>& user_knobs,
                       std::optional<Entry>* found) {
  std::optional<Entry> e = lookup(tuningKey(kernel, knobs));
  if (found) *found = e;
  if (!e) return "default";
  return applyKnobs(*e, knobs, user_knobs, false);
}

}  // namespace kiln::tune

// kiln-replay: replay a Kiln GPU archive (docs/gpu/archive-format.md) on the device, check every
// output bit-exactly against the CPU's bytes, time the cases that pass, write replay.json and
// gpu-acceptance.json. Needs only g++ and the NVIDIA driver:
//   g++ -O2 -std=c++17 -I src tools/kiln-replay/*.cpp src/gpu/cuda_driver.cpp -ldl -o kiln-replay
// Exit codes: 0 every case bit-exact, 1 a case mismatched or failed, 2 bad usage or a broken
// archive, 77 no GPU (skipped).
#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "archive.h"
#include "gpu/cuda_driver.h"
#include "replay.h"

namespace {

using kiln::replay::Options;

constexpr int kExitPass = 0;
constexpr int kExitFail = 1;
constexpr int kExitUsage = 2;
constexpr int kExitSkipped = 77;

constexpr const char* kUsage =
    "usage: kiln-replay ARCH [--out DIR] [--visits N] [--min-visit-ms T] [--max-reps R] [--hysteresis F]\n"
    "                        [--cases NAME,...] [--dump DIR] [--check-archive]\n"
    "\n"
    "Replays the Kiln GPU archive ARCH: every case once, outputs compared bit-exactly with\n"
    "ARCH/CASE/expected (NaN equals NaN), then one timed set over the cases that passed.\n"
    "\n"
    "  --out DIR          where replay.json and gpu-acceptance.json go (default .)\n"
    "  --visits N         timed visits over all cases (default 3)\n"
    "  --min-visit-ms T   timed sequences per case and visit last at least T ms (default 20)\n"
    "  --max-reps R       ... but are at most R (default 200; at least 5 unless R < 5)\n"
    "  --hysteresis F     refuse the set when a case's visit medians vary by more than F x (default 1.5)\n"
    "  --cases A,B        only these cases (index.txt order is kept)\n"
    "  --dump DIR         write DIR/CASE/NAME.f32 for every input view and every view the kernel writes\n"
    "                     (except views with INIT bits: and digest-only outputs)\n"
    "  --check-archive    no GPU: parse the archive, regenerate the inputs and check their digests\n"
    "\n"
    "Exit codes: 0 every case bit-exact (a refused timing set is reported, not an exit code),\n"
    "1 a case mismatched or failed, 2 bad usage or a broken archive, 77 no GPU.\n";

int usageError(const std::string& message) {
  std::cerr << "kiln-replay: error: " << message << "\n\n" << kUsage;
  return kExitUsage;
}

bool parseInt(const std::string& s, int& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const long v = std::strtol(s.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE || v < -1000000000L || v > 1000000000L) return false;
  out = static_cast<int>(v);
  return true;
}

bool parseNumber(const std::string& s, double& out) {
  if (s.empty()) return false;
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (*end != '\0' || errno == ERANGE || !std::isfinite(v)) return false;
  out = v;
  return true;
}

// Parses argv into `o`; returns an error message, empty when fine. Sets `help` for --help.
std::string parseArgs(int argc, char** argv, Options& o, bool& help) {
  std::vector<std::string> positional;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help = true;
      return "";
    }
    if (arg == "--check-archive") {
      o.check_archive = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      positional.push_back(arg);
      continue;
    }
    std::string name = arg, value;
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
    } else {
      if (i + 1 >= argc) return "option " + name + " needs a value";
      value = argv[++i];
    }
    if (name == "--out") {
      if (value.empty()) return "--out needs a directory";
      o.out = value;
    } else if (name == "--dump") {
      if (value.empty()) return "--dump needs a directory";
      o.dump = value;
    } else if (name == "--visits") {
      if (!parseInt(value, o.visits) || o.visits < 1) return "--visits expects an integer >= 1, got '" + value + "'";
    } else if (name == "--max-reps") {
      if (!parseInt(value, o.max_reps) || o.max_reps < 1)
        return "--max-reps expects an integer >= 1, got '" + value + "'";
    } else if (name == "--min-visit-ms") {
      if (!parseNumber(value, o.min_visit_ms) || o.min_visit_ms < 0) {
        return "--min-visit-ms expects a number >= 0, got '" + value + "'";
      }
    } else if (name == "--hysteresis") {
      if (!parseNumber(value, o.hysteresis) || o.hysteresis < 1) {
        return "--hysteresis expects a number >= 1, got '" + value + "'";
      }
    } else if (name == "--cases") {
      size_t start = 0;
      while (start <= value.size()) {
        size_t comma = value.find(',', start);
        if (comma == std::string::npos) comma = value.size();
        const std::string c = value.substr(start, comma - start);
        if (c.empty()) return "--cases expects NAME,NAME,... without empty names, got '" + value + "'";
        o.cases.push_back(c);
        start = comma + 1;
      }
    } else {
      return "unknown option " + name;
    }
  }
  if (positional.size() != 1) {
    return positional.empty() ? "missing the archive directory ARCH"
                              : "one archive directory expected, got " + std::to_string(positional.size());
  }
  o.archive = positional[0];
  return "";
}

// Every --cases name must be a case of the archive.
std::string checkSelection(const kiln::replay::Archive& archive, const Options& o) {
  std::set<std::string> names;
  for (const auto& c : archive.cases) names.insert(c.name);
  for (const std::string& c : o.cases) {
    if (!names.count(c)) return "--cases: '" + c + "' is not a case of " + archive.path;
  }
  return "";
}

// --check-archive: parse, regenerate inputs, compare digests; no GPU.
int checkArchive(const Options& o) {
  kiln::replay::Archive archive;
  if (auto e = kiln::replay::loadArchive(o.archive, archive)) {
    std::cerr << "kiln-replay: broken archive: " << *e << "\n";
    return kExitUsage;
  }
  if (std::string e = checkSelection(archive, o); !e.empty()) return usageError(e);
  int bad = 0;
  for (const kiln::replay::CaseSpec& spec : archive.cases) {
    if (!o.cases.empty() && std::find(o.cases.begin(), o.cases.end(), spec.name) == o.cases.end()) continue;
    std::vector<std::vector<uint32_t>> inputs;
    const std::vector<std::string> problems = kiln::replay::makeInputs(spec, inputs);
    if (!o.dump.empty()) {
      std::vector<bool> undumped(spec.params.size(), false);  // INIT bits: and digest-only outputs (huge)
      for (size_t i = 0; i < spec.params.size(); ++i) undumped[i] = spec.params[i].bits_init;
      for (const kiln::replay::Output& out : spec.outputs) {
        if (out.digest_only) undumped[out.param] = true;
      }
      for (size_t i = 0; i < spec.params.size(); ++i) {
        const kiln::replay::Param& p = spec.params[i];
        if (p.kind != kiln::replay::ParamKind::kView || undumped[i]) continue;
        // Only inputs exist without a GPU: written views get their initial contents as NAME.input.f32.
        const std::string file = p.written ? p.name + ".input.f32" : p.name + ".f32";
        if (p.written && !p.random_init) continue;
        std::error_code ec;
        std::filesystem::create_directories(o.dump + "/" + spec.name, ec);
        std::ofstream out(o.dump + "/" + spec.name + "/" + file, std::ios::binary | std::ios::trunc);
        out.write(reinterpret_cast<const char*>(inputs[i].data()), static_cast<std::streamsize>(inputs[i].size() * 4));
      }
    }
    if (problems.empty()) {
      size_t digest_only = 0;
      for (const kiln::replay::Output& out : spec.outputs) digest_only += out.digest_only;
      std::cout << spec.name << ": ok (" << spec.params.size() << " params, " << spec.workspaces.size()
                << " workspaces, " << spec.phases.size() << " phases, " << spec.outputs.size() << " outputs";
      if (digest_only > 0) std::cout << ", " << digest_only << " of them digest-only";
      std::cout << "; input and expected digests match)\n";
    } else {
      ++bad;
      std::cout << spec.name << ": input_digest_mismatch\n";
      for (const std::string& p : problems) std::cout << "  " << p << "\n";
    }
  }
  return bad == 0 ? kExitPass : kExitFail;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  bool help = false;
  if (std::string e = parseArgs(argc, argv, o, help); !e.empty()) return usageError(e);
  if (help) {
    std::cout << kUsage;
    return kExitPass;
  }
  if (o.check_archive) return checkArchive(o);

  // The archive first: a broken one is named even where there is no GPU.
  kiln::replay::Archive archive;
  if (auto e = kiln::replay::loadArchive(o.archive, archive)) {
    std::cerr << "kiln-replay: broken archive: " << *e << "\n";
    return kExitUsage;
  }
  if (std::string e = checkSelection(archive, o); !e.empty()) return usageError(e);

  std::string why;
  std::unique_ptr<kiln::gpu::CudaDriver> driver = kiln::gpu::CudaDriver::open(why);
  if (!driver) {
    const std::string prefix = "no GPU: ";
    if (why.rfind(prefix, 0) == 0) {
      std::cout << "skipped: no GPU (" << why.substr(prefix.size()) << ")" << std::endl;
      return kExitSkipped;
    }
    std::cerr << "kiln-replay: error: " << why << "\n";
    return kExitFail;
  }

  kiln::gpu::Context context;
  if (kiln::gpu::Status s = context.create(*driver); !s.ok()) {
    std::cerr << "kiln-replay: error: cannot create a context on device 0: " << s.message() << "\n";
    return kExitFail;
  }
  kiln::replay::Report report;
  if (kiln::gpu::Status s = context.info(report.device); !s.ok()) {
    std::cerr << "kiln-replay: error: " << s.message() << "\n";
    return kExitFail;
  }
  std::cout << "device: " << report.device.name << ", compute capability " << report.device.cc_major << "."
            << report.device.cc_minor << ", " << report.device.multiprocessors << " SMs, driver "
            << report.device.driver_version << "\n"
            << "archive: " << o.archive << " (" << archive.cases.size() << " cases)" << std::endl;

  kiln::replay::runReplay(*driver, archive, o, report);

  std::string error;
  const bool written = kiln::replay::writeReports(report, o, error);
  kiln::replay::printTable(report);
  if (!written) {
    std::cerr << "kiln-replay: error: " << error << "\n";
    return kExitFail;
  }
  std::cout << "wrote " << o.out << "/replay.json and " << o.out << "/gpu-acceptance.json" << std::endl;

  bool all_pass = !report.cases.empty();
  for (const auto& r : report.cases) all_pass = all_pass && r.status == "pass";
  return all_pass ? kExitPass : kExitFail;
}

#include "bench/environment.h"

#include <sys/utsname.h>
#include <unistd.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "host/data.h"
#include "jit/compile.h"

#ifndef KILN_SOURCE_DIR
#define KILN_SOURCE_DIR ""
#endif
#ifndef KILN_BUILD_FLAGS
#define KILN_BUILD_FLAGS "unknown"
#endif

namespace kiln::bench {
namespace {

std::string readText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return f ? std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()) : std::string();
}

// The value of the first "key\t: value" line of /proc/cpuinfo.
std::string cpuinfoField(const std::string& cpuinfo, const std::string& key) {
  std::istringstream in(cpuinfo);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(key, 0) != 0) continue;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string v = line.substr(colon + 1);
    while (!v.empty() && v.front() == ' ') v.erase(v.begin());
    return v;
  }
  return "unknown";
}

// stdout of a command, trimmed; nullopt when it fails.
std::optional<std::string> commandOutput(const std::string& cmd) {
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return std::nullopt;
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  if (pclose(p) != 0) return std::nullopt;
  while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
  return out;
}

std::string shellQuote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

nlohmann::ordered_json gitInfo() {
  std::string dir = KILN_SOURCE_DIR;
  std::error_code ec;
  if (dir.empty() || !std::filesystem::exists(dir, ec)) dir = std::filesystem::current_path(ec).string();
  const std::string git = "git -C " + shellQuote(dir) + " ";
  auto commit = commandOutput(git + "rev-parse HEAD 2>/dev/null");
  auto status = commandOutput(git + "status --porcelain 2>/dev/null");
  nlohmann::ordered_json j;
  j["source_dir"] = dir;
  j["commit"] = commit ? *commit : "unknown";
  j["dirty"] = commit && status ? nlohmann::ordered_json(!status->empty()) : nlohmann::ordered_json("unknown");
  return j;
}

nlohmann::ordered_json loadJson() {
  auto l = loadAverages();
  return {{"1min", l[0]}, {"5min", l[1]}, {"15min", l[2]}};
}

}  // namespace

std::array<double, 3> loadAverages() {
  std::array<double, 3> l = {-1, -1, -1};
  std::istringstream in(readText("/proc/loadavg"));
  in >> l[0] >> l[1] >> l[2];
  return l;
}

nlohmann::ordered_json environmentBefore() {
  nlohmann::ordered_json j;
  j["format"] = "kiln-bench-environment/1";
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  std::tm utc{};
  gmtime_r(&t, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", &utc);
  j["timestamp_utc"] = stamp;
  const std::string cpuinfo = readText("/proc/cpuinfo");
  const jit::HostTarget& host = jit::hostTarget();
  j["cpu"] = {{"model", cpuinfoField(cpuinfo, "model name")},
              {"flags", cpuinfoField(cpuinfo, "flags")},
              {"logical_cpus", static_cast<int64_t>(sysconf(_SC_NPROCESSORS_ONLN))},
              {"llvm_cpu", host.cpu},
              {"llvm_features", host.features},
              {"triple", host.triple}};
  utsname u{};
  uname(&u);
  j["kernel"] = {{"sysname", u.sysname}, {"release", u.release}, {"version", u.version}, {"machine", u.machine}};
  j["load_average_before"] = loadJson();
  j["llvm_version"] = host.llvm_version;
#if defined(__clang__)
  j["compiler"] = std::string("clang ") + __clang_version__;
#elif defined(__GNUC__)
  j["compiler"] = std::string("gcc ") + __VERSION__;
#else
  j["compiler"] = "unknown";
#endif
  j["compiler_flags"] = KILN_BUILD_FLAGS;
  j["git"] = gitInfo();
  const std::string exe = readText("/proc/self/exe");
  std::error_code ec;
  j["binary"] = {{"path", std::filesystem::read_symlink("/proc/self/exe", ec).string()},
                 {"sha256", exe.empty() ? std::string("unknown") : host::sha256Hex(exe.data(), exe.size())}};
  return j;
}

void environmentAfter(nlohmann::ordered_json& env, int pinned_cpu) {
  env["load_average_after"] = loadJson();
  env["pinned_cpu"] = pinned_cpu;
  env["timer"] = "std::chrono::steady_clock";
}

const std::vector<std::string>& environmentKeys() {
  static const std::vector<std::string> keys = {
      "format",   "timestamp_utc",  "cpu", "kernel", "load_average_before", "llvm_version",
      "compiler", "compiler_flags", "git", "binary", "load_average_after",  "pinned_cpu",
      "timer"};
  return keys;
}

}  // namespace kiln::bench

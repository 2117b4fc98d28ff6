#include "fuzz/differential.h"

#include <fmt/format.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>
#include <memory>

#include "driver/compile.h"
#include "fuzz/knob_grid.h"
#include "fuzz/rng.h"
#include "host/storage.h"
#include "interp/interp.h"

namespace kiln::fuzz {
namespace {

std::string oneLine(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r') c = ' ';
  if (s.size() > 400) s = s.substr(0, 400) + "...";
  return s;
}

std::string floatText(float f) {
  return fmt::format("{} ({:#010x})", f, std::bit_cast<uint32_t>(f));
}

Outcome runInProcess(const ir::Kernel& kernel, const plan::Knobs& knobs, const InputConfig& in) {
  std::vector<host::ParamData> inputs;
  if (auto e = makeFuzzInputs(kernel, in, inputs)) return {Verdict::Error, "inputs: " + oneLine(*e)};
  interp::Options io;
  io.reduction_partitions = static_cast<int>(knobs.reduction_partitions);
  interp::F64Views f64;
  {
    std::vector<host::ParamData> scratch = inputs;
    io.mode = interp::Mode::F64;
    if (auto e = interp::evaluate(kernel, scratch, io, &f64))
      return {Verdict::Error, "interpreter f64: " + oneLine(*e)};
  }
  std::vector<host::ParamData> strict = inputs;
  io.mode = interp::Mode::StrictF32;
  if (auto e = interp::evaluate(kernel, strict, io)) return {Verdict::Error, "interpreter strict-f32: " + oneLine(*e)};

  driver::Compilation c;
  if (auto e = driver::compile(kernel, knobs, c, driver::Stage::Obj))
    return {isRefusal(*e) ? Verdict::Refused : Verdict::Error, "compile: " + oneLine(*e)};
  // The plan's prediction of the code is part of what is checked (docs/backend.md).
  if (auto e = driver::planDisagreesWithCode(c.report)) return {Verdict::Mismatch, "plan vs code: " + *e};
  std::unique_ptr<runtime::LoadedKernel> loaded;
  if (auto e = driver::load(c.object, kernel, knobs.isa, static_cast<int>(knobs.threads), loaded))
    return {Verdict::Error, "load: " + oneLine(*e)};
  std::vector<host::ParamData> got = inputs;
  if (auto e = driver::run(*loaded, got, /*guarded=*/true)) return {Verdict::Error, "run: " + oneLine(*e)};

  const bool exact = precise(kernel, knobs);
  for (const ir::Value* p : kernel.params) {
    if (!p->type.isView()) continue;
    const std::vector<float>& g = got[static_cast<size_t>(p->index)].data;
    const std::vector<float>& s = strict[static_cast<size_t>(p->index)].data;
    const std::vector<double>& r = f64[static_cast<size_t>(p->index)];
    if (exact) {
      host::BitexactResult b = host::compareBitexact(g, s);
      if (!b.pass) {
        size_t i = static_cast<size_t>(b.first_bad);
        return {
            Verdict::Mismatch,
            fmt::format("bitexact: %{}: {} element(s) differ from strict-f32, first at {}: native {}, strict-f32 {}",
                        p->name, b.mismatches, b.first_bad, i < g.size() ? floatText(g[i]) : "-",
                        i < s.size() ? floatText(s[i]) : "-")};
      }
      continue;
    }
    // Judge only the elements the strict-f32 realization of the IR gets right.
    std::vector<float> gj, sj;
    std::vector<double> rj;
    std::vector<size_t> at;
    for (size_t i = 0; i < r.size() && i < g.size() && i < s.size(); ++i) {
      if (!host::compareF64({s[i]}, {r[i]}).pass) continue;
      gj.push_back(g[i]);
      rj.push_back(r[i]);
      at.push_back(i);
    }
    host::CompareResult cr = host::compareF64(gj, rj);
    if (!cr.pass) {
      size_t i = at[static_cast<size_t>(cr.first_bad)];
      return {Verdict::Mismatch, fmt::format("f64 tolerance: %{}: element {}: native {}, f64 {}, strict-f32 {}",
                                             p->name, i, g[i], r[i], s[i])};
    }
  }
  return {};
}

bool writeAll(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

}  // namespace

std::string verdictName(Verdict v) {
  switch (v) {
    case Verdict::Pass: return "pass";
    case Verdict::Mismatch: return "mismatch";
    case Verdict::Refused: return "refused";
    case Verdict::Error: return "error";
    case Verdict::Crash: return "crash";
  }
  return "?";
}

std::optional<std::string> makeFuzzInputs(const ir::Kernel& kernel, const InputConfig& in,
                                          std::vector<host::ParamData>& out) {
  if (auto e = host::makeInputs(kernel, in.seed, {}, out)) return e;
  // i64 scalars (loop bounds, origins) get -1..4 instead of makeInputs's 0, except with seed 0,
  // whose inputs stay exactly those of `kiln eval --seed 0` / `kiln run`.
  Rng scalars(in.seed ^ 0x5CA1A25ull);
  if (in.seed != 0)
    for (const ir::Value* p : kernel.params)
      if (p->type.isScalar() && p->type.elem == ir::Elem::I64)
        out[static_cast<size_t>(p->index)].i64 =
            p->range ? scalars.range(p->range->lo, p->range->hi) : scalars.range(-1, 4);  // within a stated range
  if (!in.specials) return std::nullopt;
  const float inf = std::numeric_limits<float>::infinity();
  const float fmax = std::numeric_limits<float>::max();
  const std::vector<float> specials = {0.0f,
                                       -0.0f,
                                       1e-40f,
                                       -3e-39f,
                                       std::numeric_limits<float>::denorm_min(),
                                       inf,
                                       -inf,
                                       std::numeric_limits<float>::quiet_NaN(),
                                       fmax,
                                       -fmax};
  Rng rng(in.seed ^ 0x5EC1A15ull);
  for (const ir::Value* v : kernel.inputs())
    for (float& x : out[static_cast<size_t>(v->index)].data)  // a 16-bit view's: the special rounded to its type
      if (rng.chance(1, 6)) x = host::roundToStorage(v->type.elem, rng.pick(specials));
  return std::nullopt;
}

bool isRefusal(const std::string& message) {
  return message.find("not yet supported") != std::string::npos ||
         message.find("max_local_bytes") != std::string::npos || message.rfind("knob '", 0) == 0;
}

Outcome differential(const ir::Kernel& kernel, const plan::Knobs& knobs, const InputConfig& in, bool isolate,
                     int timeout_s) {
  if (!isolate) return runInProcess(kernel, knobs, in);
  int fds[2];
  if (::pipe(fds) != 0) return {Verdict::Error, std::string("pipe: ") + std::strerror(errno)};
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(fds[0]);
    ::close(fds[1]);
    return {Verdict::Error, std::string("fork: ") + std::strerror(errno)};
  }
  if (pid == 0) {
    ::close(fds[0]);
    // The limit is CPU time (SIGXCPU), so a busy machine does not turn a slow compile into a
    // failure; a wall-clock alarm at 4x catches a run that hangs without using the CPU.
    struct rlimit cpu {};
    cpu.rlim_cur = static_cast<rlim_t>(timeout_s);
    cpu.rlim_max = static_cast<rlim_t>(timeout_s) + 5;
    ::setrlimit(RLIMIT_CPU, &cpu);
    ::alarm(static_cast<unsigned>(4 * timeout_s));
    Outcome o = runInProcess(kernel, knobs, in);
    writeAll(fds[1], std::to_string(static_cast<int>(o.verdict)) + " " + o.reason);
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string msg;
  char buf[4096];
  for (;;) {
    ssize_t n = ::read(fds[0], buf, sizeof buf);
    if (n > 0) {
      msg.append(buf, static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  ::close(fds[0]);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status)) {
    int sig = WTERMSIG(status);
    if (sig == SIGXCPU) return {Verdict::Crash, fmt::format("timeout: no verdict within {} s of CPU time", timeout_s)};
    if (sig == SIGALRM)
      return {Verdict::Crash, fmt::format("timeout: no verdict within {} s of wall time (a hang)", 4 * timeout_s)};
    return {Verdict::Crash, fmt::format("signal {} ({})", sig, strsignal(sig))};
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || msg.empty())
    return {Verdict::Crash, fmt::format("the child exited with status {} and no verdict",
                                        WIFEXITED(status) ? WEXITSTATUS(status) : -1)};
  size_t sp = msg.find(' ');
  Outcome o;
  o.verdict = static_cast<Verdict>(std::stoi(msg.substr(0, sp)));
  o.reason = sp == std::string::npos ? "" : msg.substr(sp + 1);
  return o;
}

}  // namespace kiln::fuzz

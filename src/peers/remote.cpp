// The child-process peer: client (RemoteImpl) and server (servePeer); protocol in remote.h.
#include "peers/remote.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <sstream>

extern char** environ;

namespace kiln::peers {
namespace {

bool readLine(FILE* in, std::string& line) {
  line.clear();
  int c;
  while ((c = std::fgetc(in)) != EOF && c != '\n') line.push_back(static_cast<char>(c));
  return c != EOF || !line.empty();
}

class RemoteImpl : public Impl {
 public:
  RemoteImpl(std::string name, std::string serve, std::map<std::string, std::string> env, const ImplOptions& o)
      : name_(std::move(name)), serve_(std::move(serve)), env_(std::move(env)), options_(o) {}
  ~RemoteImpl() override { stop(); }

  std::string name() const override { return name_; }
  std::string detail() const override { return detail_; }
  int threads() const override { return options_.threads; }

  std::optional<std::string> prepare(const Problem& p) override {
    if (p.workload != Workload::Attention) return "openblas-coretype runs attention only";
    stop();
    if (auto e = start(p)) return e;
    std::string line;
    if (!readLine(from_, line)) return "the child process ended before it was ready (see its stderr)";
    if (line.rfind("ready ", 0) == 0) {
      detail_ = line.substr(6);
      return std::nullopt;
    }
    return "child: " + (line.rfind("error ", 0) == 0 ? line.substr(6) : line);
  }

  std::optional<std::string> compute(std::vector<float>& out) override {
    if (auto e = send("output\n")) return e;
    std::string line;
    long long n = -1;
    if (!readLine(from_, line) || std::sscanf(line.c_str(), "output %lld", &n) != 1 || n < 0)
      return "child: unexpected answer '" + line + "' to output";
    out.resize(n);
    if (std::fread(out.data(), sizeof(float), n, from_) != static_cast<size_t>(n)) return "child: short output";
    return std::nullopt;
  }

  std::optional<std::string> time(int reps, int samples, std::vector<double>& seconds, bool cold) override {
    const std::string command = "time " + std::to_string(reps) + " " + std::to_string(samples) + (cold ? " cold" : "");
    if (auto e = send(command + "\n")) return e;
    std::string line, word;
    if (!readLine(from_, line)) return "child: no answer to time";
    std::istringstream is(line);
    is >> word;
    if (word != "times") return "child: " + line;
    seconds.clear();
    double t;
    while (is >> t) seconds.push_back(t);
    if (static_cast<int>(seconds.size()) != samples) return "child: " + line;
    return std::nullopt;
  }

 private:
  std::optional<std::string> start(const Problem& p) {
    signal(SIGPIPE, SIG_IGN);  // a child that dies shows up as a write error, not a dead parent
    int down[2], up[2];
    if (pipe2(down, O_CLOEXEC) != 0) return std::string("pipe: ") + std::strerror(errno);
    if (pipe2(up, O_CLOEXEC) != 0) {
      close(down[0]), close(down[1]);
      return std::string("pipe: ") + std::strerror(errno);
    }
    const std::string exe = options_.self_exe.empty() ? "/proc/self/exe" : options_.self_exe;
    std::vector<std::string> args = {exe,
                                     "peers",
                                     "--serve",
                                     serve_,
                                     "--only-shapes",
                                     "--shape",
                                     shapeText(p.shape),
                                     "--mask",
                                     p.causal ? "causal" : "none",
                                     "--threads",
                                     std::to_string(options_.threads),
                                     "--seed",
                                     std::to_string(options_.seed)};
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e) {
      const std::string kv = *e;
      if (!env_.count(kv.substr(0, kv.find('=')))) env.push_back(kv);
    }
    for (const auto& [k, v] : env_) env.push_back(k + "=" + v);
    std::vector<char*> argv, envp;
    for (std::string& a : args) argv.push_back(a.data());
    for (std::string& e : env) envp.push_back(e.data());
    argv.push_back(nullptr);
    envp.push_back(nullptr);

    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, down[0], 0);
    posix_spawn_file_actions_adddup2(&actions, up[1], 1);
    const int rc = posix_spawn(&pid_, exe.c_str(), &actions, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&actions);
    close(down[0]);
    close(up[1]);
    if (rc != 0) {
      close(down[1]), close(up[0]);
      pid_ = -1;
      return "cannot start " + exe + ": " + std::strerror(rc);
    }
    to_ = fdopen(down[1], "w");
    from_ = fdopen(up[0], "r");
    return std::nullopt;
  }

  std::optional<std::string> send(const std::string& command) {
    if (!to_ || std::fputs(command.c_str(), to_) == EOF || std::fflush(to_) != 0) return "child: the pipe is closed";
    return std::nullopt;
  }

  void stop() {
    if (to_) {
      std::fputs("quit\n", to_);
      std::fclose(to_);
      to_ = nullptr;
    }
    if (from_) {
      std::fclose(from_);
      from_ = nullptr;
    }
    if (pid_ > 0) {
      int status = 0;
      waitpid(pid_, &status, 0);
      pid_ = -1;
    }
  }

  std::string name_, serve_;
  std::map<std::string, std::string> env_;
  ImplOptions options_;
  std::string detail_;
  pid_t pid_ = -1;
  FILE* to_ = nullptr;
  FILE* from_ = nullptr;
};

}  // namespace

std::unique_ptr<Impl> makeRemote(std::string name, std::string serve, std::map<std::string, std::string> env,
                                 const ImplOptions& options) {
  return std::make_unique<RemoteImpl>(std::move(name), std::move(serve), std::move(env), options);
}

std::unique_ptr<Impl> makeOpenBlasCoretype(const ImplOptions& options) {
  const std::string family = openblasFamily();
  return makeRemote("openblas-coretype", "openblas", {{"OPENBLAS_CORETYPE", family.empty() ? "Prescott" : family}},
                    options);
}

int servePeer(const ServeRequest& request) {
  // The protocol owns the original stdout; everything else printed goes to stderr.
  const int fd = dup(1);
  if (fd < 0 || dup2(2, 1) < 0) return 1;
  FILE* out = fdopen(fd, "w");
  FILE* in = stdin;
  auto fail = [&](const std::string& message) {
    std::string m = message;
    for (char& c : m)
      if (c == '\n') c = ' ';
    std::fprintf(out, "error %s\n", m.c_str());
    std::fflush(out);
    return 1;
  };
  ImplOptions options;
  options.threads = request.threads;
  options.seed = request.seed;
  std::unique_ptr<Impl> impl = request.impl == "openblas-coretype" ? nullptr : makeImpl(request.impl, options);
  if (!impl) return fail("no in-process peer named '" + request.impl + "'");
  Problem problem;
  if (auto e = makeProblem(request.shape, request.causal, request.seed, problem)) return fail(*e);
  if (auto e = impl->prepare(problem)) return fail(*e);
  std::fprintf(out, "ready %s (child process %d)\n", impl->detail().c_str(), static_cast<int>(getpid()));
  std::fflush(out);
  std::string line;
  std::vector<float> output;
  std::vector<double> seconds;
  while (readLine(in, line)) {
    int reps = 0, samples = 0, end = 0;
    if (line == "quit") break;
    if (line == "output") {
      if (auto e = impl->compute(output)) return fail(*e);
      std::fprintf(out, "output %zu\n", output.size());
      std::fwrite(output.data(), sizeof(float), output.size(), out);
    } else if (std::sscanf(line.c_str(), "time %d %d%n", &reps, &samples, &end) == 2 && reps > 0 && samples > 0 &&
               (line.substr(end).empty() || line.substr(end) == " cold")) {
      if (auto e = impl->time(reps, samples, seconds, line.substr(end) == " cold")) return fail(*e);
      std::fprintf(out, "times");
      for (double s : seconds) std::fprintf(out, " %.9e", s);
      std::fprintf(out, "\n");
    } else {
      return fail("unknown command '" + line + "'");
    }
    std::fflush(out);
  }
  return 0;
}

}  // namespace kiln::peers

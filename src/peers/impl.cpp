// The in-process timing loop, the registry of peers, and the two hand-written peers.
#include "peers/impl.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <fstream>

namespace kiln::peers {

std::optional<std::string> LocalImpl::compute(std::vector<float>& out) {
  run();
  out = out_;
  return std::nullopt;
}

std::optional<std::string> LocalImpl::time(int reps, int samples, std::vector<double>& seconds_per_call, bool cold) {
  using Clock = std::chrono::steady_clock;
  seconds_per_call.clear();
  for (int s = 0; s < samples; ++s) {
    double seconds = 0.0;
    if (cold) {
      for (int r = 0; r < reps; ++r) {
        evictCaches();
        const auto t0 = Clock::now();
        run();
        seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      }
    } else {
      const auto t0 = Clock::now();
      for (int r = 0; r < reps; ++r) run();
      seconds = std::chrono::duration<double>(Clock::now() - t0).count();
    }
    seconds_per_call.push_back(seconds / reps);
  }
  return std::nullopt;
}

namespace {

// The largest cache size /sys states for cpu0 ("32768K"), or 0.
std::size_t largestCacheBytes() {
  std::size_t largest = 0;
  for (int index = 0; index < 8; ++index) {
    std::ifstream in("/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index) + "/size");
    std::size_t n = 0;
    char unit = 0;
    if (!(in >> n)) continue;
    in >> unit;
    const std::size_t bytes = unit == 'K' ? n << 10 : unit == 'M' ? n << 20 : unit == 'G' ? n << 30 : n;
    largest = std::max(largest, bytes);
  }
  return largest;
}

}  // namespace

std::size_t evictCaches() {
  static std::vector<uint64_t> buffer = [] {
    const std::size_t llc = largestCacheBytes();
    const std::size_t bytes = std::max<std::size_t>(4 * (llc ? llc : std::size_t{32} << 20), std::size_t{64} << 20);
    return std::vector<uint64_t>(bytes / sizeof(uint64_t), 1);  // written: every page is mapped
  }();
  uint64_t sum = 0;
  for (std::size_t i = 0; i < buffer.size(); i += 64 / sizeof(uint64_t)) sum += buffer[i];
  static volatile uint64_t sink;
  sink = sum;
  return buffer.size() * sizeof(uint64_t);
}

namespace {

class NativeImpl : public LocalImpl {
 public:
  explicit NativeImpl(const ImplOptions& o) : options_(o) {}
  std::string name() const override { return "native"; }
  std::string detail() const override {
    return std::string("hand-written online softmax, GQA-aware, ") + (isa_ ? isa_->name : options_.native_isa) + " (" +
           std::to_string(isa_ ? isa_->lanes : 0) + " lanes), " + kv_ + std::to_string(threads()) + " thread(s)";
  }
  int threads() const override { return options_.threads; }
  std::optional<std::string> prepare(const Problem& p) override {
    if (p.workload != Workload::Attention) return "the hand-written kernel is attention only";
    isa_ = isaKernels(options_.native_isa);
    if (!isa_)
      return "this CPU lacks " + (options_.native_isa == "auto" ? std::string("AVX2+FMA") : options_.native_isa);
    if (p.kv_elem == KvElem::F16 && !__builtin_cpu_supports("f16c")) return "this CPU lacks F16C (f16 K/V)";
    // 16-bit K/V are read as such and widened to f32 on load.
    kv_ = p.kv_elem == KvElem::F32 ? "" : fmt::format("K/V {} widened on load, ", kvElemName(p.kv_elem));
    team_ = std::make_unique<ThreadTeam>(options_.threads);
    out_.assign(p.outputSize(), 0.0f);
    args_ = p.args(out_.data());
    return std::nullopt;
  }

 protected:
  void run() override { nativeAttention(*isa_, *team_, args_); }

 private:
  ImplOptions options_;
  const IsaKernels* isa_ = nullptr;
  std::string kv_;
  std::unique_ptr<ThreadTeam> team_;
  AttentionArgs args_;
};

class PlainImpl : public LocalImpl {
 public:
  explicit PlainImpl(const ImplOptions& o) : options_(o), k_(o.isa == "avx2" ? plainAvx2() : plainNative()) {}
  std::string name() const override { return "plain"; }
  std::string detail() const override {
    return std::string("plain C++ loops, ") + k_.flags + ", one row at a time, " + std::to_string(threads()) +
           " thread(s)";
  }
  int threads() const override { return options_.threads; }
  std::optional<std::string> prepare(const Problem& p) override {
    team_ = std::make_unique<ThreadTeam>(options_.threads);
    out_.assign(p.outputSize(), 0.0f);
    p_ = &p;
    if (p.workload == Workload::Attention) args_ = p.args(out_.data());
    return std::nullopt;
  }

 protected:
  void run() override {
    if (p_->workload == Workload::Gemm) {
      // One row of C per item: C[i,:] = sum over k of A[i,k] * B[k,:] (i-k-j order, the loop a
      // compiler vectorizes).
      const GemmShape& g = p_->gemm;
      team_->forEach(
          g.M, 0, [this, &g](int64_t i, float*) { k_.gemm_row(p_->a.data(), p_->b.data(), out_.data(), g.N, g.K, i); });
      return;
    }
    team_->forEach(k_.items(args_), k_.scratch_floats(args_),
                   [this](int64_t item, float* scratch) { k_.item(args_, item, scratch); });
  }

 private:
  ImplOptions options_;
  const PlainKernels& k_;
  std::unique_ptr<ThreadTeam> team_;
  const Problem* p_ = nullptr;
  AttentionArgs args_;
};

}  // namespace

std::unique_ptr<Impl> makeNative(const ImplOptions& o) {
  return std::make_unique<NativeImpl>(o);
}
std::unique_ptr<Impl> makePlain(const ImplOptions& o) {
  return std::make_unique<PlainImpl>(o);
}

const std::vector<std::string>& implNames() {
  static const std::vector<std::string> names = {
      "kiln",         "kiln-1t",        "kiln-untuned", "kiln-lengths", "kiln-set",          "kiln-f32", "kiln-seed",
      "kiln-bf16dot", "kiln-bf16pairs", "onednn",       "openblas",     "openblas-coretype", "native",   "plain"};
  return names;
}

const std::vector<std::string>& implNames(Workload w) {
  static const std::vector<std::string> gemm = {"kiln",           "kiln-1t", "kiln-untuned", "kiln-set", "kiln-bf16dot",
                                                "kiln-bf16pairs", "onednn",  "openblas",     "plain"};
  return w == Workload::Gemm ? gemm : implNames();
}

bool takesHalfKv(const std::string& name) {
  return name.rfind("kiln", 0) == 0 || name == "onednn" || name == "native";
}

bool takesHalfB(const std::string& name) {
  return name.rfind("kiln", 0) == 0 || name == "onednn";
}

std::unique_ptr<Impl> makeImpl(const std::string& name, const ImplOptions& o) {
  if (name == "kiln") return makeKilnDefault(o);
  if (name == "kiln-1t") return makeKilnOneThread(o);
  if (name == "kiln-untuned") return makeKilnUntuned(o);
  if (name == "kiln-lengths") return makeKilnLengths(o);
  if (name == "kiln-set") return makeKilnSet(o);
  if (name == "kiln-seed") return makeKilnSeed(o);
  if (name == "kiln-f32") return makeKilnF32(o);
  if (name == "kiln-bf16dot") return makeKilnBf16Dot(o);
  if (name == "kiln-bf16pairs") return makeKilnBf16Pairs(o);
  if (name == "onednn") return makeOneDnn(o);
  if (name == "openblas") return makeOpenBlas(o);
  if (name == "openblas-coretype") return makeOpenBlasCoretype(o);
  if (name == "native") return makeNative(o);
  if (name == "plain") return makePlain(o);
  return nullptr;
}

}  // namespace kiln::peers

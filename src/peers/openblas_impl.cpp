// OpenBLAS as a peer (Debian libopenblas-dev, DYNAMIC_ARCH build). GEMM: one cblas_sgemm.
// Attention: per (batch, KV head), the
// query heads of the group stacked as rows, S = scale * Q.K^T with cblas_sgemm, a vectorized
// row softmax (the native kernels' AVX-512/AVX2 exp; causal rows cut at their visible keys),
// then O = P.V with cblas_sgemm straight into o. The library's thread count is set with
// openblas_set_num_threads; the softmax runs on a team of the same size.
#include <dlfcn.h>
#include <fmt/format.h>

#include <cblas.h>
#include <algorithm>
#include <climits>
#include <cstdlib>

#include "host/isa.h"
#include "peers/impl.h"

namespace kiln::peers {

std::string openblasFamily() {
  __builtin_cpu_init();
  const bool avx512 = host::cpuHasAvx512();  // KILN_HOST_WITHOUT_AVX512 included (kiln peers --isa avx2)
  if (avx512 && __builtin_cpu_supports("avx512bf16")) return "Cooperlake";
  if (avx512) return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return "";
}

std::string openblasDescription() {
  std::string path = "?";
  Dl_info info;
  if (dladdr(reinterpret_cast<void*>(&cblas_sgemm), &info) && info.dli_fname) {
    char resolved[PATH_MAX];
    path = realpath(info.dli_fname, resolved) ? resolved : info.dli_fname;
  }
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return v ? std::string(name) + "=" + v : std::string(name) + " unset";
  };
  return fmt::format("core {} ({}, {}), {}, {}", openblas_get_corename(), env("OPENBLAS_CORETYPE"),
                     env("OPENBLAS_L2_SIZE"), path, openblas_get_config());
}

namespace {

class OpenBlasImpl : public LocalImpl {
 public:
  explicit OpenBlasImpl(const ImplOptions& o) : options_(o) {}
  std::string name() const override { return "openblas"; }
  std::string detail() const override { return detail_; }
  int threads() const override { return options_.threads; }

  std::optional<std::string> prepare(const Problem& p) override {
    openblas_set_num_threads(options_.threads);
    if (openblas_get_num_threads() != options_.threads)
      return fmt::format("OpenBLAS runs {} threads, not {} (its MAX_THREADS or the CPU count caps it)",
                         openblas_get_num_threads(), options_.threads);
    p_ = &p;
    if (p.workload == Workload::Gemm) {
      out_.assign(p.outputSize(), 0.0f);
      detail_ = fmt::format("cblas_sgemm, {}, {} thread(s)", openblasDescription(), openblas_get_num_threads());
      return std::nullopt;
    }
    isa_ = isaKernels("auto");
    if (!isa_) return "this CPU lacks AVX2+FMA (the softmax)";
    const Shape& s = p.shape;
    p_ = &p;
    group_ = s.Hq / s.Hkv;
    rows_ = group_ * s.Q;
    scores_.assign(rows_ * s.K, 0.0f);
    limits_.clear();
    if (p.causal)
      for (int64_t r = 0; r < rows_; ++r)
        limits_.push_back(std::clamp<int64_t>(r % s.Q + s.K - s.Q + 1, 0, s.K));  // row r = g * Q + i
    out_.assign(p.outputSize(), 0.0f);
    team_ = std::make_unique<ThreadTeam>(options_.threads);
    detail_ = fmt::format("cblas_sgemm + {} softmax, {}, {} thread(s)", isa_->name, openblasDescription(),
                          openblas_get_num_threads());
    return std::nullopt;
  }

 protected:
  void run() override {
    if (p_->workload == Workload::Gemm) {
      const GemmShape& g = p_->gemm;
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, static_cast<int>(g.M), static_cast<int>(g.N),
                  static_cast<int>(g.K), 1.0f, p_->a.data(), static_cast<int>(g.K), p_->b.data(), static_cast<int>(g.N),
                  0.0f, out_.data(), static_cast<int>(g.N));
      return;
    }
    const Shape& s = p_->shape;
    const int M = static_cast<int>(rows_), K = static_cast<int>(s.K), D = static_cast<int>(s.D),
              Dv = static_cast<int>(s.Dv);
    constexpr int64_t kRowsPerItem = 32;
    for (int64_t bh = 0; bh < s.B * s.Hkv; ++bh) {
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, K, D, p_->scale, p_->q.data() + bh * rows_ * D, D,
                  p_->k.data() + bh * K * D, D, 0.0f, scores_.data(), K);
      team_->forEach((rows_ + kRowsPerItem - 1) / kRowsPerItem, 0, [&](int64_t item, float*) {
        const int64_t r0 = item * kRowsPerItem, n = std::min(kRowsPerItem, rows_ - r0);
        isa_->softmaxRows(scores_.data() + r0 * K, n, K, K, limits_.empty() ? nullptr : limits_.data() + r0);
      });
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, M, Dv, K, 1.0f, scores_.data(), K,
                  p_->v.data() + bh * K * Dv, Dv, 0.0f, out_.data() + bh * rows_ * Dv, Dv);
    }
  }

 private:
  ImplOptions options_;
  std::string detail_;
  const Problem* p_ = nullptr;
  const IsaKernels* isa_ = nullptr;
  std::unique_ptr<ThreadTeam> team_;
  int64_t group_ = 1, rows_ = 1;
  std::vector<float> scores_;
  std::vector<int64_t> limits_;
};

}  // namespace

std::unique_ptr<Impl> makeOpenBlas(const ImplOptions& o) {
  return std::make_unique<OpenBlasImpl>(o);
}

}  // namespace kiln::peers

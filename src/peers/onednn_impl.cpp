// oneDNN as a peer (Debian libdnnl-dev, 2.6 API). GEMM: one matmul primitive. Attention: per
// (batch, KV head), the query heads of
// the group stacked as rows ([G*Q, D] is contiguous in q), batched matmul Q.K^T with the score
// scale as output scale (K^T is K read through strides, no copy), the softmax primitive on the
// last axis, then batched matmul P.V straight into o ([G*Q, Dv] is contiguous in o). A causal
// mask is a binary-add post-op of a [1, G*Q, K] tensor of 0 / -inf. With 16-bit K/V (`kiln
// peers --kv-dtype`), oneDNN's 16-bit pipeline: its matmul takes both operands in one type, so
// Q is rounded to it once (in prepare), the scores are stored in it, the softmax runs in place
// on them, and P.V accumulates in f32 into an f32 o; it rounds Q, the scores and P, which Kiln
// does not, so its results are checked with a looser tolerance (tolerance()).
// Threads: oneDNN here runs on OpenMP (libgomp); omp_set_num_threads is looked up at run time
// in the libgomp that libdnnl loaded, so this file needs no OpenMP flags.
#include <dlfcn.h>
#include <fmt/format.h>

#include <cmath>
#include <oneapi/dnnl/dnnl.hpp>

#include "host/storage.h"
#include "peers/impl.h"

namespace kiln::peers {
namespace {

using dnnl::memory;
using dt = dnnl::memory::data_type;

int ompThreads(int set) {
  using SetFn = void (*)(int);
  using GetFn = int (*)();
  auto setFn = reinterpret_cast<SetFn>(dlsym(RTLD_DEFAULT, "omp_set_num_threads"));
  auto getFn = reinterpret_cast<GetFn>(dlsym(RTLD_DEFAULT, "omp_get_max_threads"));
  if (setFn && set > 0) setFn(set);
  return getFn ? getFn() : -1;
}

const char* isaName(dnnl::cpu_isa isa) {
  switch (isa) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    default: return "other";
  }
}

class OneDnnImpl : public LocalImpl {
 public:
  explicit OneDnnImpl(const ImplOptions& o) : options_(o) {}
  std::string name() const override { return "onednn"; }
  std::string detail() const override { return detail_; }
  int threads() const override { return options_.threads; }
  // The 16-bit pipeline rounds Q, the scores and P to 8 (bf16) or 11 (f16) significant bits:
  // two units of bf16 (measured on the decode shapes with inputs in [-1, 1]: 1.1e-4 at most,
  // Kiln 5e-8).
  double tolerance() const override { return half_ && !gemm_ ? 8e-3 : Impl::tolerance(); }
  // 16-bit GEMM: A rounded to bf16 (u = 2^-8) or f16 (2^-11).
  double roundsA() const override { return half_ && gemm_ ? (bf16_ ? 0x1p-8 : 0x1p-11) : 0.0; }

  std::optional<std::string> prepare(const Problem& p) override {
    try {
      return build(p);
    } catch (const dnnl::error& e) {
      if (half_ && e.status == dnnl_unimplemented) {
        unavailable_ = true;
        return fmt::format("oneDNN {}.{} has no {} matmul for {} ({})", dnnl_version()->major, dnnl_version()->minor,
                           kvElemName(p.workload == Workload::Gemm ? p.b_elem : p.kv_elem),
                           isaName(dnnl::get_effective_cpu_isa()), e.what());
      }
      return std::string("oneDNN: ") + e.what();
    }
  }
  bool unavailable() const override { return unavailable_; }

 protected:
  void run() override {
    if (gemm_) {
      mm_.execute(stream_, {{DNNL_ARG_SRC, a_}, {DNNL_ARG_WEIGHTS, b_}, {DNNL_ARG_DST, o_}});
      stream_.wait();
      return;
    }
    qk_.execute(stream_, qk_args_);
    if (masked_)
      mask_add_.execute(stream_, {{DNNL_ARG_SRC_0, scores_}, {DNNL_ARG_SRC_1, mask_mem_}, {DNNL_ARG_DST, scores_}});
    softmax_.execute(stream_, {{DNNL_ARG_SRC, scores_}, {DNNL_ARG_DST, scores_}});
    pv_.execute(stream_, {{DNNL_ARG_SRC, scores_}, {DNNL_ARG_WEIGHTS, v_}, {DNNL_ARG_DST, o_}});
    stream_.wait();
  }

 private:
  std::optional<std::string> build(const Problem& p) {
    const int omp = ompThreads(options_.threads);
    if (omp != options_.threads)
      return fmt::format("cannot set OpenMP threads to {} (omp_get_max_threads() = {})", options_.threads, omp);
    engine_ = dnnl::engine(dnnl::engine::kind::cpu, 0);
    stream_ = dnnl::stream(engine_);
    if (p.workload == Workload::Gemm) return buildGemm(p);
    const Shape& s = p.shape;
    const int64_t BH = s.B * s.Hkv, M = (s.Hq / s.Hkv) * s.Q, K = s.K;
    out_.assign(p.outputSize(), 0.0f);
    scratch_.assign(BH * M * K, 0.0f);
    half_ = p.kv_elem != KvElem::F32;
    const dt kv = dtypeOf(p.kv_elem);
    void* qData = const_cast<float*>(p.q.data());
    void* kData = const_cast<float*>(p.k.data());
    void* vData = const_cast<float*>(p.v.data());
    if (half_) {
      roundTo16(p.q, p.kv_elem);
      scratch_.assign((BH * M * K + 1) / 2, 0.0f);  // 16-bit scores
      qData = q16_.data();
      kData = const_cast<uint16_t*>(p.k16.data());
      vData = const_cast<uint16_t*>(p.v16.data());
    }

    const memory::desc q_md({BH, M, s.D}, kv, {M * s.D, s.D, 1});
    const memory::desc kt_md({BH, s.D, K}, kv, {K * s.D, 1, s.D});  // K^T through strides
    const memory::desc s_md({BH, M, K}, kv, {M * K, K, 1});
    const memory::desc v_md({BH, K, s.Dv}, kv, {K * s.Dv, s.Dv, 1});
    const memory::desc o_md({BH, M, s.Dv}, dt::f32, {M * s.Dv, s.Dv, 1});

    dnnl::primitive_attr qk_attr;
    qk_attr.set_output_scales(0, {p.scale});
    // Causal: scores += mask (0 or -inf, broadcast over the KV heads) by a binary primitive in
    // place. As a binary post-op of the matmul, oneDNN 2.6 falls back to its reference matmul
    // (`ref:any`, some 300x slower) for this broadcast.
    masked_ = p.causal;
    std::string mask_info;
    if (masked_) {
      const memory::desc mask_md({1, M, K}, kv, {M * K, K, 1});
      const uint16_t negInf16 = kv == dt::bf16 ? 0xFF80 : 0xFC00;  // -inf as bf16 / f16 bits
      mask_.assign(half_ ? (M * K + 1) / 2 : M * K, 0.0f);
      for (int64_t r = 0; r < M; ++r)  // row r = g * Q + i
        for (int64_t j = 0; j < K; ++j)
          if (j > r % s.Q + s.K - s.Q) {
            if (half_)
              reinterpret_cast<uint16_t*>(mask_.data())[r * K + j] = negInf16;
            else
              mask_[r * K + j] = -INFINITY;
          }
      const dnnl::binary::primitive_desc add_pd(dnnl::binary::desc(dnnl::algorithm::binary_add, s_md, mask_md, s_md),
                                                engine_);
      mask_add_ = dnnl::binary(add_pd);
      mask_mem_ = memory(mask_md, engine_, mask_.data());
      mask_info = fmt::format(" / mask add {}", add_pd.impl_info_str());
    }
    const dnnl::matmul::primitive_desc qk_pd(dnnl::matmul::desc(q_md, kt_md, s_md), qk_attr, engine_);
    const dnnl::softmax_forward::primitive_desc sm_pd(
        dnnl::softmax_forward::desc(dnnl::prop_kind::forward_inference, s_md, 2), engine_);
    const dnnl::matmul::primitive_desc pv_pd(dnnl::matmul::desc(s_md, v_md, o_md), engine_);
    qk_ = dnnl::matmul(qk_pd);
    softmax_ = dnnl::softmax_forward(sm_pd);
    pv_ = dnnl::matmul(pv_pd);

    scores_ = memory(s_md, engine_, scratch_.data());
    v_ = memory(v_md, engine_, vData);
    o_ = memory(o_md, engine_, out_.data());
    qk_args_ = {{DNNL_ARG_SRC, memory(q_md, engine_, qData)},
                {DNNL_ARG_WEIGHTS, memory(kt_md, engine_, kData)},
                {DNNL_ARG_DST, scores_}};

    const dnnl_version_t* ver = dnnl_version();
    detail_ =
        fmt::format("oneDNN {}.{}.{} ({}), {}matmul {}{} / softmax {} / matmul {}, OpenMP threads {}", ver->major,
                    ver->minor, ver->patch, isaName(dnnl::get_effective_cpu_isa()),
                    half_ ? fmt::format("{} Q, K, V, scores and P, f32 accumulation: ", kvElemName(p.kv_elem)) : "",
                    qk_pd.impl_info_str(), mask_info, sm_pd.impl_info_str(), pv_pd.impl_info_str(), ompThreads(0));
    return std::nullopt;
  }

  static dt dtypeOf(KvElem e) { return e == KvElem::BF16 ? dt::bf16 : e == KvElem::F16 ? dt::f16 : dt::f32; }
  // q16_ = x rounded to the 16-bit type e (the operand oneDNN's 16-bit matmul takes in e).
  void roundTo16(const std::vector<float>& x, KvElem e) {
    q16_.resize(x.size());
    for (size_t i = 0; i < x.size(); ++i) q16_[i] = e == KvElem::BF16 ? host::f32ToBf16(x[i]) : host::f32ToF16(x[i]);
  }

  // GEMM: one matmul primitive, C[M,N] = A[M,K] . B[K,N]. With 16-bit B (--b-dtype) oneDNN's
  // matmul takes A in the same type: A is rounded to it once (untimed), C accumulates in f32.
  std::optional<std::string> buildGemm(const Problem& p) {
    const GemmShape& g = p.gemm;
    gemm_ = true;
    half_ = p.b_elem != KvElem::F32;
    bf16_ = p.b_elem == KvElem::BF16;
    const dt in = dtypeOf(p.b_elem);
    out_.assign(p.outputSize(), 0.0f);
    void* aData = const_cast<float*>(p.a.data());
    void* bData = const_cast<float*>(p.b.data());
    if (half_) {
      roundTo16(p.a, p.b_elem);
      aData = q16_.data();
      bData = const_cast<uint16_t*>(p.b16.data());
    }
    const memory::desc a_md({g.M, g.K}, in, {g.K, 1});
    const memory::desc b_md({g.K, g.N}, in, {g.N, 1});
    const memory::desc c_md({g.M, g.N}, dt::f32, {g.N, 1});
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), engine_);
    mm_ = dnnl::matmul(pd);
    a_ = memory(a_md, engine_, aData);
    b_ = memory(b_md, engine_, bData);
    o_ = memory(c_md, engine_, out_.data());
    const dnnl_version_t* ver = dnnl_version();
    detail_ = fmt::format("oneDNN {}.{}.{} ({}), {}matmul {}, OpenMP threads {}", ver->major, ver->minor, ver->patch,
                          isaName(dnnl::get_effective_cpu_isa()),
                          half_ ? fmt::format("{} A and B, f32 accumulation: ", kvElemName(p.b_elem)) : "",
                          pd.impl_info_str(), ompThreads(0));
    return std::nullopt;
  }

  ImplOptions options_;
  std::string detail_;
  bool gemm_ = false;
  dnnl::matmul mm_;
  memory a_, b_;
  dnnl::engine engine_;
  dnnl::stream stream_;
  dnnl::matmul qk_, pv_;
  dnnl::softmax_forward softmax_;
  dnnl::binary mask_add_;
  memory scores_, v_, o_, mask_mem_;
  bool masked_ = false;
  std::unordered_map<int, memory> qk_args_;
  std::vector<float> scratch_, mask_;
  std::vector<uint16_t> q16_;
  bool half_ = false, bf16_ = false, unavailable_ = false;
};

}  // namespace

std::unique_ptr<Impl> makeOneDnn(const ImplOptions& o) {
  return std::make_unique<OneDnnImpl>(o);
}

}  // namespace kiln::peers

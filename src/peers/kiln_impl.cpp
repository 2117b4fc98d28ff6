// Kiln as a peer: the DSL attention kernel (or the library GEMM) compiled by driver::compile (default knobs, or the
// seed's preset), loaded from its object with jit::Session, timed at the native entry
// kiln_launch on one thread, or through runtime::LoadedKernel's pool with --threads N.
#include <fmt/format.h>

#include <cstdio>
#include <map>
#include <utility>

#include "driver/compile.h"
#include "driver/library_target.h"
#include "host/isa.h"
#include "host/storage.h"
#include "kernels/registry.h"
#include "peers/impl.h"
#include "tune/tune.h"

namespace kiln::peers {
namespace {

const char* const kSeedKnobs[] = {
    "packet_width=8",
    "block_size=32",
    "local_lanes=1",
    "max_unrolled_tile_elements=64",
    "max_unrolled_region_work=4096",
    "full_packet_budget=4096",
    "mma_output_block=4",
    "max_unrolled_mma_terms=8",
    "full_packet=on",
    "mma_indexable_snapshot=off",
};

class KilnImpl : public LocalImpl {
 public:
  KilnImpl(const ImplOptions& o, bool seed, std::string name) : options_(o), seed_(seed), name_(std::move(name)) {}
  std::string name() const override { return name_; }
  std::string detail() const override { return detail_; }
  int threads() const override { return options_.threads; }
  // kiln-bf16dot and kiln-bf16pairs round A to bf16 (the order's operands), as oneDNN's bf16
  // matmul does.
  double roundsA() const override { return bf16Dot() || bf16Pairs() ? 0x1p-8 : 0.0; }
  // kiln-bf16pairs' attention rounds q and the probabilities to bf16 (the order's operands),
  // as oneDNN's bf16 attention pipeline does: checked at that pipeline's tolerance.
  double tolerance() const override { return pairsAttention_ ? 8e-3 : Impl::tolerance(); }
  bool unavailable() const override { return unavailable_; }

  std::optional<std::string> prepare(const Problem& p) override {
    if (p.workload == Workload::Gemm) return prepareGemm(p);
    if (bf16Dot()) return "kiln-bf16dot is a GEMM: attention has no bf16 dot order";
    if (bf16Pairs()) {
      // kiln-bf16pairs: the library's attention in the bf16 pairs order (`--order bf16_pairs`)
      // with bf16 K and V, on VDPBF16PS; unavailable elsewhere.
      if (p.kv_elem != KvElem::BF16) return name_ + " reads bf16 K/V: run with --kv-dtype bf16";
      if (auto e = pairsAtSpeed()) return e;
      pairsAttention_ = true;
    }
    std::string block = seed_ ? (p.shape.Q > 1 ? "4x16" : "1x16") : options_.block;
    if (seed_) {
      // The seed's kernel: one program per query head, MUL then ADD.
      kernels::AttentionOptions ko;
      ko.causal = p.causal;
      ko.stack_heads = false;
      ko.fused = false;
      ko.kv_elem = p.kv_elem;
      if (std::sscanf(block.c_str(), "%ldx%ld", &ko.block_q, &ko.block_k) != 2 || ko.block_q < 1 || ko.block_k < 1)
        return "block '" + block + "' is not BQxBK (e.g. 1x16)";
      dsl::BuildResult built = kernels::attention(p.shape, ko);
      if (!built) return "the attention kernel does not build: " + built.message();
      kernel_ = std::move(built.kernel);
    } else {
      // The library's kernel as `kiln run --kernel attention` builds it (its block choice per
      // shape class unless --block is given).
      const auto& s = p.shape;
      kernels::LibraryRequest req{
          "attention", fmt::format("{},{},{},{},{},{},{}", s.B, s.Hq, s.Hkv, s.Q, s.K, s.D, s.Dv), {}};
      req.options["mask"] = p.causal ? "causal" : "none";
      req.target = libraryTarget();
      if (!block.empty()) req.options["block"] = block;
      if (!options_.split.empty()) req.options["split"] = options_.split;
      if (lengths()) req.options["kv-cache"] = "dense";
      if (halfKv(p)) req.options["kv-dtype"] = kvElemName(p.kv_elem);
      if (pairsAttention_) req.options["order"] = "bf16_pairs";
      tuned_knobs_.threads = options_.threads;
      tuned_knobs_.isa = options_.isa;
      useTuning(req, tuned_knobs_);
      if (auto e = kernels::buildLibraryKernel(req, kernel_)) return "the attention kernel does not build: " + *e;
      block = req.options.count("block") ? req.options["block"] : "library default";
    }
    plan::Knobs knobs = seed_ ? plan::Knobs{} : tuned_knobs_;
    if (seed_)
      for (const char* k : kSeedKnobs)
        if (auto e = knobs.setAssignment(k)) return "seed knob " + std::string(k) + ": " + *e;
    if (auto e = applySets(knobs)) return e;
    knobs.threads = options_.threads;
    knobs.isa = options_.isa;
    driver::Compilation c;
    if (auto e = driver::compile(*kernel_, knobs, c)) return "compile: " + *e;
    if (auto e = driver::load(c.object, *kernel_, knobs.isa, options_.threads, loaded_)) return "load: " + *e;
    out_.assign(p.outputSize(), 0.0f);
    params_ = {const_cast<float*>(p.q.data()), const_cast<float*>(p.k.data()), const_cast<float*>(p.v.data()),
               out_.data()};
    args_ = {runtime::Arg::view(params_[0], 4 * int64_t(p.q.size())),
             runtime::Arg::view(params_[1], 4 * int64_t(p.k.size())),
             runtime::Arg::view(params_[2], 4 * int64_t(p.v.size())),
             runtime::Arg::view(params_[3], 4 * int64_t(out_.size()))};
    if (halfKv(p)) {  // K and V as the problem's 16-bit bits
      const runtime::ViewElem elem = p.kv_elem == KvElem::BF16 ? runtime::ViewElem::BF16 : runtime::ViewElem::F16;
      params_[1] = const_cast<uint16_t*>(p.k16.data());
      params_[2] = const_cast<uint16_t*>(p.v16.data());
      args_[1] = runtime::Arg::halves({const_cast<uint16_t*>(p.k16.data()), p.k16.size()}, elem);
      args_[2] = runtime::Arg::halves({const_cast<uint16_t*>(p.v16.data()), p.v16.size()}, elem);
    }
    if (lengths()) {  // the cache's layout is the static kernel's; every sequence of length K
      lens_.assign(static_cast<size_t>(p.shape.B), static_cast<int32_t>(p.shape.K));
      params_.insert(params_.begin() + 3, lens_.data());
      args_.insert(args_.begin() + 3, runtime::Arg::i32s(lens_));
    }
    if (auto e = loaded_->checkArgs(args_)) return "arguments: " + *e;
    // A kernel with workspaces (split KV) runs through the runtime's launch, which allocates
    // and zero-fills them on every call, as it does for any user.
    launch_ = kernel_->workspaces.empty() ? loaded_->entry().launch : nullptr;
    const nlohmann::json& r = c.report;
    const nlohmann::json& phases = r["phases"];
    std::string split = "off";
    if (phases.size() > 1)
      split = fmt::format("{} phases ({} + {} programs)", phases.size(), phases[0]["domain"]["programs"].get<int64_t>(),
                          phases[phases.size() - 1]["domain"]["programs"].get<int64_t>());
    detail_ = fmt::format(
        "{}{}{} knobs{}, block {}, split {}, full packet {}, {}, compile {:.0f} ms, object {} B, {} thread(s){}",
        p.kv_elem == KvElem::F32 ? "" : fmt::format("K/V {}, ", halfKv(p) ? kvElemName(p.kv_elem) : "f32"),
        pairsAttention_ ? "bf16_pairs order (q and p rounded to bf16, VDPBF16PS), " : "",
        seed_ ? "seed preset" : tuning_, setsText(), block, split,
        phases.size() == 1 ? phases[0]["full_packet"]["decision"].get<std::string>() : "per phase", codeFor(r),
        r["compile_ms"].get<double>(), r["object"]["bytes"].get<int64_t>(), options_.threads,
        launch_ ? " (native entry kiln_launch)" : " (runtime launch)");
    return std::nullopt;
  }

 private:
  // What the library sizes programs for: this CPU's model at the run's ISA, and its threads.
  kernels::LibraryTarget libraryTarget() const {
    plan::Knobs k;
    k.isa = options_.isa;
    k.threads = options_.threads;
    return driver::libraryTarget(k);
  }

  // The library's GEMM as `kiln run --kernel gemm --shape M,N,K` builds it.
  std::optional<std::string> prepareGemm(const Problem& p) {
    if (seed_) return "the seed preset has no GEMM";
    const GemmShape& g = p.gemm;
    kernels::LibraryRequest req{"gemm", fmt::format("{},{},{}", g.M, g.N, g.K), {}};
    req.target = libraryTarget();
    if (bf16Dot() || bf16Pairs()) return prepareBf16Dot(p, req);
    const bool halfB = p.b_elem != KvElem::F32;
    if (halfB) req.options["b-dtype"] = kvElemName(p.b_elem);
    plan::Knobs knobs;
    knobs.threads = options_.threads;
    knobs.isa = options_.isa;
    useTuning(req, knobs);
    if (auto e = applySets(knobs)) return e;
    if (auto e = kernels::buildLibraryKernel(req, kernel_)) return "the gemm kernel does not build: " + *e;
    driver::Compilation c;
    if (auto e = driver::compile(*kernel_, knobs, c)) return "compile: " + *e;
    if (auto e = driver::load(c.object, *kernel_, knobs.isa, options_.threads, loaded_)) return "load: " + *e;
    out_.assign(p.outputSize(), 0.0f);
    params_ = {const_cast<float*>(p.a.data()), const_cast<float*>(p.b.data()), out_.data()};
    args_ = {runtime::Arg::view(params_[0], 4 * int64_t(p.a.size())),
             runtime::Arg::view(params_[1], 4 * int64_t(p.b.size())),
             runtime::Arg::view(params_[2], 4 * int64_t(out_.size()))};
    if (halfB) {  // B as the problem's 16-bit bits
      params_[1] = const_cast<uint16_t*>(p.b16.data());
      args_[1] = runtime::Arg::halves({const_cast<uint16_t*>(p.b16.data()), p.b16.size()},
                                      p.b_elem == KvElem::BF16 ? runtime::ViewElem::BF16 : runtime::ViewElem::F16);
    }
    if (auto e = loaded_->checkArgs(args_)) return "arguments: " + *e;
    launch_ = loaded_->entry().launch;
    const nlohmann::json& r = c.report;
    detail_ = fmt::format("{}{} knobs{}, tiles {}, {}, compile {:.0f} ms, object {} B, {} thread(s){}",
                          halfB ? fmt::format("B {}, ", kvElemName(p.b_elem)) : "", tuning_, setsText(), tilesOf(req),
                          codeFor(r), r["compile_ms"].get<double>(), r["object"]["bytes"].get<int64_t>(),
                          options_.threads, options_.threads == 1 ? " (native entry kiln_launch)" : " (runtime pool)");
    return std::nullopt;
  }

 protected:
  void run() override {
    if (options_.threads == 1 && launch_) {
      runtime::KilnLaunchRecord record;
      launch_(params_.data(), &record);
    } else {
      (void)loaded_->launch(args_);  // arguments checked once in prepare()
    }
  }

 private:
  bool bf16Dot() const { return name_ == "kiln-bf16dot"; }
  bool bf16Pairs() const { return name_ == "kiln-bf16pairs"; }

  // kiln-bf16dot: the library's GEMM in the bf16 dot order (`--order bf16_dot`, docs/ir.md,
  // MMA) as a bf16 model runs it: A and B bf16 (A rounded once, untimed, as for oneDNN's bf16
  // matmul), B as N x K (`--trans-b`, transposed once, untimed), on AMX tiles. Unavailable
  // without them (step by step the order is far too slow to time).
  // kiln-bf16pairs: the same in the bf16 pairs order (`--order bf16_pairs`), B as K x N, on
  // VDPBF16PS (AVX-512 code on a CPU with AVX512-BF16); unavailable elsewhere. Both take the
  // library's tiles for the order and this CPU (kernels::defaultGemmTiles), as the Llama model's
  // GEMMs do.
  std::optional<std::string> prepareBf16Dot(const Problem& p, kernels::LibraryRequest& req) {
    const GemmShape& g = p.gemm;
    if (p.b_elem != KvElem::BF16) return name_ + " reads bf16 B: run with --b-dtype bf16";
    const bool pairs = bf16Pairs();
    if (pairs)
      if (auto e = pairsAtSpeed()) return e;
    if (!pairs && (options_.isa == "avx2" || !host::cpuHasAmxBf16())) {
      unavailable_ = true;
      return "the bf16 dot order runs at speed on AMX tiles only (AVX-512 code on an AMX-BF16 host); here it would "
             "run step by step";
    }
    req.options = {{"order", pairs ? "bf16_pairs" : "bf16_dot"}, {"a-dtype", "bf16"}, {"b-dtype", "bf16"}};
    if (!pairs) req.options["trans-b"] = "";
    plan::Knobs knobs;
    knobs.threads = options_.threads;
    knobs.isa = options_.isa;
    tuning_ = "untuned";
    if (auto e = applySets(knobs)) return e;
    if (auto e = kernels::buildLibraryKernel(req, kernel_)) return "the gemm kernel does not build: " + *e;
    driver::Compilation c;
    if (auto e = driver::compile(*kernel_, knobs, c)) return "compile: " + *e;
    if (auto e = driver::load(c.object, *kernel_, knobs.isa, options_.threads, loaded_)) return "load: " + *e;
    a16_.resize(p.a.size());
    for (size_t i = 0; i < p.a.size(); ++i) a16_[i] = host::f32ToBf16(p.a[i]);
    bT16_.resize(p.b16.size());
    for (int64_t k = 0; k < g.K; ++k)
      for (int64_t n = 0; n < g.N; ++n) bT16_[pairs ? k * g.N + n : n * g.K + k] = p.b16[k * g.N + n];
    out_.assign(p.outputSize(), 0.0f);
    params_ = {a16_.data(), bT16_.data(), out_.data()};
    args_ = {runtime::Arg::halves({a16_.data(), a16_.size()}, runtime::ViewElem::BF16),
             runtime::Arg::halves({bT16_.data(), bT16_.size()}, runtime::ViewElem::BF16),
             runtime::Arg::view(out_.data(), 4 * int64_t(out_.size()))};
    if (auto e = loaded_->checkArgs(args_)) return "arguments: " + *e;
    launch_ = loaded_->entry().launch;
    std::string form = "step by step", steps = "software";
    for (const auto& ph : c.report["phases"])
      if (ph.contains("lanes") && ph["lanes"].contains("mma"))
        for (const auto& m : ph["lanes"]["mma"]) {
          form = m["form"].get<std::string>();
          if (m.contains("bf16_steps")) steps = m["bf16_steps"].get<std::string>();
        }
    if (!pairs && form != "amx") {
      unavailable_ = true;
      return "the plan chose the mma form '" + form + "', not AMX tiles (knob amx=off?)";
    }
    if (pairs && steps != "vdpbf16ps") {
      unavailable_ = true;
      return "the plan runs the pairs' steps in software, not on VDPBF16PS (knob avx512_bf16=off?)";
    }
    detail_ = fmt::format(
        "{} order, A and B bf16 (B as {}), tile {}, mma form {}{}{}, {}, compile {:.0f} ms, object {} B, {} "
        "thread(s){}",
        pairs ? "bf16_pairs" : "bf16_dot", pairs ? "K x N" : "N x K", tilesOf(req), form, pairs ? " on VDPBF16PS" : "",
        setsText(), codeFor(c.report), c.report["compile_ms"].get<double>(), c.report["object"]["bytes"].get<int64_t>(),
        options_.threads, options_.threads == 1 ? " (native entry kiln_launch)" : " (runtime pool)");
    return std::nullopt;
  }

  // Unavailable (and why) where the bf16 pairs order would run step by step.
  std::optional<std::string> pairsAtSpeed() {
    if (options_.isa != "avx2" && host::cpuHasAvx512Bf16()) return std::nullopt;
    unavailable_ = true;
    return "the bf16 pairs order runs at speed on VDPBF16PS only (AVX-512 code on a host with AVX512-BF16); here it "
           "would run step by step";
  }

  // The tiles the library chose for a GEMM request, as the report of `kiln run` states them.
  static std::string tilesOf(const kernels::LibraryRequest& req) {
    std::map<std::string, std::string> choices;
    if (kernels::libraryChoices(req, choices) || !choices.count("tile")) return "(unknown)";
    return choices["tile"];
  }

  // The tuning database's choice for this request (kiln), or none (kiln-untuned, kiln-seed).
  bool lengths() const { return name_ == "kiln-lengths"; }
  // K and V read as the problem's 16-bit type (kiln-f32: as f32 of the same values).
  bool halfKv(const Problem& p) const { return p.kv_elem != KvElem::F32 && name_ != "kiln-f32"; }

  // kiln-set: kiln peers' --set knobs over the default or tuned ones (checked by checkOptions;
  // the detail names them after the tuning source).
  std::optional<std::string> applySets(plan::Knobs& knobs) {
    if (name_ != "kiln-set") return std::nullopt;
    for (const std::string& s : options_.knob_sets) {
      if (auto e = knobs.setAssignment(s)) return "--set " + s + ": " + *e;
      sets_ += (sets_.empty() ? "" : " ") + s;
    }
    return std::nullopt;
  }

  // The isa knob, the CPU LLVM compiled for and the model it tuned for ("isa native: znver5,
  // tuned for x86-64-v4").
  static std::string codeFor(const nlohmann::json& report) {
    const nlohmann::json& t = report["target"];
    return "isa " + report["knobs"]["isa"].get<std::string>() + ": " + t["cpu"].get<std::string>() + ", tuned for " +
           t.value("tune_cpu", std::string("?"));
  }
  std::string setsText() const { return sets_.empty() ? "" : " (set " + sets_ + ")"; }

  void useTuning(kernels::LibraryRequest& req, plan::Knobs& knobs) {
    if (name_ == "kiln-untuned" || lengths() || seed_ || name_ == "kiln-f32") {
      tuning_ = "untuned";
      return;
    }
    std::optional<tune::Entry> e;
    const std::string source = tune::applyTuned(req, knobs, {}, &e);
    tuning_ = source == "default" ? "default" : "tuned (" + e->choice.label() + ")";
  }

  ImplOptions options_;
  bool seed_;
  std::string name_;
  std::string tuning_ = "default";
  std::string sets_;  // the --set knobs applied, as given
  plan::Knobs tuned_knobs_;
  std::string detail_;
  std::unique_ptr<ir::Kernel> kernel_;
  std::unique_ptr<runtime::LoadedKernel> loaded_;
  runtime::LaunchFn launch_ = nullptr;
  std::vector<void*> params_;
  std::vector<runtime::Arg> args_;
  std::vector<int32_t> lens_;         // kiln-lengths
  std::vector<uint16_t> a16_, bT16_;  // kiln-bf16dot: A rounded to bf16, B transposed (N x K)
  bool unavailable_ = false;
  bool pairsAttention_ = false;  // kiln-bf16pairs on attention
};

}  // namespace

std::unique_ptr<Impl> makeKilnDefault(const ImplOptions& o) {
  return std::make_unique<KilnImpl>(o, false, "kiln");
}
std::unique_ptr<Impl> makeKilnOneThread(const ImplOptions& o) {
  ImplOptions one = o;
  one.threads = 1;
  return std::make_unique<KilnImpl>(one, false, "kiln-1t");
}
std::unique_ptr<Impl> makeKilnUntuned(const ImplOptions& o) {
  return std::make_unique<KilnImpl>(o, false, "kiln-untuned");
}
std::unique_ptr<Impl> makeKilnLengths(const ImplOptions& o) {
  return std::make_unique<KilnImpl>(o, false, "kiln-lengths");
}
std::unique_ptr<Impl> makeKilnSet(const ImplOptions& o) {
  ImplOptions set = o;  // an isa among the knobs is also what the library sizes its kernel for
  for (const std::string& a : o.knob_sets)
    if (a.rfind("isa=", 0) == 0) set.isa = a.substr(4);
  return std::make_unique<KilnImpl>(set, false, "kiln-set");
}
std::unique_ptr<Impl> makeKilnF32(const ImplOptions& o) {
  return std::make_unique<KilnImpl>(o, false, "kiln-f32");
}
std::unique_ptr<Impl> makeKilnBf16Dot(const ImplOptions& o) {
  return std::make_unique<KilnImpl>(o, false, "kiln-bf16dot");
}
std::unique_ptr<Impl> makeKilnBf16Pairs(const ImplOptions& o) {
  return std::make_unique<KilnImpl>(o, false, "kiln-bf16pairs");
}
std::unique_ptr<Impl> makeKilnSeed(const ImplOptions& o) {
  return std::make_unique<KilnImpl>(o, true, "kiln-seed");
}

}  // namespace kiln::peers

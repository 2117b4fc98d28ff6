// The peers of `kiln peers`: the hand-written attention (AVX-512 and AVX2 builds, both
// strategies: dot for few rows per KV head, lanes for many), the plain loops, the in-process
// library peers and the shared softmax, against the FP64 reference on ragged shapes (D and Dv
// not multiples of the vector width, K not a multiple of any block, GQA ratios 1..8, causal
// with Q > K rows that see no key); shape parsing; the protocol's statistics.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "host/data.h"
#include "host_isa.h"
#include "jit/compile.h"
#include "peers/impl.h"
#include "peers/native.h"
#include "peers/peers.h"
#include "peers/problem.h"
#include "peers/protocol.h"

namespace kiln::peers {
namespace {

Problem problemFor(const std::string& shape, bool causal, uint64_t seed = 7, KvElem kv = KvElem::F32) {
  Shape s;
  auto e = parseShape(shape, s);
  EXPECT_FALSE(e) << *e;
  Problem p;
  e = makeProblem(s, causal, seed, p, kv);
  EXPECT_FALSE(e) << *e;
  computeReference(p);
  return p;
}

void expectClose(const std::vector<float>& got, const Problem& p, const std::string& what) {
  const host::CompareResult c = host::compareF64(got, p.reference);
  EXPECT_TRUE(c.pass) << what << " " << shapeText(p.shape) << (p.causal ? " causal" : "") << ": first bad "
                      << c.first_bad << ", max abs err " << c.max_abs_err;
}

const char* kShapes[] = {
    "1,8,2,1,133,80,96",  // decode, GQA 4: dot strategy, K tail
    "1,8,8,1,100,64,64",  // MHA decode: one row per KV head
    "1,4,2,32,65,32,32",  // the seed's prefill: lanes strategy, K = 64 + 1
    "2,6,2,5,37,33,17",   // ragged D and Dv, 15 rows per KV head
    "1,8,1,7,19,16,40",   // MQA, 56 rows: three panels at 16 lanes
    "1,2,1,1,1,1,1",      // the smallest
    "1,3,3,9,4,8,8",      // causal with Q > K: rows 0..4 see no key
    "2,4,4,3,300,24,8",   // batch 2, short rows, long K
    "1,2,1,1,33,16,16",   // dot strategy with 2 rows per KV head
    "1,6,2,1,70,40,24",   // dot strategy with 3 rows per KV head
};

TEST(Peers, NativeMatchesReferenceOnEveryIsa) {
  for (const char* isa_name : {"avx512", "avx2"}) {
    const IsaKernels* isa = isaKernels(isa_name);
    if (!isa) {
      kiln::testhost::sayNotRun(std::string("hand-written attention, ") + isa_name, "this CPU lacks it");
      continue;
    }
    for (int threads : {1, 2})
      for (bool causal : {false, true})
        for (const char* shape : kShapes) {
          const Problem p = problemFor(shape, causal);
          std::vector<float> o(p.outputSize(), NAN);
          ThreadTeam team(threads);
          nativeAttention(*isa, team, p.args(o.data()));
          expectClose(o, p, std::string(isa_name) + " threads " + std::to_string(threads));
        }
    // K and V as 16-bit bits (read as such, widened on load): the reference of their values.
    for (KvElem kv : {KvElem::BF16, KvElem::F16})
      for (bool causal : {false, true})
        for (const char* shape : kShapes) {
          const Problem p = problemFor(shape, causal, 7, kv);
          std::vector<float> o(p.outputSize(), NAN);
          ThreadTeam team(1);
          const AttentionArgs a = p.args(o.data());
          ASSERT_TRUE(a.k16 && a.v16 && a.kv != KvStorage::F32);
          nativeAttention(*isa, team, a);
          expectClose(o, p, std::string(isa_name) + " K/V " + kvElemName(kv));
        }
  }
}

TEST(Peers, PlainLoopsMatchReference) {
  for (const PlainKernels* k : {&plainNative(), &plainAvx2()})
    for (bool causal : {false, true})
      for (const char* shape : kShapes) {
        const Problem p = problemFor(shape, causal);
        std::vector<float> o(p.outputSize(), NAN);
        ThreadTeam team(1);
        const AttentionArgs a = p.args(o.data());
        team.forEach(k->items(a), k->scratch_floats(a), [&](int64_t i, float* s) { k->item(a, i, s); });
        expectClose(o, p, std::string("plain ") + k->flags);
      }
}

TEST(Peers, LibraryPeersMatchReference) {
  ImplOptions options;
  for (const char* name : {"onednn", "openblas", "native", "plain"})
    for (bool causal : {false, true})
      for (const char* shape : {"1,8,2,1,133,80,96", "2,6,2,5,37,33,17", "1,4,2,32,65,32,32"}) {
        const Problem p = problemFor(shape, causal);
        std::unique_ptr<Impl> impl = makeImpl(name, options);
        ASSERT_TRUE(impl);
        auto e = impl->prepare(p);
        ASSERT_FALSE(e) << name << ": " << *e;
        std::vector<float> o;
        e = impl->compute(o);
        ASSERT_FALSE(e) << *e;
        expectClose(o, p, name);
        std::vector<double> t;
        ASSERT_FALSE(impl->time(2, 3, t, false));
        EXPECT_EQ(t.size(), 3u);
        ASSERT_FALSE(impl->time(1, 2, t, true));  // cold caches: the child process is told too
        EXPECT_EQ(t.size(), 2u);
      }
}

// kiln-bf16pairs on attention (bf16 K/V): the library's kernel in the bf16 pairs order on
// VDPBF16PS against the FP64 reference at its own tolerance (q and the probabilities rounded to
// bf16, as oneDNN's bf16 pipeline); it refuses f32 K/V, and without AVX512-BF16 says it is
// unavailable.
TEST(Peers, Bf16PairsAttentionMatchesReference) {
  for (bool causal : {false, true})
    for (const char* shape : {"1,8,2,1,133,80,96", "2,6,2,5,37,33,17"}) {
      const Problem p = problemFor(shape, causal, 7, KvElem::BF16);
      std::unique_ptr<Impl> impl = makeImpl("kiln-bf16pairs", ImplOptions{});
      ASSERT_TRUE(impl);
      if (auto e = impl->prepare(p)) {
        EXPECT_TRUE(impl->unavailable()) << *e;
        kiln::testhost::sayNotRun("Peers kiln-bf16pairs attention", *e);
        return;
      }
      EXPECT_NE(impl->detail().find("bf16_pairs order"), std::string::npos) << impl->detail();
      std::vector<float> o;
      ASSERT_FALSE(impl->compute(o));
      const double t = impl->tolerance();
      EXPECT_EQ(t, 8e-3);
      const host::CompareResult c = host::compareF64(o, p.reference, t, t);
      EXPECT_TRUE(c.pass) << shape << (causal ? " causal" : "") << ": first bad " << c.first_bad;
    }
  const Problem f32 = problemFor("1,8,2,1,133,80,96", false);
  std::unique_ptr<Impl> impl = makeImpl("kiln-bf16pairs", ImplOptions{});
  EXPECT_EQ(impl->prepare(f32).value_or(""), "kiln-bf16pairs reads bf16 K/V: run with --kv-dtype bf16");
}

// kiln-set: kiln with --set's knobs over its own (an isa among them is kiln-set's isa), its
// detail naming them and the CPU the code was compiled and tuned for; kiln compiles as a user's
// kiln does (isa native). --set and kiln-set come together, and a knob is checked up front.
TEST(Peers, KilnSetRunsKilnWithItsKnobs) {
  const Problem p = problemFor("1,8,2,1,133,80,96", false, 7, KvElem::BF16);
  auto detailOf = [&](const std::string& name, const std::vector<std::string>& sets) {
    ImplOptions o;
    o.knob_sets = sets;
    std::unique_ptr<Impl> impl = makeImpl(name, o);
    EXPECT_TRUE(impl);
    if (!impl) return std::string();
    if (auto e = impl->prepare(p)) {
      ADD_FAILURE() << name << ": " << *e;
      return std::string();
    }
    std::vector<float> out;
    EXPECT_FALSE(impl->compute(out));
    expectClose(out, p, name);
    return impl->detail();
  };
  const std::string host_cpu = jit::hostTarget().cpu;
  const std::string kiln = detailOf("kiln", {"tune_cpu=host"});  // kiln takes no --set
  EXPECT_NE(kiln.find("default knobs, "), std::string::npos) << kiln;
  EXPECT_NE(kiln.find("isa native: " + host_cpu + ", tuned for " + jit::tuneCpu("native", "generic")),
            std::string::npos)
      << kiln;
  const std::string set = detailOf("kiln-set", {"tune_cpu=host", "word_transposes=unpack"});
  EXPECT_NE(set.find("default knobs (set tune_cpu=host word_transposes=unpack)"), std::string::npos) << set;
  EXPECT_NE(set.find("isa native: " + host_cpu + ", tuned for " + host_cpu), std::string::npos) << set;
  const std::string avx2 = detailOf("kiln-set", {"isa=avx2"});
  EXPECT_NE(avx2.find("isa avx2: x86-64-v3, tuned for x86-64-v3"), std::string::npos) << avx2;

  PeersOptions o;
  o.shapes = {"1,8,2,1,133,80,96"};
  o.only_shapes = true;
  std::vector<ShapeSpec> shapes;
  auto refused = [&](std::vector<std::string> impls, std::vector<std::string> sets) {
    o.impls = std::move(impls);
    o.impl.knob_sets = std::move(sets);
    return checkOptions(o, shapes).value_or("accepted");
  };
  EXPECT_EQ(refused({"kiln", "kiln-set"}, {"word_transposes=unpack"}), "accepted");
  EXPECT_EQ(refused({}, {"tune_cpu=host"}), "accepted");
  EXPECT_EQ(refused({"kiln", "kiln-set"}, {}), "implementation 'kiln-set' needs --set NAME=VALUE (its knobs)");
  EXPECT_EQ(refused({"kiln"}, {"tune_cpu=host"}), "--set gives kiln-set's knobs: add kiln-set to --impl");
  EXPECT_EQ(refused({}, {"threads=2"}), "--set threads=2: every implementation's threads are kiln peers' --threads");
  EXPECT_NE(refused({}, {"tune_cpu=fast"}).find("--set tune_cpu=fast: knob 'tune_cpu': value 'fast'"),
            std::string::npos);
  EXPECT_NE(refused({}, {"no_such_knob=1"}).find("--set no_such_knob=1: "), std::string::npos);
}

// GEMM: every implementation of `kiln peers --kernel gemm` (Kiln's library kernel included)
// against the FP64 reference, on ragged shapes (M = 1 and 2 take the wide tiles, N and K not
// multiples of any tile), one and two threads.
TEST(Peers, GemmPeersMatchReference) {
  for (int threads : {1, 2})
    for (const char* shape : {"1,300,70", "2,33,129", "37,45,19", "70,17,1"}) {
      GemmShape g;
      ASSERT_FALSE(parseGemmShape(shape, g));
      Problem p;
      ASSERT_FALSE(makeGemmProblem(g, 5, p));
      computeReference(p);
      EXPECT_EQ(p.spec().text(), shape);
      EXPECT_EQ(p.flops(), 2.0 * g.M * g.N * g.K);
      for (const std::string& name : implNames(Workload::Gemm)) {
        if (name == "kiln-bf16dot" || name == "kiln-bf16pairs") continue;  // bf16 B only: below
        ImplOptions options;
        options.threads = threads;
        std::unique_ptr<Impl> impl = makeImpl(name, options);
        ASSERT_TRUE(impl);
        auto e = impl->prepare(p);
        ASSERT_FALSE(e) << name << ": " << *e;
        std::vector<float> c;
        ASSERT_FALSE(impl->compute(c));
        const host::CompareResult r = host::compareF64(c, p.reference);
        EXPECT_TRUE(r.pass) << name << " gemm " << shape << " threads " << threads << ": first bad " << r.first_bad;
      }
    }
  // kiln-bf16dot (bf16 B): the bf16 dot order on AMX tiles against the FP64 reference, allowed
  // A's rounding to bf16 as oneDNN's bf16 matmul is; it refuses f32 B, and without AMX says it
  // is unavailable. kiln-bf16pairs likewise on VDPBF16PS (without AVX512-BF16: unavailable).
  for (const std::string name : {"kiln-bf16dot", "kiln-bf16pairs"})
    for (const char* shape : {"1,300,70", "37,45,19", "130,160,600"}) {
      GemmShape g;
      ASSERT_FALSE(parseGemmShape(shape, g));
      Problem p;
      ASSERT_FALSE(makeGemmProblem(g, 5, p, KvElem::BF16));
      computeReference(p);
      std::unique_ptr<Impl> impl = makeImpl(name, ImplOptions{});
      ASSERT_TRUE(impl);
      if (auto e = impl->prepare(p)) {
        EXPECT_TRUE(impl->unavailable()) << *e;
        kiln::testhost::sayNotRun("Peers " + name, *e);
        break;
      }
      std::vector<float> c;
      ASSERT_FALSE(impl->compute(c));
      std::vector<double> allowance;
      for (double x : p.abs_product)
        allowance.push_back((2.0 * std::sqrt(double(g.K)) * 0x1p-24 + impl->roundsA()) * x);
      const host::CompareResult r =
          host::compareF64(c, p.reference, impl->tolerance(), impl->tolerance(), ir::Elem::F32, &allowance);
      EXPECT_TRUE(r.pass) << name << " gemm " << shape << ": first bad " << r.first_bad;
    }
  for (const std::string name : {"kiln-bf16dot", "kiln-bf16pairs"}) {
    Problem f32b;
    ASSERT_FALSE(makeGemmProblem({4, 4, 4}, 0, f32b));
    auto e = makeImpl(name, ImplOptions{})->prepare(f32b);
    ASSERT_TRUE(e.has_value());
    EXPECT_NE(e->find("--b-dtype bf16"), std::string::npos) << *e;
  }
  // Attention-only peers say so instead of computing something else.
  Problem p;
  ASSERT_FALSE(makeGemmProblem({4, 4, 4}, 0, p));
  for (const char* name : {"native", "kiln-seed"}) {
    auto e = makeImpl(name, ImplOptions{})->prepare(p);
    EXPECT_TRUE(e.has_value()) << name;
  }
  GemmShape g;
  EXPECT_TRUE(parseGemmShape("4,4", g).has_value());
  EXPECT_TRUE(parseGemmShape("4,0,4", g).has_value());
  EXPECT_TRUE(parseGemmShape("65536,65536,1", g).has_value());  // 2^32 elements of C
}

TEST(Peers, SoftmaxRowsCutsAtLimits) {
  for (const char* isa_name : {"avx512", "avx2"}) {
    const IsaKernels* isa = isaKernels(isa_name);
    if (!isa) {
      kiln::testhost::sayNotRun(std::string("hand-written softmax rows, ") + isa_name, "this CPU lacks it");
      continue;
    }
    const int64_t rows = 4, cols = 37, ld = 40;
    std::vector<float> s(rows * ld);
    for (size_t i = 0; i < s.size(); ++i) s[i] = std::sin(0.37 * i) * 3;
    const std::vector<float> in = s;
    const int64_t limits[rows] = {37, 20, 0, 1};
    isa->softmaxRows(s.data(), rows, cols, ld, limits);
    for (int64_t r = 0; r < rows; ++r) {
      double mx = -INFINITY, sum = 0;
      for (int64_t j = 0; j < limits[r]; ++j) mx = std::max(mx, double(in[r * ld + j]));
      for (int64_t j = 0; j < limits[r]; ++j) sum += std::exp(in[r * ld + j] - mx);
      for (int64_t j = 0; j < cols; ++j) {
        const double want = j < limits[r] ? std::exp(in[r * ld + j] - mx) / sum : 0.0;
        EXPECT_NEAR(s[r * ld + j], want, 1e-6 + 1e-6 * want) << isa_name << " row " << r << " col " << j;
      }
    }
  }
}

TEST(Peers, PeakAndShapesAreSane) {
  const IsaKernels* isa = isaKernels("auto");
  ASSERT_TRUE(isa);
  EXPECT_GT(isa->fmaPeak(1000), 0.0);
  std::vector<float> ones(8 * 16 * 4, 1.0f);
  EXPECT_EQ(isa->readSum(ones.data(), 8 * isa->lanes), float(8 * isa->lanes));

  Shape s;
  EXPECT_FALSE(parseShape("1,8,2,1,2053,80,96", s));
  EXPECT_EQ(s.K, 2053);
  auto e = parseShape("1,8,3,1,2053,80,96", s);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("multiple of Hkv"), std::string::npos) << *e;
  e = parseShape("1,8,2,1,x,80,96", s);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("field K"), std::string::npos) << *e;
  EXPECT_TRUE(parseShape("1,8,2,1,80,96", s));
  EXPECT_TRUE(parseShape("1,8,2,0,8,8,8", s));
  EXPECT_EQ(defaultShapes().size(), 6u);
}

// A fake peer whose calls take no time; its "times" are scripted per visit.
class Scripted : public Impl {
 public:
  explicit Scripted(double base) : base_(base) {}
  std::string name() const override { return "scripted"; }
  std::string detail() const override { return ""; }
  int threads() const override { return 1; }
  std::optional<std::string> prepare(const Problem&) override { return std::nullopt; }
  std::optional<std::string> compute(std::vector<float>&) override { return std::nullopt; }
  std::optional<std::string> time(int reps, int samples, std::vector<double>& t, bool cold) override {
    asked.push_back({reps, samples, cold});
    t.assign(samples, base_ * (1 + 0.01 * (calls_++ % 3)));
    return std::nullopt;
  }
  struct Asked {
    int reps, samples;
    bool cold;
  };
  std::vector<Asked> asked;  // every time() call

 private:
  double base_;
  int calls_ = 0;
};

// --caches cold: every call the protocol makes, calibration's and the visits', asks for cold
// caches and one call a sample (no warm-up calls); warm: none asks for cold caches, and visits
// take samples of many calls.
TEST(Peers, ColdCachesAskEveryTimedCallToFollowAnEviction) {
  for (bool cold : {false, true}) {
    Scripted a(1e-5), b(2e-5);
    ProtocolOptions o = ProtocolOptions::quick();
    o.cold_caches = cold;
    std::vector<Measured> out;
    const ProtocolRun run = runProtocol({&a, &b}, 0, o, out);
    EXPECT_EQ(run.evict_s > 0, cold);
    for (const Scripted* s : {&a, &b}) {
      ASSERT_FALSE(s->asked.empty());
      for (const Scripted::Asked& q : s->asked) {
        EXPECT_EQ(q.cold, cold);
        if (cold) EXPECT_EQ(q.reps, 1);
      }
      if (!cold) EXPECT_GT(s->asked.back().reps, 50);  // 2 ms samples of 10-20 µs calls
    }
    EXPECT_TRUE(out[1].has_ratio);
  }
  EXPECT_GE(evictCaches(), std::size_t{64} << 20);
}

TEST(Peers, ProtocolPairsVisitsAndRespectsTheBudget) {
  Scripted a(1e-3), b(2e-3);
  ProtocolOptions o = ProtocolOptions::quick();
  o.visits = 5;
  std::vector<Measured> m;
  const ProtocolRun run = runProtocol({&a, &b}, 0, o, m);
  ASSERT_EQ(m.size(), 2u);
  ASSERT_TRUE(m[0].timed && m[1].timed);
  EXPECT_EQ(run.visits, 5);
  EXPECT_EQ(m[1].visits.size(), 5u);
  EXPECT_NEAR(m[0].ratio, 1.0, 1e-12);
  EXPECT_GT(m[1].ratio, 1.9);
  EXPECT_LT(m[1].ratio, 2.1);
  EXPECT_LE(m[1].ratio_min, m[1].ratio);
  EXPECT_GE(m[1].ratio_max, m[1].ratio);

  Scripted slow(2.0), fast(1e-4);  // 2 s per call: the budget cuts samples, then visits
  o = ProtocolOptions{};
  o.budget_s = 20;
  const ProtocolRun cut = runProtocol({&fast, &slow}, 0, o, m);
  EXPECT_EQ(cut.visits, o.min_visits);
  EXPECT_EQ(m[1].samples, o.min_samples);
  EXPECT_EQ(m[1].reps, 1);
  EXPECT_EQ(median({3.0, 1.0, 2.0}), 2.0);
  EXPECT_EQ(median({4.0, 1.0, 2.0, 3.0}), 2.5);
}

}  // namespace
}  // namespace kiln::peers

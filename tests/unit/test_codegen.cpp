// The CPU backend on focused kernels: precise math, thresholds, runtime indices, aliasing,
// ragged packets, bounds, the full-packet decision, knob errors, and the resource analysis
// against what the emitted IR realizes.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "driver/check.h"
#include "driver/compile.h"
#include "fuzz/campaign.h"
#include "fuzz/knob_grid.h"
#include "ir/diag.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "kernels/attention.h"

namespace {

using kiln::driver::CheckMode;
using kiln::plan::Knobs;

std::unique_ptr<kiln::ir::Kernel> parse(const std::string& text) {
  kiln::ir::DiagEngine diag;
  auto k = kiln::ir::parseKernel(text, "test.tile", diag);
  EXPECT_TRUE(k) << diag.str();
  return k;
}

// These tests pin the packets realization (local_lanes=1, W=8, as the seed);
// the lane realization has its own tests (test_lanes.cpp).
Knobs knobs(std::initializer_list<const char*> sets) {
  Knobs k;
  EXPECT_FALSE(k.setAssignment("local_lanes=1").has_value());
  EXPECT_FALSE(k.setAssignment("packet_width=8").has_value());
  for (const char* s : sets) EXPECT_FALSE(k.setAssignment(s).has_value()) << s;
  return k;
}

// Compile, check bitexact and f64; return the report of the kernel's one phase.
nlohmann::json checkBoth(const kiln::ir::Kernel& k, const Knobs& kn) {
  for (CheckMode mode : {CheckMode::Bitexact, CheckMode::F64}) {
    kiln::driver::CheckOptions o;
    o.mode = mode;
    kiln::driver::CheckResult r;
    auto err = kiln::driver::check(k, kn, o, r);
    EXPECT_FALSE(err.has_value()) << *err;
    EXPECT_TRUE(r.pass) << (mode == CheckMode::Bitexact ? "bitexact" : "f64") << " max_abs " << r.max_abs_err;
  }
  kiln::driver::Compilation c;
  auto err = kiln::driver::compile(k, kn, c);
  EXPECT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(c.report["phases"].size(), 1u);
  return c.report["phases"][0];  // the plan and the realized facts of the kernel's one phase
}

// Runs a compiled kernel on explicit parameter values.
std::vector<kiln::host::ParamData> runNative(const kiln::ir::Kernel& k, const Knobs& kn,
                                             std::vector<kiln::host::ParamData> params,
                                             kiln::runtime::KilnLaunchRecord* rec = nullptr) {
  kiln::driver::Compilation c;
  auto err = kiln::driver::compile(k, kn, c, kiln::driver::Stage::Obj);
  EXPECT_FALSE(err.has_value()) << *err;
  std::unique_ptr<kiln::runtime::LoadedKernel> loaded;
  err = kiln::driver::load(c.object, k, kn.isa, static_cast<int>(kn.threads), loaded);
  EXPECT_FALSE(err.has_value()) << *err;
  err = kiln::driver::run(*loaded, params, true, rec);
  EXPECT_FALSE(err.has_value()) << *err;
  return params;
}

const char* kFma = R"(
kernel @fma(%a: view<f32>[1, 1], %b: view<f32>[1, 1], %c: view<f32>[1, 1]) {
  parallel (%p) in (1) {
    %x = load %a[0, 0] as [m:1, k:1] fill 0
    %y = load %b[0, 0] as [k:1, n:1] fill 0
    %acc = const -1 : f32[m:1, n:1]
    %r = mma %x, %y, %acc contract [k]
    store %r, %c[0, 0] as [m:1, n:1]
  }
})";

TEST(Codegen, FmaCounterExampleIsZeroInPreciseMode) {
  auto k = parse(kFma);
  ASSERT_TRUE(k);
  std::vector<kiln::host::ParamData> p(3);
  p[0].data = {1.0f + std::ldexp(1.0f, -23)};
  p[1].data = {1.0f - std::ldexp(1.0f, -23)};
  p[2].data = {42.0f};
  auto out = runNative(*k, knobs({}), p);
  EXPECT_EQ(out[2].data[0], 0.0f);  // MUL rounds (1 - 2^-46) to 1, then ADD -1: exactly 0
  // Fast math permits the fused form, which keeps the -2^-46: the test can tell them apart.
  auto fast = runNative(*k, knobs({"fast_math=on"}), p);
  EXPECT_EQ(fast[2].data[0], -std::ldexp(1.0f, -46));
}

TEST(Codegen, ZeroKGivesTheAccumulator) {
  auto k = parse(R"(
kernel @k0(%a: view<f32>[4, 1], %b: view<f32>[1, 8], %acc: view<f32>[4, 8], %c: view<f32>[4, 8]) {
  parallel (%p) in (3) {
    %x = load %a[0, 0] as [m:4, k:0] fill 0
    %y = load %b[0, 0] as [k:0, n:8] fill 0
    %z = load %acc[0, 0] as [m:4, n:8] fill 0
    %r = mma %x, %y, %z contract [k]
    store %r, %c[0, 0] as [m:4, n:8]
  }
})");
  ASSERT_TRUE(k);
  for (const char* t : {"max_unrolled_tile_elements=64", "max_unrolled_tile_elements=8"}) checkBoth(*k, knobs({t}));
}

std::string mmaKernel(int m, int kk, int n) {
  return "kernel @mm(%a: view<f32>[" + std::to_string(m) + ", " + std::to_string(kk) + "], %b: view<f32>[" +
         std::to_string(kk) + ", " + std::to_string(n) + "], %c: view<f32>[" + std::to_string(m) + ", " +
         std::to_string(n) + "]) {\n  parallel (%p) in (11) {\n    %x = load %a[0, 0] as [m:" + std::to_string(m) +
         ", k:" + std::to_string(kk) + "] fill 0\n    %y = load %b[0, 0] as [k:" + std::to_string(kk) +
         ", n:" + std::to_string(n) + "] fill 0\n    %z = const 0.5 : f32[m:" + std::to_string(m) +
         ", n:" + std::to_string(n) +
         "]\n    %r = mma %x, %y, %z contract [k]\n    store %r, %c[0, 0] as [m:" + std::to_string(m) +
         ", n:" + std::to_string(n) + "]\n  }\n}\n";
}

TEST(Codegen, BothSidesOfTheMmaThresholds) {
  // K = 8 | 9 against max_unrolled_mma_terms = 8; K = 64 | 65 against the tile threshold 64.
  struct Case {
    int k;
    const char* cap;
    bool rolled;
  } cases[] = {{8, "max_unrolled_mma_terms=8", false},
               {9, "max_unrolled_mma_terms=8", true},
               {64, "max_unrolled_mma_terms=0", false},
               {65, "max_unrolled_mma_terms=0", true},
               {65, "max_unrolled_tile_elements=0", false}};
  for (const Case& c : cases) {
    auto k = parse(mmaKernel(2, c.k, 4));
    ASSERT_TRUE(k);
    for (const char* r : {"mma_output_block=1", "mma_output_block=4"}) {
      nlohmann::json rep = checkBoth(*k, knobs({c.cap, r}));
      EXPECT_EQ(rep["mma"][0]["contraction_rolled"].get<bool>(), c.rolled) << c.k << " " << c.cap;
      EXPECT_EQ(rep["mma"][0]["k"].get<int>(), c.k);
    }
  }
}

TEST(Codegen, OutputBlockFallsBackWithAReason) {
  auto k = parse(mmaKernel(2, 16, 6));  // innermost dim 6: not a multiple of 4
  ASSERT_TRUE(k);
  auto rep = checkBoth(*k, knobs({"mma_output_block=4"}));
  EXPECT_EQ(rep["mma"][0]["output_block"], 1);
  EXPECT_NE(rep["mma"][0]["output_block_reason"].get<std::string>().find("not a multiple"), std::string::npos);
  rep = checkBoth(*k, knobs({"mma_output_block=2", "max_unrolled_region_work=100"}));
  EXPECT_EQ(rep["mma"][0]["output_block"], 1);
  EXPECT_NE(rep["mma"][0]["output_block_reason"].get<std::string>().find("max_unrolled_region_work"),
            std::string::npos);
  rep = checkBoth(*k, knobs({"mma_output_block=2"}));
  EXPECT_EQ(rep["mma"][0]["output_block"], 2);
}

TEST(Codegen, SelectChainAndIndexableSnapshotAgree) {
  auto k = parse(mmaKernel(1, 12, 8));  // a [1,12] is a small SSA tile read at the rolled K
  ASSERT_TRUE(k);
  auto on = checkBoth(*k, knobs({"max_unrolled_mma_terms=8", "mma_indexable_snapshot=on"}));
  auto off = checkBoth(*k, knobs({"max_unrolled_mma_terms=8", "mma_indexable_snapshot=off"}));
  EXPECT_EQ(on["mma"][0]["runtime_k_operand_read"], "indexable_snapshot");
  EXPECT_EQ(on["mma"][0]["operand_representations"]["a"], "snapshot");
  EXPECT_EQ(off["mma"][0]["runtime_k_operand_read"], "select_chain");
  EXPECT_EQ(off["mma"][0]["operand_representations"]["a"], "ssa");
}

TEST(Codegen, RuntimeIndexReads) {
  // Uniform and per-lane runtime indices into SSA and snapshot tiles, in and out of range.
  auto k = parse(R"(
kernel @rt(%x: view<f32>[64], %n: i64, %y: view<f32>[21, 4]) {
  parallel (%p) in (21) {
    %t = load %x[0] as [e:64] fill 0
    %s = load %x[8] as [e:8] fill 0
    %a = extract %t[%p]
    %b = extract %s[%p]
    %c = extract %t[%n]
    %m = sub %p, 3
    %d = extract %s[%m]
    %r0 = broadcast %a : f32[j:1]
    %r1 = broadcast %b : f32[j:1]
    %r2 = broadcast %c : f32[j:1]
    %r3 = broadcast %d : f32[j:1]
    store %r0, %y[%p, 0] as [_, j:1]
    store %r1, %y[%p, 1] as [_, j:1]
    store %r2, %y[%p, 2] as [_, j:1]
    store %r3, %y[%p, 3] as [_, j:1]
  }
})");
  ASSERT_TRUE(k);
  for (const char* t : {"max_unrolled_tile_elements=64", "max_unrolled_tile_elements=4"})
    for (const char* w : {"packet_width=8", "packet_width=1"}) checkBoth(*k, knobs({t, w}));
}

TEST(Codegen, DivergentLoopBounds) {
  // Each program loops p times: lanes of one packet leave the loop at different trips.
  auto k = parse(R"(
kernel @div(%x: view<f32>[32], %y: view<f32>[19]) {
  parallel (%p) in (19) {
    %z = const 0 : f32
    %s = serial %i = 0 to %p step 1 iter(%acc = %z) : f32 {
      %t = load %x[%i] as [e:1] fill 0
      %v = extract %t[0]
      %a2 = add %acc, %v
      yield %a2
    }
    %o = broadcast %s : f32[e:1]
    store %o, %y[%p] as [e:1]
  }
})");
  ASSERT_TRUE(k);
  for (const char* w : {"packet_width=8", "packet_width=4"}) checkBoth(*k, knobs({w, "full_packet=on"}));
}

TEST(Codegen, BoundsFillAndGuardedStores) {
  auto k = parse(R"(
kernel @edge(%x: view<f32>[10, 7], %y: view<f32>[10, 7]) {
  parallel (%p) in (4) {
    %r = mul %p, 3
    %c = sub %r, 2
    %t = load %x[%c, -1] as [m:4, n:9] fill 7.5
    %u = add %t, 1
    store %u, %y[%c, -1] as [m:4, n:9]
  }
})");
  ASSERT_TRUE(k);
  for (const char* t : {"max_unrolled_tile_elements=64", "max_unrolled_tile_elements=8"})
    checkBoth(*k, knobs({t, "packet_width=4", "block_size=4"}));
  // The fill value is what out-of-range elements read: the store writes only in-range ones.
  std::vector<kiln::host::ParamData> p(2);
  p[0].data.assign(70, 1.0f);
  p[1].data.assign(70, -3.0f);
  auto out = runNative(*k, knobs({}), p);
  for (float v : out[1].data) EXPECT_TRUE(v == 2.0f || v == -3.0f) << v;
}

TEST(Codegen, InputsMayAliasOutputsWithSnapshotSemantics) {
  // z = t + u where t is read before the store to y (= x) and u after it: 1x + 2x.
  auto k = parse(R"(
kernel @alias(%x: view<f32>[48], %y: view<f32>[48], %z: view<f32>[48]) {
  parallel (%p) in (3) {
    %o = mul %p, 16
    %t = load %x[%o] as [e:16] fill 0
    %d = mul %t, 2
    store %d, %y[%o] as [e:16]
    %u = load %x[%o] as [e:16] fill 0
    %s = add %t, %u
    store %s, %z[%o] as [e:16]
  }
})");
  ASSERT_TRUE(k);
  for (const char* t : {"max_unrolled_tile_elements=64", "max_unrolled_tile_elements=8"}) {
    kiln::driver::Compilation c;
    ASSERT_FALSE(kiln::driver::compile(*k, knobs({t}), c, kiln::driver::Stage::Obj).has_value());
    std::unique_ptr<kiln::runtime::LoadedKernel> loaded;
    ASSERT_FALSE(kiln::driver::load(c.object, *k, "native", 1, loaded).has_value());
    std::vector<float> xy(48), z(48, 0.0f);
    for (int i = 0; i < 48; ++i) xy[i] = static_cast<float>(i) - 10.5f;
    std::vector<float> orig = xy;
    std::vector<kiln::runtime::Arg> args = {kiln::runtime::Arg::view(xy), kiln::runtime::Arg::view(xy),
                                            kiln::runtime::Arg::view(z)};
    ASSERT_FALSE(loaded->launch(args).has_value());
    for (int i = 0; i < 48; ++i) {
      EXPECT_EQ(xy[i], 2.0f * orig[i]);
      EXPECT_EQ(z[i], orig[i] + 2.0f * orig[i]) << i << " " << t;
    }
  }
}

TEST(Codegen, RaggedPacketsAndTheFullPacketDecision) {
  auto k = parse(mmaKernel(2, 4, 4));  // 11 programs
  ASSERT_TRUE(k);
  kiln::runtime::KilnLaunchRecord rec;
  std::vector<kiln::host::ParamData> p(3);
  p[0].data.assign(8, 1.0f);
  p[1].data.assign(16, 1.0f);
  p[2].data.assign(8, 0.0f);
  runNative(*k, knobs({"full_packet=on", "packet_width=8", "block_size=8"}), p, &rec);
  EXPECT_EQ(rec.packets_full, 1);    // programs 0..7
  EXPECT_EQ(rec.packets_masked, 1);  // programs 8..10
  auto rep = checkBoth(*k, knobs({"full_packet=on", "packet_width=4", "block_size=8"}));
  EXPECT_EQ(rep["full_packet"]["decision"], "selected");
  rep = checkBoth(*k, knobs({"full_packet=on", "packet_width=16", "block_size=16"}));
  EXPECT_EQ(rep["full_packet"]["decision"], "no_full_packet");
  rep = checkBoth(*k, knobs({"full_packet=on", "full_packet_budget=10"}));
  EXPECT_EQ(rep["full_packet"]["decision"], "over_budget");
  EXPECT_GT(rep["full_packet"]["body_instructions"].get<int>(), 10);
  rep = checkBoth(*k, knobs({}));
  EXPECT_EQ(rep["full_packet"]["decision"], "not_requested");
}

TEST(Codegen, DecodeAttentionFullPacketDecisionsAreTruthful) {
  // The seed's kernel (one program per query head, MUL then ADD). 8 query heads at W8: one full
  // packet, a small body: the clone is selected. 6 heads: none.
  kiln::kernels::AttentionOptions seed;
  seed.stack_heads = false;
  seed.fused = false;
  for (int heads : {8, 6}) {
    auto r = kiln::kernels::attention({1, heads, 2, 1, 67, 80, 96}, seed);
    ASSERT_TRUE(r) << r.message();
    kiln::driver::Compilation c;
    ASSERT_FALSE(kiln::driver::compile(*r.kernel, knobs({"full_packet=on"}), c).has_value());
    EXPECT_EQ(c.report["phases"][0]["full_packet"]["decision"], heads == 8 ? "selected" : "no_full_packet");
    std::cout << "attention 1," << heads << ",2,1,67,80,96 compile_ms " << c.report["compile_ms"] << "\n";
  }
}

TEST(Codegen, ResourceAnalysisEqualsTheRealizedIR) {
  std::vector<std::string> files;
  for (const char* dir : {"/examples", "/tests/ir"})
    for (const auto& e : std::filesystem::directory_iterator(std::string(KILN_SOURCE_DIR) + dir))
      if (e.path().extension() == ".tile") files.push_back(e.path().string());
  ASSERT_FALSE(files.empty());
  std::sort(files.begin(), files.end());
  // Knob points rotate over the files so each file meets a different representation mix.
  std::vector<Knobs> points = {knobs({}), knobs({"max_unrolled_tile_elements=16", "mma_output_block=2"}),
                               knobs({"max_unrolled_tile_elements=0"}),
                               knobs({"max_unrolled_mma_terms=8", "mma_indexable_snapshot=off", "full_packet=on"})};
  for (size_t i = 0; i < files.size(); ++i) {
    const std::string& f = files[i];
    kiln::ir::DiagEngine diag;
    auto k = kiln::ir::parseFile(f, diag);
    ASSERT_TRUE(k) << diag.str();
    for (const Knobs& point : {points[0], points[1 + i % 3]}) {
      kiln::driver::Compilation c;
      ASSERT_FALSE(kiln::driver::compile(*k, point, c).has_value()) << f;
      for (const nlohmann::json& phase : c.report["phases"]) {
        const auto& res = phase["resources"];
        EXPECT_EQ(res["snapshot_allocas"], res["realized_allocas"]) << f;
        EXPECT_EQ(res["runtime_loops"], res["realized_loops"]) << f;
      }
      EXPECT_EQ(kiln::driver::planDisagreesWithCode(c.report), std::nullopt) << f;
    }
  }
}

// A loop yielding its carried snapshots in each other's place stages them through temporaries:
// one more copy loop and one more private array each, predicted by the plan.
TEST(Codegen, SwappedSnapshotsAreCountedLoopsAndArrays) {
  auto k = parse(R"(kernel @swap(%o: view<f32>[2, 8]) {
  parallel (%p) in (1) {
    %n = iota along d : i64[d:8]
    %a = cast %n : f32[d:8]
    %b = const 1 : f32[d:8]
    %x, %y = serial %i = 0 to 3 step 1 iter(%ca = %a, %cb = %b) : f32[d:8], f32[d:8] {
      yield %cb, %ca
    }
    store %x, %o[0, 0] as [_, d:8]
    store %y, %o[1, 0] as [_, d:8]
  }
})");
  ASSERT_TRUE(k);
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, knobs({"max_unrolled_tile_elements=1"}), c).has_value());
  const auto& res = c.report["phases"][0]["resources"];
  EXPECT_EQ(res["snapshot_allocas"], res["realized_allocas"]);
  EXPECT_EQ(res["runtime_loops"], res["realized_loops"]);
  EXPECT_GE(res["realized_allocas"].get<int>(), 4);  // two carried snapshots, two temporaries
  checkBoth(*k, knobs({"max_unrolled_tile_elements=1"}));
}

// The check itself: any predicted count that differs from the realized one is named, with
// the phase when the kernel has several.
TEST(Codegen, PlanDisagreesWithCodeNamesTheCount) {
  nlohmann::json one = {
      {"phase", 0},
      {"resources", {{"runtime_loops", 3}, {"realized_loops", 3}, {"snapshot_allocas", 1}, {"realized_allocas", 1}}}};
  nlohmann::json r = {{"phases", nlohmann::json::array({one})}};
  EXPECT_EQ(kiln::driver::planDisagreesWithCode(r), std::nullopt);
  r["phases"][0]["resources"]["realized_allocas"] = 2;
  EXPECT_EQ(kiln::driver::planDisagreesWithCode(r).value_or(""), "snapshot_allocas 1 predicted, 2 realized");
  r["phases"][0]["resources"]["realized_allocas"] = 1;
  nlohmann::json code = {{"vector_loads", 4}, {"shuffles", 64}};
  r["phases"].push_back(
      nlohmann::json{{"phase", 1}, {"lanes", {{"code_per_program", {{"predicted", code}, {"realized", code}}}}}});
  EXPECT_EQ(kiln::driver::planDisagreesWithCode(r), std::nullopt);
  r["phases"][1]["lanes"]["code_per_program"]["realized"]["shuffles"] = 60;
  EXPECT_EQ(kiln::driver::planDisagreesWithCode(r).value_or(""),
            "phase 1: lane code shuffles: 64 predicted, 60 realized");
}

TEST(Codegen, KnobErrorsNameTheKnobAndItsRange) {
  Knobs k;
  auto e = k.set("packet_width", "3");
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("packet_width"), std::string::npos);
  EXPECT_NE(e->find("{1, 4, 8, 16}"), std::string::npos);
  e = k.set("no_such_knob", "1");
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("unknown knob 'no_such_knob'"), std::string::npos);
  EXPECT_TRUE(k.set("full_packet", "maybe"));
  EXPECT_TRUE(k.set("reduction_partitions", "17"));
  EXPECT_TRUE(k.setAssignment("packet_width"));

  auto kern = parse(mmaKernel(2, 4, 4));
  ASSERT_TRUE(kern);
  kiln::driver::Compilation c;
  auto err = kiln::driver::compile(*kern, knobs({"local_lanes=4"}), c);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("neither 1 nor packet_width (8)"), std::string::npos) << *err;
  EXPECT_TRUE(k.setAssignment("local_lanes=3"));
  EXPECT_FALSE(k.setAssignment("local_lanes=W"));
  EXPECT_TRUE(k.setAssignment("isa=sse2"));
  err = kiln::driver::compile(*kern, knobs({"packet_width=16", "block_size=8", "local_lanes=1"}), c);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("block_size"), std::string::npos);
  err = kiln::driver::compile(*kern, knobs({"max_local_bytes=16", "max_unrolled_tile_elements=2"}), c);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("max_local_bytes"), std::string::npos);
}

TEST(Codegen, BitexactIsRefusedUnderFastMath) {
  auto k = parse(kFma);
  ASSERT_TRUE(k);
  kiln::driver::CheckOptions o;
  o.mode = CheckMode::Bitexact;
  kiln::driver::CheckResult r;
  auto err = kiln::driver::check(*k, knobs({"fast_math=on"}), o, r);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("fast_math"), std::string::npos);
}

}  // namespace

namespace {
TEST(Codegen, FastMathKeepsInfinitiesAndStaysWithinTolerance) {
  // Attention masks with -inf and guards -inf - -inf: fast math must not assume infinities away.
  for (const char* f : {"/examples/attention_prefill.tile", "/examples/softmax.tile", "/examples/elementwise.tile"}) {
    kiln::ir::DiagEngine diag;
    auto k = kiln::ir::parseFile(std::string(KILN_SOURCE_DIR) + f, diag);
    ASSERT_TRUE(k) << diag.str();
    kiln::driver::CheckOptions o;
    o.mode = CheckMode::F64;
    kiln::driver::CheckResult r;
    auto err = kiln::driver::check(*k, knobs({"fast_math=on", "mma_output_block=4"}), o, r);
    ASSERT_FALSE(err.has_value()) << *err;
    EXPECT_TRUE(r.pass) << f << " max_abs " << r.max_abs_err;
  }
}
}  // namespace

namespace {
// What the plan and the JIT hand to LLVM stays bounded for any legal knob point (issue 23's
// reproducers in tests/fuzz/, which took minutes of CPU to compile): decisions checked, not
// times.
std::unique_ptr<kiln::ir::Kernel> reproducer(const std::string& name, kiln::fuzz::Replay& replay) {
  const std::string base = std::string(KILN_SOURCE_DIR) + "/tests/fuzz/" + name;
  kiln::ir::DiagEngine diag;
  auto k = kiln::ir::parseFile(base + ".tile", diag);
  EXPECT_TRUE(k) << diag.str();
  auto e = kiln::fuzz::readReplayOptions(base + ".knobs", replay);
  EXPECT_FALSE(e.has_value()) << *e;
  return k;
}

TEST(CompileBudget, UnrolledScattersAreCappedWithoutScatterInstructions) {
  kiln::fuzz::Replay r;
  auto k = reproducer("avx2_packets_unrolled_scatters_compile_time", r);
  ASSERT_TRUE(k);
  ASSERT_EQ(r.knobs.isa, "avx2");
  ASSERT_EQ(r.knobs.max_unrolled_tile_elements, 256);
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, r.knobs, c, kiln::driver::Stage::Report).has_value());
  EXPECT_EQ(c.report["knobs"]["max_unrolled_tile_elements"], 64);  // 1024 / W, W = 16
  EXPECT_NE(c.report["phases"][0].value("unrolled_tile_cap", "").find("lowered to 64"), std::string::npos)
      << c.report.dump();
  EXPECT_LT(c.report["llvm"]["instructions_pre_opt"].get<int>(), 4000);  // was 16 284
  EXPECT_EQ(c.report["llvm"]["pipeline"], "O2");
  // AVX-512 has scatters: the knob's cap stands there.
  Knobs wide = r.knobs;
  wide.isa = "avx512";
  kiln::driver::Compilation c512;
  ASSERT_FALSE(kiln::driver::compile(*k, wide, c512, kiln::driver::Stage::Plan).has_value());
  EXPECT_EQ(c512.report["knobs"]["max_unrolled_tile_elements"], 256);
  EXPECT_FALSE(c512.report["phases"][0].contains("unrolled_tile_cap"));
}

// AVX-512 gathers and scatters 32- and 64-bit elements but not 16-bit ones: a kernel with a bf16
// or f16 view gets the same cap there, its bits the interpreter's; f32 views alone keep the
// knob's value (the reproducer took over 30 s of CPU to compile before).
TEST(CompileBudget, UnrolledTilesAreCappedWithHalfViewsAtAvx512) {
  kiln::fuzz::Replay r;
  auto k = reproducer("packets_half_views_compile_time", r);
  ASSERT_TRUE(k);
  ASSERT_EQ(r.knobs.max_unrolled_tile_elements, 256);
  Knobs wide = r.knobs;
  wide.isa = "avx512";
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, wide, c, kiln::driver::Stage::Report).has_value());
  EXPECT_EQ(c.report["knobs"]["max_unrolled_tile_elements"], 64);
  EXPECT_NE(c.report["phases"][0].value("unrolled_tile_cap", "").find("16-bit elements: %x2 is bf16"),
            std::string::npos)
      << c.report.dump();
  EXPECT_LT(c.report["llvm"]["instructions_pre_opt"].get<int>(), 4000);
  kiln::driver::CheckOptions o;
  o.mode = CheckMode::Bitexact;
  o.seed = r.inputs.seed;
  kiln::driver::CheckResult res;
  ASSERT_FALSE(kiln::driver::check(*k, r.knobs, o, res).has_value());  // isa native: this host's
  EXPECT_TRUE(res.pass) << "max_abs " << res.max_abs_err;
  // The same program with f32 views only: no cap at AVX-512.
  std::string text = kiln::ir::print(*k);
  for (const char* t : {"view<bf16>", "view<f16>"})
    for (size_t at; (at = text.find(t)) != std::string::npos;) text.replace(at, std::strlen(t), "view<f32>");
  auto f32 = parse(text);
  ASSERT_TRUE(f32);
  kiln::driver::Compilation c32;
  ASSERT_FALSE(kiln::driver::compile(*f32, wide, c32, kiln::driver::Stage::Plan).has_value());
  EXPECT_EQ(c32.report["knobs"]["max_unrolled_tile_elements"], 256);
  EXPECT_FALSE(c32.report["phases"][0].contains("unrolled_tile_cap"));
}

TEST(CompileBudget, AHugeFunctionGetsTheReducedPipelineAndTheSameBits) {
  kiln::fuzz::Replay r;
  auto k = reproducer("lanes_huge_function_compile_time", r);
  ASSERT_TRUE(k);
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, r.knobs, c, kiln::driver::Stage::Report).has_value());
  EXPECT_EQ(c.report["llvm"]["pipeline"].get<std::string>().rfind("reduced", 0), 0u) << c.report["llvm"].dump();
  // Its results: the interpreter's bits (or within FP64 tolerance where the IR allows FMA).
  kiln::driver::CheckOptions o;
  o.mode = kiln::fuzz::precise(*k, r.knobs) ? CheckMode::Bitexact : CheckMode::F64;
  o.seed = r.inputs.seed;
  kiln::driver::CheckResult res;
  auto err = kiln::driver::check(*k, r.knobs, o, res);
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_TRUE(res.pass) << "max_abs " << res.max_abs_err;
  // Every library kernel is far below the limit: O2 (the largest, decode attention).
  auto d = kiln::kernels::attention({1, 8, 2, 1, 2053, 80, 96});
  ASSERT_TRUE(d);
  kiln::driver::Compilation cd;
  ASSERT_FALSE(kiln::driver::compile(*d.kernel, Knobs{}, cd, kiln::driver::Stage::Report).has_value());
  EXPECT_EQ(cd.report["llvm"]["pipeline"], "O2");
}
}  // namespace

// The lane realization (local_lanes = W): results are defined by the IR alone, so every vector
// width, ISA and thread count gives the strict-FP32 interpreter's bits; the plan's layout,
// conversion and mma decisions are visible in the report, and the code they predict is the
// code emitted.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <map>

#include "driver/check.h"
#include "driver/compile.h"
#include "host/isa.h"
#include "host_isa.h"
#include "ir/diag.h"
#include "ir/parser.h"
#include "jit/compile.h"
#include "kernels/attention.h"
#include "kernels/registry.h"
#include "target/target.h"

namespace {

using kiln::driver::CheckMode;
using kiln::plan::Knobs;

Knobs knobs(std::initializer_list<std::string> sets) {
  Knobs k;
  for (const std::string& s : sets) EXPECT_FALSE(k.setAssignment(s).has_value()) << s;
  return k;
}

// Bitexact against strict-FP32, or (a kernel whose mma allows reassociation or FMA
// contraction) within the FP64 tolerance.
void expectBitexact(const kiln::ir::Kernel& k, const Knobs& kn, const std::string& what) {
  if (!kiln::testhost::runsHere(kn.isa, what)) {
    // Not runnable here: the object is still made, and the code it holds is the code planned.
    kiln::driver::Compilation c;
    auto err = kiln::driver::compile(k, kn, c, kiln::driver::Stage::Report);
    ASSERT_FALSE(err.has_value()) << what << ": " << *err;
    EXPECT_EQ(kiln::driver::planDisagreesWithCode(c.report).value_or(""), "") << what;
    return;
  }
  kiln::driver::CheckOptions o;
  o.mode = CheckMode::Bitexact;
  kiln::ir::walk(k.body, [&](const kiln::ir::Op* op) {
    if (op->kind == kiln::ir::OpKind::Mma && (op->mma_policy.allow_fma || op->mma_policy.allow_reassociation))
      o.mode = CheckMode::F64;
  });
  kiln::driver::CheckResult r;
  auto err = kiln::driver::check(k, kn, o, r);
  ASSERT_FALSE(err.has_value()) << what << ": " << *err;
  EXPECT_TRUE(r.pass) << what << ": bitexact mismatch, max_abs " << r.max_abs_err;
  // The code the plan predicts (loads, gathers, FMAs, shuffles, loops, ...) is the code emitted.
  EXPECT_EQ(r.plan_vs_code, "") << what;
}

std::unique_ptr<kiln::ir::Kernel> parseFile(const std::string& path) {
  kiln::ir::DiagEngine diag;
  auto k = kiln::ir::parseFile(path, diag);
  EXPECT_TRUE(k) << diag.str();
  return k;
}

// The lane points: W x ISA x threads.
std::vector<Knobs> lanePoints() {
  std::vector<Knobs> pts;
  for (const char* w : {"4", "8", "16"})
    for (const char* isa : {"avx2", "avx512"})
      for (const char* t : {"1", "2"})
        pts.push_back(knobs({std::string("packet_width=") + w, "local_lanes=W", std::string("isa=") + isa,
                             std::string("threads=") + t, "block_size=16"}));
  return pts;
}

std::string describe(const Knobs& k) {
  return "W=" + k.get("packet_width") + " isa=" + k.get("isa") + " threads=" + k.get("threads");
}

TEST(Lanes, IsTheDefaultRealization) {
  Knobs k;
  EXPECT_EQ(k.get("local_lanes"), "W");
  EXPECT_EQ(k.get("packet_width"), "auto");  // the target model's: AVX-512 16, AVX2 8
  auto r = kiln::kernels::attention({1, 8, 2, 1, 67, 80, 96});
  ASSERT_TRUE(r) << r.message();
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*r.kernel, k, c).has_value());
  EXPECT_EQ(c.report["phases"][0]["realization"], "lanes");
  EXPECT_EQ(c.report["phases"][0]["full_packet"]["decision"], "not_applicable");
}

// Every example and tests/ir kernel, each on a rotating third of the lane points.
TEST(Lanes, ExamplesAndIrCasesAreBitexactOnEveryWidthIsaAndThreadCount) {
  std::vector<std::string> files;
  for (const char* dir : {"/examples", "/tests/ir"})
    for (const auto& e : std::filesystem::directory_iterator(std::string(KILN_SOURCE_DIR) + dir))
      if (e.path().extension() == ".tile") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  ASSERT_FALSE(files.empty());
  std::vector<Knobs> pts = lanePoints();
  for (size_t i = 0; i < files.size(); ++i) {
    auto k = parseFile(files[i]);
    ASSERT_TRUE(k);
    // Every third point; in the sanitizer tree one, the files taking the points in turn (host_isa.h).
    const size_t every = kiln::testhost::kSanitized ? pts.size() : 3;
    for (size_t j = i % every; j < pts.size(); j += every)
      expectBitexact(*k, pts[j], files[i] + " " + describe(pts[j]));
  }
}

// Library kernels on odd shapes (tails, one-element dims, ragged blocks), every lane point.
TEST(Lanes, LibraryKernelsAreBitexactOnEveryWidthIsaAndThreadCount) {
  const std::vector<kiln::kernels::LibraryRequest> reqs = {
      {"attention", "1,8,2,1,37,80,96", {{"mask", "none"}}},
      {"attention", "2,6,2,7,33,17,9", {{"mask", "causal"}}},
      {"attention", "1,3,3,5,1,8,8", {{"mask", "causal"}}},
      // Decode with a fused transpose on 16-lane machines (few rows, a ragged last K chunk of D),
      // the panel on 8-lane ones: the same bits.
      {"attention", "1,16,2,1,50,130,8", {{"mask", "none"}, {"split", "off"}}},
      {"attention", "1,3,1,1,70,40,24", {{"mask", "causal"}, {"split", "off"}, {"block", "1x48"}}},
      // Prefill with the queries along the lanes (Q transposed once per program).
      {"attention", "1,4,2,33,21,24,8", {{"mask", "causal"}, {"lanes", "queries"}}},
      {"attention", "1,4,1,3,19,16,24", {{"heads", "separate"}, {"fma", "unfused"}, {"block", "2x8"}}},
      // Q.K^T in partitions(16): the dot form (MHA decode, D = 32; auto), and element by element
      // where D is not a multiple of 16.
      {"attention", "1,3,3,1,70,32,24", {{"mask", "causal"}, {"split", "off"}}},
      {"attention", "1,2,2,3,20,9,8", {{"mask", "none"}, {"qk", "dot"}, {"fma", "unfused"}}},
      // bf16 K read as 32-bit words (whole D chunks of KV blocks inside the view; W x W in the
      // ragged last KV block and the ragged last chunk of D): fused two L chunks per step
      // (4 rows), fused one (8 rows), and the panel (16 rows); f16 the W x W way.
      {"attention", "1,8,2,1,150,80,96", {{"mask", "none"}, {"kv-dtype", "bf16"}}},
      {"attention", "1,16,2,1,150,130,8", {{"mask", "none"}, {"split", "off"}, {"kv-dtype", "bf16"}}},
      {"attention", "1,16,1,1,150,40,24", {{"mask", "causal"}, {"split", "off"}, {"kv-dtype", "bf16"}}},
      {"attention", "1,8,2,1,150,80,96", {{"mask", "causal"}, {"kv-dtype", "f16"}}},
      {"gemm", "37,20,45", {}},
      {"gemm", "9,33,17", {{"trans-b", "true"}}},
      {"gemm", "37,50,70", {{"trans-b", "true"}, {"b-dtype", "bf16"}}},  // B^T's bf16 words, a panel
      {"softmax", "5,1030", {}},
      {"rmsnorm", "3,4099", {}},
      {"layernorm", "4,17", {}},
      {"rope", "5,3,32", {{"style", "interleaved"}}},
      {"swiglu", "3,33", {}},
      {"gelu", "1001", {{"approx", "tanh"}}},
  };
  std::vector<Knobs> pts = lanePoints();
  for (size_t i = 0; i < reqs.size(); ++i) {
    std::unique_ptr<kiln::ir::Kernel> k;
    auto err = kiln::kernels::buildLibraryKernel(reqs[i], k);
    ASSERT_FALSE(err.has_value()) << *err;
    // Every other point; in the sanitizer tree one, in turn (host_isa.h).
    const size_t every = kiln::testhost::kSanitized ? pts.size() : 2;
    for (size_t j = i % every; j < pts.size(); j += every)
      expectBitexact(*k, pts[j], reqs[i].name + " " + reqs[i].shape + " " + describe(pts[j]));
  }
}

TEST(Lanes, DecodeAttentionPlan) {
  // Stacked GQA rows, the K tile transposed once per block in registers, no gathers (one
  // phase: without the split).
  std::unique_ptr<kiln::ir::Kernel> k;
  ASSERT_FALSE(
      kiln::kernels::buildLibraryKernel({"attention", "1,8,2,1,2053,80,96", {{"mask", "none"}, {"split", "off"}}}, k));
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, Knobs{}, c, kiln::driver::Stage::Plan).has_value());
  const auto& lanes = c.report["phases"][0]["lanes"];
  ASSERT_EQ(lanes["mma"].size(), 2u);
  EXPECT_EQ(lanes["mma"][0]["form"], "outer_product");
  // Four rows: each W x W block of K is transposed in registers and consumed at once (the
  // target model's W: 16x16 on AVX-512, 8x8 on AVX2), with the same bits.
  const bool fused = true;
  EXPECT_EQ(lanes["mma"][0]["operands"][1],
            fused ? "lane vectors (transposed in registers, consumed at once)" : "lane vectors (transposed)");
  EXPECT_EQ(lanes["mma"][0]["step"], "fma");
  EXPECT_EQ(lanes["mma"][1]["operands"][1], "lane vectors");
  ASSERT_EQ(lanes["conversions"].size(), 1u);
  EXPECT_EQ(lanes["conversions"][0]["value"], "%kt");
  EXPECT_EQ(lanes["conversions"][0]["made"], fused ? "in registers inside the mma (no panel)" : "before the mma");
  Knobs avx2;
  avx2.isa = "avx2";
  avx2.packet_width = 16;
  kiln::driver::Compilation c2;
  ASSERT_FALSE(kiln::driver::compile(*k, avx2, c2, kiln::driver::Stage::Plan).has_value());
  EXPECT_EQ(c2.report["phases"][0]["lanes"]["conversions"][0]["made"],
            "before the mma");  // 16 lanes on 8-lane registers: the panel
  EXPECT_EQ(lanes["code_per_program"]["predicted"]["gathers"], 0);
  for (const auto& m : lanes["memory"]) EXPECT_EQ(m["access"], "vector") << m.dump();
  for (const auto& r : lanes["reductions"]) EXPECT_EQ(r["lanes_hold_partitions"], true) << r.dump();
}

TEST(Lanes, DecodeRegisterTilesTakeTheRegisterFile) {
  // P.V's register tile and tile count of a decode (no split), planned only: any host.
  auto pvTile = [](const std::string& shape, const Knobs& knobs) {
    std::unique_ptr<kiln::ir::Kernel> k;
    EXPECT_FALSE(kiln::kernels::buildLibraryKernel({"attention", shape, {{"mask", "none"}, {"split", "off"}}}, k));
    kiln::driver::Compilation c;
    EXPECT_FALSE(kiln::driver::compile(*k, knobs, c, kiln::driver::Stage::Plan).has_value());
    const auto& mma = c.report["phases"][0]["lanes"]["mma"];
    return mma.size() == 2 ? std::pair{mma[1]["register_tile"].get<std::string>(), mma[1]["register_tiles"].get<int>()}
                           : std::pair{std::string("?"), 0};
  };
  Knobs avx512, avx2, gpu;
  avx512.isa = "avx512";
  avx2.isa = "avx2";
  gpu.target = kiln::target::Kind::Nvptx;
  gpu.gpu_realization = "lanes";
  // The GQA-4 decode with Dv = 96: 4 rows x 6 chunks of 16 lanes = 24 accumulators, past the
  // AVX-512 budget of 20 but within its 32 registers with a row's 6 V vectors and a broadcast:
  // one tile, so each P broadcast serves all 6 chunks.
  const std::string shortDecode = "1,8,2,1,2053,80,96", longDecode = "1,32,8,1,4096,128,128";
  EXPECT_EQ(pvTile(shortDecode, avx512), std::pair(std::string("4x6"), 1));
  // AVX2, 8 lanes: 12 chunks of Dv; 4 x 12 does not fit 16 registers: rows x 2 chunks.
  EXPECT_EQ(pvTile(shortDecode, avx2).first, "4x2");
  // Dv = 128, 8 chunks: 32 accumulators do not fit; all 4 rows with as many chunks as the budget
  // takes (4 x 5 = 20, a register to spare), then the rest: 2 tiles. AVX2 keeps 4 x 2 (4 x 3
  // would take all 16 registers).
  EXPECT_EQ(pvTile(longDecode, avx512), std::pair(std::string("4x5"), 2));
  EXPECT_EQ(pvTile(longDecode, avx2), std::pair(std::string("4x2"), 8));
  // The GPU's lanes state no register file: the budget of 20 vectors holds.
  EXPECT_EQ(pvTile(shortDecode, gpu), std::pair(std::string("4x4"), 2));
}

TEST(Lanes, PrefillQueriesInLanesPlan) {
  // --lanes queries: scores [g, n, m]. Q is transposed once per program (hoisted out of the KV
  // loop, after its load), K and V rows are broadcast (no conversion), row max and sum are
  // vertical, and the output is scattered once.
  std::unique_ptr<kiln::ir::Kernel> k;
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel(
      {"attention", "1,4,2,32,65,32,32", {{"mask", "none"}, {"lanes", "queries"}}}, k));
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, Knobs{}, c, kiln::driver::Stage::Plan).has_value());
  const auto& lanes = c.report["phases"][0]["lanes"];
  ASSERT_EQ(lanes["conversions"].size(), 1u);
  EXPECT_EQ(lanes["conversions"][0]["value"], "%qt");
  EXPECT_EQ(lanes["conversions"][0]["to_lane_dim"], "m");
  EXPECT_NE(lanes["conversions"][0]["made"].get<std::string>().find("once, after the definition"), std::string::npos);
  for (const auto& r : lanes["reductions"]) EXPECT_EQ(r["direction"], "vertical") << r.dump();
  EXPECT_EQ(lanes["code_per_program"]["predicted"]["gathers"], 0);
  EXPECT_GT(lanes["code_per_program"]["predicted"]["scatters"], 0);
}

// K and V tiles an mma splats element by element (queries in the lanes) are read from their
// view at each use when f32, but widened once into an f32 panel when 16-bit; a decode's K and V
// (vectors along their rows) are read from their 16-bit view directly.
TEST(Lanes, SixteenBitSplatOperandsAreWidenedOnce) {
  auto reps = [](const std::string& shape, const std::string& dtype) {
    std::unique_ptr<kiln::ir::Kernel> k;
    EXPECT_FALSE(kiln::kernels::buildLibraryKernel({"attention", shape, {{"mask", "none"}, {"kv-dtype", dtype}}}, k));
    kiln::driver::Compilation c;
    EXPECT_FALSE(kiln::driver::compile(*k, Knobs{}, c, kiln::driver::Stage::Plan).has_value());
    std::map<std::string, std::string> out;
    for (const auto& l : c.report["phases"][0]["lanes"]["layouts"])
      if (l["value"] == "%kt" || l["value"] == "%vt") out[l["value"]] = l["rep"];
    return out;
  };
  using Reps = std::map<std::string, std::string>;
  EXPECT_EQ(reps("1,4,2,32,65,32,32", "f32"), (Reps{{"%kt", "direct"}, {"%vt", "direct"}}));
  for (const char* t : {"f16", "bf16"}) {
    EXPECT_EQ(reps("1,4,2,32,65,32,32", t), (Reps{{"%kt", "panel"}, {"%vt", "panel"}})) << t;
    EXPECT_EQ(reps("1,8,2,1,2053,80,96", t), (Reps{{"%kt", "direct"}, {"%vt", "direct"}})) << t;
  }
}

// bf16 K transposed as 32-bit words: the decode's fused transpose walks two chunks of keys per
// step (8 FMA chains), with (W/2) log2(W/2) shuffles per chunk of D instead of W log2 W; f16 and
// f32 K keep the W x W transposes and one chunk per step.
TEST(Lanes, Bf16KeysAreTransposedAsWords) {
  auto plan = [](const std::string& dtype, const std::string& isa, const std::string& shape) {
    std::unique_ptr<kiln::ir::Kernel> k;
    EXPECT_FALSE(kiln::kernels::buildLibraryKernel(
        {"attention", shape, {{"mask", "causal"}, {"split", "off"}, {"kv-dtype", dtype}}}, k));
    kiln::driver::Compilation c;
    EXPECT_FALSE(kiln::driver::compile(*k, knobs({"isa=" + isa}), c, kiln::driver::Stage::Report).has_value());
    EXPECT_EQ(kiln::driver::planDisagreesWithCode(c.report).value_or(""), "") << dtype << " " << isa;
    return c.report["phases"][0]["lanes"];
  };
  for (const char* isa : {"avx2", "avx512"}) {
    const auto bf = plan("bf16", isa, "1,8,2,1,2053,80,96");
    ASSERT_EQ(bf["conversions"].size(), 1u);
    EXPECT_EQ(bf["conversions"][0]["made"], "in registers inside the mma (no panel)") << isa;
    EXPECT_NE(bf["conversions"][0]["method"].get<std::string>().find("bf16 as 32-bit words"), std::string::npos);
    EXPECT_EQ(bf["mma"][0]["fused_chunks_per_step"], 2) << isa;
    for (const char* other : {"f16", "f32"}) {
      const auto o = plan(other, isa, "1,8,2,1,2053,80,96");
      EXPECT_EQ(o["conversions"][0]["method"], "in-register WxW transposes") << other << " " << isa;
      EXPECT_EQ(o["mma"][0]["fused_chunks_per_step"], 1) << other << " " << isa;
      // Per chunk of D: 24 shuffles against 64 (W = 16), 8 against 24 (W = 8), and tails alike.
      EXPECT_LT(bf["code_per_program"]["predicted"]["shuffles"].get<int64_t>(),
                o["code_per_program"]["predicted"]["shuffles"].get<int64_t>())
          << other << " " << isa;
    }
    // 16 rows: the panel, also as words.
    const auto panel = plan("bf16", isa, "1,16,1,1,150,40,24");
    EXPECT_EQ(panel["conversions"][0]["made"], "before the mma") << isa;
    EXPECT_NE(panel["conversions"][0]["method"].get<std::string>().find("bf16 as 32-bit words"), std::string::npos);
  }
}

// The word transposes by unpacks (knob word_transposes=unpack): the report names the method,
// the plan's shuffle count is the code's, and the bits are the interpreter's — in the decode's
// fused transpose (both orders), a panel (prefill) and a ragged D, at W = 4, 8 and 16 (W = 4:
// the swaps, as the knob says).
TEST(Lanes, Bf16WordTransposesByUnpacksGiveTheSameBits) {
  struct Case {
    const char* shape;
    std::map<std::string, std::string> options;
  };
  const std::vector<Case> cases = {
      {"1,8,2,1,203,80,96", {{"kv-dtype", "bf16"}}},
      {"1,8,2,1,203,80,96", {{"kv-dtype", "bf16"}, {"order", "bf16_pairs"}}},
      {"1,16,1,1,150,40,24", {{"kv-dtype", "bf16"}, {"mask", "causal"}}},  // 16 rows: a panel
      {"1,12,3,1,150,72,40", {{"kv-dtype", "bf16"}, {"split", "2"}}},      // D = 72: a ragged chunk
  };
  for (const Case& c : cases)
    for (const char* w : {"4", "8", "16"})
      for (const char* isa : {"avx2", "avx512"}) {
        if (std::string(w) == "16" && std::string(isa) == "avx2") continue;
        const std::string what =
            std::string(c.shape) + " " + (c.options.count("order") ? "pairs " : "") + "W=" + w + " isa=" + isa;
        std::unique_ptr<kiln::ir::Kernel> k;
        ASSERT_FALSE(kiln::kernels::buildLibraryKernel({"attention", c.shape, c.options}, k)) << what;
        const Knobs kn = knobs({std::string("packet_width=") + w, std::string("isa=") + isa, "word_transposes=unpack"});
        kiln::driver::Compilation comp;
        ASSERT_FALSE(kiln::driver::compile(*k, kn, comp, kiln::driver::Stage::Report).has_value()) << what;
        bool unpacked = false;
        for (const auto& phase : comp.report["phases"])
          if (phase.contains("lanes") && phase["lanes"].is_object())
            for (const auto& cv : phase["lanes"]["conversions"])
              unpacked = unpacked || cv["method"].get<std::string>().find("unpacks") != std::string::npos;
        EXPECT_EQ(unpacked, std::string(w) != "4") << what;
        expectBitexact(*k, kn, what);
      }
}

// The knob tune_cpu picks the CPU model LLVM schedules for, not the instructions: generic is the
// level of the code's instruction set (native: this CPU's level), host this CPU's own model. The
// report names both CPUs, the compiled CPU stays the isa's, and the bits are the interpreter's.
TEST(Lanes, TuneCpuChoosesTheSchedulingModelNotTheInstructionsOrTheBits) {
  const std::string level = kiln::host::cpuHasAvx512() ? "x86-64-v4"
                            : kiln::host::cpuHasAvx2() ? "x86-64-v3"
                                                       : kiln::jit::hostTarget().cpu;
  const std::map<std::string, std::string> generic = {
      {"native", level}, {"avx2", "x86-64-v3"}, {"avx512", "x86-64-v4"}};
  struct Case {
    const char* kernel;
    const char* shape;
    std::map<std::string, std::string> options;
  };
  const std::vector<Case> cases = {
      {"attention", "1,8,2,1,203,80,96", {{"kv-dtype", "bf16"}}},
      {"gemm", "33,200,129", {}},
  };
  for (const Case& c : cases)
    for (const char* isa : {"native", "avx2", "avx512"})
      for (const char* tune : {"generic", "host"}) {
        const std::string what = std::string(c.kernel) + " " + c.shape + " isa=" + isa + " tune_cpu=" + tune;
        std::unique_ptr<kiln::ir::Kernel> k;
        ASSERT_FALSE(kiln::kernels::buildLibraryKernel({c.kernel, c.shape, c.options}, k)) << what;
        const Knobs kn = knobs({std::string("isa=") + isa, std::string("tune_cpu=") + tune});
        kiln::driver::Compilation comp;
        ASSERT_FALSE(kiln::driver::compile(*k, kn, comp, kiln::driver::Stage::Report).has_value()) << what;
        const auto& target = comp.report["target"];
        EXPECT_EQ(target["cpu"], kiln::jit::targetCpu(isa).cpu) << what;
        EXPECT_EQ(target["tune_cpu"], std::string(tune) == "host" ? kiln::jit::hostTarget().cpu : generic.at(isa))
            << what;
        expectBitexact(*k, kn, what);
      }
}

// A GEMM's B tile is a strip of B's rows read by several register tiles of rows: copied once
// into a panel. One row of outputs (1 x 4096 x 4096), or K/V tiles of whole rows (attention):
// read from the view.
TEST(Lanes, StripsReadByRowTilesArePanels) {
  auto rep = [](const char* kernel, const char* shape, const char* value) {
    std::unique_ptr<kiln::ir::Kernel> k;
    EXPECT_FALSE(kiln::kernels::buildLibraryKernel({kernel, shape, {}}, k));
    kiln::driver::Compilation c;
    EXPECT_FALSE(kiln::driver::compile(*k, Knobs{}, c, kiln::driver::Stage::Plan).has_value());
    for (const auto& l : c.report["phases"][0]["lanes"]["layouts"])
      if (l["value"] == value) return l["rep"].get<std::string>();
    return std::string("missing");
  };
  EXPECT_EQ(rep("gemm", "512,512,512", "%bt"), "panel");
  EXPECT_EQ(rep("gemm", "300,200,129", "%bt"), "panel");
  EXPECT_EQ(rep("gemm", "1,4096,4096", "%bt"), "direct");
  EXPECT_EQ(rep("attention", "1,32,8,512,512,128,128", "%vt"), "direct");
}

// A loop's carried accumulator that only its mma reads is updated in place: each register tile
// reads its accumulators before it writes them, so the trip ends without copying the panel. So
// is one that only an element-wise op of it reads, itself read only by the mma (attention's
// acc * alpha). An accumulator read elsewhere too keeps its own storage (and the copy).
TEST(Lanes, CarriedAccumulatorsAreUpdatedInPlace) {
  // One K loop of the GEMM-like mma into view %out: `acc` is the mma's accumulator (the carried
  // %acc, or an op of it defined by `pre`), `post` what the trip yields after the mma.
  auto loop = [](const char* name, const char* out, const char* pre, const char* acc, const char* post) {
    return fmt::format(R"(    %{0} = serial %k = 0 to 4 step 1 iter(%acc = %z) : f32[m:40, n:48] {{
      %k0 = mul %k, 16
      %at = load %a[0, %k0] as [m:40, e:16] : f32[m:40, e:16]
      %bt = load %b[%k0, 0] as [e:16, n:48] : f32[e:16, n:48]
{2}      %next = mma %at, %bt, {3} contract [e] fused : f32[m:40, n:48]
{4}    }}
    store %{0}, %{1}[0, 0] as [m:40, n:48]
)",
                       name, out, pre, acc, post);
  };
  const char* half = "      %half = mul %acc, 0.5\n";
  const std::string text =
      "kernel @acc(%a: view<f32>[40, 64], %b: view<f32>[64, 48], %c: view<f32>[40, 48], %d: view<f32>[40, 48],\n"
      "            %e: view<f32>[40, 48], %f: view<f32>[40, 48]) {\n"
      "  parallel (%p) in (1) {\n"
      "    %z = const 0 : f32[m:40, n:48]\n" +
      loop("r", "c", "", "%acc", "      yield %next\n") +
      loop("r2", "d", "", "%acc", "      %sum = add %next, %acc\n      yield %sum\n") +
      loop("r3", "e", half, "%half", "      yield %next\n") +
      loop("r4", "f", half, "%half", "      %sum = add %next, %half\n      yield %sum\n") + "  }\n}\n";
  kiln::ir::DiagEngine diag;
  auto k = kiln::ir::parseKernel(text, "acc.tile", diag);
  ASSERT_TRUE(k) << diag.str();
  for (const Knobs& kn : {Knobs{}, knobs({"isa=avx2", "packet_width=8"})}) {
    kiln::driver::Compilation c;
    ASSERT_FALSE(kiln::driver::compile(*k, kn, c).has_value());
    const auto& lanes = c.report["phases"][0]["lanes"];
    ASSERT_EQ(lanes["mma"].size(), 4u);
    EXPECT_EQ(lanes["mma"][0]["accumulator"], "the loop's carried panel, updated in place") << lanes["mma"].dump();
    EXPECT_EQ(lanes["mma"][1]["accumulator"], "its own storage");
    EXPECT_EQ(lanes["mma"][2]["accumulator"], "the loop's carried panel, updated in place") << lanes["mma"].dump();
    EXPECT_EQ(lanes["mma"][3]["accumulator"], "its own storage");
    EXPECT_EQ(lanes["code_per_program"]["predicted"], lanes["code_per_program"]["realized"]);
    expectBitexact(*k, kn, describe(kn));
  }
  // The library's GEMM: its K loop's accumulator.
  std::unique_ptr<kiln::ir::Kernel> g;
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel({"gemm", "70,90,200", {}}, g).has_value());
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*g, Knobs{}, c, kiln::driver::Stage::Plan).has_value());
  EXPECT_EQ(c.report["phases"][0]["lanes"]["mma"][0]["accumulator"], "the loop's carried panel, updated in place");
  // The library's prefill attention: P.V's accumulator, rescaled by alpha on the way in.
  std::unique_ptr<kiln::ir::Kernel> at;
  ASSERT_FALSE(
      kiln::kernels::buildLibraryKernel({"attention", "1,8,2,64,128,64,64", {{"mask", "none"}}}, at).has_value());
  kiln::driver::Compilation ca;
  ASSERT_FALSE(kiln::driver::compile(*at, Knobs{}, ca, kiln::driver::Stage::Plan).has_value());
  EXPECT_EQ(ca.report["phases"][0]["lanes"]["mma"][1]["accumulator"], "the loop's carried panel, updated in place");
}

// Prefetch (docs/backend.md, the target model): K and V each within L2 but not together. A
// decode's programs each read their own keys, streamed from beyond L2: its strip-read K/V
// loads prefetch the next tile. A prefill's query blocks share their head's K and V (from L2
// after the first block): no prefetch. Sized from this host's L2, so it holds on any CPU.
TEST(Lanes, PrefetchWhenTheLoopsViewsTogetherPassL2) {
  Knobs kn;
  const auto& model = kiln::target::of(kn.target).model(kn.isa);
  const int64_t l2 = model.l2_bytes > 0 ? model.l2_bytes : int64_t{1} << 20;
  const int64_t keys = l2 * 6 / 10 / (2 * 80 * 4);  // each of K and V: 0.6 of L2
  auto reasons = [&](int64_t queries) {
    std::unique_ptr<kiln::ir::Kernel> k;
    const std::string shape = fmt::format("1,8,2,{},{},80,80", queries, keys);
    EXPECT_FALSE(kiln::kernels::buildLibraryKernel({"attention", shape, {{"mask", "none"}}}, k).has_value());
    kiln::driver::Compilation c;
    EXPECT_FALSE(kiln::driver::compile(*k, kn, c, kiln::driver::Stage::Plan).has_value());
    std::vector<std::string> out;
    for (const auto& m : c.report["phases"][0]["lanes"]["memory"])
      if (m.contains("prefetch")) out.push_back(m["prefetch"]["reason"].get<std::string>());
    return out;
  };
  if (!model.prefetch) GTEST_SKIP() << "the target model has no prefetch";
  const std::vector<std::string> decode = reasons(1);
  ASSERT_FALSE(decode.empty());
  for (const std::string& r : decode) EXPECT_NE(r.find("each part read by one program"), std::string::npos) << r;
  EXPECT_TRUE(reasons(256).empty());
}

// MHA decode: Q.K^T in the partitions(16) order as a dot product along D, K read as it lies in
// memory (no transpose), the 16 partitions of 16 scores merged after one in-register transpose.
TEST(Lanes, MhaDecodeQkIsADotProduct) {
  std::unique_ptr<kiln::ir::Kernel> k;
  auto err = kiln::kernels::buildLibraryKernel({"attention", "1,4,4,1,64,32,32", {{"split", "off"}}}, k);
  ASSERT_FALSE(err.has_value()) << *err;
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, knobs({"isa=avx512", "packet_width=16"}), c).has_value());
  const auto& lanes = c.report["phases"][0]["lanes"];
  EXPECT_EQ(lanes["mma"][0]["form"], "dot");
  EXPECT_EQ(lanes["mma"][1]["form"], "outer_product");  // P.V: ascending keys
  EXPECT_TRUE(lanes["conversions"].empty()) << lanes["conversions"].dump();
  const auto& code = lanes["code_per_program"];
  EXPECT_EQ(code["predicted"], code["realized"]);
  EXPECT_EQ(code["predicted"]["gathers"], 0);
  // Per vector of 16 scores: one 16x16 transpose (64 shuffles) of the 16 partial vectors.
  EXPECT_EQ(code["predicted"]["shuffles"].get<int>() % 64, 0);
  EXPECT_GT(code["predicted"]["shuffles"].get<int>(), 0);
  for (const char* qk : {"outer", "dot"}) {
    std::unique_ptr<kiln::ir::Kernel> kq;
    ASSERT_FALSE(kiln::kernels::buildLibraryKernel({"attention", "1,4,4,1,64,32,32", {{"qk", qk}}}, kq).has_value());
    expectBitexact(*kq, knobs({"packet_width=8", "isa=avx2"}), std::string("qk ") + qk);
  }
  // The partitioned order in the seed's realization (one program per lane), unrolled and rolled.
  auto part = parseFile(std::string(KILN_SOURCE_DIR) + "/tests/ir/mma_partitioned.tile");
  ASSERT_TRUE(part);
  for (const char* unroll : {"max_unrolled_tile_elements=64", "max_unrolled_tile_elements=1"})
    expectBitexact(*part, knobs({"local_lanes=1", "packet_width=8", unroll}), std::string("local_lanes=1 ") + unroll);
}

TEST(Lanes, StridedAccessIsAGatherAndCounted) {
  // The tile's lane dim (n) is not the view's contiguous dim: gathers, counted, still exact.
  const char* text = R"(
kernel @t(%x: view<f32>[5, 9], %y: view<f32>[9, 5]) {
  parallel (%p) in (1) {
    %a = load %x[0, %p] as [n:5, _] fill 0
    %b = exp %a
    store %b, %y[%p, 0] as [_, n:5]
  }
})";
  kiln::ir::DiagEngine diag;
  auto k = kiln::ir::parseKernel(text, "strided.tile", diag);
  ASSERT_TRUE(k) << diag.str();
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, Knobs{}, c, kiln::driver::Stage::Plan).has_value());
  EXPECT_EQ(c.report["phases"][0]["lanes"]["code_per_program"]["predicted"]["gathers"], 1);
  EXPECT_EQ(c.report["phases"][0]["lanes"]["memory"][0]["access"], "gather");
  EXPECT_EQ(c.report["phases"][0]["lanes"]["memory"][1]["access"], "vector");
  expectBitexact(*k, Knobs{}, "strided");
}

TEST(Lanes, CarriedPanelsMaySwap) {
  // A loop yielding one carried tile in the other's place: both realizations run it.
  const char* text = R"(
kernel @swap(%x: view<f32>[2, 40], %y: view<f32>[2, 40]) {
  parallel (%p) in (1) {
    %a = load %x[0, 0] as [r:1, c:40] fill 0
    %b = load %x[1, 0] as [r:1, c:40] fill 0
    %u, %v = serial %i = 0 to 3 step 1 iter(%s = %a, %t = %b) : f32[r:1, c:40], f32[r:1, c:40] {
      %w = add %s, %t
      yield %t, %w
    }
    store %u, %y[0, 0] as [r:1, c:40]
    store %v, %y[1, 0] as [r:1, c:40]
  }
})";
  kiln::ir::DiagEngine diag;
  auto k = kiln::ir::parseKernel(text, "swap.tile", diag);
  ASSERT_TRUE(k) << diag.str();
  expectBitexact(*k, Knobs{}, "lanes");
  expectBitexact(*k, knobs({"max_unrolled_tile_elements=8"}), "lanes, small register cap");
  expectBitexact(*k, knobs({"local_lanes=1", "packet_width=8", "max_unrolled_tile_elements=8"}), "programs");
}

// isa=avx512 compiles on every host (cross-compiling: --emit obj for a machine with AVX-512);
// running it is refused where the CPU lacks AVX-512, by an error that names the knob and the CPU.
TEST(Lanes, IsaAvx512CompilesAnywhereAndRunsOnlyWithAvx512) {
  Knobs k = knobs({"isa=avx512"});
  auto r = kiln::kernels::attention({1, 2, 1, 1, 8, 8, 8});
  ASSERT_TRUE(r);
  kiln::driver::Compilation c;
  auto err = kiln::driver::compile(*r.kernel, k, c);
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(c.report["target"]["isa"], "avx512");
  std::unique_ptr<kiln::runtime::LoadedKernel> loaded;
  err = kiln::driver::load(c.object, *r.kernel, k.isa, 1, loaded);
  EXPECT_EQ(err.has_value(), !kiln::host::cpuHasAvx512());
  if (err) {
    EXPECT_NE(err->find("isa=avx512"), std::string::npos) << *err;
    EXPECT_NE(err->find("no AVX-512"), std::string::npos) << *err;
  }
}

}  // namespace

// Target nvptx (docs/gpu.md) on a machine without a GPU: the PTX of every example and of split
// (two-phase) attention, the report's GPU fields, precise arithmetic in the PTX, the capture of
// an archive (checked by kiln-replay --check-archive, which needs no GPU) and its replay, which
// runs where a driver is present and is skipped, visibly, where none is.
#include <gtest/gtest.h>

#include <fmt/format.h>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "driver/compile.h"
#include "driver/gpu_capture.h"
#include "fuzz/campaign.h"
#include "fuzz/generate.h"
#include "ir/diag.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "jit/compile.h"
#include "kernels/registry.h"
#include "target/target.h"

namespace {

namespace fs = std::filesystem;

std::unique_ptr<kiln::ir::Kernel> parseFile(const std::string& path) {
  kiln::ir::DiagEngine diag;
  auto k = kiln::ir::parseFile(path, diag);
  EXPECT_TRUE(k) << diag.str();
  return k;
}

kiln::plan::Knobs gpuKnobs() {
  kiln::plan::Knobs k;
  EXPECT_FALSE(k.setAssignment("target=nvptx").has_value());
  return k;
}

// A kernel's text (`file` names it in diagnostics) compiled for nvptx into `c` (report and PTX).
void compileGpuText(const std::string& text, const std::string& file, kiln::driver::Compilation& c) {
  kiln::ir::DiagEngine diag;
  auto k = kiln::ir::parseKernel(text, file, diag);
  ASSERT_TRUE(k) << diag.str();
  auto err = kiln::driver::compile(*k, gpuKnobs(), c, kiln::driver::Stage::Report);
  ASSERT_FALSE(err.has_value()) << *err;
}

std::vector<std::string> examples() {
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(std::string(KILN_SOURCE_DIR) + "/examples"))
    if (e.path().extension() == ".tile") files.push_back(e.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

// The most consecutive PTX instructions that start with `op` (comments and labels between them
// break a run).
int longestRun(const std::string& ptx, const std::string& op) {
  std::istringstream lines(ptx);
  int run = 0, best = 0;
  for (std::string line; std::getline(lines, line);) {
    const size_t at = line.find_first_not_of(" \t");
    run = at != std::string::npos && line.compare(at, op.size(), op) == 0 ? run + 1 : 0;
    best = std::max(best, run);
  }
  return best;
}

// Every f32 add/sub/mul/div/sqrt/fma of precise PTX carries an explicit rounding mode, so ptxas contracts
// nothing into an FMA the IR did not ask for; no approximate instruction, no external call.
void expectPrecisePtx(const std::string& ptx, const std::string& what) {
  EXPECT_NE(ptx.find(".target sm_90a"), std::string::npos) << what;
  EXPECT_EQ(ptx.find(".approx"), std::string::npos) << what;
  // Nothing external but the block's dynamic shared memory (no function, no library).
  for (size_t at = ptx.find(".extern"); at != std::string::npos; at = ptx.find(".extern", at + 1))
    EXPECT_EQ(ptx.compare(at, 15, ".extern .shared"), 0) << what << ": " << ptx.substr(at, 60);
  EXPECT_EQ(ptx.find(".ftz"), std::string::npos) << what << ": denormals flushed";
  std::istringstream lines(ptx);
  int arithmetic = 0;
  for (std::string line; std::getline(lines, line);) {
    static const std::regex op(R"(\b(add|sub|mul|div|sqrt|fma)\.(rn\.|rz\.|rm\.|rp\.)?f32\b)");
    std::smatch m;
    if (!std::regex_search(line, m, op)) continue;
    ++arithmetic;
    EXPECT_TRUE(m[2].matched) << what << ": f32 arithmetic without a rounding mode: " << line;
  }
  EXPECT_GT(arithmetic, 0) << what;
}

TEST(Gpu, EveryExampleCompilesToPtxWithItsLaunchInTheReport) {
  for (const std::string& file : examples()) {
    SCOPED_TRACE(file);
    auto kernel = parseFile(file);
    ASSERT_TRUE(kernel);
    kiln::driver::Compilation c;
    auto err = kiln::driver::compile(*kernel, gpuKnobs(), c, kiln::driver::Stage::Report);
    ASSERT_FALSE(err.has_value()) << *err;
    EXPECT_NE(c.object.find(".visible .entry kiln_phase0("), std::string::npos);
    expectPrecisePtx(c.object, file);
    const nlohmann::json& r = c.report;
    EXPECT_EQ(r["target"]["name"], "nvptx");
    EXPECT_EQ(r["target"]["arch"], "sm_90a");
    EXPECT_FALSE(r["target"]["ptx_version"].get<std::string>().empty());
    ASSERT_EQ(r["gpu"]["kernels"].size(), 1u);
    const nlohmann::json& k = r["gpu"]["kernels"][0];
    const int64_t programs = k["programs"], perThread = k["programs_per_thread"], threads = k["threads"];
    const int64_t grid = k["grid"], block = k["block"], perProgram = k["threads_per_program"];
    EXPECT_EQ(programs, r["phases"][0]["domain"]["programs"].get<int64_t>());
    // Every example runs a program per thread block (block realization) or spreads its lanes
    // over a warp segment of W threads.
    if (k["realization"] == "block") {
      EXPECT_EQ(k["lanes"], "block");
      EXPECT_EQ(perProgram, r["phases"][0]["block"]["threads"].get<int64_t>());
      EXPECT_EQ(block, perProgram);
      EXPECT_EQ(grid, programs);
    } else {
      EXPECT_EQ(k["lanes"], "threads") << k["lanes_not_spread_because"];
      EXPECT_EQ(perProgram, r["knobs"]["packet_width"].get<int64_t>());
      EXPECT_FALSE(r["phases"][0]["block_not_taken_because"].get<std::string>().empty());
    }
    EXPECT_EQ(threads, (programs + perThread - 1) / perThread * perProgram);
    // Lanes fill whole warp segments; a block may end in a part of a warp (softmax.tile's 33
    // columns: 4 x 33 threads).
    if (k["realization"] != "block") {
      EXPECT_EQ(block % 32, 0);
    }
    EXPECT_GE(grid * block, threads);
    EXPECT_LT((grid - 1) * block, threads);
    ASSERT_TRUE(k["ptx"].is_object());
    EXPECT_GT(k["ptx"]["virtual_registers"].value(".b32", 0), 0);
    EXPECT_TRUE(r["gpu"]["functions_called"].empty()) << "the program is inlined into its entry";
  }
}

// The plan for nvptx never splits a W-lane access into x86 register pieces (whatever `isa`
// says), so W = 16 with isa=avx2 spreads over threads too; local_lanes=1 says why it does not.
TEST(Gpu, LanesSpreadWhateverTheIsaAndSayWhyWhenNot) {
  auto kernel = parseFile(std::string(KILN_SOURCE_DIR) + "/examples/elementwise.tile");
  ASSERT_TRUE(kernel);
  kiln::plan::Knobs avx2 = gpuKnobs();
  ASSERT_FALSE(avx2.setAssignment("isa=avx2").has_value());
  ASSERT_FALSE(avx2.setAssignment("gpu_realization=lanes").has_value());
  kiln::driver::Compilation c;
  auto err = kiln::driver::compile(*kernel, avx2, c, kiln::driver::Stage::Report);
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(c.report["gpu"]["kernels"][0]["lanes"], "threads") << c.report["gpu"]["kernels"][0];
  EXPECT_EQ(c.object.find("asm"), std::string::npos);
  kiln::plan::Knobs one = gpuKnobs();
  ASSERT_FALSE(one.setAssignment("local_lanes=1").has_value());
  ASSERT_FALSE(one.setAssignment("packet_width=8").has_value());
  kiln::driver::Compilation p;
  err = kiln::driver::compile(*kernel, one, p, kiln::driver::Stage::Report);
  ASSERT_FALSE(err.has_value()) << *err;
  const nlohmann::json& k = p.report["gpu"]["kernels"][0];
  EXPECT_EQ(k["lanes"], "registers");
  EXPECT_NE(k["lanes_not_spread_because"].get<std::string>().find("local_lanes=1"), std::string::npos);
  EXPECT_EQ(k["programs_per_thread"], 8);
  EXPECT_EQ(k["threads"], (k["programs"].get<int64_t>() + 7) / 8);
  expectPrecisePtx(p.object, "local_lanes=1");
}

// The block realization (docs/gpu.md, "Thread blocks"): a GEMM sized for the GPU by the library
// runs a program per block of 256 threads, each with its register tile of accumulators, the
// operands staged in shared memory (double-buffered over the K loop) and read as 4-wide
// vectors; the report states the plan and the PTX declares what it says. A program with no block
// form keeps the lane realization and says why; forcing the knob there is an error naming it.
// A library kernel built for an H200 (132 SMs) and compiled for it: its IR in `k`.
void compileForGpu(const char* name, const char* shape, std::unique_ptr<kiln::ir::Kernel>& k,
                   kiln::driver::Compilation& c, std::map<std::string, std::string> options = {}) {
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel({name, shape, options, {true, 132}}, k));
  auto err = kiln::driver::compile(*k, gpuKnobs(), c, kiln::driver::Stage::Report);
  ASSERT_FALSE(err.has_value()) << *err;
}

TEST(Gpu, GemmRunsAProgramPerThreadBlockWithStagedOperands) {
  std::unique_ptr<kiln::ir::Kernel> k;
  kiln::driver::Compilation c;
  ASSERT_NO_FATAL_FAILURE(compileForGpu("gemm", "300,200,129", k, c));
  const nlohmann::json& b = c.report["phases"][0]["block"];
  EXPECT_EQ(c.report["phases"][0]["realization"], "block");
  EXPECT_EQ(b["threads"], 256);
  EXPECT_EQ(b["grid"], nlohmann::json({16, 16}));
  EXPECT_EQ(b["rows"]["extent"], 32);  // 32x32x16: 70 blocks for 132 SMs
  EXPECT_EQ(b["rows"]["microtile"], 2);
  ASSERT_EQ(b["columns"].size(), 1u);
  EXPECT_EQ(b["columns"][0]["extent"], 32);
  EXPECT_EQ(b["columns"][0]["microtile"], 2);
  EXPECT_EQ(b["dynamic_shared"], false);
  ASSERT_EQ(b["stages"].size(), 2u);
  for (const nlohmann::json& s : b["stages"]) {
    EXPECT_EQ(s["buffers"], 2);
    EXPECT_EQ(s["shape"], nlohmann::json({16, 36}));  // K rows of 32 outputs, padded by 4
  }
  EXPECT_EQ(b["double_buffered_loops"], 1);
  const nlohmann::json& g = c.report["gpu"]["kernels"][0];
  EXPECT_EQ(g["block"], 256);
  EXPECT_EQ(g["grid"], 70);
  EXPECT_EQ(g["ptx"]["shared_bytes"], b["shared_bytes"]);
  EXPECT_EQ(g["ptx"]["local_bytes"], 0);
  EXPECT_NE(c.object.find(".maxntid 256"), std::string::npos);
  EXPECT_NE(c.object.find("bar.sync"), std::string::npos);
  EXPECT_NE(c.object.find("ld.shared.v2"), std::string::npos);  // groups of 2 in a 2 x 2 tile
  expectPrecisePtx(c.object, "block gemm");

  // A large GEMM: 128 x 128 outputs per block, 8 x 8 per thread, K steps of 8, 4-wide reads.
  ASSERT_NO_FATAL_FAILURE(compileForGpu("gemm", "4096,4096,4096", k, c));
  EXPECT_EQ(c.report["phases"][0]["block"]["rows"]["microtile"], 8);
  EXPECT_EQ(c.report["phases"][0]["block"]["columns"][0]["microtile"], 8);
  EXPECT_EQ(c.report["gpu"]["kernels"][0]["grid"], 1024);
  EXPECT_NE(c.object.find("ld.shared.v4"), std::string::npos);
  size_t fmas = 0;
  for (size_t at = c.object.find("fma.rn.f32"); at != std::string::npos; at = c.object.find("fma.rn.f32", at + 1))
    ++fmas;
  EXPECT_EQ(fmas, 8u * 64u);  // one K step of 8, unrolled: 64 accumulators each

  // A one-row GEMM streams B: its K is split into chunks (programs of their own) for 4 blocks
  // per SM, summed in chunk order by a second phase.
  ASSERT_NO_FATAL_FAILURE(compileForGpu("gemm", "1,4096,4096", k, c));
  ASSERT_EQ(c.report["gpu"]["kernels"].size(), 2u);
  EXPECT_GE(c.report["gpu"]["kernels"][0]["programs"].get<int64_t>(), 4 * 132);
  EXPECT_EQ(c.report["gpu"]["kernels"][1]["programs"], 4096 / 32);

  // No block form (a pipeline op): the lanes, and why.
  auto prefill = parseFile(std::string(KILN_SOURCE_DIR) + "/tests/ir/pipeline_gemm.tile");
  ASSERT_TRUE(prefill);
  auto err = kiln::driver::compile(*prefill, gpuKnobs(), c, kiln::driver::Stage::Report);
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(c.report["phases"][0]["realization"], "lanes");
  const std::string why = c.report["phases"][0]["block_not_taken_because"];
  EXPECT_NE(why.find("pipeline_gemm.tile:"), std::string::npos) << why;
  EXPECT_NE(why.find("pipeline"), std::string::npos) << why;
  kiln::plan::Knobs forced = gpuKnobs();
  ASSERT_FALSE(forced.setAssignment("gpu_realization=block").has_value());
  err = kiln::driver::compile(*prefill, forced, c, kiln::driver::Stage::Report);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("gpu_realization=block"), std::string::npos) << *err;
}

// PTX above gpu_max_ptx_kb is an error naming the knobs that unroll (a 7.9 MB PTX of the fuzz
// grid's max_unrolled_tile_elements=256 with local_lanes=1 had not loaded after 6 minutes); at
// the default limit the same kernel compiles.
TEST(Gpu, PtxAboveItsLimitIsAnErrorNamingTheKnobs) {
  kiln::ir::DiagEngine diag;
  auto k = kiln::ir::parseKernel(
      "kernel @scale(%x: view<f32>[64, 64], %y: view<f32>[64, 64]) {\n"
      "  parallel (%i) in (64) {\n"
      "    %v = load %x[%i, 0] as [_, c:64] : f32[c:64]\n"
      "    %s = const 2 : f32\n"
      "    %w = mul %v, %s : f32[c:64]\n"
      "    store %w, %y[%i, 0] as [_, c:64]\n"
      "  }\n"
      "}\n",
      "scale.tile", diag);
  ASSERT_TRUE(k) << diag.str();
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, gpuKnobs(), c, kiln::driver::Stage::Report).has_value());
  kiln::plan::Knobs small = gpuKnobs();
  ASSERT_FALSE(small.setAssignment("gpu_max_ptx_kb=1").has_value());
  ASSERT_FALSE(small.setAssignment("local_lanes=1").has_value());
  kiln::driver::Compilation d;
  auto err = kiln::driver::compile(*k, small, d, kiln::driver::Stage::Report);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("above gpu_max_ptx_kb=1"), std::string::npos) << *err;
  EXPECT_NE(err->find("max_unrolled_tile_elements=64 elements in each thread (local_lanes=1"), std::string::npos)
      << *err;
  EXPECT_TRUE(small.set("gpu_max_ptx_kb", "0").has_value());  // out of range
}

// An mma that contracts every dim (a scalar result: a dot product of two tiles) has no rows or
// columns for the block form: the program keeps the lanes and the report says why (the block
// planner read the result's last dim of an empty list: kiln fuzz --seed 41, program 1).
TEST(Gpu, ScalarMmaKeepsTheLanesAndSaysWhy) {
  kiln::driver::Compilation c;
  ASSERT_NO_FATAL_FAILURE(
      compileGpuText("kernel @dot(%a: view<f32>[3, 16], %b: view<f32>[3, 16], %y: view<f32>[4]) {\n"
                     "  parallel (%p) in (4) {\n"
                     "    %x = load %a[0, 0] as [r:3, c:16] fill 0 : f32[r:3, c:16]\n"
                     "    %w = load %b[0, 0] as [r:3, c:16] fill 0 : f32[r:3, c:16]\n"
                     "    %z = const 0 : f32\n"
                     "    %d = mma %x, %w, %z contract [c, r] partitions(16) : f32\n"
                     "    store %d, %y[%p] as [_]\n"
                     "  }\n"
                     "}\n",
                     "dot.tile", c));
  EXPECT_EQ(c.report["phases"][0]["realization"], "lanes");
  const std::string why = c.report["phases"][0]["block_not_taken_because"];
  EXPECT_NE(why.find("dot.tile:6:"), std::string::npos) << why;
  EXPECT_NE(why.find("scalar"), std::string::npos) << why;
}

// Reductions in the block realization: the GPU's row kernels (unordered_tree(16): 16 threads per
// row fold a partition each) run a program per block with a scratch area for the folds; an
// ordered reduction takes one partition per line (one thread folds it, as the IR says).
TEST(Gpu, RowKernelsRunAProgramPerThreadBlock) {
  // (softmax whole: with fewer rows than SMs its rows are otherwise split, see below.)
  for (const char* name : {"softmax", "rmsnorm", "layernorm"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<kiln::ir::Kernel> k;
    kiln::driver::Compilation c;
    const std::map<std::string, std::string> whole = std::string(name) == "softmax"
                                                         ? std::map<std::string, std::string>{{"parts", "off"}}
                                                         : std::map<std::string, std::string>{};
    ASSERT_NO_FATAL_FAILURE(compileForGpu(name, "33,5000", k, c, whole));
    const nlohmann::json& b = c.report["phases"][0]["block"];
    EXPECT_EQ(c.report["phases"][0]["realization"], "block");
    EXPECT_EQ(b["threads"], 512);  // 33 blocks, fewer than the SMs: up to 512 threads
    // 64K registers over 512 threads: 128 each (255 let ptxas take 170, past what launches).
    EXPECT_NE(c.object.find(".maxntid 512\n.maxnreg 128"), std::string::npos);
    EXPECT_EQ(b["columns"][0]["extent"], 1024);  // column chunks of 1024
    EXPECT_GE(b["shared_bytes"].get<int64_t>(), 1024 * 4);
    EXPECT_NE(kiln::ir::print(*k).find("unordered_tree(16)"), std::string::npos);
    // A partition's fold through shared memory (64 contributions each) reads 8 of them before
    // it folds them, so that a trip waits for one round trip, not one per contribution.
    EXPECT_GE(longestRun(c.object, "ld.shared.b32"), 8) << c.object;
    expectPrecisePtx(c.object, name);
  }
  // softmax and layernorm carry per-column running values across their chunks on the GPU
  // (element-wise: no reduction, so no barrier, inside the loop), reduced once after it
  // (softmax in two passes; three below).
  for (const char* name : {"softmax", "layernorm"}) {
    SCOPED_TRACE(name);
    std::unique_ptr<kiln::ir::Kernel> k;
    std::map<std::string, std::string> whole;
    if (std::string(name) == "softmax") whole = {{"parts", "off"}, {"passes", "2"}};
    ASSERT_FALSE(kiln::kernels::buildLibraryKernel({name, "33,5000", whole, {true, 132}}, k));
    const std::string text = kiln::ir::print(*k);
    int reductions = 0;
    for (size_t at = text.find("reduce "); at != std::string::npos; at = text.find("reduce ", at + 1)) ++reductions;
    EXPECT_EQ(reductions, 2) << text;  // softmax: max and sum; layernorm: sum and squares
    EXPECT_NE(text.find(std::string(name) == "softmax" ? "%l_scaled" : "%row_sq"), std::string::npos);
  }
  // softmax's default on a GPU: three passes, each loop element-wise (the max per column; the
  // sum of exps against the row's max per column; the write), one exp an element in the second
  // and one in the third, two reductions between them.
  {
    std::unique_ptr<kiln::ir::Kernel> k;
    ASSERT_FALSE(kiln::kernels::buildLibraryKernel({"softmax", "33,5000", {{"parts", "off"}}, {true, 132}}, k));
    const std::string text = kiln::ir::print(*k);
    auto count = [&](const std::string& what) {
      int n = 0;
      for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
      return n;
    };
    EXPECT_EQ(count("serial "), 3) << text;
    EXPECT_EQ(count("reduce "), 2) << text;
    EXPECT_EQ(count(" exp "), 2) << text;
    EXPECT_NE(text.find("%max_safe"), std::string::npos) << text;
  }
  // The CPU's build of the same request keeps ascending sums.
  std::unique_ptr<kiln::ir::Kernel> cpu;
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel({"softmax", "33,5000", {}, {}}, cpu));
  EXPECT_EQ(kiln::ir::print(*cpu).find("unordered_tree"), std::string::npos);
  auto rms = parseFile(std::string(KILN_SOURCE_DIR) + "/examples/rmsnorm.tile");
  ASSERT_TRUE(rms);
  kiln::driver::Compilation c;
  auto err = kiln::driver::compile(*rms, gpuKnobs(), c, kiln::driver::Stage::Report);
  ASSERT_FALSE(err.has_value()) << *err;
  EXPECT_EQ(c.report["phases"][0]["realization"], "block");
}

// softmax with at most a quarter as many rows as SMs (parts auto): each row in parts of one
// 256-column chunk over programs, two phases of a block each. More rows, a runtime row count or
// rows of one chunk (1024 columns) stay one phase.
TEST(Gpu, SoftmaxSplitsFewLongRowsOverTheSms) {
  struct Case {
    const char* shape;
    int64_t chunk, parts;
  };
  for (const Case& t : {Case{"33,5000", 256, 20}, Case{"5,7000", 256, 28}, Case{"9,12345", 256, 49},
                        Case{"3,8191", 256, 32}, Case{"1,100000", 256, 196}}) {  // 391 chunks: parts of 2
    SCOPED_TRACE(t.shape);
    std::unique_ptr<kiln::ir::Kernel> k;
    kiln::driver::Compilation c;
    ASSERT_NO_FATAL_FAILURE(compileForGpu("softmax", t.shape, k, c));
    ASSERT_EQ(c.report["phases"].size(), 2u);
    const int64_t rows = std::stoll(std::string(t.shape).substr(0, std::string(t.shape).find(',')));
    for (const nlohmann::json& ph : c.report["phases"]) {
      ASSERT_EQ(ph["realization"], "block") << ph.dump();
      EXPECT_EQ(ph["block"]["columns"][0]["extent"], t.chunk);
      EXPECT_EQ(ph["block"]["threads"], 256);
    }
    const std::string text = kiln::ir::print(*k);
    EXPECT_NE(text.find(fmt::format("%part_m: view<f32>[{}, {}]", rows, t.parts)), std::string::npos) << text;
    expectPrecisePtx(c.object, "softmax");
  }
  for (const char* shape : {"34,5000", "33,1024"}) {
    std::unique_ptr<kiln::ir::Kernel> k;
    ASSERT_FALSE(kiln::kernels::buildLibraryKernel({"softmax", shape, {}, {true, 132}}, k));
    EXPECT_EQ(kiln::ir::print(*k).find("part_m"), std::string::npos) << shape;
  }
  std::unique_ptr<kiln::ir::Kernel> k;
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel({"softmax", "5,7000", {{"runtime-rows", ""}}, {true, 132}}, k));
  EXPECT_EQ(kiln::ir::print(*k).find("part_m"), std::string::npos);
  // A CPU keeps its rows whole unless asked.
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel({"softmax", "5,7000", {}, {}}, k));
  EXPECT_EQ(kiln::ir::print(*k).find("part_m"), std::string::npos);
}

// softmax's rows of at most 3072 columns that chunks would cut, or that a count of threads not
// a power of two would hold, are one tile on a GPU, padded (-inf read past the end) to the next
// power of two up to 1024, else to a multiple of 256: one exp per element, no loop over chunks.
// Rows in parts, longer rows and CPUs keep their chunks.
TEST(Gpu, SoftmaxTakesShortRowsWholeAndPadded) {
  struct Case {
    const char* shape;
    int64_t width;  // 0: chunks of 1024 columns carried per column
  };
  for (const Case& t : {Case{"1000,1000", 1024}, Case{"17,777", 1024}, Case{"100,100", 128}, Case{"64,3000", 3072},
                        Case{"2048,2048", 2048}, Case{"300,1500", 1536}, Case{"512,768", 768}, Case{"128,4096", 0},
                        Case{"64,3073", 0}}) {
    SCOPED_TRACE(t.shape);
    std::unique_ptr<kiln::ir::Kernel> k;
    kiln::driver::Compilation c;
    ASSERT_NO_FATAL_FAILURE(compileForGpu("softmax", t.shape, k, c));
    const std::string text = kiln::ir::print(*k);
    const int64_t cols = std::stoll(std::string(t.shape).substr(std::string(t.shape).find(',') + 1));
    ASSERT_EQ(c.report["phases"].size(), 1u);
    EXPECT_EQ(c.report["phases"][0]["realization"], "block");
    if (t.width) {
      EXPECT_EQ(text.find("serial"), std::string::npos) << text;
      EXPECT_EQ(c.report["phases"][0]["block"]["columns"][0]["extent"], t.width);
      const std::string read = fmt::format("as [r:1, c:{}]{}", t.width, t.width > cols ? " fill -inf" : " fill 0");
      EXPECT_NE(text.find(read), std::string::npos) << text;
    } else {  // chunks in three passes (RowKernelsRunAProgramPerThreadBlock)
      EXPECT_NE(text.find("%max_safe"), std::string::npos) << text;
      EXPECT_EQ(c.report["phases"][0]["block"]["columns"][0]["extent"], 1024);
    }
    expectPrecisePtx(c.object, t.shape);
  }
  // Few rows: in parts (above); a CPU: rows of up to 1024 columns whole, unpadded.
  std::unique_ptr<kiln::ir::Kernel> k;
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel({"softmax", "8,3000", {}, {true, 132}}, k));
  EXPECT_NE(kiln::ir::print(*k).find("part_m"), std::string::npos);
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel({"softmax", "17,777", {}, {}}, k));
  EXPECT_NE(kiln::ir::print(*k).find("as [r:1, c:777] fill 0"), std::string::npos) << kiln::ir::print(*k);
}

// A GQA group of 3 or 7 query heads (rows not a power of two): the rows over as many threads
// (3 x 32, 7 x 32: whole warps), not one row of 32 threads. A grid of at most a block per SM
// states its threads' registers (.maxnreg 255 here), without which ptxas held the 96-thread
// blocks to 168; a larger grid leaves them to ptxas.
TEST(Gpu, RowsOfAnyExtentSpreadOverWholeWarps) {
  struct Case {
    const char* shape;
    int64_t rows, registers;
  };
  for (const Case& t : {Case{"1,6,2,1,2053,80,96", 3, 255}, Case{"2,28,4,1,3001,128,128", 7, 0}}) {
    SCOPED_TRACE(t.shape);
    std::unique_ptr<kiln::ir::Kernel> k;
    kiln::driver::Compilation c;
    ASSERT_NO_FATAL_FAILURE(compileForGpu("attention", t.shape, k, c, {{"mask", "none"}}));
    const nlohmann::json& b = c.report["phases"][0]["block"];
    ASSERT_EQ(c.report["phases"][0]["realization"], "block");
    EXPECT_EQ(b["grid"], nlohmann::json({t.rows, 32}));
    EXPECT_EQ(b["threads"], t.rows * 32);
    EXPECT_EQ(b["rows"]["microtile"], 1);
    EXPECT_EQ(b["registers"], t.registers);
    const std::string bound = fmt::format(".maxntid {}\n", t.rows * 32);
    EXPECT_NE(c.object.find(t.registers ? bound + ".maxnreg 255" : bound + "{"), std::string::npos);
    expectPrecisePtx(c.object, t.shape);
  }
  // The knob gpu_threads caps it (32: a row of 32 threads, as before).
  std::unique_ptr<kiln::ir::Kernel> k;
  ASSERT_FALSE(
      kiln::kernels::buildLibraryKernel({"attention", "1,6,2,1,2053,80,96", {{"mask", "none"}}, {true, 132}}, k));
  kiln::plan::Knobs knobs = gpuKnobs();
  knobs.gpu_threads = 32;
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, knobs, c, kiln::driver::Stage::Report).has_value());
  EXPECT_EQ(c.report["phases"][0]["block"]["grid"], nlohmann::json({1, 32}));
}

// Attention in the block realization: rows (g, m) of stacked heads, two column dims (the keys n
// of the scores, the value columns dv of the accumulator), Q staged once before the KV loop, K
// and V staged per KV block, P staged from the threads' registers; the stages pass 48 KB, so
// the shared memory is dynamic: an extern array in the PTX and its bytes in the launch.
TEST(Gpu, AttentionRunsAProgramPerThreadBlock) {
  std::unique_ptr<kiln::ir::Kernel> k;
  kiln::driver::Compilation c;
  ASSERT_NO_FATAL_FAILURE(compileForGpu("attention", "1,32,8,512,512,128,128", k, c));
  const nlohmann::json& ph = c.report["phases"][0];
  ASSERT_EQ(ph["realization"], "block") << ph["block_not_taken_because"];
  const nlohmann::json& b = ph["block"];
  // 256 programs (a block per SM): threads for a full 64-element microtile of the largest mma
  // output, the accumulator [64 rows, 128 value columns]: 128 threads, 16 x 8.
  EXPECT_EQ(b["threads"], 128);
  EXPECT_EQ(b["rows"]["dims"], nlohmann::json::parse(R"([{"dim":"g","extent":4},{"dim":"m","extent":16}])"));
  EXPECT_EQ(b["rows"]["microtile"], 4);
  ASSERT_EQ(b["columns"].size(), 2u);
  EXPECT_EQ(b["columns"][0]["dim"], "n");
  EXPECT_EQ(b["columns"][1]["dim"], "dv");
  EXPECT_EQ(b["columns"][1]["microtile"], 16);  // 128 value columns over 8 threads
  {
    // The knob gpu_threads sets the most threads instead (256: the old blocks); a grid of fewer
    // blocks than SMs keeps 256 threads (small prefill: 2 blocks).
    kiln::plan::Knobs t256 = gpuKnobs();
    ASSERT_FALSE(t256.setAssignment("gpu_threads=256").has_value());
    kiln::driver::Compilation c256;
    ASSERT_FALSE(kiln::driver::compile(*k, t256, c256, kiln::driver::Stage::Report).has_value());
    EXPECT_EQ(c256.report["phases"][0]["block"]["threads"], 256);
    auto bad = t256.setAssignment("gpu_threads=96");
    ASSERT_TRUE(bad.has_value());
    EXPECT_NE(bad->find("gpu_threads"), std::string::npos) << *bad;
    std::unique_ptr<kiln::ir::Kernel> small;
    kiln::driver::Compilation cs;
    ASSERT_NO_FATAL_FAILURE(compileForGpu("attention", "1,4,2,32,65,32,32", small, cs));
    EXPECT_EQ(cs.report["gpu"]["kernels"][0]["grid"], 2);
    EXPECT_EQ(cs.report["phases"][0]["block"]["threads"], 256);
  }
  std::map<std::string, std::string> from;
  for (const nlohmann::json& s : b["stages"]) from[s["value"]] = s["from"];
  // K and V (double-buffered, f32, fill 0) are copied by cp.async; Q (read once) through
  // registers; P from each thread's registers.
  EXPECT_EQ(from, (std::map<std::string, std::string>{
                      {"%qt", "load"}, {"%kt", "cp.async"}, {"%vt", "cp.async"}, {"%p", "registers"}}));
  // K (keys one per thread along n: groups of one) stays K-inner: [n, d] lines of an odd number
  // of 16-byte units (132 floats), filled by 16-byte copies, read 4 d steps per vector; the
  // others are d (or n) lines of their output side.
  for (const nlohmann::json& s : b["stages"]) {
    const bool inner = s["value"] == "%kt";
    EXPECT_EQ(s["layout"].get<std::string>().rfind("k inner", 0) == 0, inner) << s;
    if (inner) {
      EXPECT_EQ(s["shape"], nlohmann::json({32, 132}));
    }
  }
  EXPECT_NE(c.object.find("cp.async.cg.shared.global"), std::string::npos);
  EXPECT_EQ(b["mma_steps_per_trip"][1]["steps"].get<int64_t>() % 4, 0);
  EXPECT_NE(c.object.find("cp.async.ca.shared.global"), std::string::npos);
  EXPECT_NE(c.object.find("cp.async.wait_group"), std::string::npos);
  EXPECT_NE(c.object.find("cp.async.commit_group"), std::string::npos);
  {
    // gpu_async_copy=off: the same stages through registers, no cp.async.
    kiln::plan::Knobs off = gpuKnobs();
    ASSERT_FALSE(off.setAssignment("gpu_async_copy=off").has_value());
    kiln::driver::Compilation co;
    ASSERT_FALSE(kiln::driver::compile(*k, off, co, kiln::driver::Stage::Report).has_value());
    for (const nlohmann::json& s : co.report["phases"][0]["block"]["stages"]) EXPECT_NE(s["from"], "cp.async");
    EXPECT_EQ(co.object.find("cp.async"), std::string::npos);
    ASSERT_TRUE(off.setAssignment("gpu_async_copy=maybe").has_value());
  }
  {
    // 64 keys per block: the stages pass two blocks' share of an SM (112 KB) even single-
    // buffered, so the block takes what one block per SM may (227 KB), double-buffered, and its
    // threads every register. gpu_blocks_per_sm=2 keeps the share: no block form, and why.
    std::unique_ptr<kiln::ir::Kernel> wide;
    kiln::driver::Compilation cw;
    ASSERT_NO_FATAL_FAILURE(compileForGpu("attention", "1,32,8,512,512,128,128", wide, cw, {{"block", "16x64"}}));
    const nlohmann::json& ph64 = cw.report["phases"][0];
    ASSERT_EQ(ph64["realization"], "block") << ph64["block_not_taken_because"];
    const int64_t shared = ph64["block"]["shared_bytes"];
    EXPECT_GT(shared, 112 * 1024);
    EXPECT_LE(shared, 227 * 1024);
    EXPECT_EQ(ph64["block"]["shared_budget"], 227 * 1024);
    EXPECT_EQ(b["shared_budget"], 112 * 1024);
    EXPECT_EQ(cw.report["gpu"]["kernels"][0]["dynamic_shared_bytes"], shared);
    EXPECT_EQ(ph64["block"]["registers"], 255);
    for (const nlohmann::json& s : ph64["block"]["stages"])
      if (s["value"] == "%kt" || s["value"] == "%vt") {
        EXPECT_EQ(s["buffers"], 2) << s;
      }
    kiln::plan::Knobs two = gpuKnobs();
    ASSERT_FALSE(two.setAssignment("gpu_blocks_per_sm=2").has_value());
    kiln::driver::Compilation c2;
    ASSERT_FALSE(kiln::driver::compile(*wide, two, c2, kiln::driver::Stage::Report).has_value());
    EXPECT_EQ(c2.report["phases"][0]["realization"], "lanes");
    const std::string why = c2.report["phases"][0]["block_not_taken_because"];
    EXPECT_NE(why.find("bytes of shared memory (a block's: 114688)"), std::string::npos) << why;
    // gpu_blocks_per_sm=1 gives the 64-row x 32-key block (which fits two blocks' share) the
    // same stages in one block's memory, with every register.
    kiln::plan::Knobs one = gpuKnobs();
    ASSERT_FALSE(one.setAssignment("gpu_blocks_per_sm=1").has_value());
    kiln::driver::Compilation c1;
    ASSERT_FALSE(kiln::driver::compile(*k, one, c1, kiln::driver::Stage::Report).has_value());
    EXPECT_EQ(c1.report["phases"][0]["block"]["shared_bytes"], b["shared_bytes"]);
    EXPECT_EQ(b["registers"], 0);  // two blocks per SM: ptxas's choice
    EXPECT_EQ(c1.report["phases"][0]["block"]["registers"], 255);
    auto bad = one.setAssignment("gpu_blocks_per_sm=3");
    ASSERT_TRUE(bad.has_value());
    EXPECT_NE(bad->find("gpu_blocks_per_sm"), std::string::npos) << *bad;
  }
  EXPECT_EQ(b["dynamic_shared"], true);
  const nlohmann::json& g = c.report["gpu"]["kernels"][0];
  EXPECT_EQ(g["dynamic_shared_bytes"], b["shared_bytes"]);
  EXPECT_GT(g["dynamic_shared_bytes"].get<int64_t>(), 48 * 1024);
  EXPECT_EQ(g["ptx"]["local_bytes"], 0);
  EXPECT_NE(c.object.find(".extern .shared .align 16"), std::string::npos);
  // The row maximum and sum over the keys: 16 threads of a row in one warp, by shuffles.
  EXPECT_EQ(b["shuffle_reductions"].size(), 2u);
  EXPECT_NE(c.object.find("shfl.sync.idx.b32"), std::string::npos);
  // q.k^T walks D = 128 in trips of several steps (reads ahead of products).
  ASSERT_EQ(b["mma_steps_per_trip"].size(), 2u);
  EXPECT_GT(b["mma_steps_per_trip"][0]["steps"].get<int64_t>(), 1);
  expectPrecisePtx(c.object, "block attention");
  // Decode: few programs, so the KV sequence is split to fill the multiprocessors; both phases
  // (the chunks and their merge) run as blocks.
  ASSERT_NO_FATAL_FAILURE(compileForGpu("attention", "1,32,8,1,4096,128,128", k, c));
  ASSERT_EQ(c.report["gpu"]["kernels"].size(), 2u);
  EXPECT_GE(c.report["gpu"]["kernels"][0]["programs"].get<int64_t>(), 132);
  for (const nlohmann::json& e : c.report["gpu"]["kernels"]) EXPECT_EQ(e["realization"], "block");
  // The merge is spread over the SMs too: 8 row blocks of 4 rows, 16 programs of 8 value
  // columns each (a warp of threads).
  std::map<std::string, std::string> choices;
  ASSERT_FALSE(kiln::kernels::libraryChoices({"attention", "1,32,8,1,4096,128,128", {}, {true, 132}}, choices));
  EXPECT_EQ(choices["merge_columns"], "8 (16 programs per row block) (auto)");
  EXPECT_EQ(c.report["gpu"]["kernels"][1]["programs"], 128);
  {
    // gpu_early_copies=on: the KV loop's first cp.async copies are issued before the program
    // stages Q (its origin is known from the start), so both are in flight together.
    EXPECT_TRUE(c.report["phases"][0]["block"]["early_copies"].empty());  // off by default
    kiln::plan::Knobs early = gpuKnobs();
    ASSERT_FALSE(early.setAssignment("gpu_early_copies=on").has_value());
    kiln::driver::Compilation ce;
    ASSERT_FALSE(kiln::driver::compile(*k, early, ce, kiln::driver::Stage::Report).has_value());
    EXPECT_EQ(ce.report["phases"][0]["block"]["early_copies"].size(), 1u);
    const std::string phase0 = ce.object.substr(0, ce.object.find(".entry kiln_phase1"));
    const std::string plain = c.object.substr(0, c.object.find(".entry kiln_phase1"));
    EXPECT_LT(phase0.find("cp.async.ca.shared.global"), phase0.find("st.shared"));
    EXPECT_GT(plain.find("cp.async.ca.shared.global"), plain.find("st.shared"));
    expectPrecisePtx(ce.object, "block decode, early copies");
  }
  // The merge walks the chunks in batches of trips, each batch's partials loaded together.
  const nlohmann::json& ahead = c.report["phases"][1]["block"]["batched_loads"];
  ASSERT_EQ(ahead.size(), 3u);
  for (const nlohmann::json& a : ahead) EXPECT_GT(a["trips_per_batch"].get<int64_t>(), 1);
  expectPrecisePtx(c.object, "block decode");
}

// Attention over KV caches as thread blocks: the V tile masked past the cache's length is
// staged with its select applied as its elements are put (masked_by), the query tile read by
// both loops of a decode is one stage, lengths and page indices are words every thread holds;
// packed (varlen) queries run in blocks of one sequence's queries, then a phase puts the rows
// in token order.
TEST(Gpu, KvCacheAttentionRunsAsThreadBlocks) {
  struct Case {
    const char* shape;
    std::map<std::string, std::string> options;
    size_t entries;
  };
  const std::vector<Case> cases = {
      {"5,8,2,1,1024,64,64", {{"kv-cache", "dense"}}, 2},
      {"5,8,2,1,1024,64,64", {{"kv-cache", "paged"}, {"page", "64"}, {"pages", "83"}}, 2},
      {"5,8,2,64,1024,64,64", {{"kv-cache", "dense"}, {"mask", "causal"}}, 2},
      {"4,32,4,1024,512,64,64", {{"kv-cache", "dense"}, {"varlen", "true"}}, 2},  // 256 queries a sequence
      {"5,8,2,80,1024,64,64",
       {{"kv-cache", "paged"}, {"page", "64"}, {"pages", "83"}, {"varlen", "true"}, {"block", "16x64"}},
       2},
      {"5,8,2,80,1024,64,64", {{"kv-cache", "dense"}, {"varlen", "true"}}, 1}};  // 16: one token a program
  for (const Case& cs : cases) {
    std::unique_ptr<kiln::ir::Kernel> k;
    kiln::driver::Compilation c;
    ASSERT_NO_FATAL_FAILURE(compileForGpu("attention", cs.shape, k, c, cs.options));
    const std::string label = std::string(cs.shape) + " " + cs.options.at("kv-cache") +
                              (cs.options.count("varlen") ? " varlen" : "") +
                              (cs.options.count("block") ? " " + cs.options.at("block") : "");
    ASSERT_EQ(c.report["gpu"]["kernels"].size(), cs.entries) << label;
    for (const nlohmann::json& ph : c.report["phases"])
      EXPECT_EQ(ph["realization"], "block") << label << ": " << ph["block_not_taken_because"];
    std::set<std::string> masked, staged;
    for (const nlohmann::json& s : c.report["phases"][0]["block"]["stages"]) {
      staged.insert(s["value"].get<std::string>());
      if (!s["masked_by"].is_null())
        masked.insert(s["value"].get<std::string>() + "<-" + s["masked_by"].get<std::string>());
    }
    EXPECT_TRUE(masked.count("%vt.1<-%vt_masked") || masked.count("%vt<-%vt_masked")) << label;
    EXPECT_TRUE(staged.count("%qt")) << label;
    if (label == "5,8,2,1,1024,64,64 dense") {
      // The full blocks' loop and the tail's, one after the other, share their stages' memory,
      // which leaves room to double-buffer both: K and V (the tail's V masked) by cp.async.
      std::map<std::string, nlohmann::json> st;
      for (const nlohmann::json& s : c.report["phases"][0]["block"]["stages"]) st[s["value"]] = s;
      EXPECT_EQ(st["%kt"]["offset_bytes"], st["%kt.1"]["offset_bytes"]);
      EXPECT_EQ(st["%vt"]["offset_bytes"], st["%vt.1"]["offset_bytes"]);
      EXPECT_NE(st["%qt"]["offset_bytes"], st["%kt"]["offset_bytes"]);
      for (const char* v : {"%kt", "%vt", "%kt.1", "%vt.1"}) EXPECT_EQ(st[v]["from"], "cp.async") << v;
      EXPECT_EQ(c.report["phases"][0]["block"]["double_buffered_loops"], 2);
    }
    expectPrecisePtx(c.object, label);
    if (cs.entries == 2 && cs.options.count("varlen")) {
      EXPECT_EQ(c.report["gpu"]["kernels"][1]["programs"], k->params[0]->type.dims[0].extent)
          << label;  // a program per token
      EXPECT_EQ(c.report["phases"][0]["block"]["rows"]["dims"][0]["dim"], "m") << label;
    }
  }
}

// Wide copies and reading ahead (docs/gpu.md): an async stage whose groups of 4 elements are
// adjacent in the view and the stage (K-inner K; V, its value columns the view's fastest dim,
// also where a KV cache's tail masks its rows) is copied 16 bytes at a time behind one
// alignment test, element by element in a loop otherwise; a stage transposed on its way in
// (gemm's A) keeps 4-byte copies (so do all but K-inner ones with gpu_wide_copies=off). With
// gpu_read_ahead=on the mmas whose K is a loop read the next trip ahead; off (the default)
// gives the loop that reads, then multiplies.
TEST(Gpu, WideCopiesAndReadAheadAreShownAndSwitchable) {
  auto copies = [](const kiln::driver::Compilation& c) {
    std::map<std::string, std::string> out;
    for (const nlohmann::json& s : c.report["phases"][0]["block"]["stages"])
      out[s["value"]] = s["copies"].is_null() ? "-" : s["copies"].get<std::string>();
    return out;
  };
  const std::string wide = "16-byte where aligned";
  std::unique_ptr<kiln::ir::Kernel> k;
  kiln::driver::Compilation c;
  ASSERT_NO_FATAL_FAILURE(compileForGpu("attention", "1,32,8,512,512,128,128", k, c));
  EXPECT_EQ(copies(c), (std::map<std::string, std::string>{{"%qt", "-"}, {"%kt", wide}, {"%vt", wide}, {"%p", "-"}}));
  // One test of the base's and origin's alignment per stage and trip, then the 16-byte copies
  // (K and V: 32 x 128 floats over 128 threads, 8 each) or the element loop's 4-byte ones.
  auto count = [](const std::string& text, const std::string& what) {
    size_t n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
    return n;
  };
  EXPECT_EQ(count(c.object, "cp.async.cg.shared.global"), 2u * 2u * 8u);  // first trip and the loop's
  EXPECT_GE(count(c.object, "cp.async.ca.shared.global"), 2u);
  const nlohmann::json& b = c.report["phases"][0]["block"];
  EXPECT_TRUE(b["read_ahead"].empty());
  kiln::plan::Knobs on = gpuKnobs();
  ASSERT_FALSE(on.setAssignment("gpu_read_ahead=on").has_value());
  kiln::driver::Compilation ca;
  ASSERT_FALSE(kiln::driver::compile(*k, on, ca, kiln::driver::Stage::Report).has_value());
  const nlohmann::json& ba = ca.report["phases"][0]["block"];
  ASSERT_EQ(ba["read_ahead"].size(), 2u);  // q·kᵀ and p·v
  EXPECT_EQ(ba["read_ahead"],
            nlohmann::json::array({ba["mma_steps_per_trip"][0]["at"], ba["mma_steps_per_trip"][1]["at"]}));
  EXPECT_EQ(ba["stages"], b["stages"]);
  // Read ahead, the loop carries the next trip's values through opaque moves; off, none.
  EXPECT_GT(count(ca.object, "mov.b32"), count(c.object, "mov.b32"));
  expectPrecisePtx(ca.object, "gpu_read_ahead=on");
  expectPrecisePtx(c.object, "gpu_read_ahead=off");
  ASSERT_TRUE(on.setAssignment("gpu_read_ahead=sometimes").has_value());

  std::unique_ptr<kiln::ir::Kernel> kv;
  kiln::driver::Compilation ckv;
  ASSERT_NO_FATAL_FAILURE(
      compileForGpu("attention", "5,8,2,3,1024,64,64", kv, ckv, {{"kv-cache", "dense"}, {"mask", "causal"}}));
  const std::map<std::string, std::string> kvCopies = copies(ckv);
  EXPECT_EQ(kvCopies.at("%vt"), wide);
  EXPECT_EQ(kvCopies.at("%vt.1"), wide);  // masked past the length: the same condition along dv
  std::unique_ptr<kiln::ir::Kernel> g;
  kiln::driver::Compilation cg;
  ASSERT_NO_FATAL_FAILURE(compileForGpu("gemm", "4096,4096,4096", g, cg));
  EXPECT_EQ(copies(cg), (std::map<std::string, std::string>{{"%at", "4-byte"}, {"%bt", wide}}));
  // gpu_wide_copies=off: 4-byte copies but for a K-inner stage's (attention's K).
  kiln::plan::Knobs narrow = gpuKnobs();
  ASSERT_FALSE(narrow.setAssignment("gpu_wide_copies=off").has_value());
  kiln::driver::Compilation cn;
  ASSERT_FALSE(kiln::driver::compile(*g, narrow, cn, kiln::driver::Stage::Report).has_value());
  EXPECT_EQ(copies(cn), (std::map<std::string, std::string>{{"%at", "4-byte"}, {"%bt", "4-byte"}}));
  EXPECT_EQ(count(cn.object, "cp.async.cg"), 0u);
  kiln::driver::Compilation an;
  ASSERT_FALSE(kiln::driver::compile(*k, narrow, an, kiln::driver::Stage::Report).has_value());
  EXPECT_EQ(copies(an),
            (std::map<std::string, std::string>{{"%qt", "-"}, {"%kt", wide}, {"%vt", "4-byte"}, {"%p", "-"}}));
  expectPrecisePtx(an.object, "gpu_wide_copies=off");
}

// GQA groups of 5 and 7 (Qwen-like 20/4, 28/4 heads): the library doubles the query block so
// that group x BQ rows (80, 112) spread over 16 rows of threads, with 64-key blocks also for
// D = 128, where 40 and 56 rows took 320- or 448-thread blocks of 4 x 1 or 4 x 2 scores that
// spilled (docs/gpu.md, "Run V", "Run W").
TEST(Gpu, OddGqaGroupsFillSixteenRowsOfThreads) {
  auto plan = [](const char* shape, int64_t rows, int64_t threads) {
    std::unique_ptr<kiln::ir::Kernel> k;
    kiln::driver::Compilation c;
    ASSERT_NO_FATAL_FAILURE(compileForGpu("attention", shape, k, c, {{"mask", "causal"}}));
    const nlohmann::json& b = c.report["phases"][0]["block"];
    EXPECT_EQ(b["rows"]["extent"], rows) << shape;
    EXPECT_EQ(b["threads"], threads) << shape;
    expectPrecisePtx(c.object, shape);
  };
  plan("1,28,4,1024,1024,64,64", 112, 128);
  plan("2,10,2,300,300,64,64", 80, 128);
  // D = 128: 64 keys a block too, where the rule gives 32.
  plan("1,20,4,512,512,128,128", 80, 256);
  plan("1,28,4,512,512,128,128", 112, 256);
  // A multiple of 16 already (group 4: 64 rows; 3: 48): as before.
  plan("1,16,4,1024,1024,64,64", 64, 128);
  plan("2,12,4,77,300,64,64", 48, 256);
  plan("1,32,8,512,512,128,128", 64, 128);
  // A decode's block is its one query: its rows are the group.
  plan("1,28,4,1,4096,64,64", 7, 224);
  // A paged cache's 16-position pages cut its blocks to 16 keys: the rows stay 56 (112 rows of
  // 16 keys spilled 10 KB, run X).
  std::unique_ptr<kiln::ir::Kernel> k;
  kiln::driver::Compilation c;
  ASSERT_NO_FATAL_FAILURE(
      compileForGpu("attention", "2,28,4,256,512,64,64", k, c, {{"mask", "causal"}, {"kv-cache", "paged"}}));
  EXPECT_EQ(c.report["phases"][0]["block"]["rows"]["extent"], 56);
}

// No mask, 48 < D <= 64, 64-row programs: 32 keys a block where three blocks an SM (61 KB of stages)
// take fewer waves of programs than two (64 keys: 104 KB); else 64 keys (run AC). Not with a
// causal mask, D past 64 or 48 and under, another group's rows, a given --block, or on a CPU.
TEST(Gpu, ThirtyTwoKeysWhereTheyTakeFewerWaves) {
  auto keys = [](const char* shape, std::map<std::string, std::string> options, bool gpu = true) {
    if (!options.count("mask")) options["mask"] = "none";
    kiln::kernels::LibraryRequest r{"attention", shape, options, {}};
    if (gpu) r.target = {true, 132};
    std::unique_ptr<kiln::ir::Kernel> k;
    auto err = kiln::kernels::buildLibraryKernel(r, k);
    EXPECT_FALSE(err) << *err;
    const std::string text = k ? kiln::ir::print(*k) : "";
    const size_t at = text.find("load %k[");
    const size_t n = text.find("n:", at);
    return at == std::string::npos || n == std::string::npos ? int64_t(-1) : std::stoll(text.substr(n + 2));
  };
  EXPECT_EQ(keys("4,12,12,512,512,64,64", {}), 32);  // 384 programs: 2 waves at two an SM, 1 at three
  EXPECT_EQ(keys("8,16,16,512,512,64,64", {}), 32);  // 1024: 4 against 3
  EXPECT_EQ(keys("1,32,8,777,777,64,64", {}), 32);   // group 4 x 16 queries: 392 programs
  EXPECT_EQ(keys("4,12,12,512,512,48,48", {}), 64);  // D = 48: two blocks an SM either way
  EXPECT_EQ(keys("2,16,16,512,512,64,64", {}), 64);  // 256: one wave either way
  EXPECT_EQ(keys("3,20,20,400,400,64,64", {}), 64);  // 420: two either way
  EXPECT_EQ(keys("4,12,12,512,512,64,64", {{"mask", "causal"}}), 64);
  EXPECT_EQ(keys("4,16,16,512,512,32,32", {}), 64);  // D = 32: three blocks an SM already
  EXPECT_EQ(keys("4,12,12,512,512,80,80", {}), 32);  // D = 80: 32 by the D rule
  EXPECT_EQ(keys("4,12,12,512,512,64,64", {{"block", "64x64"}}), 64);
  EXPECT_EQ(keys("4,12,12,512,512,64,64", {{"kv-dtype", "bf16"}}), 64);
  EXPECT_EQ(keys("4,12,12,512,512,64,64", {}, false), 64);
}

// A causal prefill of one to two programs an SM (no KV cache, K >= 384): its keys in 2 chunks,
// so that the long programs' halves fill the SMs the short ones leave (run AC). Not without a
// mask (equal programs: the split only adds the merge), nor from two programs an SM on; fewer
// programs than SMs split for two an SM, as before.
TEST(Gpu, CausalPrefillsOfOneToTwoProgramsAnSmSplitInTwo) {
  auto chunks = [](const char* shape, const char* mask) {
    std::unique_ptr<kiln::ir::Kernel> k;
    auto err = kiln::kernels::buildLibraryKernel({"attention", shape, {{"mask", mask}}, {true, 132}}, k);
    EXPECT_FALSE(err) << *err;
    const std::string text = k ? kiln::ir::print(*k) : "";
    const size_t at = text.find("%part_m: view<f32>[");
    if (at == std::string::npos) return int64_t(1);
    const size_t comma = text.find(", ", at);
    return int64_t(std::stoll(text.substr(comma + 2)));
  };
  EXPECT_EQ(chunks("1,12,12,1024,1024,64,64", "causal"), 2);    // 192 programs
  EXPECT_EQ(chunks("1,20,20,512,512,80,80", "causal"), 2);      // 160
  EXPECT_EQ(chunks("1,32,8,400,400,128,128", "causal"), 2);     // 8 KV heads x 25 blocks of 16 queries
  EXPECT_EQ(chunks("1,12,12,1024,1024,64,64", "none"), 1);      // equal programs
  EXPECT_EQ(chunks("1,32,32,1024,1024,128,128", "causal"), 1);  // 512: from two an SM on
  EXPECT_EQ(chunks("1,16,16,1056,1056,64,64", "causal"), 1);    // 272
  EXPECT_EQ(chunks("4,16,4,256,256,128,128", "causal"), 1);     // 256 programs, but chunks of 128 keys
  EXPECT_EQ(chunks("1,2,2,2048,2048,64,64", "causal"), 5);      // 64 programs: ceil(264 / 64) chunks
}

// Causal attention's later query blocks see more keys: the grid starts them first (the query
// block axis outermost, from its last index down; docs/gpu.md, "Program order"), so the short
// programs fill the last wave. Not where the trips do not rise (mask none), nor where they are
// read at launch (a KV cache's lengths), nor on a CPU; the knobs switch it off or fix the order.
TEST(Gpu, CausalQueryBlocksStartLongestFirst) {
  auto domain = [](const kiln::driver::Compilation& c, int phase) { return c.report["phases"][phase]["domain"]; };
  std::unique_ptr<kiln::ir::Kernel> k;
  kiln::driver::Compilation c;
  ASSERT_NO_FATAL_FAILURE(compileForGpu("attention", "1,32,8,1024,1024,128,128", k, c, {{"mask", "causal"}}));
  ASSERT_EQ(c.report["phases"].size(), 1u);
  EXPECT_EQ(domain(c, 0)["root_axis_order"], nlohmann::json::parse(R"(["qb","b","kvh"])"));
  EXPECT_EQ(domain(c, 0)["descending_axes"], nlohmann::json::parse(R"(["qb"])"));
  EXPECT_EQ(domain(c, 0)["program_order"],
            "qb outermost, from 63 down: the program's loops take 1 trips at qb = 0 and 32 at qb = 63 (the other "
            "axes last; the longest programs start first)");
  expectPrecisePtx(c.object, "heaviest first");
  auto with = [&](const char* knob, kiln::driver::Compilation& out) {
    kiln::plan::Knobs kn = gpuKnobs();
    ASSERT_FALSE(kn.setAssignment(knob).has_value());
    ASSERT_FALSE(kiln::driver::compile(*k, kn, out, kiln::driver::Stage::Report).has_value());
  };
  // As written: the same PTX but for the program's indices.
  kiln::driver::Compilation asWritten;
  ASSERT_NO_FATAL_FAILURE(with("gpu_heavy_first=off", asWritten));
  EXPECT_EQ(domain(asWritten, 0)["root_axis_order"], nlohmann::json::parse(R"(["b","kvh","qb"])"));
  EXPECT_TRUE(domain(asWritten, 0)["descending_axes"].empty());
  EXPECT_TRUE(domain(asWritten, 0)["program_order"].is_null());
  EXPECT_NE(asWritten.object, c.object);
  EXPECT_EQ(asWritten.report["phases"][0]["block"], c.report["phases"][0]["block"]);
  // A fixed order is the user's.
  kiln::driver::Compilation given;
  ASSERT_NO_FATAL_FAILURE(with("root_axis_order=kvh,qb,b", given));
  EXPECT_EQ(domain(given, 0)["root_axis_order"], nlohmann::json::parse(R"(["kvh","qb","b"])"));
  EXPECT_TRUE(domain(given, 0)["descending_axes"].empty());
  // A CPU plan keeps the domain as written.
  kiln::driver::Compilation cpu;
  ASSERT_FALSE(kiln::driver::compile(*k, kiln::plan::Knobs{}, cpu, kiln::driver::Stage::Plan).has_value());
  EXPECT_TRUE(domain(cpu, 0)["descending_axes"].empty());

  // A split: phase 0's (query block, chunk) programs (the trips rise along qb in the last
  // chunk), not the merge's.
  std::unique_ptr<kiln::ir::Kernel> ks;
  kiln::driver::Compilation cs;
  ASSERT_NO_FATAL_FAILURE(compileForGpu("attention", "1,16,4,384,384,128,128", ks, cs, {{"mask", "causal"}}));
  ASSERT_EQ(cs.report["phases"].size(), 2u);
  EXPECT_EQ(domain(cs, 0)["root_axis_order"], nlohmann::json::parse(R"(["qb","b","kvh","c"])"));
  EXPECT_EQ(domain(cs, 0)["descending_axes"], nlohmann::json::parse(R"(["qb"])"));
  EXPECT_TRUE(domain(cs, 1)["descending_axes"].empty());

  // Every program the same trips: as written.
  std::unique_ptr<kiln::ir::Kernel> kn;
  kiln::driver::Compilation cn;
  ASSERT_NO_FATAL_FAILURE(compileForGpu("attention", "1,32,8,512,512,128,128", kn, cn, {{"mask", "none"}}));
  EXPECT_EQ(domain(cn, 0)["root_axis_order"], nlohmann::json::parse(R"(["b","kvh","qb"])"));
  EXPECT_TRUE(domain(cn, 0)["program_order"].is_null());
  // Trips from lengths given at launch: unknown to the plan, as written.
  std::unique_ptr<kiln::ir::Kernel> kc;
  kiln::driver::Compilation cc;
  ASSERT_NO_FATAL_FAILURE(
      compileForGpu("attention", "5,8,2,3,1024,64,64", kc, cc, {{"kv-cache", "dense"}, {"mask", "causal"}}));
  for (size_t i = 0; i < cc.report["phases"].size(); ++i) EXPECT_TRUE(domain(cc, i)["descending_axes"].empty()) << i;
}

// The lane realization of a split decode (gpu_realization=lanes: the block realization would
// take both phases).
TEST(Gpu, SplitAttentionIsTwoEntriesLaunchedInOrder) {
  std::unique_ptr<kiln::ir::Kernel> k;
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel(
      {"attention", "1,8,2,1,2053,80,96", {{"mask", "none"}, {"split", "8"}, {"block", "1x32"}}, {}}, k));
  kiln::driver::Compilation c;
  kiln::plan::Knobs lanes = gpuKnobs();
  ASSERT_FALSE(lanes.setAssignment("gpu_realization=lanes").has_value());
  auto err = kiln::driver::compile(*k, lanes, c, kiln::driver::Stage::Report);
  ASSERT_FALSE(err.has_value()) << *err;
  ASSERT_EQ(c.report["gpu"]["kernels"].size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const std::string entry = "kiln_phase" + std::to_string(i);
    EXPECT_EQ(c.report["gpu"]["kernels"][i]["entry"], entry);
    EXPECT_NE(c.object.find(".visible .entry " + entry + "("), std::string::npos);
  }
  EXPECT_EQ(c.report["gpu"]["kernels"][0]["programs"], 2 * 8);
  EXPECT_EQ(c.report["gpu"]["kernels"][1]["programs"], 2);
  expectPrecisePtx(c.object, "split attention");
  // Spread lanes talk through warp shuffles and ballots; `gpu_lanes=registers` keeps a program
  // in one thread, with no cross-thread instruction at all.
  EXPECT_NE(c.object.find("shfl.sync.idx"), std::string::npos);
  kiln::plan::Knobs regs = lanes;
  ASSERT_FALSE(regs.setAssignment("gpu_lanes=registers").has_value());
  kiln::driver::Compilation one;
  ASSERT_FALSE(kiln::driver::compile(*k, regs, one, kiln::driver::Stage::Report).has_value());
  for (const nlohmann::json& e : one.report["gpu"]["kernels"]) {
    EXPECT_EQ(e["lanes"], "registers");
    EXPECT_EQ(e["threads_per_program"], 1);
    EXPECT_EQ(e["threads"], e["programs"]);
  }
  EXPECT_EQ(one.object.find("shfl.sync"), std::string::npos);
  EXPECT_EQ(one.object.find("vote.sync"), std::string::npos);
  expectPrecisePtx(one.object, "split attention, registers");
}

// A split's merge computes each row's rescale factors (exp of the maxima's differences), values of
// the rows alone that every thread of a row repeats: its row's threads each take a group of 4
// adjacent columns and the rest of the block lies along the rows (a prefill's merge: 4 rows x 4
// columns a thread where it was 16 x 1). A merge of too few rows to fill a warp that way (a
// decode's 4) keeps its columns first, and so does a kernel that reduces along its columns.
TEST(Gpu, MergeThreadsTakeColumnGroupsAndSpreadOverTheRows) {
  auto merge = [](const char* shape, const char* mask) {
    std::unique_ptr<kiln::ir::Kernel> k;
    kiln::driver::Compilation c;
    compileForGpu("attention", shape, k, c, {{"mask", mask}});
    EXPECT_EQ(c.report["phases"].size(), 2u) << shape;
    return c.report["phases"].back()["block"];
  };
  const nlohmann::json prefill = merge("1,16,4,384,384,128,128", "causal");
  EXPECT_EQ(prefill["threads"], 256);
  EXPECT_EQ(prefill["rows"]["microtile"], 4);
  EXPECT_EQ(prefill["columns"][0]["microtile"], 4);
  EXPECT_EQ(prefill["columns"][0]["group"], 4);
  const nlohmann::json decode = merge("1,32,8,1,4096,128,128", "none");  // 4 rows x 8 columns
  EXPECT_EQ(decode["threads"], 32);
  EXPECT_EQ(decode["rows"]["microtile"], 1);
  EXPECT_EQ(decode["columns"][0]["microtile"], 1);
}

TEST(Gpu, PtxIsNotLoadedIntoThisProcessAndTheKnobNamesItsRange) {
  auto kernel = parseFile(std::string(KILN_SOURCE_DIR) + "/examples/softmax.tile");
  ASSERT_TRUE(kernel);
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*kernel, gpuKnobs(), c, kiln::driver::Stage::Obj).has_value());
  std::unique_ptr<kiln::runtime::LoadedKernel> loaded;
  auto err = kiln::driver::load(c.object, *kernel, "native", 1, loaded);
  ASSERT_TRUE(err.has_value());
  EXPECT_NE(err->find("kiln-replay"), std::string::npos) << *err;
  kiln::plan::Knobs k;
  auto bad = k.setAssignment("target=cuda");
  ASSERT_TRUE(bad.has_value());
  EXPECT_NE(bad->find("cpu|nvptx"), std::string::npos) << *bad;
}

TEST(Gpu, PtxFunctionsReadsRegistersAndLocalMemory) {
  const std::string ptx =
      ".version 8.0\n.target sm_90a\n.visible .entry k(\n\t.param .u64 .ptr .align 1 k_param_0\n)\n{\n"
      "\t.local .align 16 .b8 \t__local_depot0[96];\n\t.reg .b64 \t%SP;\n\t.reg .pred \t%p<3>;\n"
      "\t.reg .b32 \t%r<41>;\n\tret;\n}\n.func  (.param .b32 func_retval0) f(\n\t.param .b32 f_param_0\n)\n{\n"
      "\t.reg .b32 \t%r<5>;\n\tret;\n}\n";
  const auto fns = kiln::jit::ptxFunctions(ptx);
  ASSERT_EQ(fns.size(), 2u);
  EXPECT_EQ(fns[0].name, "k");
  EXPECT_TRUE(fns[0].entry);
  EXPECT_EQ(fns[0].local_bytes, 96);
  ASSERT_EQ(fns[0].registers.size(), 3u);
  EXPECT_EQ(fns[0].registers[0], (std::pair<std::string, int64_t>{".b64", 1}));
  EXPECT_EQ(fns[0].registers[2], (std::pair<std::string, int64_t>{".b32", 41}));
  EXPECT_EQ(fns[1].name, "f");
  EXPECT_FALSE(fns[1].entry);
  EXPECT_EQ(kiln::jit::ptxVersion(ptx), "8.0");
}

int runCommand(const std::string& command, std::string& output) {
  output.clear();
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  for (size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;) output.append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// `kiln fuzz --emit-programs` writes the campaign's programs and their knob points, which
// scripts/gpu/fuzz-capture.sh captures for a GPU replay.
TEST(Gpu, FuzzEmitsTheCampaignsProgramsWithTheirKnobs) {
  const fs::path dir = fs::temp_directory_path() / ("kiln-gpu-fuzz-" + std::to_string(getpid()));
  fs::remove_all(dir);
  std::string out;
  ASSERT_EQ(
      runCommand(std::string(KILN_BINARY_DIR) + "/bin/kiln fuzz --programs 3 --seed 5 --emit-programs " + dir.string(),
                 out),
      0)
      << out;
  for (int n = 0; n < 3; ++n) {
    const fs::path tile = dir / ("fuzz-5-" + std::to_string(n) + ".tile");
    EXPECT_TRUE(parseFile(tile.string())) << tile;
    std::ifstream knobs(dir / ("fuzz-5-" + std::to_string(n) + ".knobs"));
    std::stringstream text;
    text << knobs.rdbuf();
    EXPECT_NE(text.str().find("--set packet_width="), std::string::npos) << text.str();
    EXPECT_NE(text.str().find("--input-seed "), std::string::npos) << text.str();
  }
  fs::remove_all(dir);
}

// A loop whose plain loads run in batches is emitted twice (the batches, then the trips past
// them); a loop inside it so too, and a batched load there whose origin is a scalar its body
// computes must compute it again, not take the other emission's value (LLVM: "Instruction does
// not dominate all uses"; kiln fuzz --family block --seed 6, programs 82 and 103).
TEST(Gpu, LoopsEmittedTwiceComputeTheirOwnScalars) {
  kiln::driver::Compilation c;
  ASSERT_NO_FATAL_FAILURE(
      compileGpuText("kernel @dom(%x: view<f32>[16, 64], %y: view<f32>[4, 8, 64]) {\n"
                     "  parallel (%p) in (4) {\n"
                     "    %z = const 0 : f32[r:8, c:64]\n"
                     "    %o = serial %i = 0 to 3 step 1 iter(%acc = %z) : f32[r:8, c:64] {\n"
                     "      %l = load %x[0, 0] as [r:8, c:64] fill 0 : f32[r:8, c:64]\n"
                     "      %q = serial %j = 0 to 2 step 1 iter(%d = %acc) : f32[r:8, c:64] {\n"
                     "        %s = add %p, 1 : i64\n"
                     "        %m = load %x[%s, 0] as [r:8, c:64] fill 0 : f32[r:8, c:64]\n"
                     "        %e = add %d, %m : f32[r:8, c:64]\n"
                     "        yield %e\n"
                     "      }\n"
                     "      %f = add %q, %l : f32[r:8, c:64]\n"
                     "      yield %f\n"
                     "    }\n"
                     "    store %o, %y[%p, 0, 0] as [_, r:8, c:64]\n"
                     "  }\n"
                     "}\n",
                     "dom.tile", c));
  EXPECT_EQ(c.report["phases"][0]["realization"], "block");
  EXPECT_EQ(c.report["phases"][0]["block"]["batched_loads"].size(), 2u) << c.report["phases"][0]["block"].dump();
}

// The registers a block's threads may state and still launch: its warps are dealt over the
// register file's four parts of 16K, so 14 warps put 4 in one part (an H100's driver refused
// 448 threads at 144 registers each: kiln fuzz --family block).
TEST(Gpu, BlockRegistersFitTheFullestPartOfTheRegisterFile) {
  const kiln::target::Model& m = kiln::target::of(kiln::target::Kind::Nvptx).model("native");
  EXPECT_EQ(m.blockThreadRegisters(32), 255);
  EXPECT_EQ(m.blockThreadRegisters(256), 255);
  EXPECT_EQ(m.blockThreadRegisters(384), 168);
  EXPECT_EQ(m.blockThreadRegisters(448), 128);
  EXPECT_EQ(m.blockThreadRegisters(480), 128);
  EXPECT_EQ(m.blockThreadRegisters(512), 128);
  EXPECT_EQ(m.blockThreadRegisters(288), 168);  // 9 warps: 3 in one part
  EXPECT_EQ(m.blockThreadRegisters(1024), 64);
}

// The block form's threads share a program's views: a store waits at a barrier for earlier
// accesses of its view by other threads that may meet its elements (a program's statements
// run in order), not where the ranges cannot meet (two halves at constant origins) or where a
// loop's trips store disjoint chunks; a load read both as an mma's accumulator and as another
// mma's computed operand is loaded as a tile (it had been taken for a stage copied from memory).
TEST(Gpu, BlockStatementsOrderTheirStoresAndLoads) {
  auto ptxOf = [](const std::string& body, std::string& ptx) {
    kiln::driver::Compilation c;
    ASSERT_NO_FATAL_FAILURE(compileGpuText(
        "kernel @k(%x: view<f32>[8, 64], %w: view<f32>[16, 64], %v: view<f32>[8, 16], %y: view<f32>[4, 8, 130]) {\n"
        "  parallel (%p) in (4) {\n" +
            body + "  }\n}\n",
        "order.tile", c));
    ASSERT_EQ(c.report["phases"][0]["realization"], "block") << c.report["phases"][0]["block_not_taken_because"];
    ptx = c.object;
  };
  auto barriers = [](const std::string& ptx) {
    size_t n = 0;
    for (size_t at = ptx.find("barrier.sync"); at != std::string::npos; at = ptx.find("barrier.sync", at + 1)) ++n;
    for (size_t at = ptx.find("bar.sync"); at != std::string::npos; at = ptx.find("bar.sync", at + 1)) ++n;
    return n;
  };
  const std::string load = "    %t = load %x[0, 0] as [r:8, c:64] fill 0 : f32[r:8, c:64]\n";
  std::string ptx;
  // Two stores of the same elements (the second shifted by one column: other threads): ordered.
  ASSERT_NO_FATAL_FAILURE(ptxOf(load + "    store %t, %y[%p, 0, 0] as [_, r:8, c:64]\n"
                                       "    store %t, %y[%p, 0, 1] as [_, r:8, c:64]\n",
                                ptx));
  EXPECT_EQ(barriers(ptx), 1u);
  // A load of what the program stored, then a store over what it read: two barriers.
  ASSERT_NO_FATAL_FAILURE(ptxOf(load + "    store %t, %y[%p, 0, 0] as [_, r:8, c:64]\n"
                                       "    %u = load %y[%p, 0, 1] as [_, r:8, c:64] fill 0 : f32[r:8, c:64]\n"
                                       "    %e = exp %u : f32[r:8, c:64]\n"
                                       "    store %e, %y[%p, 0, 0] as [_, r:8, c:64]\n",
                                ptx));
  EXPECT_EQ(barriers(ptx), 2u);
  // Halves at constant origins, and a loop's chunks: no barrier.
  ASSERT_NO_FATAL_FAILURE(ptxOf(load + "    store %t, %y[%p, 0, 0] as [_, r:8, c:64]\n"
                                       "    store %t, %y[%p, 0, 64] as [_, r:8, c:64]\n",
                                ptx));
  EXPECT_EQ(barriers(ptx), 0u);
  ASSERT_NO_FATAL_FAILURE(ptxOf(load + "    serial %i = 0 to 2 step 1 {\n"
                                       "      %o = mul %i, 64 : i64\n"
                                       "      store %t, %y[%p, 0, %o] as [_, r:8, c:64]\n"
                                       "    }\n",
                                ptx));
  EXPECT_EQ(barriers(ptx), 0u);
  // ... but chunks that overlap (a stride of 32 for 64 columns): a barrier each trip.
  ASSERT_NO_FATAL_FAILURE(ptxOf(load + "    serial %i = 0 to 2 step 1 {\n"
                                       "      %o = mul %i, 32 : i64\n"
                                       "      store %t, %y[%p, 0, %o] as [_, r:8, c:64]\n"
                                       "    }\n",
                                ptx));
  EXPECT_GE(barriers(ptx), 1u);  // (LLVM may unroll the two trips)
  // A barrier inside a loop (its load of a column the first store wrote) orders nothing when the
  // loop takes no trip: the second store still waits for the first (two barriers, not one).
  ASSERT_NO_FATAL_FAILURE(ptxOf(load + "    store %t, %y[%p, 0, 0] as [_, r:8, c:64]\n"
                                       "    %z = const 0 : f32[r:8]\n"
                                       "    %f = serial %i = 0 to %p step 1 iter(%a = %z) : f32[r:8] {\n"
                                       "      %u = load %y[%p, 0, 0] as [_, r:8, _] fill 0 : f32[r:8]\n"
                                       "      yield %u\n"
                                       "    }\n"
                                       "    store %f, %v[0, 0] as [r:8, _]\n"
                                       "    store %t, %y[%p, 0, 1] as [_, r:8, c:64]\n",
                                ptx));
  EXPECT_EQ(barriers(ptx), 2u);
  // A loaded tile as one mma's accumulator and another's operand [rows, K = a column dim].
  ASSERT_NO_FATAL_FAILURE(
      ptxOf("    %a = load %v[0, 0] as [r:8, k:16] fill 0 : f32[r:8, k:16]\n"
            "    %b = load %w[0, 0] as [k:16, c:64] fill 0 : f32[k:16, c:64]\n"
            "    %s = load %x[0, 0] as [r:8, c:64] fill 0 : f32[r:8, c:64]\n"
            "    %acc = mma %a, %b, %s contract [k] : f32[r:8, c:64]\n"
            "    %w2 = load %x[0, 0] as [c:64, n:64] fill 0 : f32[c:64, n:64]\n"
            "    %z = const 0 : f32[r:8, n:64]\n"
            "    %o = mma %s, %w2, %z contract [c] : f32[r:8, n:64]\n"
            "    store %acc, %y[%p, 0, 0] as [_, r:8, c:64]\n"
            "    store %o, %y[%p, 0, 64] as [_, r:8, n:64]\n",
            ptx));
}

// kiln fuzz --family block: random programs of the block form (docs/fuzz.md). Each verifies,
// compiles for nvptx under its campaign knob point (no internal error: the block emitter had
// held a scalar load as a tile, "scalar used before its definition", in 30 of seed 5's first 80),
// and most take the block realization (the others: a grid of less than a warp, or a value the
// form refuses, with the reason in the report).
TEST(Gpu, BlockFamilyFuzzProgramsRunAsThreadBlocks) {
  kiln::fuzz::CampaignOptions o;
  o.seed = 5;
  o.family = kiln::fuzz::Family::Block;
  int blocks = 0, programs = 0;
  for (uint64_t n = 0; n < 24; ++n) {
    const uint64_t ps = kiln::fuzz::programSeed(o.seed, n);
    kiln::fuzz::Program p;
    auto gen = kiln::fuzz::generate(ps, p, o.family);
    ASSERT_FALSE(gen.has_value()) << *gen;
    kiln::fuzz::Replay r = kiln::fuzz::campaignRun(o, ps, p);
    EXPECT_NE(r.knobs.packet_width, 1) << n;
    EXPECT_EQ(r.knobs.local_lanes, r.knobs.packet_width) << n;
    ASSERT_FALSE(r.knobs.setAssignment("target=nvptx").has_value());
    kiln::driver::Compilation c;
    auto err = kiln::driver::compile(*p.kernel, r.knobs, c, kiln::driver::Stage::Report);
    ASSERT_FALSE(err.has_value()) << "program " << n << ": " << *err << "\n" << p.text;
    ++programs;
    bool block = true;
    for (const auto& ph : c.report["phases"]) block = block && ph["realization"] == "block";
    blocks += block;
  }
  EXPECT_GE(blocks * 2, programs) << blocks << " of " << programs << " as thread blocks";
}

// 16-bit views on the GPU (docs/gpu.md, "16-bit views on the GPU"): the conversions are
// PTX's cvt (no .ftz) with a NaN's result built from its bits (the target model says cvt's NaN
// is canonical); the archive carries a 16-bit view's halves as words (STORAGE f16 | bf16), and
// a conversion sweep's inputs as bit patterns (INIT bits:) and outputs as digests only.
TEST(Gpu, SixteenBitViewsConvertExactlyAndTravelInTheArchive) {
  auto k = parseFile(std::string(KILN_SOURCE_DIR) + "/tests/ir/half_views.tile");
  ASSERT_TRUE(k);
  kiln::driver::Compilation c;
  auto e = kiln::driver::compile(*k, gpuKnobs(), c, kiln::driver::Stage::Obj);
  ASSERT_FALSE(e.has_value()) << *e;
  const std::string ptx(c.object.data(), c.object.size());
  expectPrecisePtx(ptx, "half_views");
  EXPECT_NE(ptx.find("cvt.f32.f16"), std::string::npos);
  EXPECT_NE(ptx.find("cvt.rn.f16.f32"), std::string::npos);
  EXPECT_NE(ptx.find("2143289344"), std::string::npos) << "a loaded NaN's bits: 0x7FC00000 | payload";
  EXPECT_NE(ptx.find("2139095040"), std::string::npos) << "a stored NaN's test: |x| > 0x7F800000";
  kiln::driver::Compilation report;
  ASSERT_FALSE(kiln::driver::compile(*k, gpuKnobs(), report, kiln::driver::Stage::Report).has_value());
  EXPECT_EQ(report.report["target"]["model"]["half_conversions_keep_nan"], false) << report.report["target"].dump(1);

  const fs::path arch = fs::temp_directory_path() / ("kiln-gpu-half-" + std::to_string(getpid()));
  fs::remove_all(arch);
  auto capture = [&](const kiln::ir::Kernel& kernel, const std::string& name, kiln::driver::GpuCaptureOptions o) {
    o.archive = arch.string();
    o.case_name = name;
    o.source = "test";
    kiln::driver::GpuCaptureResult r;
    auto err = kiln::driver::captureGpuCase(kernel, kiln::plan::Knobs(), o, r);
    ASSERT_FALSE(err.has_value()) << *err;
    EXPECT_TRUE(r.cpu_bitexact && r.cpu_f64) << name;
  };
  auto manifest = [&](const std::string& name) {
    std::ifstream m(arch / name / "manifest.txt");
    std::stringstream s;
    s << m.rdbuf();
    return s.str();
  };
  std::unique_ptr<kiln::ir::Kernel> att;
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel(
      {"attention", "1,4,2,1,70,16,8", {{"mask", "none"}, {"kv-dtype", "bf16"}}, {true, 132}}, att));
  capture(*att, "attention_bf16", {});
  // K [1,2,70,16] bf16: 2240 halves in 1120 words, from a file; the output o is f32.
  EXPECT_NE(manifest("attention_bf16").find(" view k 1120 file 0 "), std::string::npos) << manifest("attention_bf16");
  EXPECT_NE(manifest("attention_bf16").find(" bf16\n"), std::string::npos);
  EXPECT_TRUE(fs::exists(arch / "attention_bf16" / "inputs" / "k.bin"));
  capture(*k, "half_views", {});
  EXPECT_NE(manifest("half_views").find(" view s 144 zero 1 "), std::string::npos) << manifest("half_views");
  EXPECT_NE(manifest("half_views").find("output s 144 "), std::string::npos);

  kiln::ir::DiagEngine diag;
  auto sweep = kiln::ir::parseKernel(R"(kernel @sweep(%x: view<f32>[4096], %hin: view<f16>[4096], %h: view<f16>[4096],
                                              %y: view<f32>[4096]) {
  parallel (%p) in (4) {
    %o = mul %p, 1024 : i64
    %t = load %x[%o] as [e:1024] fill 0
    store %t, %h[%o] as [e:1024]
    %u = load %hin[%o] as [e:1024] fill 0
    store %u, %y[%o] as [e:1024]
  }
})",
                                     "sweep.tile", diag);
  ASSERT_TRUE(sweep) << diag.str();
  kiln::driver::GpuCaptureOptions bits;
  bits.bit_patterns = {{"x", 0x7F7FF800u}, {"hin", 0x7B00u}};  // finite, infinities, NaNs; halves past 0x7C00
  bits.digest_only = true;
  capture(*sweep, "sweep", bits);
  const std::string m = manifest("sweep");
  EXPECT_NE(m.find(" view x 4096 bits:7f7ff800 0 "), std::string::npos) << m;
  EXPECT_NE(m.find(" view hin 2048 file 0 "), std::string::npos) << m;
  EXPECT_NE(m.find("\noutput h 2048 "), std::string::npos) << m;
  EXPECT_NE(m.find(" digest\n"), std::string::npos) << m;
  EXPECT_FALSE(fs::exists(arch / "sweep" / "expected" / "h.f32"));
  // The stored halves of patterns past f16's range: 65520 and up to inf, NaNs quiet with their
  // payload (the CPU's, equal to the definition: tests/unit/test_heavy_storage.cpp).
  {
    std::ifstream in(arch / "sweep" / "inputs" / "hin.bin", std::ios::binary);
    uint16_t first = 0;
    in.read(reinterpret_cast<char*>(&first), 2);
    EXPECT_EQ(first, 0x7B00u);  // the patterns as they are, not rounded through a float
  }
  const std::string replay = std::string(KILN_BINARY_DIR) + "/bin/kiln-replay";
  std::string out;
  EXPECT_EQ(runCommand(replay + " " + arch.string() + " --check-archive", out), 0) << out;
  // A changed half of an input file is caught by its digest.
  {
    std::fstream f(arch / "attention_bf16" / "inputs" / "k.bin", std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f);
    f.seekp(2);
    f.put('\x55');
  }
  EXPECT_NE(runCommand(replay + " " + arch.string() + " --check-archive", out), 0) << out;
  fs::remove_all(arch);
}

// Knob gpu_dependent_launch (on by default): the merge phase waits for the phase before at its
// entry, before any memory access (griddepcontrol.wait), and that phase lets its launch begin as
// soon as its own blocks have all started (griddepcontrol.launch_dependents). The report and the
// archive's manifest say so (`dependent 1`: kiln-replay launches it with programmatic stream
// serialization); off, the PTX has neither instruction and the manifest no such line.
TEST(Gpu, DependentLaunchWaitsForThePhaseBeforeAndTravelsInTheManifest) {
  std::unique_ptr<kiln::ir::Kernel> k;
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel(
      {"attention", "1,4,2,1,70,16,8", {{"mask", "none"}, {"split", "3"}, {"block", "1x16"}}, {}}, k));
  const kiln::plan::Knobs on = gpuKnobs();
  EXPECT_TRUE(on.gpu_dependent_launch);
  kiln::driver::Compilation c;
  ASSERT_FALSE(kiln::driver::compile(*k, on, c, kiln::driver::Stage::Report).has_value());
  ASSERT_EQ(c.report["gpu"]["kernels"].size(), 2u);
  const size_t second = c.object.find(".visible .entry kiln_phase1(");
  ASSERT_NE(second, std::string::npos);
  const std::string first_ptx = c.object.substr(0, second), second_ptx = c.object.substr(second);
  EXPECT_NE(first_ptx.find("griddepcontrol.launch_dependents;"), std::string::npos);
  EXPECT_EQ(first_ptx.find("griddepcontrol.wait"), std::string::npos);
  const size_t wait = second_ptx.find("griddepcontrol.wait;");
  ASSERT_NE(wait, std::string::npos);
  EXPECT_EQ(second_ptx.find("griddepcontrol.launch_dependents"), std::string::npos);
  for (const char* access : {"ld.global", "st.global", "ld.shared", "st.shared", "cp.async", "atom."})
    EXPECT_GT(second_ptx.find(access), wait) << access << " before the wait";
  EXPECT_EQ(c.report["gpu"]["kernels"][0]["dependent_launch"]["triggers_next"], true);
  EXPECT_EQ(c.report["gpu"]["kernels"][0]["dependent_launch"]["waits_for_previous"], false);
  EXPECT_EQ(c.report["gpu"]["kernels"][1]["dependent_launch"]["triggers_next"], false);
  EXPECT_EQ(c.report["gpu"]["kernels"][1]["dependent_launch"]["waits_for_previous"], true);
  expectPrecisePtx(c.object, "dependent launch");
  kiln::plan::Knobs offKnobs = gpuKnobs();
  ASSERT_FALSE(offKnobs.setAssignment("gpu_dependent_launch=off").has_value());
  kiln::driver::Compilation off;
  ASSERT_FALSE(kiln::driver::compile(*k, offKnobs, off, kiln::driver::Stage::Report).has_value());
  EXPECT_EQ(off.object.find("griddepcontrol"), std::string::npos);
  EXPECT_EQ(off.report["gpu"]["kernels"][1]["dependent_launch"]["waits_for_previous"], false);

  // The manifest: `dependent 1`, read back by kiln-replay; a line naming no later phase is refused.
  const fs::path arch = fs::temp_directory_path() / ("kiln-gpu-dependent-" + std::to_string(getpid()));
  fs::remove_all(arch);
  kiln::driver::GpuCaptureOptions o;
  o.archive = arch.string();
  o.case_name = "split";
  o.source = "test";
  kiln::driver::GpuCaptureResult r;
  auto err = kiln::driver::captureGpuCase(*k, on, o, r);
  ASSERT_FALSE(err.has_value()) << *err;
  const fs::path manifest = arch / "split" / "manifest.txt";
  std::string text;
  {
    std::ifstream m(manifest);
    std::stringstream ss;
    ss << m.rdbuf();
    text = ss.str();
  }
  EXPECT_NE(text.find("\ndependent 1\n"), std::string::npos) << text;
  EXPECT_EQ(text.find("\ndependent 0"), std::string::npos) << text;
  const std::string replay = std::string(KILN_BINARY_DIR) + "/bin/kiln-replay";
  std::string out;
  EXPECT_EQ(runCommand(replay + " " + arch.string() + " --check-archive", out), 0) << out;
  for (const auto& [line, says] :
       std::map<std::string, std::string>{{"dependent 0", "dependent phase '0' is not an index >= 1"},
                                          {"dependent 2", "dependent phase 2 is not a phase of this case"},
                                          {"dependent 1\ndependent 1", "phase 1 is dependent twice"}}) {
    std::string bad = text;
    bad.replace(bad.find("dependent 1"), std::string("dependent 1").size(), line);
    std::ofstream(manifest, std::ios::trunc) << bad;
    EXPECT_EQ(runCommand(replay + " " + arch.string() + " --check-archive", out), 2) << line << ": " << out;
    EXPECT_NE(out.find(says), std::string::npos) << line << ": " << out;
  }
  fs::remove_all(arch);
}

// Capture two examples (one with a scalar, split attention with workspaces and two phases);
// kiln-replay --check-archive regenerates their inputs and checks every digest here; the replay
// itself runs them on a GPU where there is one.
TEST(Gpu, CapturedArchiveIsCheckedHereAndReplayedWhereThereIsAGpu) {
  const fs::path arch = fs::temp_directory_path() / ("kiln-gpu-test-" + std::to_string(getpid()));
  fs::remove_all(arch);
  auto add = [&](const kiln::ir::Kernel& kernel, const std::string& name) {
    kiln::driver::GpuCaptureOptions o;
    o.archive = arch.string();
    o.case_name = name;
    o.source = "test";
    o.seed = 5;
    kiln::driver::GpuCaptureResult r;
    auto err = kiln::driver::captureGpuCase(kernel, kiln::plan::Knobs(), o, r);
    ASSERT_FALSE(err.has_value()) << *err;
    EXPECT_TRUE(r.cpu_bitexact);
    EXPECT_TRUE(r.cpu_f64);
    EXPECT_TRUE(fs::exists(arch / name / "kernel.ptx"));
  };
  auto rms = parseFile(std::string(KILN_SOURCE_DIR) + "/examples/rmsnorm.tile");
  ASSERT_TRUE(rms);
  add(*rms, "rmsnorm");
  std::unique_ptr<kiln::ir::Kernel> att;
  ASSERT_FALSE(kiln::kernels::buildLibraryKernel(
      {"attention", "1,4,2,1,70,16,8", {{"mask", "none"}, {"split", "3"}, {"block", "1x16"}}, {}}, att));
  add(*att, "attention_split");
  {
    std::ifstream m(arch / "attention_split" / "manifest.txt");
    std::stringstream s;
    s << m.rdbuf();
    EXPECT_NE(s.str().find("\nworkspace 0 "), std::string::npos) << s.str();
    EXPECT_NE(s.str().find("\nphase 1 kiln_phase1 "), std::string::npos) << s.str();
  }
  const std::string replay = std::string(KILN_BINARY_DIR) + "/bin/kiln-replay";
  std::string out;
  EXPECT_EQ(runCommand(replay + " " + arch.string() + " --check-archive", out), 0) << out;

  // A corrupted expected file is caught by its digest, before any GPU is needed.
  {
    std::fstream f(arch / "rmsnorm" / "expected" / "y.f32", std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f);
    f.seekp(4);
    f.put('\x55');
  }
  EXPECT_NE(runCommand(replay + " " + arch.string() + " --check-archive", out), 0) << out;
  // The archive is read before any GPU is looked for: a broken one is named everywhere.
  EXPECT_EQ(runCommand(replay + " " + (arch / "no-such-archive").string(), out), 2) << out;
  EXPECT_NE(out.find("no-such-archive/index.txt"), std::string::npos) << out;
  fs::remove_all(arch / "rmsnorm");
  {
    std::ofstream idx(arch / "index.txt", std::ios::trunc);
    idx << "attention_split\n";
  }
  const fs::path results = arch / "results";
  fs::create_directories(results);
  const int rc = runCommand(replay + " " + arch.string() + " --out " + results.string() + " --visits 2", out);
  fs::remove_all(arch);
  if (rc == 77) {
    std::printf("skipped: no GPU (%s)\n", out.c_str());
    GTEST_SKIP() << "skipped: no GPU: " << out;
  }
  EXPECT_EQ(rc, 0) << out;
}

}  // namespace

// Kernels of several phases with workspaces (docs/ir.md, "Phases and workspaces"), and the
// library's split-KV attention built on them: the text form round-trips, the verifier names
// what is wrong, the interpreter and the compiled code run the phases in order with zero-filled
// workspaces, and the output bytes depend on the IR alone — never on threads, W or the ISA.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "driver/check.h"
#include "driver/compile.h"
#include "host/data.h"
#include "host_isa.h"
#include "interp/interp.h"
#include "ir/diag.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "kernels/registry.h"

namespace {

using namespace kiln;

// Phase 0 adds x into the workspace (which starts at zero on every launch); phase 1 sums
// neighbouring tiles of it into y, reading what other programs of phase 0 wrote.
const char* kTwoPhase = R"(
kernel @two_phase(%x: view<f32>[100], %y: view<f32>[100]) workspace(%w: view<f32>[112]) {
  parallel (%p) in (7) {
    %o = mul %p, 16 : i64
    %t = load %x[%o] as [n:16] fill 0
    %old = load %w[%o] as [n:16] fill 0
    %e = exp %t
    %r = add %old, %e
    store %r, %w[%o] as [n:16]
  }
  parallel (%q) in (7) {
    %o = mul %q, 16 : i64
    %o2 = add %o, 16
    %a = load %w[%o] as [n:16] fill 0
    %b = load %w[%o2] as [n:16] fill 0
    %s = add %a, %b
    store %s, %y[%o] as [n:16]
  }
}
)";

std::unique_ptr<ir::Kernel> parse(const std::string& text, std::string* error = nullptr) {
  ir::DiagEngine diag;
  auto k = ir::parseKernel(text, "phases.tile", diag);
  if (error) *error = diag.str();
  return k;
}

plan::Knobs knobs(std::initializer_list<std::string> sets) {
  plan::Knobs k;
  for (const std::string& s : sets) EXPECT_FALSE(k.setAssignment(s).has_value()) << s;
  return k;
}

driver::Compilation compiled(const ir::Kernel& k, const plan::Knobs& kn) {
  driver::Compilation c;
  auto err = driver::compile(k, kn, c);
  EXPECT_FALSE(err) << *err;
  return c;
}

// Loads the object with `threads` and runs it natively on `params` (inside guard zones).
void runNative(const ir::Kernel& k, const driver::Compilation& c, int threads, std::vector<host::ParamData>& params) {
  std::unique_ptr<runtime::LoadedKernel> loaded;
  auto err = driver::load(c.object, k, c.report["knobs"]["isa"].get<std::string>(), threads, loaded);
  ASSERT_FALSE(err) << *err;
  ASSERT_EQ(loaded->concurrency(), threads) << "the pool did not get the threads it asked for";
  err = driver::run(*loaded, params, /*guarded=*/true);
  ASSERT_FALSE(err) << *err;
}

TEST(Phases, TextRoundTripsAndTheVerifierNamesTheProblem) {
  std::string error;
  auto k = parse(kTwoPhase, &error);
  ASSERT_TRUE(k) << error;
  EXPECT_EQ(k->roots().size(), 2u);
  ASSERT_EQ(k->workspaces.size(), 1u);
  EXPECT_TRUE(k->phased());
  const std::string printed = ir::print(*k);
  EXPECT_NE(printed.find("workspace(%w: view<f32>[112])"), std::string::npos) << printed;
  auto again = parse(printed, &error);
  ASSERT_TRUE(again) << error;
  EXPECT_EQ(ir::print(*again), printed);
  // Only the params are arguments; outputs() and inputs() never list a workspace.
  EXPECT_EQ(driver::signature(*k).size(), 2u);
  ASSERT_EQ(k->outputs().size(), 1u);
  EXPECT_EQ(k->outputs()[0]->name, "y");

  EXPECT_FALSE(parse("kernel @a(%x: view<f32>[4]) workspace(%w: i64) {\n  parallel (%p) in (1) {\n  }\n}\n", &error));
  EXPECT_NE(error.find("a workspace is a view<f32>"), std::string::npos) << error;
  EXPECT_FALSE(
      parse("kernel @a(%x: view<f32>[4]) workspace(%w: view<f32>[0]) {\n  parallel (%p) in (1) {\n  }\n}\n", &error));
  EXPECT_NE(error.find("workspace extents are at least 1"), std::string::npos) << error;
  EXPECT_FALSE(
      parse("kernel @a(%x: view<f32>[4]) {\n  parallel (%p) in (1) {\n  }\n  %c = const 1 : i64\n}\n", &error));
  EXPECT_NE(error.find("outside a root parallel domain"), std::string::npos) << error;
  // A value of one phase is not visible in the next.
  EXPECT_FALSE(
      parse("kernel @a(%x: view<f32>[16]) {\n  parallel (%p) in (1) {\n    %t = load %x[0] as [n:16]\n  }\n"
            "  parallel (%q) in (1) {\n    store %t, %x[0] as [n:16]\n  }\n}\n",
            &error));
  EXPECT_NE(error.find("%t"), std::string::npos) << error;
}

TEST(Phases, PhaseKernelIsASelfContainedCopy) {
  auto k = parse(kTwoPhase);
  ASSERT_TRUE(k);
  auto p1 = ir::phaseKernel(*k, 1);
  ASSERT_EQ(p1->params.size(), 3u);  // x, y, then the workspace as a parameter
  EXPECT_EQ(p1->params[2]->name, "w");
  EXPECT_EQ(p1->params[2]->index, 2);
  EXPECT_EQ(p1->roots().size(), 1u);
  EXPECT_TRUE(p1->workspaces.empty());
  ir::DiagEngine diag;
  auto reparsed = ir::parseKernel(ir::print(*p1), "phase1.tile", diag);
  EXPECT_TRUE(reparsed) << diag.str();
  EXPECT_EQ(p1->roots()[0]->loc.line, k->roots()[1]->loc.line);  // positions kept
}

TEST(Phases, InterpreterRunsPhasesInOrderOnZeroedWorkspaces) {
  auto k = parse(kTwoPhase);
  ASSERT_TRUE(k);
  std::vector<host::ParamData> params;
  ASSERT_FALSE(host::makeInputs(*k, 5, {}, params));
  std::vector<float> x = params[0].data;
  interp::Options io;
  io.mode = interp::Mode::StrictF32;
  ASSERT_FALSE(interp::evaluate(*k, params, io));
  // w[i] = 0 + exp(x[i]) for i < 112 (x reads 0 past its end, exp(0) = 1); y[i] = w[i] + w[i + 16]
  // with w reading 0 past 112. Kiln's exp is its own algorithm: compare within 2^-20.
  auto w = [&](int i) { return i < 100 ? std::exp(double(x[i])) : i < 112 ? 1.0 : 0.0; };
  for (int i = 0; i < 100; ++i) ASSERT_NEAR(params[1].data[i], w(i) + w(i + 16), 1e-6 * (w(i) + w(i + 16))) << i;
}

TEST(Phases, CompiledBitsMatchTheInterpreterOnEveryRealizationAndThreadCount) {
  auto k = parse(kTwoPhase);
  ASSERT_TRUE(k);
  std::vector<host::ParamData> expected;
  ASSERT_FALSE(host::makeInputs(*k, 9, {}, expected));
  interp::Options io;
  io.mode = interp::Mode::StrictF32;
  ASSERT_FALSE(interp::evaluate(*k, expected, io));
  for (const char* lanes : {"local_lanes=W", "local_lanes=1"})
    for (const char* isa : {"isa=avx2", "isa=avx512"})
      for (const char* bs : {"block_size=auto", "block_size=16"}) {
        const driver::Compilation c = compiled(*k, knobs({lanes, isa, bs}));
        if (!testhost::runsHere(knobs({isa}).isa, std::string("Phases.CompiledBits ") + lanes + " " + isa + " " + bs))
          continue;
        for (int threads : {1, 2, 3, 8}) {
          std::vector<host::ParamData> params;
          ASSERT_FALSE(host::makeInputs(*k, 9, {}, params));
          // Launch twice: the workspace starts at zero on every launch, not where the last ended.
          runNative(*k, c, threads, params);
          runNative(*k, c, threads, params);
          EXPECT_EQ(params[1].data, expected[1].data) << lanes << " " << isa << " " << bs << " threads " << threads;
        }
      }
}

TEST(Phases, ReportListsPhasesAndWorkspaces) {
  auto k = parse(kTwoPhase);
  ASSERT_TRUE(k);
  driver::Compilation c;
  ASSERT_FALSE(driver::compile(*k, {}, c));
  EXPECT_EQ(c.report["domain"]["phases"], 2);
  ASSERT_EQ(c.report["phases"].size(), 2u);
  EXPECT_EQ(c.report["phases"][1]["domain"]["programs"], 7);
  EXPECT_EQ(c.report["workspaces"][0]["bytes"], 448);
  EXPECT_EQ(c.report["phases"][0]["at"], "phases.tile:3:3");
}

// ---- split-KV attention ----

std::unique_ptr<ir::Kernel> library(const std::string& shape, std::map<std::string, std::string> options) {
  kernels::LibraryRequest req{"attention", shape, std::move(options)};
  std::unique_ptr<ir::Kernel> k;
  auto err = kernels::buildLibraryKernel(req, k);
  EXPECT_FALSE(err) << *err;
  return k;
}

TEST(SplitKv, AutoSplitsFewProgramsOnlyAndSaysSo) {
  std::map<std::string, std::string> choices;
  ASSERT_FALSE(kernels::libraryChoices({"attention", "1,8,2,1,2053,80,96", {}}, choices));
  EXPECT_EQ(choices["split"], "7 chunks of 5 KV blocks (320 keys) (auto)");
  EXPECT_EQ(library("1,8,2,1,2053,80,96", {})->roots().size(), 2u);
  // Enough programs already (big prefill), or too few KV blocks: one phase.
  ASSERT_FALSE(kernels::libraryChoices({"attention", "1,32,8,512,512,128,128", {}}, choices));
  EXPECT_EQ(choices["split"], "off (auto)");
  ASSERT_FALSE(kernels::libraryChoices({"attention", "1,8,2,1,17,80,96", {}}, choices));
  EXPECT_EQ(choices["split"], "off (auto)");
  ASSERT_FALSE(kernels::libraryChoices({"attention", "1,8,2,1,2053,80,96", {{"split", "off"}}}, choices));
  EXPECT_EQ(choices["split"], "off (given)");
  EXPECT_EQ(library("1,8,2,1,2053,80,96", {{"split", "off"}})->roots().size(), 1u);
  std::unique_ptr<ir::Kernel> k;
  auto err = kernels::buildLibraryKernel({"attention", "1,8,2,1,2053,80,96", {{"split", "x"}}}, k);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("--split 'x'"), std::string::npos) << *err;
}

// Same bytes for threads 1, 2, 3, 8 (and both ISAs) for each split the IR fixes; each one
// bitexact against the interpreter and within the FP64 tolerance of the library reference.
TEST(SplitKv, BytesDependOnTheSplitOnlyNeverOnThreads) {
  for (const char* mask : {"none", "causal"})
    for (const char* split : {"off", "2", "3", "auto"}) {
      auto k = library("2,8,2,3,700,32,40", {{"split", split}, {"mask", mask}});
      ASSERT_TRUE(k);
      std::vector<host::ParamData> expected;
      ASSERT_FALSE(host::makeInputs(*k, 4, {}, expected));
      interp::Options io;
      io.mode = interp::Mode::StrictF32;
      ASSERT_FALSE(interp::evaluate(*k, expected, io));
      for (const char* isa : {"isa=avx2", "isa=avx512"}) {
        const driver::Compilation c = compiled(*k, knobs({isa}));
        if (!testhost::runsHere(knobs({isa}).isa, std::string("SplitKv.Bytes split ") + split + " " + mask + " " + isa))
          continue;
        for (int threads : {1, 2, 3, 8}) {
          std::vector<host::ParamData> params;
          ASSERT_FALSE(host::makeInputs(*k, 4, {}, params));
          runNative(*k, c, threads, params);
          EXPECT_EQ(params[3].data, expected[3].data)
              << "split " << split << " " << mask << " threads " << threads << " " << isa;
        }
      }
    }
}

// Decode shapes with K in {1, 17, 4099, 32768}, causal and none, GQA group 1/4/8: f64 against
// the library's FP64 reference and bitexact against the interpreter (split chosen by auto).
TEST(SplitKv, DecodeShapesPassF64AndBitexact) {
  for (int64_t K : {1, 17, 4099, 32768})
    for (int64_t group : {1, 4, 8})
      for (const char* mask : {"none", "causal"}) {
        const std::string shape = "1," + std::to_string(2 * group) + ",2,1," + std::to_string(K) + ",32,32";
        kernels::LibraryRequest req{"attention", shape, {{"mask", mask}}};
        std::unique_ptr<ir::Kernel> k;
        ASSERT_FALSE(kernels::buildLibraryKernel(req, k));
        for (auto mode : {driver::CheckMode::F64, driver::CheckMode::Bitexact}) {
          driver::CheckOptions o;
          o.mode = mode;
          if (mode == driver::CheckMode::F64)
            o.f64_reference = [&](const std::vector<host::ParamData>& in, std::vector<std::vector<double>>& out) {
              return kernels::libraryReference(req, in, out);
            };
          driver::CheckResult r;
          auto err = driver::check(*k, knobs({"threads=2"}), o, r);
          ASSERT_FALSE(err) << shape << ": " << *err;
          EXPECT_TRUE(r.pass) << shape << " " << mask << (mode == driver::CheckMode::F64 ? " f64" : " bitexact")
                              << ": max_abs " << r.max_abs_err;
        }
      }
}

}  // namespace

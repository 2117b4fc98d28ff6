// The differential tester's parts: the PRNG, the program generator (valid, deterministic), the
// knob grid sampler, the special-value inputs, the reproducer options and the shrinker.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

#include "fuzz/campaign.h"
#include "fuzz/differential.h"
#include "fuzz/generate.h"
#include "fuzz/knob_grid.h"
#include "fuzz/rng.h"
#include "fuzz/shrink.h"
#include "ir/diag.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace {

using namespace kiln;

std::unique_ptr<ir::Kernel> parse(const std::string& text) {
  ir::DiagEngine diag;
  auto k = ir::parseKernel(text, "test.tile", diag);
  EXPECT_TRUE(k) << diag.str();
  return k;
}

TEST(FuzzRng, IsSplitMix64) {
  // The published first outputs of SplitMix64 seeded with 0.
  fuzz::Rng r(0);
  EXPECT_EQ(r.next(), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(r.next(), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(r.next(), 0x06C45D188009454Full);
}

TEST(FuzzGenerator, EveryProgramOfSeeds1To200Verifies) {
  std::set<std::string> ops;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    fuzz::Program p;
    auto e = fuzz::generate(seed, p);
    ASSERT_FALSE(e) << *e;
    ASSERT_TRUE(p.kernel);
    ir::walk(p.kernel->body, [&](const ir::Op* op) {
      ops.insert(std::string(ir::opName(op->kind)));
      if (op->kind == ir::OpKind::Reduce) {
        ops.insert("reduce." + std::string(ir::reduceName(op->reduce)));
        if (op->reduce_policy.kind == ir::ReducePolicy::Kind::UnorderedTree)
          ops.insert(op->reduce_policy.partitions ? "unordered_tree(P)" : "unordered_tree");
      }
      if (op->kind == ir::OpKind::Mma && op->mma_policy.allow_fma) ops.insert("allow_fma");
      if (op->kind == ir::OpKind::Mma && op->mma_policy.allow_reassociation) ops.insert("allow_reassociation");
      if (op->kind == ir::OpKind::Mma && op->operands[0]->type.numElements() == 0) ops.insert("mma K=0");
      if (op->kind == ir::OpKind::Extract)
        for (const ir::Index& ix : op->indices)
          if (!ix.isConstant()) ops.insert("extract at a runtime index");
      if (ir::isLoop(op->kind) && !op->indices[1].isConstant()) ops.insert("runtime loop bound");
    });
  }
  // Every op family appears within 200 seeds.
  for (const char* want : {"load",
                           "store",
                           "const",
                           "iota",
                           "broadcast",
                           "neg",
                           "abs",
                           "exp",
                           "log",
                           "sqrt",
                           "rsqrt",
                           "tanh",
                           "erf",
                           "add",
                           "sub",
                           "mul",
                           "div",
                           "max",
                           "min",
                           "cmp",
                           "select",
                           "cast",
                           "reduce.add",
                           "reduce.max",
                           "reduce.min",
                           "reduce.mul",
                           "unordered_tree",
                           "unordered_tree(P)",
                           "mma",
                           "allow_fma",
                           "allow_reassociation",
                           "mma K=0",
                           "extract",
                           "extract at a runtime index",
                           "serial",
                           "pipeline",
                           "stage",
                           "yield",
                           "runtime loop bound"})
    EXPECT_TRUE(ops.count(want)) << "no " << want << " in seeds 1..200";
}

TEST(FuzzGenerator, SameSeedSameTextOtherSeedOtherText) {
  for (uint64_t seed : {1ull, 2ull, 77ull, 0xFFFFFFFFFFFFFFFFull}) {
    EXPECT_EQ(fuzz::generateText(seed).text, fuzz::generateText(seed).text);
    EXPECT_NE(fuzz::generateText(seed).text, fuzz::generateText(seed + 1).text);
  }
  EXPECT_EQ(fuzz::programSeed(1, 5), fuzz::programSeed(1, 5));
  EXPECT_NE(fuzz::programSeed(1, 5), fuzz::programSeed(1, 6));
  EXPECT_NE(fuzz::programSeed(1, 5), fuzz::programSeed(2, 5));
}

TEST(FuzzKnobGrid, DrawsLegalPointsAndPinnedKnobsWin) {
  std::set<std::string> seen;
  for (uint64_t s = 0; s < 200; ++s) {
    fuzz::Rng rng(s);
    fuzz::KnobPoint p = fuzz::randomKnobs(rng, {{"mma_output_block", "4"}});
    EXPECT_EQ(p.knobs.mma_output_block, 4);
    EXPECT_EQ(p.knobs.block_size % p.knobs.packet_width, 0);
    for (const std::string& a : p.assignments) {
      // Every recorded assignment is one the knob table accepts.
      plan::Knobs k;
      EXPECT_FALSE(k.setAssignment(a)) << a;
      seen.insert(a.substr(0, a.find('=')) + "=" + (a.find("=on") != std::string::npos ? "on" : "*"));
    }
  }
  for (const char* knob :
       {"packet_width", "block_size", "local_lanes", "max_unrolled_tile_elements", "max_unrolled_mma_terms",
        "max_unrolled_region_work", "full_packet_budget", "reduction_partitions", "threads"})
    EXPECT_TRUE(seen.count(std::string(knob) + "=*")) << knob;
  for (const char* knob : {"mma_indexable_snapshot", "full_packet", "fuse_recipes", "fast_math"})
    EXPECT_TRUE(seen.count(std::string(knob) + "=on")) << knob;
  // The ISA knob is drawn too (AVX2 and AVX-512 code must give the same bits).
  EXPECT_TRUE(seen.count("isa=*"));
  // With a kernel: its root domain's axes in a random order, or none given (the planner's own:
  // as written, or the longest programs first on a GPU, drawn on and off).
  auto k = parse(
      "kernel @k(%y: view<f32>[2, 3]) {\n  parallel (%i, %j) in (2, 3) {\n    %c = const 1 : f32\n"
      "    store %c, %y[%i, %j] as [_, _]\n  }\n}\n");
  ASSERT_TRUE(k);
  std::set<std::string> orders, heavy;
  for (uint64_t s = 0; s < 50; ++s) {
    fuzz::Rng rng(s);
    const fuzz::KnobPoint p = fuzz::randomKnobs(rng, {}, k.get());
    orders.insert(p.knobs.root_axis_order);
    heavy.insert(p.knobs.gpu_heavy_first ? "on" : "off");
  }
  EXPECT_EQ(orders, (std::set<std::string>{"", "i,j", "j,i"}));
  EXPECT_EQ(heavy, (std::set<std::string>{"on", "off"}));
  // Deterministic.
  fuzz::Rng a(9), b(9);
  EXPECT_EQ(fuzz::randomKnobs(a, {}).assignments, fuzz::randomKnobs(b, {}).assignments);
}

TEST(FuzzInputs, SpecialsInjectZerosDenormalsInfinitiesAndNaN) {
  auto k = parse(
      "kernel @k(%x: view<f32>[4096], %y: view<f32>[4096]) {\n  parallel (%p) in (1) {\n"
      "    %t = load %x[0] as [n:4096] fill 0\n    store %t, %y[0] as [n:4096]\n  }\n}\n");
  std::vector<host::ParamData> plain, special, again;
  ASSERT_FALSE(fuzz::makeFuzzInputs(*k, {7, false}, plain));
  ASSERT_FALSE(fuzz::makeFuzzInputs(*k, {7, true}, special));
  ASSERT_FALSE(fuzz::makeFuzzInputs(*k, {7, true}, again));
  int nan = 0, inf = 0, denormal = 0, zero = 0;
  for (float v : special[0].data) {
    nan += std::isnan(v);
    inf += std::isinf(v);
    denormal += std::fpclassify(v) == FP_SUBNORMAL;
    zero += v == 0.0f;
  }
  EXPECT_GT(nan, 0);
  EXPECT_GT(inf, 0);
  EXPECT_GT(denormal, 0);
  EXPECT_GT(zero, 0);
  for (float v : plain[0].data) EXPECT_TRUE(std::isfinite(v));
  EXPECT_EQ(0, std::memcmp(special[0].data.data(), again[0].data.data(), special[0].data.size() * sizeof(float)));
  for (float v : special[1].data) EXPECT_EQ(v, 0.0f);  // stored-only views are not inputs
}

TEST(FuzzDifferential, AGoodKernelPassesInAForkedChild) {
  auto k = parse(
      "kernel @k(%x: view<f32>[10, 33], %y: view<f32>[10, 33]) {\n  parallel (%p) in (10) {\n"
      "    %t = load %x[%p, 0] as [_, n:33] fill 0\n    %e = exp %t\n    %z = const 0 : f32\n    %s = reduce add %e "
      "over [n] init %z "
      "unordered_tree(16)\n    %b = broadcast %s : f32[n:33]\n    %r = div %e, %b\n"
      "    store %r, %y[%p, 0] as [_, n:33]\n  }\n}\n");
  ASSERT_TRUE(k);
  fuzz::Outcome o = fuzz::differential(*k, plan::Knobs{}, {3, true});
  EXPECT_EQ(o.verdict, fuzz::Verdict::Pass) << o.reason;
  plan::Knobs lanes;
  ASSERT_FALSE(lanes.set("local_lanes", "8"));
  o = fuzz::differential(*k, lanes, {3, false});
  if (o.verdict != fuzz::Verdict::Pass) {
    EXPECT_EQ(o.verdict, fuzz::Verdict::Refused) << o.reason;  // a clean refusal while it is not supported
    EXPECT_NE(o.reason.find("local_lanes"), std::string::npos) << o.reason;
  }
}

TEST(FuzzReplay, ReadsKnobsInputsAndNamesBadLines) {
  auto dir = std::filesystem::temp_directory_path() / "kiln_test_fuzz_replay";
  std::filesystem::create_directories(dir);
  {
    std::ofstream f(dir / "a.knobs");
    f << "--set packet_width=4\n--input-seed 12\n--specials\n";
  }
  fuzz::Replay r;
  ASSERT_FALSE(fuzz::readReplayOptions((dir / "a.knobs").string(), r));
  EXPECT_EQ(r.knobs.packet_width, 4);
  EXPECT_EQ(r.inputs.seed, 12u);
  EXPECT_TRUE(r.inputs.specials);
  {
    std::ofstream f(dir / "b.knobs");
    f << "--set packet_width=4\n--set packet_width=3\n";
  }
  auto e = fuzz::readReplayOptions((dir / "b.knobs").string(), r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("b.knobs:2"), std::string::npos) << *e;
  EXPECT_NE(e->find("packet_width"), std::string::npos) << *e;
  {
    std::ofstream f(dir / "c.knobs");
    f << "--threads 2\n";
  }
  e = fuzz::readReplayOptions((dir / "c.knobs").string(), r);
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("expected '--set NAME=VALUE'"), std::string::npos) << *e;
  std::filesystem::remove_all(dir);
}

int countOps(const ir::Kernel& k) {
  int n = 0;
  ir::walk(k.body, [&](const ir::Op*) { ++n; });
  return n;
}

bool hasOp(const ir::Kernel& k, ir::OpKind kind) {
  bool found = false;
  ir::walk(k.body, [&](const ir::Op* op) { found = found || op->kind == kind; });
  return found;
}

TEST(FuzzShrink, ASyntheticFailureShrinksToASmallProgram) {
  // The "failure": the kernel holds an exp and stores something. Find a big program that fails.
  fuzz::Program p;
  uint64_t seed = 1;
  for (;; ++seed) {
    ASSERT_FALSE(fuzz::generate(seed, p));
    if (hasOp(*p.kernel, ir::OpKind::Exp) && countOps(*p.kernel) >= 25) break;
    ASSERT_LT(seed, 500u) << "no big program with an exp in seeds 1..500";
  }
  auto fails = [](const ir::Kernel& k) { return hasOp(k, ir::OpKind::Exp) && hasOp(k, ir::OpKind::Store); };
  fuzz::ShrinkStats stats;
  std::string small = fuzz::shrink(p.text, fails, {}, &stats);
  auto k = parse(small);
  ASSERT_TRUE(k);
  EXPECT_TRUE(fails(*k)) << small;
  // parallel + exp + its operand (a const once shrunk) + store, plus at most a couple more.
  EXPECT_LE(countOps(*k), 6) << "from " << countOps(*p.kernel) << " ops:\n" << small;
  EXPECT_GT(stats.kept, 0);
  // Extents shrink too: every tile dim and every view dim ends at 1, the root domain at 1.
  ir::walk(k->body, [&](const ir::Op* op) {
    for (const ir::Value* r : op->results)
      for (const ir::Dim& d : r->type.dims) EXPECT_EQ(d.extent, 1) << small;
    for (int64_t e : op->extents) EXPECT_EQ(e, 1) << small;
  });
  for (const ir::Value* v : k->params) EXPECT_TRUE(v->type.isScalar() || v->type.numElements() == 1) << small;
  EXPECT_EQ(small, ir::print(*k));  // canonical text
}

TEST(FuzzShrink, KeepsOnlyChangesThatStillFail) {
  // A failure that needs a loop running at least twice: the loop stays, its trip count may not
  // drop to one.
  const std::string text =
      "kernel @k(%x: view<f32>[8], %y: view<f32>[1, 8]) {\n  parallel (%p) in (1) {\n"
      "    %t = load %x[0] as [n:8] fill 0\n    %z = const 0 : f32[n:8]\n"
      "    %r = serial %i = 0 to 3 step 1 iter(%a = %z) : f32[n:8] {\n      %b = add %a, %t\n      yield %b\n    }\n"
      "    store %r, %y[%p, 0] as [_, n:8]\n  }\n}\n";
  auto fails = [](const ir::Kernel& k) {
    bool loop = false;
    ir::walk(k.body, [&](const ir::Op* op) {
      loop = loop || (op->kind == ir::OpKind::Serial && op->indices.size() == 3 && op->indices[1].isConstant() &&
                      op->indices[1].constant - op->indices[0].constant >= 2);
    });
    return loop;
  };
  std::string small = fuzz::shrink(text, fails);
  auto k = parse(small);
  ASSERT_TRUE(k);
  EXPECT_TRUE(fails(*k)) << small;
  EXPECT_NE(small.find("serial"), std::string::npos) << small;
}

}  // namespace

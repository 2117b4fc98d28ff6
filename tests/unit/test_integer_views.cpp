// Integer views (docs/ir.md, "Integer views"): view<i32> and view<i64> parameters hold lengths,
// positions and tables; a load widens them to i64 tiles, a store narrows i64 tiles into them.
// The interpreter against values computed here, both CPU realizations against the
// interpreter over widths, ISAs and threads, and the errors of every layer.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "driver/check.h"
#include "driver/compile.h"
#include "host/data.h"
#include "host/npy.h"
#include "host_isa.h"
#include "interp/interp.h"
#include "ir/diag.h"
#include "ir/parser.h"
#include "ir/verifier.h"
#include "plan/knobs.h"
#include "runtime/runtime.h"

namespace {

using kiln::driver::CheckMode;

const std::vector<int64_t> kLens = {0, 1, 16, 17, 31, 32, 40, 5};  // every length 0 .. 40 of a row of x
const std::vector<int64_t> kRows = {7, 6, 5, 4, 3, 2, 1, 0};

std::unique_ptr<kiln::ir::Kernel> kernel() {
  kiln::ir::DiagEngine diag;
  auto k = kiln::ir::parseFile(std::string(KILN_SOURCE_DIR) + "/tests/ir/integer_views.tile", diag);
  EXPECT_TRUE(k && kiln::ir::verify(*k, diag)) << diag.str();
  return k;
}

std::unique_ptr<kiln::ir::Kernel> parse(const std::string& text, kiln::ir::DiagEngine& diag) {
  auto k = kiln::ir::parseKernel(text, "t.tile", diag);
  if (k && !kiln::ir::verify(*k, diag)) return nullptr;
  return k;
}

// The outputs of tests/ir/integer_views.tile, computed here from its definition.
void expectOutputs(const std::vector<kiln::host::ParamData>& p) {
  const std::vector<float>& x = p[0].data;
  for (int64_t prog = 0; prog < 8; ++prog) {
    const int64_t len = kLens[prog], row = kRows[prog];
    for (int64_t n = 0; n < 16; ++n) {
      // Whole steps of 16 over [0, len): column i + n while it lies inside the row of 40.
      float acc = 0.0f;
      for (int64_t i = 0; i < len; i += 16)
        if (i + n < 40) acc = acc + x[row * 40 + i + n];
      EXPECT_EQ(p[3].data[prog * 16 + n], acc) << "y " << prog << "," << n;
      const int64_t v = n * 1000000007 + len;
      EXPECT_EQ(p[4].ints[prog * 16 + n], static_cast<int32_t>(v)) << "o32 " << prog << "," << n;  // low 32 bits
      EXPECT_EQ(p[5].ints[prog * 16 + n], v) << "o64 " << prog << "," << n;
    }
    for (int64_t n = 0; n < 4; ++n) {
      const int64_t at = prog + n;
      EXPECT_EQ(p[6].ints[prog * 4 + n], (at < 8 ? kLens[at] : -7) + row) << "tail " << prog << "," << n;
    }
  }
}

TEST(IntegerViews, TheInterpreterLoadsWidensAndNarrowsAsDefined) {
  auto k = kernel();
  ASSERT_TRUE(k);
  for (auto mode : {kiln::interp::Mode::StrictF32, kiln::interp::Mode::F64}) {
    std::vector<kiln::host::ParamData> p;
    ASSERT_FALSE(kiln::host::makeInputs(*k, 3, {}, p).has_value());
    for (int64_t v : p[1].ints) EXPECT_TRUE(v >= -8 && v < 56) << v;  // loaded integer views: small integers
    EXPECT_EQ(p[4].ints, std::vector<int64_t>(128, 0));               // only stored: zeros
    p[1].ints = kLens;
    p[2].ints = kRows;
    kiln::interp::Options o;
    o.mode = mode;
    ASSERT_FALSE(kiln::interp::evaluate(*k, p, o).has_value());
    expectOutputs(p);
  }
}

TEST(IntegerViews, CompiledCodeMatchesTheInterpreterOnEveryRealization) {
  auto k = kernel();
  ASSERT_TRUE(k);
  const char* points[][4] = {{"local_lanes=1", "packet_width=8", "isa=avx2", "threads=1"},
                             {"local_lanes=1", "packet_width=16", "isa=avx512", "threads=2"},
                             {"local_lanes=1", "packet_width=4", "isa=avx512", "max_unrolled_tile_elements=1"},
                             {"local_lanes=16", "packet_width=16", "isa=avx2", "threads=2"},
                             {"local_lanes=16", "packet_width=16", "isa=avx512", "threads=1"},
                             {"local_lanes=8", "packet_width=8", "isa=avx2", "max_unrolled_tile_elements=4"},
                             {"local_lanes=4", "packet_width=4", "isa=avx512", "threads=2"}};
  for (const auto& point : points) {
    kiln::plan::Knobs knobs;
    std::string label;
    for (const char* s : point) {
      ASSERT_FALSE(knobs.setAssignment(s).has_value()) << s;
      label += std::string(s) + " ";
    }
    kiln::driver::Compilation c;
    ASSERT_FALSE(kiln::driver::compile(*k, knobs, c).has_value()) << label;
    EXPECT_EQ(kiln::driver::planDisagreesWithCode(c.report), std::nullopt) << label;
    if (!kiln::testhost::runsHere(knobs.isa, "IntegerViews " + label)) continue;
    kiln::driver::CheckOptions o;
    o.mode = CheckMode::Bitexact;
    o.int_views = {{"lens", kLens}, {"rows", kRows}};
    kiln::driver::CheckResult r;
    ASSERT_FALSE(kiln::driver::check(*k, knobs, o, r).has_value()) << label;
    EXPECT_TRUE(r.pass) << label;
    EXPECT_EQ(r.plan_vs_code, "") << label;
    expectOutputs(r.native);
  }
}

// The comparison check() applies to integer outputs: one differing element, or a missing one,
// fails and is located.
TEST(IntegerViews, AnIntegerOutputThatDiffersFailsTheComparison) {
  EXPECT_TRUE(kiln::host::compareInts({1, 2, 3}, {1, 2, 3}).pass);
  kiln::host::BitexactResult r = kiln::host::compareInts({1, 2, 3, 4}, {1, 2, 5, 6});
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.mismatches, 2);
  EXPECT_EQ(r.first_bad, 2);
  r = kiln::host::compareInts({1, 2}, {1, 2, 3});
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.first_bad, 2);
  // A table pointing past x: every load of x is its fill, on both sides.
  auto k = kernel();
  ASSERT_TRUE(k);
  kiln::driver::CheckOptions o;
  o.int_views = {{"lens", kLens}, {"rows", std::vector<int64_t>(8, 9)}};
  kiln::driver::CheckResult cr;
  ASSERT_FALSE(kiln::driver::check(*k, kiln::plan::Knobs{}, o, cr).has_value());
  EXPECT_TRUE(cr.pass);
  for (float v : cr.native[3].data) EXPECT_EQ(v, 0.0f);
}

TEST(IntegerViews, EveryLayerNamesWhatIsWrong) {
  kiln::ir::DiagEngine diag;
  EXPECT_FALSE(parse(R"(kernel @k(%l: view<i32>[4], %y: view<f32>[4]) {
  parallel (%p) in (1) {
    %t = load %l[0] as [n:4] fill 0.5
  }
})",
                     diag));
  EXPECT_NE(diag.str().find("the fill of a load from a view<i32> is an integer"), std::string::npos) << diag.str();
  diag = {};
  EXPECT_FALSE(parse(R"(kernel @k(%l: view<i32>[4], %y: view<f32>[4]) {
  parallel (%p) in (1) {
    %t = load %y[0] as [n:4] fill 0
    store %t, %l[0] as [n:4]
  }
})",
                     diag));
  EXPECT_NE(diag.str().find("a store into a view<i32> needs an i64 tile"), std::string::npos) << diag.str();
  diag = {};
  EXPECT_FALSE(parse(R"(kernel @k(%l: view<i32>[4]) workspace(%w: view<i32>[4]) {
  parallel (%p) in (1) {
    %t = load %l[0] as [n:4] fill 0
    store %t, %w[0] as [n:4]
  }
})",
                     diag));
  EXPECT_NE(diag.str().find("a workspace is a view<f32>"), std::string::npos) << diag.str();

  // The interpreter: an i32 view's elements lie in the i32 range.
  auto k = kernel();
  ASSERT_TRUE(k);
  std::vector<kiln::host::ParamData> p;
  ASSERT_FALSE(kiln::host::makeInputs(*k, 0, {}, p).has_value());
  p[1].ints[2] = int64_t{1} << 40;
  auto e = kiln::interp::evaluate(*k, p, {});
  ASSERT_TRUE(e);
  EXPECT_NE(e->find("element 2 = 1099511627776 is outside the i32 range"), std::string::npos) << *e;

  // The runtime: a typed buffer of another element type, or the wrong size, names the parameter.
  const kiln::runtime::ParamSpec spec = kiln::runtime::ParamSpec::view("lens", {8}, kiln::runtime::ViewElem::I32);
  EXPECT_EQ(spec.byte_size, 32);
  EXPECT_EQ(kiln::runtime::describe(spec), "i32[8]");
  EXPECT_EQ(kiln::runtime::ParamSpec::view("t", {2, 3}, kiln::runtime::ViewElem::I64).byte_size, 48);
  kiln::runtime::KernelEntry entry;
  entry.blocks = +[](void* const*, int64_t, int64_t, kiln::runtime::KilnLaunchRecord*) {};
  entry.num_blocks = 1;
  kiln::runtime::LoadedKernel loaded(entry, {spec}, 1);
  std::vector<float> floats(8);
  std::vector<int32_t> i32(8);
  std::vector<int64_t> i64(8);
  std::vector<kiln::runtime::Arg> args = {kiln::runtime::Arg::view(std::span<float>(floats))};
  auto err = loaded.checkArgs(args);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("lens"), std::string::npos) << *err;
  EXPECT_NE(err->find("a buffer of f32 elements for view i32[8]"), std::string::npos) << *err;
  args = {kiln::runtime::Arg::i64s(i64)};
  err = loaded.checkArgs(args);
  ASSERT_TRUE(err);
  EXPECT_NE(err->find("a buffer of i64 elements"), std::string::npos) << *err;
  args = {kiln::runtime::Arg::i32s(i32)};
  EXPECT_FALSE(loaded.checkArgs(args).has_value());
}

TEST(IntegerViews, NpyReadsAndWritesInt32AndInt64) {
  for (bool int32 : {true, false}) {
    const std::vector<int64_t> values = {0, -1, 2147483647, -2147483648LL, 5, 6};
    kiln::host::NpyArray a;
    ASSERT_FALSE(kiln::host::parseNpy(kiln::host::npyInts({2, 3}, values, int32), a).has_value());
    EXPECT_EQ(a.dtype, int32 ? "int32" : "int64");
    EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
    EXPECT_EQ(a.i64, values);
  }
  kiln::host::NpyArray a;
  ASSERT_FALSE(kiln::host::parseNpy(kiln::host::npyInts({1}, {int64_t{1} << 33}, true), a).has_value());
  EXPECT_EQ(a.i64[0], 0);  // int32 keeps the low 32 bits
}

}  // namespace

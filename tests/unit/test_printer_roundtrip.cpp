// Printer: canonical text, and print(parse(print(k))) == print(k) for every text kernel in
// tests/ir and examples (found at run time), and for kernels built through the Builder.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "ir/builder.h"
#include "ir/diag.h"
#include "ir/ir.h"
#include "ir/parser.h"
#include "ir/printer.h"

namespace kiln::ir {
namespace {

namespace fs = std::filesystem;

std::vector<std::string> tileFiles() {
  std::vector<std::string> out;
  for (const char* dir : {"tests/ir", "examples"}) {
    fs::path d = fs::path(KILN_SOURCE_DIR) / dir;
    std::error_code ec;
    if (!fs::is_directory(d, ec)) continue;
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.is_regular_file() && e.path().extension() == ".tile") out.push_back(e.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string reprint(const std::string& text, const std::string& name, std::string* diags = nullptr) {
  DiagEngine diag;
  auto k = parseKernel(text, name, diag);
  if (!k) {
    if (diags) *diags = diag.str();
    return {};
  }
  return print(*k);
}

class RoundTrip : public testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, PrintParsePrintIsStable) {
  const std::string path = GetParam();
  DiagEngine diag;
  auto k = parseFile(path, diag);
  ASSERT_NE(k, nullptr) << diag.str();
  const std::string once = print(*k);
  std::string diags;
  const std::string twice = reprint(once, path + " (printed)", &diags);
  ASSERT_FALSE(twice.empty()) << diags << "\n" << once;
  EXPECT_EQ(twice, once);
}

std::string testName(const testing::TestParamInfo<std::string>& info) {
  fs::path p(info.param);
  std::string name = p.parent_path().filename().string() + "_" + p.stem().string();
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

INSTANTIATE_TEST_SUITE_P(Files, RoundTrip, testing::ValuesIn(tileFiles()), testName);

TEST(RoundTripFiles, TestsIrHoldsEnoughKernels) {
  auto files = tileFiles();
  auto n = std::count_if(files.begin(), files.end(),
                         [](const std::string& f) { return f.find("/tests/ir/") != std::string::npos; });
  EXPECT_GE(n, 8);
}

// ---- canonical form ---------------------------------------------------------------------------

TEST(Printer, CanonicalForm) {
  const char* loose = R"(kernel @k(%x: view<f32>[4, 64], %y: view<f32>[64], %n: i64) {
  parallel (%p) in (4) {
    %o = mul %p, 16
    %t = load %x[0, %o] as [_, n:16]
    %z = const 0.1 : f32
    %r = reduce add %t over [n] init %z unordered_tree
    %s, %u = serial %i = 0 to %n iter(%a = %t, %b = %z) {
      yield %a, %b
    }
    pipeline %j = 0 to 2 step 1 {
      stage 0
      store %s, %y[%o] as [n:16]
    }
    %acc = const 0 : f32[m:1]
    %w = load %x[0, 0] as [m:1, n:16] fill -inf
    %c = mma %w, %t, %acc contract [n] allow_fma allow_reassociation
    %e = extract %c[0] : f32
  }
}
)";
  const char* canonical = R"(kernel @k(%x: view<f32>[4, 64], %y: view<f32>[64], %n: i64) {
  parallel (%p) in (4) {
    %lit0 = const 16 : i64
    %o = mul %p, %lit0 : i64
    %t = load %x[0, %o] as [_, n:16] fill 0 : f32[n:16]
    %z = const 0.1 : f32
    %r = reduce add %t over [n] init %z unordered_tree : f32
    %s, %u = serial %i = 0 to %n step 1 iter(%a = %t, %b = %z) : f32[n:16], f32 {
      yield %a, %b
    }
    pipeline %j = 0 to 2 step 1 {
      stage 0
      store %s, %y[%o] as [n:16]
      yield
    }
    %acc = const 0 : f32[m:1]
    %w = load %x[0, 0] as [m:1, n:16] fill -inf : f32[m:1, n:16]
    %c = mma %w, %t, %acc contract [n] allow_reassociation allow_fma : f32[m:1]
    %e = extract %c[0] : f32
  }
}
)";
  std::string diags;
  EXPECT_EQ(reprint(loose, "loose.tile", &diags), canonical) << diags;
  EXPECT_EQ(reprint(canonical, "canonical.tile", &diags), canonical) << diags;
}

TEST(Printer, LongParameterListsGoOnePerLine) {
  std::string params;
  for (int i = 0; i < 8; ++i) params += (i ? ", %v" : "%v") + std::to_string(i) + ": view<f32>[128, 128]";
  std::string text = "kernel @many(" + params + ") {\n  parallel (%p) in (1) {\n  }\n}\n";
  std::string diags;
  std::string once = reprint(text, "many.tile", &diags);
  ASSERT_FALSE(once.empty()) << diags;
  EXPECT_EQ(once.rfind("kernel @many(\n  %v0: view<f32>[128, 128],\n  %v1:", 0), 0u) << once;
  EXPECT_NE(once.find("  %v7: view<f32>[128, 128]\n) {\n"), std::string::npos) << once;
  EXPECT_EQ(reprint(once, "many2.tile"), once);
}

TEST(Printer, FormatF32) {
  EXPECT_EQ(formatF32(0.1f), "0.1");
  EXPECT_EQ(formatF32(0.1), "0.1");  // the double rounds to the same float
  EXPECT_EQ(formatF32(1.0 / 3.0), "0.33333334");
  EXPECT_EQ(formatF32(2.0), "2");
  EXPECT_EQ(formatF32(-0.0), "-0");
  EXPECT_EQ(formatF32(1e10), "10000000000");
  EXPECT_EQ(formatF32(1e30), "1e+30");
  EXPECT_EQ(formatF32(1e-7), "1e-07");
  EXPECT_EQ(formatF32(16777216.0), "16777216");
  EXPECT_EQ(formatF32(INFINITY), "inf");
  EXPECT_EQ(formatF32(-INFINITY), "-inf");
  EXPECT_EQ(formatF32(NAN), "nan");
  EXPECT_EQ(formatF32(1e300), "inf");  // beyond f32 range
}

// Every float prints to text that the parser reads back to the same bits.
TEST(Printer, FormatF32ReadsBackExactly) {
  std::mt19937 rng(42);
  auto check = [](float f) {
    std::string text = "kernel @k() {\n  parallel (%p) in (1) {\n    %c = const " + formatF32(f) + " : f32\n  }\n}\n";
    DiagEngine diag;
    auto k = parseKernel(text, "f.tile", diag);
    ASSERT_NE(k, nullptr) << diag.str();
    float back = static_cast<float>(k->root()->regions[0]->ops[0]->fconst);
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(back));
    } else {
      uint32_t a, b;
      std::memcpy(&a, &f, 4);
      std::memcpy(&b, &back, 4);
      EXPECT_EQ(a, b) << formatF32(f);
    }
  };
  for (float f : {0.0f, -0.0f, 1.0f, -1.0f, 1e-45f, 1.17549435e-38f, 3.40282347e38f, -3.40282347e38f, 0.1f, 123456.79f,
                  INFINITY, -INFINITY, NAN})
    check(f);
  for (int i = 0; i < 2000; ++i) {
    uint32_t bits = static_cast<uint32_t>(rng());
    float f;
    std::memcpy(&f, &bits, 4);
    check(f);
  }
}

// A kernel built through the Builder (the DSL's path) prints, parses and prints the same.
TEST(Printer, BuilderKernelRoundTrips) {
  Kernel k;
  DiagEngine diag;
  Builder b(k, diag);
  Loc loc{"dsl.cpp", 1, 1};
  k.name = "built";
  Value* x = b.param("x", Type::view(Elem::F32, {8, 16}), loc);
  Value* y = b.param("y", Type::view(Elem::F32, {8}), loc);
  Op* par = b.parallel({"row"}, {8}, loc);
  ASSERT_NE(par, nullptr);
  b.setInsertion(par->regions[0]);
  Value* row = par->regions[0]->args[0];
  Value* t = b.load(x, {Index{row, 0}, Index{nullptr, 0}}, {Dim{"", 1}, Dim{"n", 16}}, -INFINITY, loc, "t");
  Value* init = b.constF32(0.25, Type::scalar(Elem::F32), loc, "init");
  Value* r = b.reduce(ReduceKind::Max, t, {"n"}, init, ReducePolicy{ReducePolicy::Kind::UnorderedTree, 2}, loc, "r");
  Value* z = b.constF32(0, Type::tile(Elem::F32, {Dim{"n", 16}}), loc, "z");
  Op* loop = b.loop(OpKind::Serial, "i", Index{nullptr, 0}, Index{nullptr, 4}, 1, {{"acc", z}}, {"sum"}, loc);
  ASSERT_NE(loop, nullptr);
  b.setInsertion(loop->regions[0]);
  Value* s = b.binary(OpKind::Add, loop->regions[0]->args[1], t, loc, "s");
  b.yield({s}, loc);
  b.setInsertion(par->regions[0]);
  Value* e = b.extract(loop->results[0], {Index{nullptr, 3}}, loc, "e");
  Value* m = b.binary(OpKind::Max, r, e, loc, "m");
  b.store(y, {Index{row, 0}}, {Dim{"", 1}}, m, loc);
  ASSERT_FALSE(diag.hasErrors()) << diag.str();

  const std::string once = print(k);
  EXPECT_NE(once.find("%t = load %x[%row, 0] as [_, n:16] fill -inf : f32[n:16]"), std::string::npos) << once;
  EXPECT_NE(once.find("%r = reduce max %t over [n] init %init unordered_tree(2) : f32"), std::string::npos) << once;
  EXPECT_NE(once.find("%sum = serial %i = 0 to 4 step 1 iter(%acc = %z) : f32[n:16] {"), std::string::npos) << once;
  EXPECT_NE(once.find("store %m, %y[%row] as [_]"), std::string::npos) << once;
  std::string diags;
  EXPECT_EQ(reprint(once, "built.tile", &diags), once) << diags;
}

// The printer never crashes on a malformed kernel (the verifier's job is to reject it).
TEST(Printer, MalformedKernelPrints) {
  Kernel k;
  k.name = "bad";
  k.body = k.newRegion(nullptr);
  Op* op = k.newOp(OpKind::Add, Loc{});
  op->parent = k.body;
  k.body->ops.push_back(op);
  Op* loop = k.newOp(OpKind::Serial, Loc{});
  loop->parent = k.body;
  k.body->ops.push_back(loop);
  std::string text = print(k);
  EXPECT_NE(text.find("add"), std::string::npos);
  EXPECT_NE(text.find("serial"), std::string::npos);
}

}  // namespace
}  // namespace kiln::ir

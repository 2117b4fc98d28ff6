// The C++ DSL: builds verified kernels, broadcasts by name, names values, and reports mistakes
// at the test's own source line (std::source_location), never at the DSL's. Also keeps
// examples/*.tile equal to the printed DSL kernels (regenerate with KILN_REGENERATE_EXAMPLES=1).
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>

#include "host/data.h"
#include "interp/interp.h"
#include "ir/diag.h"
#include "ir/ir.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/rmsnorm.h"
#include "kernels/softmax.h"
#include "kiln/dsl.h"

namespace kiln::dsl {
namespace {

namespace fs = std::filesystem;

kernels::AttentionOptions blocks(int64_t bq, int64_t bk, bool causal = false) {
  kernels::AttentionOptions o;
  o.block_q = bq;
  o.block_k = bk;
  o.causal = causal;
  return o;
}

// The first diagnostic must point at `line` of this file.
void expectAt(const BuildResult& r, int line, const std::string& code) {
  ASSERT_FALSE(r) << "expected a diagnostic";
  ASSERT_FALSE(r.diagnostics.empty());
  const ir::Diagnostic& d = r.diagnostics.front();
  EXPECT_EQ(fs::path(d.loc.file).filename(), "test_dsl.cpp") << r.message();
  EXPECT_EQ(d.loc.line, line) << r.message();
  EXPECT_GT(d.loc.col, 0) << r.message();
  EXPECT_EQ(d.code, code) << r.message();
}

std::vector<const ir::Op*> opsOf(const ir::Kernel& k, ir::OpKind kind) {
  std::vector<const ir::Op*> out;
  ir::walk(k.body, [&](const ir::Op* op) {
    if (op->kind == kind) out.push_back(op);
  });
  return out;
}

TEST(Dsl, BuildsTheDocExample) {
  KernelBuilder kb("scale_exp");
  View x = kb.view("x", {1000}), y = kb.view("y", {1000});
  kb.parallel({{"p", 63}}, [&](Idx p) {
    Idx o = (p * 16).as("o");
    Tile t = load(x, {o}, {{"n", 16}}).as("t");
    store((exp(t) * 2.0).as("r"), y, {o}, {{"n", 16}});
  });
  BuildResult r = kb.finish();
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r.kernel->name, "scale_exp");
  ASSERT_EQ(r.kernel->params.size(), 2u);
  EXPECT_EQ(r.kernel->params[0]->name, "x");
  const std::string text = ir::print(*r.kernel);
  EXPECT_NE(text.find("%o = mul %p, %cst : i64"), std::string::npos) << text;
  EXPECT_NE(text.find("%t = load %x[%o] as [n:16] fill 0 : f32[n:16]"), std::string::npos) << text;
  // The printed form parses back and prints identically.
  ir::DiagEngine diag;
  auto reparsed = ir::parseKernel(text, "dsl", diag);
  ASSERT_TRUE(reparsed) << diag.str() << text;
  EXPECT_EQ(ir::print(*reparsed), text);
}

TEST(Dsl, OpsCarryTheCallersSourceLine) {
  KernelBuilder kb("k");
  View x = kb.view("x", {8});
  int line = 0;
  kb.parallel({{"p", 1}}, [&](Idx) {
    Tile t = load(x, {0}, {{"n", 8}});
    line = __LINE__ + 1;
    Tile u = t + 1.0;
    store(u, x, {0}, {{"n", 8}});
    const ir::Value* v = u.value();
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(fs::path(v->def->loc.file).filename(), "test_dsl.cpp");
    EXPECT_EQ(v->def->loc.line, line);
  });
  EXPECT_TRUE(kb.finish());
}

TEST(Dsl, BroadcastsByDimName) {
  KernelBuilder kb("k");
  View x = kb.view("x", {4, 8}), w = kb.view("w", {8}), y = kb.view("y", {4, 8});
  kb.parallel({{"p", 1}}, [&](Idx) {
    Tile t = load(x, {0, 0}, {{"m", 4}, {"n", 8}});
    Tile wt = load(w, {0}, {{"n", 8}});
    Tile rowSum = reduceSum(t, {"n"}, 0.0);                // [m]
    Tile r = (t * wt - rowSum) / 2.0;                      // [m,n] * [n], [m,n] - [m]
    Tile flipped = load(y, {0, 0}, {{"m", 4}, {"n", 8}});  // same dims: no broadcast needed
    store(r + flipped, y, {0, 0}, {{"m", 4}, {"n", 8}});
  });
  BuildResult r = kb.finish();
  ASSERT_TRUE(r) << r.message();
  auto bcasts = opsOf(*r.kernel, ir::OpKind::Broadcast);
  ASSERT_EQ(bcasts.size(), 2u);
  for (const ir::Op* b : bcasts) EXPECT_EQ(ir::toString(b->results[0]->type), "f32[m:4, n:8]");
}

TEST(Dsl, TransposedOperandIsBroadcastToTheLeftOrder) {
  KernelBuilder kb("k");
  View x = kb.view("x", {4, 8}), y = kb.view("y", {8, 4});
  kb.parallel({{"p", 1}}, [&](Idx) {
    Tile a = load(x, {0, 0}, {{"m", 4}, {"n", 8}});
    Tile b = load(y, {0, 0}, {{"n", 8}, {"m", 4}});
    Tile s = a + b;
    EXPECT_EQ(s.type(), "f32[m:4, n:8]");
    store(s, x, {0, 0}, {{"m", 4}, {"n", 8}});
  });
  EXPECT_TRUE(kb.finish());
}

TEST(Dsl, NamesAreReadableAndUnique) {
  KernelBuilder kb("k");
  View x = kb.view("x", {8});
  kb.parallel({{"p", 1}}, [&](Idx p) {
    Tile a = load(x, {0}, {{"n", 8}}).as("s");
    Tile b = (a * a).as("s");
    Tile c = (b + a).as("x");  // a parameter's name: uniquified
    EXPECT_EQ(a.name(), "s");
    EXPECT_EQ(b.name(), "s.1");
    EXPECT_EQ(c.name(), "x.1");
    EXPECT_EQ(p.name(), "p");
    store(c, x, {0}, {{"n", 8}});
  });
  EXPECT_TRUE(kb.finish());
}

TEST(Dsl, SerialLoopCarriesValues) {
  KernelBuilder kb("k");
  View x = kb.view("x", {64}), y = kb.view("y", {16});
  kb.parallel({{"p", 1}}, [&](Idx) {
    Carry init{"acc", kb.zeros({{"n", 16}})};
    auto [acc] = kb.serial("i", 0, 4, {init}, [&](Idx i, Tile acc) { return acc + load(x, {i * 16}, {{"n", 16}}); });
    store(acc, y, {0}, {{"n", 16}});
  });
  BuildResult r = kb.finish();
  ASSERT_TRUE(r) << r.message();
  std::vector<host::ParamData> params;
  ASSERT_FALSE(host::makeInputs(*r.kernel, 1, {}, params));
  std::vector<float> xs = params[0].data;
  ASSERT_FALSE(interp::evaluate(*r.kernel, params, {}));
  for (int n = 0; n < 16; ++n) {
    double want = 0;
    for (int i = 0; i < 4; ++i) want += xs[i * 16 + n];
    EXPECT_NEAR(params[1].data[n], want, 1e-6);
  }
}

TEST(Dsl, PipelineWithStagesVerifies) {
  KernelBuilder kb("k");
  View a = kb.view("a", {4, 32}), b = kb.view("b", {32, 4}), c = kb.view("c", {4, 4});
  kb.parallel({{"p", 1}}, [&](Idx) {
    auto [acc] = kb.pipeline({"kk", 8}, 0, 32, {Carry{"acc", kb.zeros({{"m", 4}, {"n", 4}})}}, [&](Idx kk, Tile acc) {
      kb.stage(0);
      Tile at = load(a, {0, kk}, {{"m", 4}, {"k", 8}});
      Tile bt = load(b, {kk, 0}, {{"k", 8}, {"n", 4}});
      kb.stage(1);
      return mma(at, bt, acc, {"k"});
    });
    store(acc, c, {0, 0}, {{"m", 4}, {"n", 4}});
  });
  BuildResult r = kb.finish();
  ASSERT_TRUE(r) << r.message();
  ASSERT_EQ(opsOf(*r.kernel, ir::OpKind::Pipeline).size(), 1u);
  EXPECT_EQ(opsOf(*r.kernel, ir::OpKind::Pipeline)[0]->indices[2].constant, 8);
  EXPECT_EQ(opsOf(*r.kernel, ir::OpKind::Stage).size(), 2u);
}

TEST(Dsl, IndexArithmeticStaysI64) {
  KernelBuilder kb("k");
  View x = kb.view("x", {100});
  Idx off = kb.scalarI64("off");
  Tile s = kb.scalarF32("s");
  kb.parallel({{"p", 3}, {"q", 2}}, [&](Idx p, Idx q) {
    Idx o = (p * 2 + q) * 8 / 3 - 1 + off;
    Idx o2 = 5 + o;
    EXPECT_EQ(o2.type(), "i64");
    Tile t = load(x, {o2}, {{"n", 8}});
    Tile pos = toF32(kb.iota({{"n", 8}}, "n") + o2);  // Tile + Idx: a tile
    EXPECT_EQ(pos.type(), "f32[n:8]");
    store(select(lt(t, 0.0), pos * s, -t), x, {o2}, {{"n", 8}});
  });
  BuildResult r = kb.finish();
  ASSERT_TRUE(r) << r.message();
  EXPECT_EQ(r.kernel->params.size(), 3u);
}

// ---- mistakes: a diagnostic at the line of this file that made them ----

TEST(DslErrors, TilesThatCannotBroadcast) {
  KernelBuilder kb("k");
  View x = kb.view("x", {4, 8});
  int line = 0;
  kb.parallel({{"p", 1}}, [&](Idx) {
    Tile a = load(x, {0, 0}, {{"m", 4}, _});
    Tile b = load(x, {0, 0}, {_, {"n", 8}});
    line = __LINE__ + 1;
    Tile c = a + b;
    Tile d = exp(c) * 2.0;  // builds nothing more, reports nothing more
    store(d, x, {0, 0}, {{"m", 4}, _});
  });
  BuildResult r = kb.finish();
  expectAt(r, line, "broadcast");
  EXPECT_EQ(r.diagnostics.size(), 1u) << r.message();
  EXPECT_NE(r.diagnostics[0].message.find("f32[m:4]"), std::string::npos);
}

// The bf16 mma orders stand alone (docs/ir.md, MMA), in the DSL as in the text form.
TEST(DslErrors, Bf16OrdersTakeNoOtherMmaFlag) {
  for (const auto& [flags, message] :
       {std::pair{MmaFlags{.fused = true, .bf16_pairs = true}, "bf16_pairs is an order of its own"},
        {MmaFlags{.partitions = 4, .bf16_dot = true}, "bf16_dot is an order of its own"},
        {MmaFlags{.bf16_dot = true, .bf16_pairs = true}, "two different orders"},
        {MmaFlags{.partitions = 17}, "partition count 17 is outside 1..16"}}) {
    KernelBuilder kb("k");
    View x = kb.view("x", {4, 8});
    View y = kb.view("y", {4, 4});
    int line = 0;
    kb.parallel({{"p", 1}}, [&](Idx) {
      Tile a = load(x, {0, 0}, {{"m", 4}, {"k", 8}});
      Tile b = load(x, {0, 0}, {{"n", 4}, {"k", 8}});
      line = __LINE__ + 1;
      Tile c = mma(a, b, kb.zeros({{"m", 4}, {"n", 4}}), {"k"}, flags);
      store(c, y, {0, 0}, {{"m", 4}, {"n", 4}});
    });
    BuildResult r = kb.finish();
    expectAt(r, line, "policy");
    EXPECT_NE(r.message().find(message), std::string::npos) << r.message();
  }
}

TEST(DslErrors, SameNameDifferentExtent) {
  KernelBuilder kb("k");
  View x = kb.view("x", {16});
  int line = 0;
  kb.parallel({{"p", 1}}, [&](Idx) {
    Tile a = load(x, {0}, {{"n", 8}});
    Tile b = load(x, {0}, {{"n", 16}});
    line = __LINE__ + 1;
    store(max(a, b), x, {0}, {{"n", 8}});
  });
  expectAt(kb.finish(), line, "broadcast");
}

TEST(DslErrors, ValueUsedAfterItsLoop) {
  KernelBuilder kb("k");
  View x = kb.view("x", {64});
  int line = 0;
  kb.parallel({{"p", 1}}, [&](Idx) {
    Tile inside;
    kb.serial("i", 0, 4, [&](Idx i) { inside = load(x, {i * 16}, {{"n", 16}}); });
    line = __LINE__ + 1;
    store(inside, x, {0}, {{"n", 16}});
  });
  BuildResult r = kb.finish();
  ASSERT_FALSE(r);
  bool found = false;
  for (const ir::Diagnostic& d : r.diagnostics)
    found = found || (fs::path(d.loc.file).filename() == "test_dsl.cpp" && d.loc.line == line);
  EXPECT_TRUE(found) << r.message();
}

TEST(DslErrors, TypeRuleOfTheBuilder) {
  KernelBuilder kb("k");
  View x = kb.view("x", {4, 8});
  int line = 0;
  kb.parallel({{"p", 1}}, [&](Idx) {
    Tile a = load(x, {0, 0}, {{"m", 4}, {"k", 8}});
    Tile acc = kb.zeros({{"m", 4}, {"m2", 4}});
    line = __LINE__ + 1;
    Tile c = mma(a, a, acc, {"d"});
    store(c, x, {0, 0}, {{"m", 4}, _});
  });
  expectAt(kb.finish(), line, "mma-contract");
}

TEST(DslErrors, LoopBodyReturnsTheWrongNumberOfValues) {
  KernelBuilder kb("k");
  View x = kb.view("x", {8});
  int line = 0;
  kb.parallel({{"p", 1}}, [&](Idx) {
    Tile z = kb.zeros({{"n", 8}});
    line = __LINE__ + 1;
    auto [a, b] = kb.serial("i", 0, 2, {z, z}, [&](Idx, Tile first, Tile) { return Tiles{first}; });
    store(a + b, x, {0}, {{"n", 8}});
  });
  expectAt(kb.finish(), line, "yield-arity");
}

TEST(DslErrors, NonIntegralLiteralWithAnIndex) {
  KernelBuilder kb("k");
  View x = kb.view("x", {8});
  int line = 0;
  kb.parallel({{"p", 1}}, [&](Idx) {
    Tile i = kb.iota({{"n", 8}}, "n");
    line = __LINE__ + 1;
    Tile j = i * 0.5;
    store(toF32(j), x, {0}, {{"n", 8}});
  });
  expectAt(kb.finish(), line, "elem-type");
}

TEST(DslErrors, ElementTypesAreNeverConvertedSilently) {
  KernelBuilder kb("k");
  View x = kb.view("x", {8});
  int line = 0;
  kb.parallel({{"p", 1}}, [&](Idx) {
    Tile t = load(x, {0}, {{"n", 8}});
    line = __LINE__ + 1;
    Tile u = t + kb.iota({{"n", 8}}, "n");
    store(u, x, {0}, {{"n", 8}});
  });
  expectAt(kb.finish(), line, "elem-type");
}

TEST(DslErrors, UnassignedTile) {
  KernelBuilder kb("k");
  View x = kb.view("x", {8});
  int line = 0;
  kb.parallel({{"p", 1}}, [&](Idx) {
    Tile never;
    line = __LINE__ + 1;
    store(never, x, {0}, {{"n", 8}});
  });
  expectAt(kb.finish(), line, "unset-tile");
}

TEST(DslErrors, ParallelBodyArity) {
  KernelBuilder kb("k");
  const int line = __LINE__ + 1;
  kb.parallel({{"p", 2}, {"q", 2}}, [&](Idx) {});
  expectAt(kb.finish(), line, "parallel-arity");
}

TEST(DslErrors, MissingParallelIsAVerifierError) {
  KernelBuilder kb("k");
  kb.view("x", {8});
  BuildResult r = kb.finish();
  ASSERT_FALSE(r);
  EXPECT_FALSE(r.diagnostics.empty());
}

TEST(DslErrors, KernelShapeErrorsAreDiagnostics) {
  BuildResult r = kernels::attention({1, 3, 2, 1, 8, 4, 4});
  ASSERT_FALSE(r);
  EXPECT_EQ(r.diagnostics[0].code, "bad-shape");
  EXPECT_FALSE(kernels::gemm({0, 4, 4}));
  EXPECT_FALSE(kernels::softmax(4, 0));
}

// ---- the library kernels build and verify ----

TEST(DslKernels, AllVerify) {
  std::vector<std::pair<std::string, BuildResult>> ks;
  ks.emplace_back("mha", kernels::attention({1, 8, 8, 1, 2048, 64, 64}));
  ks.emplace_back("decode", kernels::attention({1, 8, 2, 1, 2053, 80, 96}, blocks(1, 16)));
  ks.emplace_back("prefill", kernels::attention({1, 4, 2, 32, 65, 32, 32}, blocks(4, 16, true)));
  ks.emplace_back("k0", kernels::attention({1, 2, 1, 3, 0, 8, 8}, blocks(2, 4, true)));
  ks.emplace_back("gemm", kernels::gemm({13, 10, 21}, {4, 8, 8}));
  ks.emplace_back("gemm_tn", kernels::gemm({13, 10, 21}, {4, 8, 8}, true));
  ks.emplace_back("gelu", kernels::gelu(1000, 64));
  ks.emplace_back("softmax", kernels::softmax(10, 33, 4));
  ks.emplace_back("rmsnorm", kernels::rmsnorm(10, 48, 1e-5, 4));
  for (auto& [name, r] : ks) {
    EXPECT_TRUE(r) << name << ":\n" << r.message();
    if (!r) continue;
    ir::DiagEngine diag;
    auto reparsed = ir::parseKernel(ir::print(*r.kernel), name, diag);
    EXPECT_TRUE(reparsed) << name << ":\n" << diag.str();
  }
}

// softmax's `width` (a GPU reads a row as a padded tile): the columns past the end read -inf,
// add +0 to the sums and change no maximum, so every output has the unpadded row's bits, edge
// rows included (-inf elements, a row of -inf, +inf, signed zeros, fewer columns than partitions).
TEST(DslKernels, PaddedSoftmaxRowsHaveTheUnpaddedBits) {
  struct Case {
    int64_t rows, cols, width;
  };
  for (const Case& t : {Case{6, 10, 32}, Case{6, 1000, 1024}, Case{6, 3000, 3072}}) {
    SCOPED_TRACE(t.cols);
    BuildResult padded =
        kernels::softmax(t.rows, t.cols, 1, t.width, false, FloatElem::F32, unorderedTree(16), true, 0, t.width);
    BuildResult plain =
        kernels::softmax(t.rows, t.cols, 1, t.cols, false, FloatElem::F32, unorderedTree(16), true, 0, 0);
    ASSERT_TRUE(padded) << padded.message();
    ASSERT_TRUE(plain) << plain.message();
    EXPECT_NE(ir::print(*padded.kernel).find(fmt::format("c:{}] fill -inf", t.width)), std::string::npos);
    std::vector<host::ParamData> in;
    ASSERT_FALSE(host::makeInputs(*plain.kernel, 11, {}, in));
    std::vector<float>& x = in[0].data;
    const float inf = std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < t.cols; ++c) {
      if (c % 3 == 0) x[0 * t.cols + c] = -inf;      // row 0: a third -inf
      x[1 * t.cols + c] = -inf;                      // row 1: all -inf (NaN, both)
      x[2 * t.cols + c] = c % 2 ? -0.0f : 0.0f;      // row 2: signed zeros
      if (c == t.cols / 2) x[3 * t.cols + c] = inf;  // row 3: one +inf
    }
    std::vector<host::ParamData> a = in, b = in;
    const interp::Options strict{interp::Mode::StrictF32};
    ASSERT_FALSE(interp::evaluate(*padded.kernel, a, strict));
    ASSERT_FALSE(interp::evaluate(*plain.kernel, b, strict));
    for (size_t i = 0; i < a[1].data.size(); ++i) {
      const float u = a[1].data[i], v = b[1].data[i];
      if (std::isnan(u) && std::isnan(v)) continue;
      ASSERT_EQ(std::bit_cast<uint32_t>(u), std::bit_cast<uint32_t>(v)) << "element " << i << ": " << u << " " << v;
    }
  }
}

TEST(DslKernels, SimpleKernelsComputeWhatTheySay) {
  auto run = [](const BuildResult& r, std::vector<host::ParamData>& params, interp::F64Views& out) {
    ASSERT_TRUE(r) << r.message();
    ASSERT_FALSE(host::makeInputs(*r.kernel, 7, {}, params));
    std::vector<host::ParamData> copy = params;
    auto err = interp::evaluate(*r.kernel, copy, {}, &out);
    ASSERT_FALSE(err) << *err;
  };
  {  // gelu, ragged tail
    std::vector<host::ParamData> p;
    interp::F64Views out;
    run(kernels::gelu(100, 16), p, out);
    for (int i = 0; i < 100; ++i) {
      double x = p[0].data[i];
      double want = 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)));
      EXPECT_NEAR(out[1][i], want, 1e-6) << i;
    }
  }
  {  // softmax
    std::vector<host::ParamData> p;
    interp::F64Views out;
    run(kernels::softmax(7, 5, 3), p, out);
    for (int r = 0; r < 7; ++r) {
      double m = -INFINITY, s = 0;
      for (int c = 0; c < 5; ++c) m = std::max(m, double(p[0].data[r * 5 + c]));
      for (int c = 0; c < 5; ++c) s += std::exp(p[0].data[r * 5 + c] - m);
      for (int c = 0; c < 5; ++c) EXPECT_NEAR(out[1][r * 5 + c], std::exp(p[0].data[r * 5 + c] - m) / s, 1e-6);
    }
  }
  {  // rmsnorm
    std::vector<host::ParamData> p;
    interp::F64Views out;
    run(kernels::rmsnorm(5, 6, 1e-5, 2), p, out);
    for (int r = 0; r < 5; ++r) {
      double ss = 0;
      for (int c = 0; c < 6; ++c) ss += double(p[0].data[r * 6 + c]) * p[0].data[r * 6 + c];
      double inv = 1 / std::sqrt(ss / 6 + double(float(1e-5)));
      for (int c = 0; c < 6; ++c) EXPECT_NEAR(out[2][r * 6 + c], p[0].data[r * 6 + c] * inv * p[1].data[c], 1e-6);
    }
  }
}

// ---- examples/*.tile are the printed DSL kernels ----

struct Example {
  std::string file;
  std::string header;  // comment lines (without '#') saying what it computes
  std::function<BuildResult()> build;
};

std::vector<Example> examples() {
  const char* regen = "regenerate: KILN_REGENERATE_EXAMPLES=1 <build>/bin/test_dsl --gtest_filter='Examples.*'";
  return {
      {"elementwise.tile",
       "GELU (tanh form), elementwise: y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).\n"
       "Shape: x, y [1000]; 64 elements per program (the last program is ragged).\n"
       "Built by kiln::kernels::gelu(1000, 64) (src/kernels/elementwise.cpp).\n" +
           std::string(regen),
       [] { return kernels::gelu(1000, 64); }},
      {"softmax.tile",
       "Row softmax: y[r, :] = exp(x[r, :] - max(x[r, :])) / sum(exp(x[r, :] - max(x[r, :]))).\n"
       "Shape: x, y [10, 33]; 4 rows per program (the last program is ragged).\n"
       "Built by kiln::kernels::softmax(10, 33, 4) (src/kernels/softmax.cpp).\n" +
           std::string(regen),
       [] { return kernels::softmax(10, 33, 4); }},
      {"rmsnorm.tile",
       "RMSNorm: y[r, c] = x[r, c] / sqrt(mean(x[r, :]^2) + eps) * w[c], eps = 1e-5.\n"
       "Shape: x, y [10, 48], w [48]; 4 rows per program.\n"
       "Built by kiln::kernels::rmsnorm(10, 48, 1e-5, 4) (src/kernels/rmsnorm.cpp).\n" +
           std::string(regen),
       [] { return kernels::rmsnorm(10, 48, 1e-5, 4); }},
      {"gemm.tile",
       "GEMM: c[M, N] = a[M, K] . b[K, N], with ragged M, N and K.\n"
       "Shape: M=37 N=20 K=45; tiles 16x8, K step 16; out-of-range loads read 0; fused mma.\n"
       "Built by kiln::kernels::gemm({37, 20, 45}, {16, 8, 16}) (src/kernels/gemm.cpp).\n" +
           std::string(regen),
       [] {
         return kernels::gemm({37, 20, 45}, {16, 8, 16});
       }},
      {"attention_decode.tile",
       "Attention, decode step with grouped-query heads (4 query heads per KV head):\n"
       "  o[b,h,i,:] = softmax_j(q[b,h,i,:] . k[b,h/4,j,:] * scale) . v[b,h/4,j,:], scale = 1/sqrt(80).\n"
       "Shape: B=1 Hq=8 Hkv=2 Q=1 K=67 D=80 Dv=96; block 1x16 (queries x keys), not causal; one program\n"
       "per KV head, its rows the 4 query heads of the group (K and V read once per group); fused mma.\n"
       "Built by kiln::kernels::attention({1, 8, 2, 1, 67, 80, 96}) with block_q=1, "
       "block_k=16\n(src/kernels/attention.cpp).\n" +
           std::string(regen),
       [] {
         return kernels::attention({1, 8, 2, 1, 67, 80, 96}, blocks(1, 16));
       }},
      {"attention_prefill.tile",
       "Attention, causal prefill (bottom-right aligned) with grouped-query heads (2 per KV head):\n"
       "  o[b,h,i,:] = softmax_{j <= i+K-Q}(q[b,h,i,:] . k[b,h/2,j,:] * scale) . v[b,h/2,j,:], scale = 1/sqrt(32).\n"
       "Shape: B=1 Hq=4 Hkv=2 Q=32 K=65 D=32 Dv=32; block 4x16 (queries x keys); one program per\n"
       "(KV head, query block), its rows 2 query heads x 4 queries; fused mma.\n"
       "Built by kiln::kernels::attention({1, 4, 2, 32, 65, 32, 32}) with block_q=4, block_k=16, "
       "causal=true\n(src/kernels/attention.cpp).\n" +
           std::string(regen),
       [] {
         return kernels::attention({1, 4, 2, 32, 65, 32, 32}, blocks(4, 16, true));
       }},
  };
}

std::string exampleText(const Example& e, const ir::Kernel& k) {
  std::string out;
  std::istringstream lines(e.header);
  for (std::string line; std::getline(lines, line);) out += "# " + line + "\n";
  return out + ir::print(k);
}

TEST(Examples, MatchThePrintedDslKernels) {
  const bool regenerate = std::getenv("KILN_REGENERATE_EXAMPLES") != nullptr;
  for (const Example& e : examples()) {
    BuildResult r = e.build();
    ASSERT_TRUE(r) << e.file << ":\n" << r.message();
    const std::string want = exampleText(e, *r.kernel);
    const fs::path path = fs::path(KILN_SOURCE_DIR) / "examples" / e.file;
    if (regenerate) {
      std::ofstream(path) << want;
      continue;
    }
    std::ifstream in(path);
    std::stringstream got;
    got << in.rdbuf();
    EXPECT_EQ(got.str(), want) << path << " is out of date with the DSL kernel; regenerate it with\n"
                               << "  KILN_REGENERATE_EXAMPLES=1 <build>/bin/test_dsl --gtest_filter='Examples.*'";
  }
}

TEST(Examples, ParseAndEvaluate) {
  for (const Example& e : examples()) {
    const fs::path path = fs::path(KILN_SOURCE_DIR) / "examples" / e.file;
    ir::DiagEngine diag;
    auto k = ir::parseFile(path.string(), diag);
    ASSERT_TRUE(k) << diag.str();
    std::vector<host::ParamData> params;
    ASSERT_FALSE(host::makeInputs(*k, 1, {}, params));
    for (interp::Mode mode : {interp::Mode::F64, interp::Mode::StrictF32}) {
      std::vector<host::ParamData> p = params;
      interp::Options opt;
      opt.mode = mode;
      auto err = interp::evaluate(*k, p, opt);
      EXPECT_FALSE(err) << e.file << ": " << *err;
    }
  }
}

}  // namespace
}  // namespace kiln::dsl

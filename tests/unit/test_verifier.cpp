// Verifier: good kernels pass silently; each kind of bad kernel (built through the Builder the
// way a DSL user could, or assembled by hand past the Builder) gets its diagnostic code at the
// right op, and nothing makes the verifier abort.
#include "ir/verifier.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "ir/builder.h"

namespace kiln::ir {
namespace {

Loc L(int line, int col = 1) {
  return Loc{"t.tile", line, col};
}

Type f32(std::vector<Dim> dims) {
  return Type::tile(Elem::F32, std::move(dims));
}
const Type kF32 = Type::scalar(Elem::F32);
const Type kI64 = Type::scalar(Elem::I64);

// Appends an op past the Builder (no type check), for kernels the Builder would refuse.
Op* raw(Kernel& k, Region* at, OpKind kind, std::vector<Value*> operands, std::vector<Type> results, Loc loc,
        const std::string& name = "") {
  Op* op = k.newOp(kind, loc);
  op->operands = std::move(operands);
  for (size_t i = 0; i < results.size(); ++i) {
    Value* v = k.newValue(name.empty() ? "r" + std::to_string(k.values.size()) : name, results[i],
                          Value::Origin::OpResult, loc);
    v->def = op;
    v->index = static_cast<int>(i);
    op->results.push_back(v);
  }
  op->parent = at;
  at->ops.push_back(op);
  return op;
}

struct Fixture : ::testing::Test {
  Kernel k;
  DiagEngine d;
  Builder b{k, d};
  Value* x = nullptr;
  Value* y = nullptr;
  Op* par = nullptr;

  // kernel @t(%x: view<f32>[64], %y: view<f32>[64]) { parallel (%p) in (4) { <here> } }
  void SetUp() override {
    k.name = "t";
    k.loc = L(1);
    x = b.param("x", Type::view(Elem::F32, {64}), L(1, 10));
    y = b.param("y", Type::view(Elem::F32, {64}), L(1, 30));
    par = b.parallel({"p"}, {4}, L(2, 3));
    ASSERT_NE(par, nullptr);
    b.setInsertion(body(par));
  }
  static Region* body(Op* op) { return op->regions[0]; }
  Value* p() { return par->regions[0]->args[0]; }
  Value* loadN(int64_t n, const Loc& loc, const std::string& name = "t") {
    return b.load(x, {Index{p(), 0}}, {Dim{"n", n}}, 0.0, loc, name);
  }

  bool run() {
    EXPECT_FALSE(d.hasErrors()) << "the builder already complained:\n" << d.str();
    d.clear();
    return verify(k, d);
  }
  // The codes reported, in order.
  std::vector<std::string> codes() const {
    std::vector<std::string> out;
    for (const Diagnostic& x : d.all()) out.push_back(x.code);
    return out;
  }
  const Diagnostic* find(const std::string& code) const {
    for (const Diagnostic& x : d.all())
      if (x.code == code) return &x;
    return nullptr;
  }
  void expectOnly(const std::string& code, int line) {
    ASSERT_FALSE(d.all().empty()) << "expected " << code;
    EXPECT_EQ(d.all()[0].code, code) << d.str();
    EXPECT_EQ(d.all()[0].loc.line, line) << d.str();
    EXPECT_EQ(d.all().size(), 1u) << d.str();
  }
};

TEST_F(Fixture, ValidElementwiseKernelPasses) {
  Value* o = b.binary(OpKind::Mul, p(), b.constInt(16, kI64, L(3)), L(4));
  Value* t = b.load(x, {Index{o, 0}}, {Dim{"n", 16}}, 0.0, L(5));
  Value* e = b.unary(OpKind::Exp, t, L(6));
  Value* r = b.binary(OpKind::Mul, e, b.constF32(2.0, kF32, L(7)), L(8));
  b.store(y, {Index{o, 0}}, {Dim{"n", 16}}, r, L(9));
  EXPECT_TRUE(run()) << d.str();
  EXPECT_TRUE(d.all().empty());
}

TEST_F(Fixture, ValidLoopsAndPipelinePass) {
  Value* m0 = b.constF32(0.0, f32({{"n", 16}}), L(3));
  Op* loop = b.loop(OpKind::Pipeline, "kb", Index{nullptr, 0}, Index{nullptr, 4}, 1, {{"mi", m0}}, {"m"}, L(4));
  ASSERT_NE(loop, nullptr);
  b.setInsertion(body(loop));
  b.stage(0, L(5));
  Value* t = loadN(16, L(6));
  b.stage(0, L(7));
  b.stage(1, L(8));
  Value* s = b.binary(OpKind::Add, body(loop)->args[1], t, L(9));
  b.yield({s}, L(10));
  b.setInsertion(body(par));
  Op* empty = b.loop(OpKind::Serial, "j", Index{nullptr, 0}, Index{p(), 0}, 2, {}, {}, L(11));
  ASSERT_NE(empty, nullptr);  // no carried values: no yield needed
  b.store(y, {Index{nullptr, 0}}, {Dim{"n", 16}}, loop->results[0], L(12));
  EXPECT_TRUE(run()) << d.str();
}

TEST_F(Fixture, MmaWithEmptyContractionPasses) {
  Value* a = b.load(x, {Index{nullptr, 0}}, {Dim{"k", 0}}, 0.0, L(3), "a");
  Value* bb = b.constF32(1.0, f32({{"k", 0}, {"n", 4}}), L(4), "b");
  Value* acc = b.constF32(0.0, f32({{"n", 4}}), L(5), "acc");
  Value* c = b.mma(a, bb, acc, {"k"}, {}, L(6));
  b.store(y, {Index{nullptr, 0}}, {Dim{"n", 4}}, c, L(7));
  EXPECT_TRUE(run()) << d.str();
}

TEST_F(Fixture, FurtherRootParallelsArePhases) {
  b.setInsertion(k.body);
  b.parallel({"q"}, {2}, L(20));
  b.parallel({"r"}, {2}, L(30));
  EXPECT_TRUE(run()) << d.str();
  EXPECT_EQ(k.roots().size(), 3u);
}

TEST(Verifier, KernelWithoutParallelOrBody) {
  Kernel k;
  DiagEngine d;
  EXPECT_FALSE(verify(k, d));  // no body at all
  EXPECT_EQ(d.all().at(0).code, "root-domain");
  d.clear();
  Builder b(k, d);
  b.constF32(1.0, kF32, L(3));
  EXPECT_FALSE(verify(k, d));
  ASSERT_EQ(d.all().size(), 2u) << d.str();  // no root domain; an op outside it
  EXPECT_EQ(d.all()[0].code, "root-domain");
  EXPECT_EQ(d.all()[1].code, "root-domain");
  EXPECT_EQ(d.all()[1].loc.line, 3);
}

TEST_F(Fixture, ParallelNestedInLoopIsBadNesting) {
  Op* loop = b.loop(OpKind::Serial, "i", Index{nullptr, 0}, Index{nullptr, 2}, 1, {}, {}, L(3));
  b.setInsertion(body(loop));
  b.parallel({"q"}, {2}, L(4));
  EXPECT_FALSE(run());
  expectOnly("bad-nesting", 4);
}

// The DSL misuse: a value made inside a loop body, used after the loop has closed.
TEST_F(Fixture, ValueFromClosedLoopBodyIsOutOfScope) {
  Op* loop = b.loop(OpKind::Serial, "i", Index{nullptr, 0}, Index{nullptr, 2}, 1, {}, {}, L(3));
  b.setInsertion(body(loop));
  Value* inner = loadN(16, L(4), "inner");
  b.setInsertion(body(par));
  Value* e = b.unary(OpKind::Exp, inner, L(6));
  b.store(y, {Index{body(loop)->args[0], 0}}, {Dim{"n", 16}}, e, L(7));  // the induction variable, too
  EXPECT_FALSE(run());
  ASSERT_EQ(codes(), (std::vector<std::string>{"out-of-scope", "out-of-scope"})) << d.str();
  EXPECT_EQ(d.all()[0].loc.line, 6);
  EXPECT_NE(d.all()[0].message.find("%inner"), std::string::npos);
  EXPECT_NE(d.all()[0].message.find("serial at 3:1"), std::string::npos) << d.all()[0].message;
  EXPECT_EQ(d.all()[1].loc.line, 7);
  EXPECT_NE(d.all()[1].message.find("%i "), std::string::npos);
}

TEST_F(Fixture, ValueOfAnotherKernelIsUndefined) {
  Kernel other;
  DiagEngine od;
  Builder ob(other, od);
  Value* foreign = ob.constF32(1.0, f32({{"n", 16}}), L(1), "alien");
  Value* t = loadN(16, L(3));
  b.binary(OpKind::Add, t, foreign, L(4));
  EXPECT_FALSE(run());
  expectOnly("undefined-value", 4);
  EXPECT_NE(d.all()[0].message.find("%alien"), std::string::npos);
}

TEST_F(Fixture, UseBeforeDefinitionIsUndefined) {
  Value* t = loadN(16, L(3));
  Value* e = b.unary(OpKind::Exp, t, L(4));
  std::swap(body(par)->ops[0], body(par)->ops[1]);  // exp now comes before the load
  b.store(y, {Index{nullptr, 0}}, {Dim{"n", 16}}, e, L(5));
  EXPECT_FALSE(run());
  expectOnly("undefined-value", 4);
  EXPECT_NE(d.all()[0].message.find("%t is used before its definition at 3:1"), std::string::npos)
      << d.all()[0].message;
}

TEST_F(Fixture, YieldRules) {
  Value* m0 = b.constF32(0.0, kF32, L(3));
  Op* loop = b.loop(OpKind::Serial, "i", Index{nullptr, 0}, Index{nullptr, 2}, 1, {{"mi", m0}}, {"m"}, L(4));
  b.setInsertion(body(loop));
  Value* i64v = b.constInt(1, kI64, L(5));
  b.yield({i64v}, L(6));  // wrong type
  Op* loop2 = b.loop(OpKind::Serial, "j", Index{nullptr, 0}, Index{nullptr, 2}, 1, {{"ni", m0}}, {"n"}, L(7));
  b.setInsertion(body(loop2));
  b.yield({body(loop2)->args[1]}, L(8));  // fine, but not last
  b.constF32(0.0, kF32, L(9));            // -> loop2 lacks a final yield as well
  b.setInsertion(body(par));
  b.yield({}, L(10));  // yield outside any loop
  EXPECT_FALSE(run());
  // loop2 sits inside loop, so loop's yield is no longer last either.
  EXPECT_EQ(codes(), (std::vector<std::string>{"yield-placement", "yield-placement", "missing-yield", "missing-yield",
                                               "yield-placement"}))
      << d.str();
}

TEST_F(Fixture, YieldTypeMismatch) {
  Value* m0 = b.constF32(0.0, kF32, L(3));
  Op* loop = b.loop(OpKind::Serial, "i", Index{nullptr, 0}, Index{nullptr, 2}, 1, {{"mi", m0}}, {"m"}, L(4));
  b.setInsertion(body(loop));
  b.yield({b.constInt(1, kI64, L(5))}, L(6));
  EXPECT_FALSE(run());
  expectOnly("yield-type", 6);
  d.clear();
  body(loop)->ops.back()->operands.clear();
  EXPECT_FALSE(verify(k, d));
  expectOnly("yield-type", 6);
}

TEST_F(Fixture, StageRules) {
  b.stage(0, L(3));  // not in a pipeline
  Op* pipe = b.loop(OpKind::Pipeline, "i", Index{nullptr, 0}, Index{nullptr, 2}, 1, {}, {}, L(4));
  b.setInsertion(body(pipe));
  b.stage(1, L(5));  // does not start at 0
  b.stage(0, L(6));  // decreases
  Op* inner = b.loop(OpKind::Serial, "j", Index{nullptr, 0}, Index{nullptr, 2}, 1, {}, {}, L(7));
  b.setInsertion(body(inner));
  b.stage(0, L(8));  // not directly inside the pipeline
  EXPECT_FALSE(run());
  EXPECT_EQ(codes(), (std::vector<std::string>{"stage-placement", "stage-order", "stage-order", "stage-placement"}))
      << d.str();
}

TEST(Verifier, ParameterTypes) {
  Kernel k;
  DiagEngine d;
  Builder b(k, d);
  b.param("h", Type::view(Elem::I1, {8}), L(1, 1));
  b.param("c", Type::scalar(Elem::I1), L(1, 2));
  b.param("t", f32({{"n", 4}}), L(1, 3));
  b.param("s", kF32, L(1, 4));
  b.param("i", kI64, L(1, 5));
  b.param("big", Type::view(Elem::F32, {65536, 65537}), L(1, 6));
  b.param("neg", Type::view(Elem::F32, {-1}), L(1, 7));
  b.param("empty", Type::view(Elem::F32, {0, 4}), L(1, 8));  // an empty view is fine
  b.parallel({"p"}, {1}, L(2));
  EXPECT_FALSE(verify(k, d));
  EXPECT_NE(d.str().find("views hold f32, f16, bf16, i32 or i64 elements"), std::string::npos) << d.str();
  std::vector<std::string> got;
  for (const Diagnostic& x : d.all()) got.push_back(x.code);
  EXPECT_EQ(got,
            (std::vector<std::string>{"param-type", "param-type", "param-type", "view-too-large", "negative-extent"}))
      << d.str();
}

TEST_F(Fixture, TypeRulesAreRechecked) {
  Value* t = loadN(16, L(3));
  Value* u = b.load(x, {Index{nullptr, 0}}, {Dim{"m", 16}}, 0.0, L(4), "u");
  raw(k, body(par), OpKind::Add, {t, u}, {f32({{"n", 16}})}, L(5));          // shape mismatch
  raw(k, body(par), OpKind::Exp, {t}, {f32({{"n", 8}})}, L(6));              // wrong stored type
  raw(k, body(par), OpKind::Neg, {t, t}, {f32({{"n", 16}})}, L(7));          // too many operands
  raw(k, body(par), OpKind::Store, {y, t}, {}, L(8))->access = {{"m", 16}};  // dims not matching
  body(par)->ops.back()->indices = {Index{nullptr, 0}};
  Value* zero = b.constF32(0.0, kF32, L(9));
  Op* red = raw(k, body(par), OpKind::Reduce, {t, zero}, {kF32}, L(10));
  red->dims = {"n"};
  red->reduce_policy = {ReducePolicy::Kind::UnorderedTree, 17};
  EXPECT_FALSE(run());
  EXPECT_EQ(codes(), (std::vector<std::string>{"shape-mismatch", "type-mismatch", "arity", "dim-mismatch", "policy"}))
      << d.str();
}

TEST_F(Fixture, CastKeepsDims) {
  Value* t = loadN(16, L(3));
  Op* c = k.newOp(OpKind::Cast, L(4));
  c->operands = {t};
  Type wrong = Type::tile(Elem::I64, {{"m", 16}});
  EXPECT_FALSE(b.finish(c, &wrong, {"c"}));
  EXPECT_EQ(d.all().at(0).code, "shape-mismatch");
  d.clear();
  Type right = Type::tile(Elem::I64, {{"n", 16}});
  Op* c2 = k.newOp(OpKind::Cast, L(5));
  c2->operands = {t};
  EXPECT_TRUE(b.finish(c2, &right, {"c2"}));
  EXPECT_TRUE(run()) << d.str();
}

TEST_F(Fixture, ZeroSizeTile) {
  Value* t = loadN(0, L(3));
  Value* e = b.unary(OpKind::Exp, t, L(4));  // inherits the empty dim: reported once, at the load
  b.binary(OpKind::Add, e, e, L(5));
  b.constF32(0.0, f32({{"m", 0}}), L(6), "unused");
  EXPECT_FALSE(run());
  EXPECT_EQ(codes(), (std::vector<std::string>{"zero-size", "zero-size"})) << d.str();
  EXPECT_EQ(d.all()[0].loc.line, 3);
  EXPECT_NE(d.all()[0].message.find("tile of zero elements"), std::string::npos);
  EXPECT_NE(d.all()[0].message.find("exp at 4:1"), std::string::npos) << d.all()[0].message;
  EXPECT_EQ(d.all()[1].loc.line, 6);
}

TEST_F(Fixture, ZeroSizeOnUncontractedMmaDim) {
  Value* a = b.constF32(0.0, f32({{"m", 0}, {"k", 4}}), L(3), "a");
  Value* bb = b.constF32(0.0, f32({{"k", 4}, {"n", 4}}), L(4), "b");
  Value* acc = b.constF32(0.0, f32({{"m", 0}, {"n", 4}}), L(5), "acc");
  b.mma(a, bb, acc, {"k"}, {}, L(6));
  EXPECT_FALSE(run());
  EXPECT_EQ(codes(), (std::vector<std::string>{"zero-size", "zero-size"})) << d.str();
}

TEST_F(Fixture, NegativeExtentReportedOnceAtItsSource) {
  Value* c = raw(k, body(par), OpKind::Const, {}, {f32({{"n", -3}})}, L(3))->results[0];
  raw(k, body(par), OpKind::Exp, {c}, {f32({{"n", -3}})}, L(4));
  EXPECT_FALSE(run());
  expectOnly("negative-extent", 3);
}

TEST_F(Fixture, SizeLimits) {
  Value* big = b.constF32(0.0, f32({{"m", 8192}, {"n", 4096}}), L(3));
  b.unary(OpKind::Exp, big, L(4));
  b.setInsertion(k.body);
  b.constF32(0.0, f32({{"m", int64_t{1} << 40}, {"n", int64_t{1} << 40}}), L(5));  // no overflow
  EXPECT_FALSE(run());
  EXPECT_EQ(codes(), (std::vector<std::string>{"tile-too-large", "root-domain", "tile-too-large"})) << d.str();
  Kernel k2;
  DiagEngine d2;
  Builder b2(k2, d2);
  b2.parallel({"i", "j"}, {65536, 32769}, L(1));
  EXPECT_FALSE(verify(k2, d2));
  EXPECT_EQ(d2.all().at(0).code, "domain-too-large");
}

TEST_F(Fixture, MalformedKernelsDoNotAbort) {
  Value* t = loadN(16, L(3));
  Op* bad = raw(k, body(par), OpKind::Exp, {nullptr}, {f32({{"n", 16}})}, L(4));
  body(par)->ops.push_back(nullptr);
  body(par)->ops.push_back(bad);  // the same op twice
  raw(k, body(par), OpKind::Add, {t, t}, {f32({{"n", 16}})}, L(5))->results.push_back(nullptr);
  Op* loop = raw(k, body(par), OpKind::Serial, {}, {}, L(6));
  loop->indices = {Index{nullptr, 0}, Index{nullptr, 1}, Index{nullptr, 1}};
  loop->regions.push_back(body(par));  // a cycle: the loop's body is the parallel's body
  loop->regions.push_back(nullptr);
  EXPECT_FALSE(run());
  for (const std::string& c : codes()) EXPECT_EQ(c, "malformed") << d.str();
  EXPECT_GE(d.all().size(), 5u) << d.str();
}

TEST_F(Fixture, ReportsEveryProblemUpToACap) {
  Value* t = loadN(16, L(3));
  Value* u = b.load(x, {Index{nullptr, 0}}, {Dim{"m", 16}}, 0.0, L(4), "u");
  for (int i = 0; i < 500; ++i) raw(k, body(par), OpKind::Add, {t, u}, {f32({{"n", 16}})}, L(10 + i));
  EXPECT_FALSE(run());
  ASSERT_EQ(d.all().size(), 51u);
  EXPECT_EQ(d.all()[49].loc.line, 59);
  EXPECT_EQ(d.all().back().code, "too-many-errors");
}

TEST_F(Fixture, DeepNestingIsADiagnostic) {
  for (int i = 0; i < 5000; ++i) {
    Op* loop =
        b.loop(OpKind::Serial, "i" + std::to_string(i), Index{nullptr, 0}, Index{nullptr, 2}, 1, {}, {}, L(3 + i));
    b.setInsertion(body(loop));
  }
  EXPECT_FALSE(run());
  expectOnly("too-deep", 258);
}

TEST_F(Fixture, RedefinitionOfAVisibleName) {
  b.setUniquifyNames(false);
  loadN(16, L(3), "t");
  loadN(16, L(4), "t");
  Op* l1 = b.loop(OpKind::Serial, "i", Index{nullptr, 0}, Index{nullptr, 2}, 1, {}, {}, L(5));
  b.setInsertion(body(par));
  Op* l2 = b.loop(OpKind::Serial, "i", Index{nullptr, 0}, Index{nullptr, 2}, 1, {}, {}, L(6));  // sibling: fine
  ASSERT_TRUE(l1 && l2);
  EXPECT_FALSE(run());
  expectOnly("redefinition", 4);
}

TEST_F(Fixture, I1ConstIsZeroOrOne) {
  raw(k, body(par), OpKind::Const, {}, {Type::scalar(Elem::I1)}, L(3))->iconst = 2;
  EXPECT_FALSE(run());
  expectOnly("const-value", 3);
}

}  // namespace
}  // namespace kiln::ir

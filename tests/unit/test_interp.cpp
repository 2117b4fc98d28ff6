// The interpreter (the oracle) on small kernels built with ir::Builder, checked against
// hand-computed results where f32 evaluation order matters; and the host data helpers
// (input generator, comparisons, SHA-256, statistics).
#include "interp/interp.h"

#include <gtest/gtest.h>

#include <bit>
#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "host/data.h"
#include "ir/builder.h"
#include "ir/verifier.h"
#include "math/kmath.h"

namespace kiln {
namespace {

using host::ParamData;
using interp::Mode;
using interp::Options;
using ir::Dim;
using ir::Elem;
using ir::Index;
using ir::OpKind;
using ir::Type;
using ir::Value;

const float kInf = std::numeric_limits<float>::infinity();
const float kNaN = std::numeric_limits<float>::quiet_NaN();

Index I(int c) {  // an int parameter, so that I(0) is a literal rather than a null Value*
  return Index{nullptr, c};
}
Index I(Value* v) {
  return Index{v, 0};
}
Type f32(std::vector<Dim> dims = {}) {
  return Type::tile(Elem::F32, std::move(dims));
}
Type i64(std::vector<Dim> dims = {}) {
  return Type::tile(Elem::I64, std::move(dims));
}

// A kernel under construction: parameters first, then body() opens the root parallel op.
struct K {
  ir::Kernel k;
  ir::DiagEngine d;
  ir::Builder b{k, d};
  ir::Op* par = nullptr;
  ir::Loc loc{"test", 1, 1};

  K() { k.name = "t"; }
  Value* view(const std::string& name, std::vector<int64_t> shape) {
    return b.param(name, Type::view(Elem::F32, shape), loc);
  }
  Value* scalar(const std::string& name, Elem e) { return b.param(name, Type::scalar(e), loc); }
  void body(std::vector<int64_t> extents = {1}) {
    std::vector<std::string> names;
    for (size_t i = 0; i < extents.size(); ++i) names.push_back("p" + std::to_string(i));
    par = b.parallel(names, extents, loc);
    b.setInsertion(par->regions[0]);
  }
  Value* iv(int i) { return par->regions[0]->args[i]; }
  Value* cf(double v, std::vector<Dim> dims = {}) { return b.constF32(v, f32(std::move(dims)), loc); }
  Value* ci(int64_t v, std::vector<Dim> dims = {}) { return b.constInt(v, i64(std::move(dims)), loc); }
  Value* load(Value* v, std::vector<Index> origin, std::vector<Dim> access, double fill = 0) {
    return b.load(v, std::move(origin), std::move(access), fill, loc);
  }
  void store(Value* t, Value* v, std::vector<Index> origin, std::vector<Dim> access) {
    ASSERT_NE(b.store(v, std::move(origin), std::move(access), t, loc), nullptr) << d.str();
  }
  Value* un(OpKind op, Value* x) { return b.unary(op, x, loc); }
  Value* bin(OpKind op, Value* x, Value* y) { return b.binary(op, x, y, loc); }
  Value* reduce(ir::ReduceKind kind, Value* x, std::vector<std::string> dims, Value* init, ir::ReducePolicy p) {
    return b.reduce(kind, x, std::move(dims), init, p, loc);
  }
  Value* mma(Value* a, Value* bb, Value* acc, std::vector<std::string> contract, ir::MmaPolicy policy = {}) {
    return b.mma(a, bb, acc, std::move(contract), policy, loc);
  }
  // Verifies; returns the diagnostics (empty when valid).
  std::string verify() {
    ir::verify(k, d);
    return d.str();
  }
};

ir::ReducePolicy ordered() {
  return {};
}
ir::ReducePolicy tree(int p) {
  return {ir::ReducePolicy::Kind::UnorderedTree, p};
}

std::vector<ParamData> paramsFor(const ir::Kernel& k) {
  std::vector<ParamData> ps(k.params.size());
  for (const Value* p : k.params)
    if (p->type.isView()) ps[p->index].data.assign(static_cast<size_t>(p->type.numElements()), 0.0f);
  return ps;
}

std::vector<float> run(const ir::Kernel& k, std::vector<ParamData> ps, int out, Mode mode, int partitions = 4,
                       interp::F64Views* f64 = nullptr) {
  Options o;
  o.mode = mode;
  o.reduction_partitions = partitions;
  auto err = interp::evaluate(k, ps, o, f64);
  EXPECT_FALSE(err.has_value()) << *err;
  return ps[out].data;
}

bool sameBits(float a, float b) {
  return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b);
}

// ---- reductions -------------------------------------------------------------------------------

// y[0] = reduce add x over [n] (4 contributions) with the given policy.
struct ReduceAdd4 : K {
  explicit ReduceAdd4(ir::ReducePolicy p) {
    Value* x = view("x", {4});
    Value* y = view("y", {1});
    body();
    Value* t = load(x, {I(0)}, {{"n", 4}});
    Value* r = reduce(ir::ReduceKind::Add, t, {"n"}, cf(0), p);
    Value* r1 = b.broadcast(r, f32({{"o", 1}}), loc);
    store(r1, y, {I(0)}, {{"o", 1}});
  }
};

TEST(Interp, ReduceOrderedVsTree) {
  // Ordered: ((((0 + 1e8) + 1) - 1e8) + 1) = 1 in f32 (1e8 + 1 rounds to 1e8).
  // Tree(2): partitions {1e8, -1e8} -> 0 and {1, 1} -> 2; (0 + 0) + 2 = 2.
  const std::vector<float> x = {1e8f, 1.0f, -1e8f, 1.0f};
  ReduceAdd4 ord(ordered()), t2(tree(2)), t0(tree(0)), t4(tree(4));
  for (K* k : std::vector<K*>{&ord, &t2, &t0, &t4}) ASSERT_EQ(k->verify(), "");
  auto with = [&](K& k) {
    auto ps = paramsFor(k.k);
    ps[0].data = x;
    return ps;
  };
  EXPECT_EQ(run(ord.k, with(ord), 1, Mode::StrictF32)[0], 1.0f);
  EXPECT_EQ(run(t2.k, with(t2), 1, Mode::StrictF32)[0], 2.0f);
  // Without (P) the knob decides: P = 2 as above, P = 1 is the ordered fold of one partition.
  EXPECT_EQ(run(t0.k, with(t0), 1, Mode::StrictF32, 2)[0], 2.0f);
  EXPECT_EQ(run(t0.k, with(t0), 1, Mode::StrictF32, 1)[0], 1.0f);
  // P = 4: every partition holds one contribution; ((((0 + 1e8) + 1) - 1e8) + 1) again.
  EXPECT_EQ(run(t4.k, with(t4), 1, Mode::StrictF32)[0], 1.0f);
  // In f64 every order gives the exact sum.
  EXPECT_EQ(run(ord.k, with(ord), 1, Mode::F64)[0], 2.0f);
}

TEST(Interp, ReduceTreeInitEntersOnceAndPartitionsStartFromFirstContribution) {
  // init 1e8, x = {1, 1, 1}, P = 2: p0 = 1 + 1 = 2, p1 = 1; (1e8 + 2) + 1 = 1e8 + 4 (ties to
  // even at ulp 8) -> 1e8; a scheme that put init into each partition would differ.
  K k;
  Value* x = k.view("x", {3});
  Value* y = k.view("y", {1});
  k.body();
  Value* t = k.load(x, {I(0)}, {{"n", 3}});
  Value* r = k.reduce(ir::ReduceKind::Add, t, {"n"}, k.cf(1e8), tree(2));
  k.store(k.b.broadcast(r, f32({{"o", 1}}), k.loc), y, {I(0)}, {{"o", 1}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {1, 1, 1};
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32)[0], static_cast<float>(1e8f + 2.0f + 1.0f));
  ps[0].data = {3, 4, 0.5f};
  // p0 = 3 + 0.5 = 3.5, p1 = 4: (1e8 + 3.5) + 4 = 1e8 + 8 = 100000008 (each step rounds).
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32)[0], (1e8f + 3.5f) + 4.0f);
}

TEST(Interp, ReduceContributionsAreRowMajorInOperandOrder) {
  // x[a:2, b:2] = {{1e8, 1}, {-1e8, 1}} reduced over [b, a]: contributions are numbered in x's
  // dim order (a outer): 1e8, 1, -1e8, 1 -> tree(2) gives 2 (the `over` order would give 0).
  K k;
  Value* x = k.view("x", {2, 2});
  Value* y = k.view("y", {1});
  k.body();
  Value* t = k.load(x, {I(0), I(0)}, {{"a", 2}, {"b", 2}});
  Value* r = k.reduce(ir::ReduceKind::Add, t, {"b", "a"}, k.cf(0), tree(2));
  k.store(k.b.broadcast(r, f32({{"o", 1}}), k.loc), y, {I(0)}, {{"o", 1}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {1e8f, 1, -1e8f, 1};
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32)[0], 2.0f);
}

TEST(Interp, ReduceKeepsDimsAndTakesTileInit) {
  // x[m:2, n:3] reduced over [n] with init[m:2]; max, min, mul too.
  K k;
  Value* x = k.view("x", {2, 3});
  Value* y = k.view("y", {4, 2});
  k.body();
  Value* t = k.load(x, {I(0), I(0)}, {{"m", 2}, {"n", 3}});
  Value* init = k.load(x, {I(0), I(0)}, {{"m", 2}, {"_n", 1}});                    // x[:, 0] as [m:2, _n:1]
  Value* init2 = k.reduce(ir::ReduceKind::Add, init, {"_n"}, k.cf(0), ordered());  // -> [m:2]
  Value* rs[] = {k.reduce(ir::ReduceKind::Add, t, {"n"}, init2, ordered()),
                 k.reduce(ir::ReduceKind::Max, t, {"n"}, k.cf(-kInf), ordered()),
                 k.reduce(ir::ReduceKind::Min, t, {"n"}, k.cf(kInf), tree(2)),
                 k.reduce(ir::ReduceKind::Mul, t, {"n"}, k.cf(1), tree(3))};
  for (int i = 0; i < 4; ++i) k.store(rs[i], y, {I(i), I(0)}, {{"", 1}, {"m", 2}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {1, 2, 3, -4, 5, -6};
  auto out = run(k.k, ps, 1, Mode::StrictF32);
  EXPECT_EQ(out, (std::vector<float>{1 + 6, -4 + -5, 3, 5, 1, -6, 6, 120}));
}

TEST(Interp, MaxMinPropagateNaNAndOrderSignedZeros) {
  K k;
  Value* x = k.view("x", {4});
  Value* z = k.view("z", {4});
  Value* y = k.view("y", {6, 4});
  k.body();
  Value* a = k.load(x, {I(0)}, {{"n", 4}});
  Value* b = k.load(z, {I(0)}, {{"n", 4}});
  Value* r[] = {k.bin(OpKind::Max, a, b), k.bin(OpKind::Min, a, b), k.bin(OpKind::Max, b, a), k.bin(OpKind::Min, b, a)};
  for (int i = 0; i < 4; ++i) k.store(r[i], y, {I(i), I(0)}, {{"", 1}, {"n", 4}});
  Value* rm = k.reduce(ir::ReduceKind::Max, a, {"n"}, k.cf(0), ordered());
  Value* rn = k.reduce(ir::ReduceKind::Min, b, {"n"}, k.cf(0), tree(2));
  k.store(k.b.broadcast(rm, f32({{"n", 4}}), k.loc), y, {I(4), I(0)}, {{"", 1}, {"n", 4}});
  k.store(k.b.broadcast(rn, f32({{"n", 4}}), k.loc), y, {I(5), I(0)}, {{"", 1}, {"n", 4}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {kNaN, 1.0f, -0.0f, 0.0f};
  ps[1].data = {1.0f, kNaN, 0.0f, -0.0f};
  for (Mode mode : {Mode::StrictF32, Mode::F64}) {
    auto o = run(k.k, ps, 2, mode);
    for (int i = 0; i < 4; ++i) {  // rows: max(a,b), min(a,b), max(b,a), min(b,a)
      EXPECT_TRUE(std::isnan(o[4 * i + 0]));
      EXPECT_TRUE(std::isnan(o[4 * i + 1]));
    }
    for (int row : {0, 2}) {
      EXPECT_TRUE(sameBits(o[4 * row + 2], 0.0f));
      EXPECT_TRUE(sameBits(o[4 * row + 3], 0.0f));
    }
    for (int row : {1, 3}) {
      EXPECT_TRUE(sameBits(o[4 * row + 2], -0.0f));
      EXPECT_TRUE(sameBits(o[4 * row + 3], -0.0f));
    }
    EXPECT_TRUE(std::isnan(o[16]));  // reduce max with a NaN contribution
    EXPECT_TRUE(std::isnan(o[20]));
  }
}

// ---- mma --------------------------------------------------------------------------------------

TEST(Interp, MmaSumsKInAscendingOrderWithRoundedProducts) {
  // acc = 0, a = {1e8, 1, -1e8}, b = 1: ((0 + 1e8) + 1) - 1e8 = 0 in f32, 1 in f64.
  K k;
  Value* x = k.view("x", {3});
  Value* y = k.view("y", {1});
  k.body();
  Value* a = k.load(x, {I(0)}, {{"k", 3}});
  Value* c = k.mma(a, k.cf(1, {{"k", 3}}), k.cf(0), {"k"});
  k.store(k.b.broadcast(c, f32({{"o", 1}}), k.loc), y, {I(0)}, {{"o", 1}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {1e8f, 1, -1e8f};
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32)[0], 0.0f);
  EXPECT_EQ(run(k.k, ps, 1, Mode::F64)[0], 1.0f);
  ps[0].data = {1, 1e8f, -1e8f};  // (1 + 1e8) - 1e8 = 0 too; {-1e8, 1e8, 1} gives 1
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32)[0], 0.0f);
  ps[0].data = {-1e8f, 1e8f, 1};
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32)[0], 1.0f);
}

TEST(Interp, MmaPartitionsFoldEachPartitionThenMergeInOrder) {
  // partitions(2), K = 5, b = 1, acc = 0: p0 = (a0 + a2) + a4, p1 = a1 + a3, c = (0 + p0) + p1.
  // a = {1e8, 1, -1e8, 1, 1}: p0 = (1e8 - 1e8) + 1 = 1, p1 = 2, c = 3, where ascending K gives
  // ((((1e8 + 1) - 1e8) + 1) + 1) = 2 in f32.
  K k;
  Value* x = k.view("x", {5});
  Value* y = k.view("y", {1});
  k.body();
  Value* a = k.load(x, {I(0)}, {{"k", 5}});
  ir::MmaPolicy part;
  part.partitions = 2;
  Value* c = k.mma(a, k.cf(1, {{"k", 5}}), k.cf(0), {"k"}, part);
  k.store(k.b.broadcast(c, f32({{"o", 1}}), k.loc), y, {I(0)}, {{"o", 1}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {1e8f, 1, -1e8f, 1, 1};
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32)[0], 3.0f);
  // P >= K: one product per partition, merged in order: ((0 + 1e8) + 1) - 1e8 = 0, as ascending K.
  ir::MmaPolicy wide;
  wide.partitions = 16;
  K k2;
  Value* x2 = k2.view("x", {3});
  Value* y2 = k2.view("y", {1});
  k2.body();
  Value* c2 = k2.mma(k2.load(x2, {I(0)}, {{"k", 3}}), k2.cf(1, {{"k", 3}}), k2.cf(0), {"k"}, wide);
  k2.store(k2.b.broadcast(c2, f32({{"o", 1}}), k2.loc), y2, {I(0)}, {{"o", 1}});
  ASSERT_EQ(k2.verify(), "");
  auto ps2 = paramsFor(k2.k);
  ps2[0].data = {1e8f, 1, -1e8f};
  EXPECT_EQ(run(k2.k, ps2, 1, Mode::StrictF32)[0], 0.0f);
}

TEST(Interp, MmaIsNotFused) {
  // (1 + 2^-23) * (1 - 2^-23) = 1 - 2^-46 rounds to 1; acc = -1: exactly 0 without FMA
  // (an FMA would give -2^-46). The f64 oracle keeps -2^-46 in its double view.
  K k;
  Value* y = k.view("y", {1});
  k.body();
  Value* a = k.cf(1.0 + 0x1p-23, {{"k", 1}});
  Value* b = k.cf(1.0 - 0x1p-23, {{"k", 1}});
  Value* c = k.mma(a, b, k.cf(-1), {"k"});
  k.store(k.b.broadcast(c, f32({{"o", 1}}), k.loc), y, {I(0)}, {{"o", 1}});
  ASSERT_EQ(k.verify(), "");
  EXPECT_TRUE(sameBits(run(k.k, paramsFor(k.k), 0, Mode::StrictF32)[0], 0.0f));
  interp::F64Views f64;
  auto out = run(k.k, paramsFor(k.k), 0, Mode::F64, 4, &f64);
  EXPECT_EQ(f64[0][0], -0x1p-46);
  EXPECT_EQ(out[0], -0x1p-46f);
}

TEST(Interp, MmaGemmWithFreeDimsInAnyOrderAndSeveralContractedDims) {
  // c[n:3, m:2] = acc + sum_k a[m, k] b[k, n] with small integers (exact in f32).
  K k;
  Value* xa = k.view("a", {2, 4});
  Value* xb = k.view("b", {4, 3});
  Value* y = k.view("y", {3, 2});
  k.body();
  Value* a = k.load(xa, {I(0), I(0)}, {{"m", 2}, {"k", 4}});
  Value* b = k.load(xb, {I(0), I(0)}, {{"k", 4}, {"n", 3}});
  Value* c = k.mma(a, b, k.cf(0.5, {{"n", 3}, {"m", 2}}), {"k"});
  k.store(c, y, {I(0), I(0)}, {{"n", 3}, {"m", 2}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  for (int i = 0; i < 8; ++i) ps[0].data[i] = static_cast<float>(i - 3);
  for (int i = 0; i < 12; ++i) ps[1].data[i] = static_cast<float>(2 * i % 7 - 2);
  auto out = run(k.k, ps, 2, Mode::StrictF32);
  for (int n = 0; n < 3; ++n)
    for (int m = 0; m < 2; ++m) {
      float want = 0.5f;
      for (int kk = 0; kk < 4; ++kk) want += ps[0].data[m * 4 + kk] * ps[1].data[kk * 3 + n];
      EXPECT_EQ(out[n * 2 + m], want) << n << "," << m;
    }
}

TEST(Interp, MmaContractsSeveralDimsRowMajorInListedOrder) {
  // a[k2:2, k1:2] contracted over [k1, k2]: terms in order (k1,k2) = (0,0),(0,1),(1,0),(1,1),
  // i.e. a's elements 0, 2, 1, 3. With a = {1e8, -1e8, 1, 1} (b = 1): 1e8 + 1 - 1e8 + 1 = 1
  // in f32; a's storage order would give 1e8 - 1e8 + 1 + 1 = 2.
  K k;
  Value* x = k.view("x", {2, 2});
  Value* y = k.view("y", {1});
  k.body();
  Value* a = k.load(x, {I(0), I(0)}, {{"k2", 2}, {"k1", 2}});
  Value* c = k.mma(a, k.cf(1, {{"k1", 2}, {"k2", 2}}), k.cf(0), {"k1", "k2"});
  k.store(k.b.broadcast(c, f32({{"o", 1}}), k.loc), y, {I(0)}, {{"o", 1}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {1e8f, -1e8f, 1, 1};  // a[k2=0,k1=0], a[k2=0,k1=1], a[k2=1,k1=0], a[k2=1,k1=1]
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32)[0], 1.0f);
}

TEST(Interp, MmaWithZeroKReturnsAcc) {
  K k;
  Value* y = k.view("y", {2, 2});
  k.body();
  Value* a = k.cf(1, {{"m", 2}, {"k", 0}});
  Value* b = k.cf(1, {{"k", 0}, {"n", 2}});
  Value* acc = k.cf(-2.5, {{"m", 2}, {"n", 2}});
  k.store(k.mma(a, b, acc, {"k"}), y, {I(0), I(0)}, {{"m", 2}, {"n", 2}});
  ASSERT_EQ(k.verify(), "");
  EXPECT_EQ(run(k.k, paramsFor(k.k), 0, Mode::StrictF32), std::vector<float>(4, -2.5f));
  EXPECT_EQ(run(k.k, paramsFor(k.k), 0, Mode::F64), std::vector<float>(4, -2.5f));
}

// ---- memory -----------------------------------------------------------------------------------

TEST(Interp, LoadFillsOutsideAndStoreSkipsOutside) {
  // y[8] = {100..107}; programs p = 0..2 at origins 3*p - 2 move 4-element tiles of x (5
  // elements) into y at the same origin: elements outside x read 7, outside y are skipped.
  K k;
  Value* x = k.view("x", {5});
  Value* y = k.view("y", {8});
  k.body({3});
  Value* o = k.bin(OpKind::Sub, k.bin(OpKind::Mul, k.iv(0), k.ci(3)), k.ci(2));
  Value* t = k.load(x, {I(o)}, {{"n", 4}}, 7);
  k.store(t, y, {I(o)}, {{"n", 4}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {10, 11, 12, 13, 14};
  for (int i = 0; i < 8; ++i) ps[1].data[i] = 100.0f + i;
  // p0: origin -2 -> y[0..1] = x[0..1]; p1: origin 1 -> y[1..4] = x[1..4]; p2: origin 4 ->
  // y[4] = x[4], y[5..7] = 7.
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32), (std::vector<float>{10, 11, 12, 13, 14, 7, 7, 7}));
}

TEST(Interp, LoadStore2DWithSqueezedDimsAndTransposedStore) {
  K k;
  Value* x = k.view("x", {2, 3, 4});  // [b, m, n]
  Value* y = k.view("y", {4, 3});     // [n, m]
  Value* bi = k.scalar("b", Elem::I64);
  k.body();
  Value* t = k.load(x, {I(bi), I(0), I(1)}, {{"", 1}, {"m", 3}, {"n", 4}}, -1);
  k.store(t, y, {I(0), I(0)}, {{"n", 4}, {"m", 3}});  // tile [m, n] stored as [n, m]
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  for (int i = 0; i < 24; ++i) ps[0].data[i] = static_cast<float>(i);
  ps[2].i64 = 1;
  auto out = run(k.k, ps, 1, Mode::StrictF32);
  for (int n = 0; n < 4; ++n)
    for (int m = 0; m < 3; ++m) EXPECT_EQ(out[n * 3 + m], n + 1 < 4 ? 12 + m * 4 + n + 1 : -1.0f);
  ps[2].i64 = 2;  // squeezed coordinate outside the view: everything reads the fill
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32), std::vector<float>(12, -1.0f));
  ps[2].i64 = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32), std::vector<float>(12, -1.0f));
}

TEST(Interp, StoreIsVisibleToLaterLoadsOfTheSameProgram) {
  K k;
  Value* y = k.view("y", {2});
  k.body();
  k.store(k.cf(3, {{"n", 1}}), y, {I(0)}, {{"n", 1}});
  Value* t = k.load(y, {I(0)}, {{"n", 1}});
  k.store(k.bin(OpKind::Add, t, k.cf(1)), y, {I(1)}, {{"n", 1}});
  ASSERT_EQ(k.verify(), "");
  EXPECT_EQ(run(k.k, paramsFor(k.k), 0, Mode::StrictF32), (std::vector<float>{3, 4}));
}

// ---- integer and conversion semantics ---------------------------------------------------------

TEST(Interp, I64DivisionWrapAndCasts) {
  // Results go through cast i64 -> f32 into y.
  K k;
  Value* y = k.view("y", {12});
  Value* xf = k.view("xf", {6});
  Value* yi = k.view("yi", {6});
  k.body();
  const int64_t kMin = std::numeric_limits<int64_t>::min();
  const int64_t kMax = std::numeric_limits<int64_t>::max();
  Value* r[] = {k.bin(OpKind::Div, k.ci(7), k.ci(2)),    k.bin(OpKind::Div, k.ci(-7), k.ci(2)),
                k.bin(OpKind::Div, k.ci(7), k.ci(0)),    k.bin(OpKind::Div, k.ci(kMin), k.ci(-1)),
                k.bin(OpKind::Add, k.ci(kMax), k.ci(1)), k.bin(OpKind::Mul, k.ci(kMax), k.ci(2)),
                k.un(OpKind::Neg, k.ci(kMin)),           k.un(OpKind::Abs, k.ci(-5)),
                k.bin(OpKind::Max, k.ci(-3), k.ci(2)),   k.bin(OpKind::Min, k.ci(-3), k.ci(2)),
                k.bin(OpKind::Sub, k.ci(kMin), k.ci(1)), k.bin(OpKind::Div, k.ci(-7), k.ci(-2))};
  for (int i = 0; i < 12; ++i) {
    Value* f = k.b.cast(k.b.broadcast(r[i], i64({{"o", 1}}), k.loc), Elem::F32, k.loc);
    k.store(f, y, {I(i)}, {{"o", 1}});
  }
  // f32 -> i64 -> f32: truncation, saturation, NaN -> 0.
  Value* xt = k.load(xf, {I(0)}, {{"n", 6}});
  k.store(k.b.cast(k.b.cast(xt, Elem::I64, k.loc), Elem::F32, k.loc), yi, {I(0)}, {{"n", 6}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[1].data = {2.9f, -2.9f, kNaN, 1e30f, -kInf, -0.5f};
  Options o;
  o.mode = Mode::StrictF32;
  ASSERT_FALSE(interp::evaluate(k.k, ps, o).has_value());
  const float fMin = static_cast<float>(kMin), fMax = static_cast<float>(kMax);
  EXPECT_EQ(ps[0].data, (std::vector<float>{3, -3, 0, fMin, fMin, -2, fMin, 5, 2, -3, fMax, 3}));
  EXPECT_EQ(ps[2].data, (std::vector<float>{2, -2, 0, fMax, fMin, 0}));
}

TEST(Interp, CmpSelectAndI1Casts) {
  K k;
  Value* x = k.view("x", {5});
  Value* y = k.view("y", {8, 5});
  k.body();
  Value* t = k.load(x, {I(0)}, {{"n", 5}});
  const ir::CmpPred preds[] = {ir::CmpPred::LT, ir::CmpPred::LE, ir::CmpPred::GT,
                               ir::CmpPred::GE, ir::CmpPred::EQ, ir::CmpPred::NE};
  for (int i = 0; i < 6; ++i) {
    Value* c = k.b.cmp(preds[i], t, k.cf(1), k.loc);
    k.store(k.b.select(c, k.cf(1), k.cf(0, {{"n", 5}}), k.loc), y, {I(i), I(0)}, {{"", 1}, {"n", 5}});
  }
  Value* nz = k.b.cast(t, Elem::I1, k.loc);  // x != 0 (NaN -> true)
  k.store(k.b.cast(nz, Elem::F32, k.loc), y, {I(6), I(0)}, {{"", 1}, {"n", 5}});
  Value* i = k.b.iota(i64({{"n", 5}}), "n", k.loc);
  k.store(k.b.cast(i, Elem::F32, k.loc), y, {I(7), I(0)}, {{"", 1}, {"n", 5}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {0.0f, 1.0f, 2.0f, kNaN, -0.0f};
  auto o = run(k.k, ps, 1, Mode::StrictF32);
  std::vector<float> want = {1, 0, 0, 0, 1,   // lt
                             1, 1, 0, 0, 1,   // le
                             0, 0, 1, 0, 0,   // gt
                             0, 1, 1, 0, 0,   // ge
                             0, 1, 0, 0, 0,   // eq
                             1, 0, 1, 1, 1,   // ne (true for NaN)
                             0, 1, 1, 1, 0,   // cast to i1 and back
                             0, 1, 2, 3, 4};  // iota
  EXPECT_EQ(o, want);
}

TEST(Interp, IotaAlongAnInnerDimAndBroadcastByName) {
  K k;
  Value* y = k.view("y", {2, 3});
  Value* z = k.view("z", {2, 3});
  k.body();
  Value* i = k.b.iota(i64({{"m", 2}, {"n", 3}}), "m", k.loc);
  k.store(k.b.cast(i, Elem::F32, k.loc), y, {I(0), I(0)}, {{"m", 2}, {"n", 3}});
  Value* row = k.b.cast(k.b.iota(i64({{"n", 3}}), "n", k.loc), Elem::F32, k.loc);
  Value* bc = k.b.broadcast(row, f32({{"m", 2}, {"n", 3}}), k.loc);
  k.store(bc, z, {I(0), I(0)}, {{"m", 2}, {"n", 3}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  EXPECT_EQ(run(k.k, ps, 0, Mode::StrictF32), (std::vector<float>{0, 0, 0, 1, 1, 1}));
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32), (std::vector<float>{0, 1, 2, 0, 1, 2}));
}

TEST(Interp, UnaryOpsRsqrtAndKilnMath) {
  K k;
  Value* x = k.view("x", {3});
  Value* y = k.view("y", {8, 3});
  k.body();
  Value* t = k.load(x, {I(0)}, {{"n", 3}});
  const OpKind ops[] = {OpKind::Neg,  OpKind::Abs,   OpKind::Exp,  OpKind::Log,
                        OpKind::Sqrt, OpKind::Rsqrt, OpKind::Tanh, OpKind::Erf};
  for (int i = 0; i < 8; ++i) k.store(k.un(ops[i], t), y, {I(i), I(0)}, {{"", 1}, {"n", 3}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {3.0f, 0.7f, -0.0f};
  auto o = run(k.k, ps, 1, Mode::StrictF32);
  for (int e = 0; e < 3; ++e) {
    const float v = ps[0].data[e];
    EXPECT_TRUE(sameBits(o[0 * 3 + e], -v));
    EXPECT_TRUE(sameBits(o[1 * 3 + e], std::fabs(v)));
    EXPECT_TRUE(sameBits(o[2 * 3 + e], math::exp(v)));
    EXPECT_TRUE(sameBits(o[3 * 3 + e], math::log(v)));
    EXPECT_TRUE(sameBits(o[4 * 3 + e], std::sqrt(v)));
    EXPECT_TRUE(sameBits(o[5 * 3 + e], 1.0f / std::sqrt(v)));
    EXPECT_TRUE(sameBits(o[6 * 3 + e], math::tanh(v)));
    EXPECT_TRUE(sameBits(o[7 * 3 + e], math::erf(v)));
  }
  interp::F64Views f64;
  run(k.k, ps, 1, Mode::F64, 4, &f64);
  EXPECT_EQ(f64[1][2 * 3 + 1], std::exp(double{0.7f}));
  EXPECT_EQ(f64[1][5 * 3 + 0], 1.0 / std::sqrt(3.0));
  EXPECT_EQ(f64[1][7 * 3 + 1], std::erf(double{0.7f}));
}

// ---- loops and extract ------------------------------------------------------------------------

TEST(Interp, SerialLoopCarriesValuesWithRuntimeBounds) {
  // s = sum of i for i = lo, lo+2, ... < hi; the pair (a, b) is swapped every iteration.
  K k;
  Value* y = k.view("y", {3});
  Value* lo = k.scalar("lo", Elem::I64);
  Value* hi = k.scalar("hi", Elem::I64);
  k.body();
  ir::Op* loop = k.b.loop(OpKind::Serial, "i", I(lo), I(hi), 2, {{"s", k.cf(0)}, {"a", k.cf(1)}, {"b", k.cf(2)}},
                          {"s_out", "a_out", "b_out"}, k.loc);
  ASSERT_NE(loop, nullptr) << k.d.str();
  ir::Region* body = loop->regions[0];
  k.b.setInsertion(body);
  Value* fi = k.b.cast(body->args[0], Elem::F32, k.loc);
  Value* s2 = k.bin(OpKind::Add, body->args[1], fi);
  k.b.yield({s2, body->args[3], body->args[2]}, k.loc);
  k.b.setInsertion(k.par->regions[0]);
  for (int i = 0; i < 3; ++i) k.store(k.b.broadcast(loop->results[i], f32({{"o", 1}}), k.loc), y, {I(i)}, {{"o", 1}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[1].i64 = 1;
  ps[2].i64 = 8;  // i = 1, 3, 5, 7: four swaps
  EXPECT_EQ(run(k.k, ps, 0, Mode::StrictF32), (std::vector<float>{16, 1, 2}));
  ps[2].i64 = 6;  // i = 1, 3, 5: three swaps
  EXPECT_EQ(run(k.k, ps, 0, Mode::StrictF32), (std::vector<float>{9, 2, 1}));
  ps[2].i64 = 1;  // zero iterations: the inits
  EXPECT_EQ(run(k.k, ps, 0, Mode::StrictF32), (std::vector<float>{0, 1, 2}));
  ps[1].i64 = std::numeric_limits<int64_t>::max() - 2;  // near the top: no overflow
  ps[2].i64 = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(run(k.k, ps, 0, Mode::F64)[0], static_cast<float>(std::numeric_limits<int64_t>::max() - 2));
}

TEST(Interp, PipelineLoopWithStagesAndNoCarriedValues) {
  // Each iteration stores x[i] * 2 into y[i]; stage markers change nothing.
  K k;
  Value* x = k.view("x", {4});
  Value* y = k.view("y", {4});
  k.body();
  ir::Op* loop = k.b.loop(OpKind::Pipeline, "i", I(0), I(4), 1, {}, {}, k.loc);
  ASSERT_NE(loop, nullptr) << k.d.str();
  k.b.setInsertion(loop->regions[0]);
  k.b.stage(0, k.loc);
  Value* t = k.load(x, {I(loop->regions[0]->args[0])}, {{"n", 1}});
  k.b.stage(1, k.loc);
  k.store(k.bin(OpKind::Mul, t, k.cf(2)), y, {I(loop->regions[0]->args[0])}, {{"n", 1}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {1, 2, 3, 4};
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32), (std::vector<float>{2, 4, 6, 8}));
}

TEST(Interp, ExtractWithRuntimeIndexOutOfRangeReadsZero) {
  K k;
  Value* x = k.view("x", {2, 3});
  Value* y = k.view("y", {5});
  Value* j = k.scalar("j", Elem::I64);
  k.body();
  Value* t = k.load(x, {I(0), I(0)}, {{"m", 2}, {"n", 3}});
  Value* e0 = k.b.extract(t, {I(1), I(j)}, k.loc);
  Value* e1 = k.b.extract(t, {I(0), I(2)}, k.loc);
  Value* neg = k.bin(OpKind::Sub, k.ci(0), j);
  Value* e2 = k.b.extract(t, {I(1), I(neg)}, k.loc);
  Value* ii = k.b.iota(i64({{"n", 3}}), "n", k.loc);
  Value* e3 = k.b.cast(k.b.extract(ii, {I(j)}, k.loc), Elem::F32, k.loc);
  Value* e4 = k.b.extract(t, {I(j), I(0)}, k.loc);
  Value* es[] = {e0, e1, e2, e3, e4};
  for (int i = 0; i < 5; ++i) k.store(k.b.broadcast(es[i], f32({{"o", 1}}), k.loc), y, {I(i)}, {{"o", 1}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[0].data = {1, 2, 3, 4, 5, 6};
  ps[2].i64 = 2;
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32), (std::vector<float>{6, 3, 0, 2, 0}));
  ps[2].i64 = 0;
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32), (std::vector<float>{4, 3, 4, 0, 1}));
  ps[2].i64 = 3;
  EXPECT_EQ(run(k.k, ps, 1, Mode::StrictF32), (std::vector<float>{0, 3, 0, 0, 0}));
}

TEST(Interp, ScalarParamsAndConstantsAreF32Values) {
  // A const literal and an f32 scalar parameter are f32 values in both modes: 0.1 is
  // float(0.1); the f64 mode then multiplies in double.
  K k;
  Value* y = k.view("y", {1});
  Value* s = k.scalar("s", Elem::F32);
  k.body();
  Value* r = k.bin(OpKind::Mul, k.cf(0.1), s);
  k.store(k.b.broadcast(r, f32({{"o", 1}}), k.loc), y, {I(0)}, {{"o", 1}});
  ASSERT_EQ(k.verify(), "");
  auto ps = paramsFor(k.k);
  ps[1].f32 = 3.0f;
  interp::F64Views f64;
  run(k.k, ps, 0, Mode::F64, 4, &f64);
  EXPECT_EQ(f64[0][0], double{0.1f} * 3.0);
  EXPECT_TRUE(f64[1].empty());  // scalars have no view
  EXPECT_EQ(run(k.k, ps, 0, Mode::StrictF32)[0], 0.1f * 3.0f);
}

// ---- errors -----------------------------------------------------------------------------------

TEST(Interp, BadArgumentsAreMessagesNotAborts) {
  K k;
  Value* x = k.view("x", {4});
  k.body();
  k.store(k.cf(1, {{"n", 4}}), x, {I(0)}, {{"n", 4}});
  ASSERT_EQ(k.verify(), "");
  Options o;
  std::vector<ParamData> none;
  auto e1 = interp::evaluate(k.k, none, o);
  ASSERT_TRUE(e1.has_value());
  EXPECT_NE(e1->find("1 parameters but 0"), std::string::npos) << *e1;
  std::vector<ParamData> small(1);
  small[0].data.resize(3);
  auto e2 = interp::evaluate(k.k, small, o);
  ASSERT_TRUE(e2.has_value());
  EXPECT_NE(e2->find("%x"), std::string::npos) << *e2;
  auto ok = paramsFor(k.k);
  o.reduction_partitions = 17;
  EXPECT_TRUE(interp::evaluate(k.k, ok, o).has_value());
  ir::Kernel empty;
  EXPECT_TRUE(interp::evaluate(empty, none, Options{}).has_value());
}

// ---- f64 vs strict-f32 ------------------------------------------------------------------------

TEST(Interp, F64AndStrictAgreeWithinToleranceOnRandomInputs) {
  // y[m] = sum_n (exp(x) * tanh(x) + erf(x) - log(|x| + 1)) / sqrt(|x| + 2), x in [-1, 1).
  K k;
  Value* x = k.view("x", {64, 96});
  Value* y = k.view("y", {64});
  k.body({4});
  Value* o = k.bin(OpKind::Mul, k.iv(0), k.ci(16));
  Value* t = k.load(x, {I(o), I(0)}, {{"m", 16}, {"n", 96}});
  Value* a = k.un(OpKind::Abs, t);
  Value* v = k.bin(OpKind::Mul, k.un(OpKind::Exp, t), k.un(OpKind::Tanh, t));
  v = k.bin(OpKind::Add, v, k.un(OpKind::Erf, t));
  v = k.bin(OpKind::Sub, v, k.un(OpKind::Log, k.bin(OpKind::Add, a, k.cf(1))));
  v = k.bin(OpKind::Div, v, k.un(OpKind::Sqrt, k.bin(OpKind::Add, a, k.cf(2))));
  Value* r = k.reduce(ir::ReduceKind::Add, v, {"n"}, k.cf(0), tree(0));
  k.store(r, y, {I(o)}, {{"m", 16}});
  ASSERT_EQ(k.verify(), "");
  std::vector<ParamData> ps;
  ASSERT_FALSE(host::makeInputs(k.k, 7, {}, ps).has_value());
  interp::F64Views f64;
  run(k.k, ps, 1, Mode::F64, 4, &f64);
  auto strict = run(k.k, ps, 1, Mode::StrictF32);
  host::CompareResult c = host::compareF64(strict, f64[1]);
  EXPECT_TRUE(c.pass) << "first bad " << c.first_bad << " max abs " << c.max_abs_err;
  EXPECT_LT(c.max_abs_err, 1e-4);
  EXPECT_GT(c.max_abs_err, 0.0);  // the two modes do differ
}

// ---- attention: end to end, and fast enough ---------------------------------------------------

// Decode attention, one program per head: o = softmax(q k^T / sqrt(D)) v, K = 2053, D = 80.
TEST(Interp, DecodeAttentionMatchesReferenceAndIsFast) {
  const int64_t H = 8, N = 2053, D = 80;
  K k;
  Value* q = k.view("q", {1, H, 1, D});
  Value* kv = k.view("k", {1, H, N, D});
  Value* vv = k.view("v", {1, H, N, D});
  Value* out = k.view("o", {1, H, 1, D});
  k.body({1, H});
  std::vector<Index> at = {I(k.iv(0)), I(k.iv(1)), I(0), I(0)};
  Value* qt = k.load(q, at, {{"", 1}, {"", 1}, {"m", 1}, {"d", D}});
  Value* kt = k.load(kv, at, {{"", 1}, {"", 1}, {"n", N}, {"d", D}});
  Value* vt = k.load(vv, at, {{"", 1}, {"", 1}, {"n", N}, {"d", D}});
  Value* s = k.mma(qt, kt, k.cf(0, {{"m", 1}, {"n", N}}), {"d"});
  s = k.bin(OpKind::Mul, s, k.cf(1.0 / std::sqrt(static_cast<double>(D))));
  Value* mx = k.reduce(ir::ReduceKind::Max, s, {"n"}, k.cf(-kInf), tree(0));
  Value* e = k.un(OpKind::Exp, k.bin(OpKind::Sub, s, k.b.broadcast(mx, f32({{"m", 1}, {"n", N}}), k.loc)));
  Value* l = k.reduce(ir::ReduceKind::Add, e, {"n"}, k.cf(0), tree(0));
  Value* pv = k.mma(e, vt, k.cf(0, {{"m", 1}, {"d", D}}), {"n"});
  Value* ot = k.bin(OpKind::Div, pv, k.b.broadcast(l, f32({{"m", 1}, {"d", D}}), k.loc));
  k.store(ot, out, at, {{"", 1}, {"", 1}, {"m", 1}, {"d", D}});
  ASSERT_EQ(k.verify(), "");
  std::vector<ParamData> ps;
  ASSERT_FALSE(host::makeInputs(k.k, 1, {}, ps).has_value());

  // Reference in double, straight from the definition.
  std::vector<double> ref(static_cast<size_t>(H * D));
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(D)));
  for (int64_t h = 0; h < H; ++h) {
    std::vector<double> sc(static_cast<size_t>(N));
    double m = -INFINITY, sum = 0;
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0;
      for (int64_t d = 0; d < D; ++d) acc += double{ps[0].data[h * D + d]} * ps[1].data[(h * N + n) * D + d];
      sc[n] = acc * scale;
      m = std::max(m, sc[n]);
    }
    for (int64_t n = 0; n < N; ++n) sum += sc[n] = std::exp(sc[n] - m);
    for (int64_t d = 0; d < D; ++d) {
      double acc = 0;
      for (int64_t n = 0; n < N; ++n) acc += sc[n] * ps[2].data[(h * N + n) * D + d];
      ref[h * D + d] = acc / sum;
    }
  }
  for (Mode mode : {Mode::F64, Mode::StrictF32}) {
    auto t0 = std::chrono::steady_clock::now();
    interp::F64Views f64;
    auto got = run(k.k, ps, 3, mode, 4, &f64);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_LT(secs, 1.0) << "interpreter too slow: " << secs << " s";
    host::CompareResult c = host::compareF64(got, ref);
    EXPECT_TRUE(c.pass) << "max abs " << c.max_abs_err << " at " << c.first_bad;
    if (mode == Mode::F64) {
      double worst = 0;
      for (size_t i = 0; i < ref.size(); ++i) worst = std::max(worst, std::fabs(f64[3][i] - ref[i]));
      EXPECT_LT(worst, 1e-12);
    }
  }
}

// ---- host data --------------------------------------------------------------------------------

TEST(HostData, MakeInputsFollowsTheDocumentedGenerator) {
  K k;
  Value* x = k.view("x", {3, 5});
  Value* y = k.view("y", {4});
  k.scalar("n", Elem::I64);
  k.scalar("s", Elem::F32);
  k.body();
  k.store(k.load(x, {I(0), I(0)}, {{"", 1}, {"c", 4}}), y, {I(0)}, {{"c", 4}});
  ASSERT_EQ(k.verify(), "");
  std::vector<ParamData> ps;
  ASSERT_FALSE(host::makeInputs(k.k, 42, {}, ps).has_value());
  ASSERT_EQ(ps.size(), 4u);
  // The generator written out again from its specification in data.h.
  auto mix = [](uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  };
  auto drawN = [&](uint64_t seed, uint64_t param, int n) {
    uint64_t state = seed ^ mix(param + 1);
    std::vector<float> v;
    for (int i = 0; i < n; ++i) {
      state += 0x9E3779B97F4A7C15ull;
      int64_t u = static_cast<int64_t>(mix(state) >> 40);
      v.push_back(static_cast<float>(u - (1 << 23)) / 8388608.0f);
    }
    return v;
  };
  EXPECT_EQ(ps[0].data, drawN(42, 0, 15));
  EXPECT_EQ(ps[1].data, std::vector<float>(4, 0.0f));  // only stored to
  EXPECT_EQ(ps[2].i64, 0);
  EXPECT_EQ(ps[3].f32, drawN(42, 3, 1)[0]);
  for (float v : ps[0].data) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
    EXPECT_EQ(v * 8388608.0f, std::trunc(v * 8388608.0f));
  }
  std::vector<ParamData> again, other;
  ASSERT_FALSE(host::makeInputs(k.k, 42, {}, again).has_value());
  ASSERT_FALSE(host::makeInputs(k.k, 43, {}, other).has_value());
  EXPECT_EQ(again[0].data, ps[0].data);
  EXPECT_NE(other[0].data, ps[0].data);

  ASSERT_FALSE(host::makeInputs(k.k, 42, {{"n", "-17"}, {"%s", "2.5e-1"}}, ps).has_value());
  EXPECT_EQ(ps[2].i64, -17);
  EXPECT_EQ(ps[3].f32, 0.25f);
  ASSERT_FALSE(host::makeInputs(k.k, 42, {{"s", "-inf"}}, ps).has_value());
  EXPECT_EQ(ps[3].f32, -kInf);
  EXPECT_TRUE(host::makeInputs(k.k, 42, {{"x", "1"}}, ps).has_value());    // a view
  EXPECT_TRUE(host::makeInputs(k.k, 42, {{"q", "1"}}, ps).has_value());    // no such parameter
  EXPECT_TRUE(host::makeInputs(k.k, 42, {{"n", "1.5"}}, ps).has_value());  // not an integer
  EXPECT_TRUE(host::makeInputs(k.k, 42, {{"n", ""}}, ps).has_value());
  EXPECT_TRUE(host::makeInputs(k.k, 42, {{"n", "99999999999999999999"}}, ps).has_value());
  EXPECT_TRUE(host::makeInputs(k.k, 42, {{"s", "1x"}}, ps).has_value());
}

TEST(HostData, CompareF64) {
  auto r = host::compareF64({1.0f, 2.0f, 3.0f}, {1.0, 2.0 + 1e-5, 3.0});
  EXPECT_TRUE(r.pass);
  EXPECT_NEAR(r.max_abs_err, 1e-5, 1e-9);
  EXPECT_EQ(r.first_bad, -1);
  r = host::compareF64({1.0f, 2.1f, 5.0f}, {1.0, 2.0, 3.0});
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.first_bad, 1);
  EXPECT_NEAR(r.max_abs_err, 2.0, 1e-6);
  EXPECT_NEAR(r.max_rel_err, 2.0 / 3.0, 1e-6);
  // 1000 + 0.04: within 5e-5 + 5e-5 * 1000.
  EXPECT_TRUE(host::compareF64({1000.04f}, {1000.0}).pass);
  EXPECT_TRUE(host::compareF64({kNaN, kInf, -kInf}, {NAN, INFINITY, -INFINITY}).pass);
  EXPECT_FALSE(host::compareF64({kInf}, {-INFINITY}).pass);
  EXPECT_FALSE(host::compareF64({1.0f}, {NAN}).pass);
  EXPECT_FALSE(host::compareF64({kNaN}, {1.0}).pass);
  EXPECT_FALSE(host::compareF64({kInf}, {1e300}).pass);
  r = host::compareF64({1.0f}, {1.0, 2.0});
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.first_bad, 1);
  EXPECT_TRUE(host::compareF64({1.5f}, {1.0}, 0.5, 0.0).pass);
}

TEST(HostData, CompareBitexact) {
  const float otherNaN = std::bit_cast<float>(0xffc00123u);
  EXPECT_TRUE(host::compareBitexact({1.0f, kNaN}, {1.0f, otherNaN}).pass);
  auto r = host::compareBitexact({0.0f, 1.0f, 2.0f}, {-0.0f, 1.0f, 3.0f});
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.first_bad, 0);
  EXPECT_EQ(r.mismatches, 2);
  r = host::compareBitexact({1.0f}, {1.0f, 2.0f});
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.first_bad, 1);
}

TEST(HostData, Sha256KnownVectors) {
  auto hex = [](const std::string& s) { return host::sha256Hex(s.data(), s.size()); };
  EXPECT_EQ(hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(hex(std::string(1000000, 'a')), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  EXPECT_EQ(hex(std::string(64, 'x')), "7ce100971f64e7001e8fe5a51973ecdfe1ced42befe7ee8d5fd6219506b5393c");
  EXPECT_EQ(hex(std::string(55, 'x')), "d5e285683cd4efc02d021a5c62014694958901005d6f71e89e0989fac77e4072");
  EXPECT_EQ(hex(std::string(56, 'x')), "04c26261370ee7541549d16dee320c723e3fd14671e66a099afe0a377c16888e");
}

TEST(HostData, StatsPropagateNaN) {
  host::Stats s = host::stats({1.0f, -2.0f, 4.0f});
  EXPECT_EQ(s.count, 3);
  EXPECT_EQ(s.min, -2.0);
  EXPECT_EQ(s.max, 4.0);
  EXPECT_EQ(s.mean, 1.0);
  s = host::stats({1.0f, kNaN});
  EXPECT_TRUE(std::isnan(s.min) && std::isnan(s.max) && std::isnan(s.mean));
  s = host::stats({1.0f, kInf});
  EXPECT_EQ(s.max, INFINITY);
  EXPECT_EQ(s.mean, INFINITY);
  s = host::stats({});
  EXPECT_EQ(s.count, 0);
  EXPECT_TRUE(std::isnan(s.mean));
}

}  // namespace
}  // namespace kiln

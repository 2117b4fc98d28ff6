#include "interp/machine.h"
#include "host/storage.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "interp/scalar_ops.h"
#include "math/kmath.h"

namespace kiln::interp::detail {
namespace {

// docs/ir.md, MMA, bf16_dot. A value of magnitude below 2^-126 (a subnormal) becomes the zero of
// its sign; an operand is first rounded to bf16 (a bf16 store's rounding).
float flushTiny(float x) {
  uint32_t u = std::bit_cast<uint32_t>(x);
  if ((u & 0x7F800000u) == 0) u &= 0x80000000u;
  return std::bit_cast<float>(u);
}
float bf16Operand(float x) {
  return flushTiny(host::roundToStorage(ir::Elem::BF16, x));
}

// The strict-FP32 steps: per block of 32 contributions (the last one completed with +0 products),
// two chains (even and odd k) of fused steps from +0, each result flushed; then c + (even + odd),
// each flushed.
float bf16Dot(const float* a, const float* b, const int64_t* ak, const int64_t* bk, int64_t terms, float acc) {
  float c = flushTiny(acc);
  for (int64_t k0 = 0; k0 < terms; k0 += 32) {
    float chain[2] = {0.0f, 0.0f};
    for (int64_t k = k0; k < k0 + 32; ++k) {
      float& e = chain[k % 2];
      e = k < terms ? flushTiny(std::fma(bf16Operand(a[ak[k]]), bf16Operand(b[bk[k]]), e)) : e + 0.0f;
    }
    c = flushTiny(c + flushTiny(chain[0] + chain[1]));
  }
  return c;
}
// docs/ir.md, MMA, bf16_pairs: one chain from the flushed accumulator; per pair of contributions
// k+1's step, then k's (an odd count's last contribution alone), each a flushed fused step on
// operands rounded to bf16 and flushed.
float bf16Pairs(const float* a, const float* b, const int64_t* ak, const int64_t* bk, int64_t terms, float acc) {
  float c = flushTiny(acc);
  auto step = [&](int64_t k) { c = flushTiny(std::fma(bf16Operand(a[ak[k]]), bf16Operand(b[bk[k]]), c)); };
  int64_t k = 0;
  for (; k + 1 < terms; k += 2) step(k + 1), step(k);
  if (k < terms) step(k);
  return c;
}
// The f64 oracle (both bf16 orders): the ideal sum of the bf16-rounded operands' products.
double bf16Dot(const double* a, const double* b, const int64_t* ak, const int64_t* bk, int64_t terms, double acc) {
  auto op = [](double x) { return static_cast<double>(host::roundToStorage(ir::Elem::BF16, static_cast<float>(x))); };
  for (int64_t k = 0; k < terms; ++k) acc += op(a[ak[k]]) * op(b[bk[k]]);
  return acc;
}

double bf16Pairs(const double* a, const double* b, const int64_t* ak, const int64_t* bk, int64_t terms, double acc) {
  return bf16Dot(a, b, ak, bk, terms, acc);
}

// Coordinates i in [0, extent) with 0 <= origin + i < size form [lo, hi) (lo == hi: none).
struct Range {
  int64_t lo = 0, hi = 0;
};
Range validRange(int64_t origin, int64_t size, int64_t extent) {
  if (origin >= size || origin <= -extent) return {};
  return {origin < 0 ? -origin : 0, std::min(extent, size - origin)};
}

// Walks a load/store tile row by row (a row = the last tile dim). For each row calls
// fn(tile_offset, view_offset, lo, hi, row_length, view_stride): elements lo <= i < hi of the
// row are inside the view, at view_offset + i * view_stride; the others are outside.
template <class Fn>
void forEachRow(const AccessPlan& p, const std::vector<int64_t>& origin, Fn fn) {
  const size_t rank = p.tile_extent.size();
  for (int64_t e : p.tile_extent)
    if (e == 0) return;
  bool inside = true;
  for (int k : p.squeezed) inside = inside && origin[k] >= 0 && origin[k] < p.view_shape[k];
  std::vector<Range> range(rank);
  for (size_t t = 0; t < rank; ++t) {
    int k = p.tile_to_view[t];
    range[t] = validRange(origin[k], p.view_shape[k], p.tile_extent[t]);
    inside = inside && range[t].lo < range[t].hi;
  }
  int64_t base = 0;
  if (inside)
    for (size_t k = 0; k < origin.size(); ++k) base += origin[k] * p.view_stride[k];
  if (rank == 0) {
    fn(0, base, 0, inside ? 1 : 0, 1, 0);
    return;
  }
  const size_t last = rank - 1;
  const int64_t rowLen = p.tile_extent[last];
  const int64_t rowStride = p.view_stride[p.tile_to_view[last]];
  std::vector<int64_t> coord(last, 0);
  int64_t rows = 1;
  for (size_t t = 0; t < last; ++t) rows *= p.tile_extent[t];
  for (int64_t r = 0; r < rows; ++r) {
    bool ok = inside;
    int64_t off = base;
    for (size_t t = 0; t < last && ok; ++t) {
      ok = coord[t] >= range[t].lo && coord[t] < range[t].hi;
      off += coord[t] * p.view_stride[p.tile_to_view[t]];
    }
    fn(r * rowLen, off, ok ? range[last].lo : 0, ok ? range[last].hi : 0, rowLen, rowStride);
    for (size_t t = last; t-- > 0;) {
      if (++coord[t] < p.tile_extent[t]) break;
      coord[t] = 0;
    }
  }
}

template <class T>
inline size_t step(const std::vector<T>& v) {
  return v.size() == 1 ? 0 : 1;  // rank-0 operands splat
}

template <class A, class R, class Fn>
void map1(const std::vector<A>& a, std::vector<R>& r, int64_t n, Fn fn) {
  r.resize(static_cast<size_t>(n));
  const size_t sa = step(a);
  for (int64_t e = 0; e < n; ++e) r[e] = fn(a[e * sa]);
}

template <class A, class R, class Fn>
void map2(const std::vector<A>& a, const std::vector<A>& b, std::vector<R>& r, int64_t n, Fn fn) {
  r.resize(static_cast<size_t>(n));
  const size_t sa = step(a), sb = step(b);
  for (int64_t e = 0; e < n; ++e) r[e] = fn(a[e * sa], b[e * sb]);
}

template <class F>
F mathExp(F x) {
  if constexpr (std::is_same_v<F, float>)
    return kiln::math::exp(x);
  else
    return std::exp(x);
}
template <class F>
F mathLog(F x) {
  if constexpr (std::is_same_v<F, float>)
    return kiln::math::log(x);
  else
    return std::log(x);
}
template <class F>
F mathTanh(F x) {
  if constexpr (std::is_same_v<F, float>)
    return kiln::math::tanh(x);
  else
    return std::tanh(x);
}
template <class F>
F mathErf(F x) {
  if constexpr (std::is_same_v<F, float>)
    return kiln::math::erf(x);
  else
    return std::erf(x);
}

template <class T, class Combine>
void reduceInto(const std::vector<T>& x, const std::vector<T>& init, std::vector<T>& out, const Step& s, int partitions,
                Combine op) {
  const int64_t n = s.size;
  const int64_t terms = static_cast<int64_t>(s.map1.size());
  out.resize(static_cast<size_t>(n));
  const size_t si = step(init);
  const bool ordered = s.op->reduce_policy.kind == ir::ReducePolicy::Kind::Ordered;
  T part[16];
  for (int64_t o = 0; o < n; ++o) {
    const T* xo = x.data() + s.map0[o];
    T r = init[o * si];
    if (ordered) {
      for (int64_t j = 0; j < terms; ++j) r = op(r, xo[s.map1[j]]);
    } else {
      // Contribution j goes to partition j mod P; partition p starts from its first one.
      const int64_t used = std::min<int64_t>(partitions, terms);
      for (int64_t j = 0; j < terms; ++j) {
        const T v = xo[s.map1[j]];
        const int64_t p = j % partitions;
        part[p] = j < partitions ? v : op(part[p], v);
      }
      for (int64_t p = 0; p < used; ++p) r = op(r, part[p]);
    }
    out[o] = r;
  }
}

template <class T>
void reduceDispatch(const std::vector<T>& x, const std::vector<T>& init, std::vector<T>& out, const Step& s,
                    int partitions) {
  switch (s.op->reduce) {
    case ir::ReduceKind::Add: reduceInto(x, init, out, s, partitions, CombineAdd{}); break;
    case ir::ReduceKind::Mul: reduceInto(x, init, out, s, partitions, CombineMul{}); break;
    case ir::ReduceKind::Max: reduceInto(x, init, out, s, partitions, CombineMax{}); break;
    case ir::ReduceKind::Min: reduceInto(x, init, out, s, partitions, CombineMin{}); break;
  }
}

template <class T>
bool compare(ir::CmpPred p, T a, T b) {
  switch (p) {
    case ir::CmpPred::LT: return a < b;
    case ir::CmpPred::LE: return a <= b;
    case ir::CmpPred::GT: return a > b;
    case ir::CmpPred::GE: return a >= b;
    case ir::CmpPred::EQ: return a == b;
    case ir::CmpPred::NE: return a != b;
  }
  return false;
}

}  // namespace

template <class F>
Machine<F>::Machine(const ir::Kernel& kernel, const std::vector<host::ParamData>& params,
                    std::vector<std::vector<F>*> views, std::vector<std::vector<int64_t>*> ints, int default_partitions)
    : env_(kernel.values.size()),
      views_(std::move(views)),
      ints_(std::move(ints)),
      num_params_(kernel.params.size()),
      default_partitions_(default_partitions) {
  for (const ir::Value* p : kernel.params) {
    if (p->type.isView()) continue;
    Buf& b = slot(p);
    if (p->type.elem == ir::Elem::F32)
      b.f = {static_cast<F>(params[p->index].f32)};
    else
      b.i = {params[p->index].i64};
  }
}

template <class F>
void Machine<F>::run(const Step& root) {
  const ir::Op& op = *root.op;
  const std::vector<ir::Value*>& ivs = op.regions[0]->args;
  const size_t rank = op.extents.size();
  // A runtime extent from its (range-checked) parameter; programs run over the runtime domain.
  std::vector<int64_t> extents = op.extents;
  for (size_t d = 0; d < op.runtime_extents.size(); ++d)
    if (const ir::RuntimeExtent& r = op.runtime_extents[d]; r.runtime()) extents[d] = r.at(slot(r.param).i.at(0));
  std::vector<int64_t> coord(rank, 0);
  int64_t programs = 1;
  for (int64_t e : extents) programs *= std::max<int64_t>(e, 0);
  for (int64_t p = 0; p < programs; ++p) {
    for (size_t d = 0; d < rank; ++d) slot(ivs[d]).i = {coord[d]};
    runRegion(root.body);
    for (size_t d = rank; d-- > 0;) {
      if (++coord[d] < extents[d]) break;
      coord[d] = 0;
    }
  }
}

template <class F>
void Machine<F>::runRegion(const std::vector<Step>& steps) {
  for (const Step& s : steps) exec(s);
}

template <class F>
void Machine<F>::exec(const Step& s) {
  const ir::OpKind k = s.op->kind;
  if (ir::isUnary(k)) return execUnary(s);
  if (ir::isBinary(k)) return execBinary(s);
  switch (k) {
    case ir::OpKind::Serial:
    case ir::OpKind::Pipeline: return execLoop(s);
    case ir::OpKind::Load: return execLoad(s);
    case ir::OpKind::Store: return execStore(s);
    case ir::OpKind::Const: return execConst(s);
    case ir::OpKind::Iota: {
      std::vector<int64_t>& r = slot(s.op->results[0]).i;
      r.resize(static_cast<size_t>(s.size));
      for (int64_t e = 0; e < s.size; ++e) r[e] = (e / s.stride) % s.extent;
      return;
    }
    case ir::OpKind::Broadcast: {
      const Buf& x = slot(s.op->operands[0]);
      Buf& r = slot(s.op->results[0]);
      if (s.op->operands[0]->type.elem == ir::Elem::F32) {
        r.f.resize(static_cast<size_t>(s.size));
        for (int64_t e = 0; e < s.size; ++e) r.f[e] = x.f[s.map0[e]];
      } else {
        r.i.resize(static_cast<size_t>(s.size));
        for (int64_t e = 0; e < s.size; ++e) r.i[e] = x.i[s.map0[e]];
      }
      return;
    }
    case ir::OpKind::Reduce: return execReduce(s);
    case ir::OpKind::Mma: return execMma(s);
    case ir::OpKind::Extract: return execExtract(s);
    case ir::OpKind::Cast: return execCast(s);
    case ir::OpKind::Select: return execSelect(s);
    case ir::OpKind::Cmp: return execCmp(s);
    case ir::OpKind::Parallel:  // only the root, run by run()
    case ir::OpKind::Yield:     // read by the enclosing loop
    case ir::OpKind::Stage:     // scheduling intent only
    default: return;
  }
}

template <class F>
void Machine<F>::execLoop(const Step& s) {
  const ir::Op& op = *s.op;
  const ir::Region& body = *op.regions[0];
  const int64_t lower = index(op.indices[0]);
  const int64_t upper = index(op.indices[1]);
  const int64_t stride = op.indices[2].constant;
  const size_t carried = op.operands.size();
  for (size_t c = 0; c < carried; ++c) slot(body.args[c + 1]) = slot(op.operands[c]);
  const ir::Op* yield = !body.ops.empty() && body.ops.back()->kind == ir::OpKind::Yield ? body.ops.back() : nullptr;
  std::vector<Buf> next(carried);
  for (int64_t iv = lower; iv < upper;) {
    slot(body.args[0]).i = {iv};
    runRegion(s.body);
    if (yield) {
      for (size_t c = 0; c < carried; ++c) next[c] = slot(yield->operands[c]);
      for (size_t c = 0; c < carried; ++c) std::swap(slot(body.args[c + 1]), next[c]);
    }
    // Step without overflow: stop when fewer than `stride` values remain below `upper`.
    if (static_cast<uint64_t>(upper) - static_cast<uint64_t>(iv) <= static_cast<uint64_t>(stride)) break;
    iv += stride;
  }
  for (size_t c = 0; c < carried; ++c) slot(op.results[c]) = slot(body.args[c + 1]);
}

template <class F>
void Machine<F>::execLoad(const Step& s) {
  const ir::Op& op = *s.op;
  const AccessPlan& p = s.access;
  std::vector<int64_t> origin(op.indices.size());
  for (size_t k = 0; k < origin.size(); ++k) origin[k] = index(op.indices[k]);
  if (ir::isIntegerStorage(op.operands[0]->type.elem)) {
    // An integer view: its elements as i64 (an i32 view holds i32 values), the fill likewise.
    const std::vector<int64_t>& view = *ints_[bufferOf(p)];
    std::vector<int64_t>& out = slot(op.results[0]).i;
    out.resize(static_cast<size_t>(s.size));
    const auto fill = static_cast<int64_t>(op.fconst);
    forEachRow(p, origin, [&](int64_t to, int64_t vo, int64_t lo, int64_t hi, int64_t len, int64_t vs) {
      int64_t* row = out.data() + to;
      for (int64_t i = 0; i < lo; ++i) row[i] = fill;
      for (int64_t i = lo; i < hi; ++i) row[i] = view[vo + i * vs];
      for (int64_t i = std::max(lo, hi); i < len; ++i) row[i] = fill;
    });
    return;
  }
  const std::vector<F>& view = *views_[bufferOf(p)];
  std::vector<F>& out = slot(op.results[0]).f;
  out.resize(static_cast<size_t>(s.size));
  // (a 16-bit view's elements are values of its type already; its fill is rounded to the type)
  const F fill = static_cast<F>(host::roundToStorage(op.operands[0]->type.elem, static_cast<float>(op.fconst)));
  forEachRow(p, origin, [&](int64_t to, int64_t vo, int64_t lo, int64_t hi, int64_t len, int64_t vs) {
    F* row = out.data() + to;
    for (int64_t i = 0; i < lo; ++i) row[i] = fill;
    if (vs == 1) {
      std::copy(view.data() + vo + lo, view.data() + vo + hi, row + lo);
    } else {
      for (int64_t i = lo; i < hi; ++i) row[i] = view[vo + i * vs];
    }
    for (int64_t i = std::max(lo, hi); i < len; ++i) row[i] = fill;
  });
}

template <class F>
void Machine<F>::execStore(const Step& s) {
  const ir::Op& op = *s.op;
  const AccessPlan& p = s.access;
  std::vector<int64_t> origin(op.indices.size());
  for (size_t k = 0; k < origin.size(); ++k) origin[k] = index(op.indices[k]);
  if (ir::isIntegerStorage(op.operands[0]->type.elem)) {
    // Into an integer view: an i32 view keeps the low 32 bits (two's complement wrap).
    const bool narrow = op.operands[0]->type.elem == ir::Elem::I32;
    std::vector<int64_t>& view = *ints_[bufferOf(p)];
    const std::vector<int64_t>& tile = slot(op.operands[1]).i;
    forEachRow(p, origin, [&](int64_t to, int64_t vo, int64_t lo, int64_t hi, int64_t, int64_t vs) {
      const int64_t* row = tile.data() + to;
      for (int64_t i = lo; i < hi; ++i) view[vo + i * vs] = narrow ? static_cast<int32_t>(row[i]) : row[i];
    });
    return;
  }
  std::vector<F>& view = *views_[bufferOf(p)];
  const std::vector<F>& tile = slot(op.operands[1]).f;
  const ir::Elem elem = op.operands[0]->type.elem;
  // Into a 16-bit view: each f32 rounded to the view's type (docs/ir.md, "16-bit views"). The
  // f64 oracle keeps its double values (the ideal result; evaluate() rounds them at the end).
  const bool half = std::is_same_v<F, float> && ir::isHalfStorage(elem);
  forEachRow(p, origin, [&](int64_t to, int64_t vo, int64_t lo, int64_t hi, int64_t, int64_t vs) {
    const F* row = tile.data() + to;
    if (half)
      for (int64_t i = lo; i < hi; ++i)
        view[vo + i * vs] = static_cast<F>(host::roundToStorage(elem, static_cast<float>(row[i])));
    else
      for (int64_t i = lo; i < hi; ++i) view[vo + i * vs] = row[i];
  });
}

template <class F>
void Machine<F>::execConst(const Step& s) {
  const ir::Value* r = s.op->results[0];
  Buf& b = slot(r);
  const size_t n = static_cast<size_t>(s.size);
  switch (r->type.elem) {
    case ir::Elem::F32: b.f.assign(n, static_cast<F>(static_cast<float>(s.op->fconst))); break;
    case ir::Elem::I1: b.i.assign(n, s.op->iconst != 0 ? 1 : 0); break;
    default: b.i.assign(n, s.op->iconst); break;
  }
}

template <class F>
void Machine<F>::execUnary(const Step& s) {
  const ir::Op& op = *s.op;
  const Buf& x = slot(op.operands[0]);
  Buf& r = slot(op.results[0]);
  const int64_t n = s.size;
  if (op.operands[0]->type.elem == ir::Elem::I64) {
    if (op.kind == ir::OpKind::Neg)
      map1(x.i, r.i, n, negWrap);
    else
      map1(x.i, r.i, n, absWrap);
    return;
  }
  switch (op.kind) {
    case ir::OpKind::Neg: map1(x.f, r.f, n, [](F v) { return -v; }); break;
    case ir::OpKind::Abs: map1(x.f, r.f, n, [](F v) { return std::fabs(v); }); break;
    case ir::OpKind::Exp: map1(x.f, r.f, n, [](F v) { return mathExp(v); }); break;
    case ir::OpKind::Log: map1(x.f, r.f, n, [](F v) { return mathLog(v); }); break;
    case ir::OpKind::Sqrt: map1(x.f, r.f, n, [](F v) { return std::sqrt(v); }); break;
    case ir::OpKind::Rsqrt: map1(x.f, r.f, n, [](F v) { return F(1) / std::sqrt(v); }); break;
    case ir::OpKind::Tanh: map1(x.f, r.f, n, [](F v) { return mathTanh(v); }); break;
    case ir::OpKind::Erf: map1(x.f, r.f, n, [](F v) { return mathErf(v); }); break;
    default: break;
  }
}

template <class F>
void Machine<F>::execBinary(const Step& s) {
  const ir::Op& op = *s.op;
  const Buf& a = slot(op.operands[0]);
  const Buf& b = slot(op.operands[1]);
  Buf& r = slot(op.results[0]);
  const int64_t n = s.size;
  if (op.operands[0]->type.elem == ir::Elem::I64) {
    switch (op.kind) {
      case ir::OpKind::Add: map2(a.i, b.i, r.i, n, addWrap); break;
      case ir::OpKind::Sub: map2(a.i, b.i, r.i, n, subWrap); break;
      case ir::OpKind::Mul: map2(a.i, b.i, r.i, n, mulWrap); break;
      case ir::OpKind::Div: map2(a.i, b.i, r.i, n, divI64); break;
      case ir::OpKind::Max: map2(a.i, b.i, r.i, n, [](int64_t x, int64_t y) { return x > y ? x : y; }); break;
      case ir::OpKind::Min: map2(a.i, b.i, r.i, n, [](int64_t x, int64_t y) { return x < y ? x : y; }); break;
      default: break;
    }
    return;
  }
  switch (op.kind) {
    case ir::OpKind::Add: map2(a.f, b.f, r.f, n, [](F x, F y) { return x + y; }); break;
    case ir::OpKind::Sub: map2(a.f, b.f, r.f, n, [](F x, F y) { return x - y; }); break;
    case ir::OpKind::Mul: map2(a.f, b.f, r.f, n, [](F x, F y) { return x * y; }); break;
    case ir::OpKind::Div: map2(a.f, b.f, r.f, n, [](F x, F y) { return x / y; }); break;
    case ir::OpKind::Max: map2(a.f, b.f, r.f, n, maxNaN<F>); break;
    case ir::OpKind::Min: map2(a.f, b.f, r.f, n, minNaN<F>); break;
    default: break;
  }
}

template <class F>
void Machine<F>::execCmp(const Step& s) {
  const ir::Op& op = *s.op;
  const Buf& a = slot(op.operands[0]);
  const Buf& b = slot(op.operands[1]);
  std::vector<int64_t>& r = slot(op.results[0]).i;
  const ir::CmpPred p = op.pred;
  if (op.operands[0]->type.elem == ir::Elem::F32)
    map2(a.f, b.f, r, s.size, [p](F x, F y) -> int64_t { return compare(p, x, y) ? 1 : 0; });
  else
    map2(a.i, b.i, r, s.size, [p](int64_t x, int64_t y) -> int64_t { return compare(p, x, y) ? 1 : 0; });
}

template <class F>
void Machine<F>::execSelect(const Step& s) {
  const ir::Op& op = *s.op;
  const std::vector<int64_t>& c = slot(op.operands[0]).i;
  const Buf& a = slot(op.operands[1]);
  const Buf& b = slot(op.operands[2]);
  Buf& r = slot(op.results[0]);
  const int64_t n = s.size;
  const size_t sc = step(c);
  auto pick = [&](const auto& av, const auto& bv, auto& rv) {
    rv.resize(static_cast<size_t>(n));
    const size_t sa = step(av), sb = step(bv);
    for (int64_t e = 0; e < n; ++e) rv[e] = c[e * sc] ? av[e * sa] : bv[e * sb];
  };
  if (op.operands[1]->type.elem == ir::Elem::F32)
    pick(a.f, b.f, r.f);
  else
    pick(a.i, b.i, r.i);
}

template <class F>
void Machine<F>::execCast(const Step& s) {
  const ir::Op& op = *s.op;
  const Buf& x = slot(op.operands[0]);
  Buf& r = slot(op.results[0]);
  const ir::Elem from = op.operands[0]->type.elem;
  const ir::Elem to = op.results[0]->type.elem;
  const int64_t n = s.size;
  if (from == ir::Elem::F32) {
    if (to == ir::Elem::F32)
      map1(x.f, r.f, n, [](F v) { return v; });
    else if (to == ir::Elem::I64)
      map1(x.f, r.i, n, castToI64<F>);
    else
      map1(x.f, r.i, n, [](F v) -> int64_t { return v != F(0) ? 1 : 0; });
    return;
  }
  // from i64 or i1 (stored as 0/1)
  if (to == ir::Elem::F32)
    map1(x.i, r.f, n, [](int64_t v) { return static_cast<F>(v); });
  else if (to == ir::Elem::I1 && from == ir::Elem::I64)
    map1(x.i, r.i, n, [](int64_t v) -> int64_t { return v != 0; });
  else
    map1(x.i, r.i, n, [](int64_t v) { return v; });
}

template <class F>
void Machine<F>::execReduce(const Step& s) {
  const ir::Op& op = *s.op;
  const Buf& x = slot(op.operands[0]);
  const Buf& init = slot(op.operands[1]);
  Buf& r = slot(op.results[0]);
  const int partitions = op.reduce_policy.partitions > 0 ? op.reduce_policy.partitions : default_partitions_;
  if (op.operands[0]->type.elem == ir::Elem::F32)
    reduceDispatch(x.f, init.f, r.f, s, partitions);
  else
    reduceDispatch(x.i, init.i, r.i, s, partitions);
}

template <class F>
void Machine<F>::execMma(const Step& s) {
  const ir::Op& op = *s.op;
  const std::vector<F>& a = slot(op.operands[0]).f;
  const std::vector<F>& b = slot(op.operands[1]).f;
  const std::vector<F>& acc = slot(op.operands[2]).f;
  std::vector<F>& out = slot(op.results[0]).f;
  out.resize(static_cast<size_t>(s.size));
  const int64_t terms = static_cast<int64_t>(s.map2.size());
  if (terms == 0) {  // K = 0: the result is acc
    std::copy(acc.begin(), acc.end(), out.begin());
    return;
  }
  const int64_t* ak = s.map2.data();
  const int64_t* bk = s.map3.data();
  for (int64_t o = 0; o < s.size; ++o) {
    const F* ao = a.data() + s.map0[o];
    const F* bo = b.data() + s.map1[o];
    F c = acc[o];
    if (op.mma_policy.bf16_dot) {
      c = bf16Dot(ao, bo, ak, bk, terms, c);
    } else if (op.mma_policy.bf16_pairs) {
      c = bf16Pairs(ao, bo, ak, bk, terms, c);
    } else if (const int64_t P = op.mma_policy.partitions; P > 0) {
      // docs/ir.md, MMA: partition q = k mod P, each from its first product; then acc merges
      // partitions 0..min(P, K)-1 in order.
      const int64_t parts = std::min(P, terms);
      F part[16];
      for (int64_t q = 0; q < parts; ++q) part[q] = ao[ak[q]] * bo[bk[q]];
      for (int64_t k = parts; k < terms; ++k) {
        F& pq = part[k % P];
        if (op.mma_policy.fused) {
          pq = std::fma(ao[ak[k]], bo[bk[k]], pq);
        } else {
          const F p = ao[ak[k]] * bo[bk[k]];
          pq = pq + p;
        }
      }
      for (int64_t q = 0; q < parts; ++q) c = c + part[q];
    } else if (op.mma_policy.fused) {
      for (int64_t k = 0; k < terms; ++k) c = std::fma(ao[ak[k]], bo[bk[k]], c);  // rounded once
    } else {
      for (int64_t k = 0; k < terms; ++k) {
        const F p = ao[ak[k]] * bo[bk[k]];  // rounded product, then a separate add: no FMA
        c = c + p;
      }
    }
    out[o] = c;
  }
}

template <class F>
void Machine<F>::execExtract(const Step& s) {
  const ir::Op& op = *s.op;
  const ir::Type& t = op.operands[0]->type;
  int64_t off = 0;
  bool inside = true;
  for (size_t d = 0; d < op.indices.size(); ++d) {
    const int64_t i = index(op.indices[d]);
    inside = inside && i >= 0 && i < t.dims[d].extent;
    if (inside) off += i * s.strides[d];
  }
  const Buf& x = slot(op.operands[0]);
  Buf& r = slot(op.results[0]);
  if (t.elem == ir::Elem::F32)
    r.f = {inside ? x.f[off] : F(0)};
  else
    r.i = {inside ? x.i[off] : 0};
}

template class Machine<float>;
template class Machine<double>;

}  // namespace kiln::interp::detail

// DSL ops on tiles: elementwise operators with broadcast by dim name, math, reductions, mma,
// index arithmetic and memory.
// Expects: handles made by one KernelBuilder.
// Guarantees: each op is built by ir::Builder at the caller's source position; the only ops
// the DSL adds on its own are `broadcast` (by name) and `const` (literals).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "dsl/impl.h"

namespace kiln::dsl {

using detail::Internal;

namespace {

// Every dim of `sub` is a dim of `super` (by name, same extent).
bool dimsWithin(const std::vector<ir::Dim>& sub, const std::vector<ir::Dim>& super) {
  return std::all_of(sub.begin(), sub.end(),
                     [&](const ir::Dim& d) { return std::find(super.begin(), super.end(), d) != super.end(); });
}

// The builder an expression belongs to: the first operand that has one.
KernelBuilder* builderOf(std::initializer_list<const Operand*> ops) {
  for (const Operand* o : ops)
    if (!o->is_literal && o->tile.builder()) return o->tile.builder();
  return nullptr;
}

ir::Value* literal(KernelBuilder* kb, const Operand& x, ir::Elem elem, const ir::Loc& loc) {
  KernelBuilder::Impl& I = Internal::impl(kb);
  switch (elem) {
    case ir::Elem::F32: return I.scalarConst(elem, x.literal, 0, loc);
    case ir::Elem::I64:
      if (!x.is_int && x.literal != std::trunc(x.literal)) {
        I.error(loc, "elem-type",
                fmt::format("the literal {} is used with an i64 operand; write an integer", x.literal));
        return nullptr;
      }
      return I.scalarConst(elem, 0.0, x.is_int ? x.int_literal : static_cast<int64_t>(x.literal), loc);
    case ir::Elem::I1:
      if (x.literal != 0.0 && x.literal != 1.0) {
        I.error(loc, "elem-type", fmt::format("the literal {} is used with an i1 operand; write 0 or 1", x.literal));
        return nullptr;
      }
      return I.scalarConst(elem, 0.0, x.literal != 0.0 ? 1 : 0, loc);
    default: break;
  }
  I.error(loc, "elem-type", "a literal can only stand for an f32, i64 or i1 value");
  return nullptr;
}

// The value of operand `x`; a literal takes the element type of `like` (f32 when unknown).
// Returns null when there is nothing to build on (after an error, reported once).
ir::Value* materialize(KernelBuilder* kb, const Operand& x, ir::Value* like, bool likeFailed, const ir::Loc& loc) {
  if (!x.is_literal) return valueOf(kb, x.tile, loc);
  if (likeFailed) return nullptr;
  return literal(kb, x, like ? like->type.elem : ir::Elem::F32, loc);
}

// Makes the operands of an elementwise op agree: the operand of highest rank sets the dims,
// and every other non-scalar operand whose dims it holds (by name) is broadcast to them.
bool unify(KernelBuilder* kb, std::vector<ir::Value*>& vs, const ir::Loc& loc, std::string_view what) {
  KernelBuilder::Impl& I = Internal::impl(kb);
  const ir::Value* target = nullptr;
  for (const ir::Value* v : vs)
    if (!target || v->type.rank() > target->type.rank()) target = v;
  for (ir::Value*& v : vs) {
    if (v == target || v->type.isScalar() || v->type.dims == target->type.dims) continue;
    if (!v->type.isTile() || !target->type.isTile() || !dimsWithin(v->type.dims, target->type.dims)) {
      I.error(loc, "broadcast",
              fmt::format("{} cannot combine {} and {}: broadcasting by name needs the dims of one side to be among "
                          "the dims of the other, with the same extents; broadcast explicitly with broadcast(t, dims)",
                          what, ir::toString(v->type), ir::toString(target->type)));
      return false;
    }
    v = I.b.broadcast(v, ir::Type::tile(v->type.elem, target->type.dims), loc, I.fresh(v->name));
    if (!v) return false;
  }
  return true;
}

Tile unary(ir::OpKind kind, const Tile& x, SrcLoc loc) {
  KernelBuilder* kb = x.builder();
  if (!kb || !x.ok()) return x;
  KernelBuilder::Impl& I = Internal::impl(kb);
  return Internal::tile(kb, I.b.unary(kind, x.value(), toLoc(loc), I.fresh("t")));
}

Tile cast(const Tile& x, ir::Elem to, SrcLoc loc) {
  KernelBuilder* kb = x.builder();
  if (!kb || !x.ok()) return x;
  KernelBuilder::Impl& I = Internal::impl(kb);
  return Internal::tile(kb, I.b.cast(x.value(), to, toLoc(loc), I.fresh("t")));
}

Tile reduce(ir::ReduceKind kind, const Tile& x, const std::vector<std::string>& dims, const Operand& init,
            ReduceOrder order, SrcLoc loc) {
  KernelBuilder* kb = x.builder();
  if (!kb) return x;
  KernelBuilder::Impl& I = Internal::impl(kb);
  ir::Loc l = toLoc(loc);
  ir::Value* xv = x.value();
  ir::Value* iv = materialize(kb, init, xv, xv == nullptr, l);
  if (!xv || !iv) return Internal::tile(kb, nullptr);
  // An init holding some of the result's dims is broadcast to all of them.
  std::vector<ir::Dim> rest;
  for (const ir::Dim& d : xv->type.dims)
    if (std::find(dims.begin(), dims.end(), d.name) == dims.end()) rest.push_back(d);
  if (!iv->type.isScalar() && iv->type.dims != rest && dimsWithin(iv->type.dims, rest))
    iv = I.b.broadcast(iv, ir::Type::tile(iv->type.elem, rest), l, I.fresh(iv->name));
  ir::ReducePolicy policy;
  if (order.tree) policy = ir::ReducePolicy{ir::ReducePolicy::Kind::UnorderedTree, order.partitions};
  return Internal::tile(kb, I.b.reduce(kind, xv, dims, iv, policy, l, I.fresh("t")));
}

Idx indexBinary(ir::OpKind kind, const IdxOperand& a, const IdxOperand& b) {
  KernelBuilder* kb = !a.is_constant && a.idx.builder() ? a.idx.builder() : b.idx.builder();
  if (!kb) return Idx{};
  KernelBuilder::Impl& I = Internal::impl(kb);
  ir::Loc l = toLoc(b.loc);
  auto value = [&](const IdxOperand& x) -> ir::Value* {
    if (!x.is_constant) return valueOf(kb, x.idx, l);
    return I.scalarConst(ir::Elem::I64, 0.0, x.constant, l);
  };
  ir::Value* va = value(a);
  ir::Value* vb = value(b);
  return Internal::idx(kb, I.b.binary(kind, va, vb, l, I.fresh("i")));
}

}  // namespace

// ---- elementwise ----

Tile detail::binary(Bin op, const Operand& a, const Operand& b, SrcLoc loc) {
  KernelBuilder* kb = builderOf({&a, &b});
  if (!kb) return Tile{};
  KernelBuilder::Impl& I = Internal::impl(kb);
  ir::Loc l = toLoc(loc);
  ir::Value* va = a.is_literal ? nullptr : valueOf(kb, a.tile, l);
  ir::Value* vb = b.is_literal ? nullptr : valueOf(kb, b.tile, l);
  if (a.is_literal) va = materialize(kb, a, vb, vb == nullptr, l);
  if (b.is_literal) vb = materialize(kb, b, va, va == nullptr, l);
  if (!va || !vb) return Internal::tile(kb, nullptr);
  static constexpr const char* kNames[] = {"add",    "sub",    "mul",    "div",    "max",    "min",
                                           "cmp lt", "cmp le", "cmp gt", "cmp ge", "cmp eq", "cmp ne"};
  std::vector<ir::Value*> vs = {va, vb};
  if (!unify(kb, vs, l, kNames[static_cast<int>(op)])) return Internal::tile(kb, nullptr);
  switch (op) {
    case Bin::Add: return Internal::tile(kb, I.b.binary(ir::OpKind::Add, vs[0], vs[1], l, I.fresh("t")));
    case Bin::Sub: return Internal::tile(kb, I.b.binary(ir::OpKind::Sub, vs[0], vs[1], l, I.fresh("t")));
    case Bin::Mul: return Internal::tile(kb, I.b.binary(ir::OpKind::Mul, vs[0], vs[1], l, I.fresh("t")));
    case Bin::Div: return Internal::tile(kb, I.b.binary(ir::OpKind::Div, vs[0], vs[1], l, I.fresh("t")));
    case Bin::Max: return Internal::tile(kb, I.b.binary(ir::OpKind::Max, vs[0], vs[1], l, I.fresh("t")));
    case Bin::Min: return Internal::tile(kb, I.b.binary(ir::OpKind::Min, vs[0], vs[1], l, I.fresh("t")));
    case Bin::Lt: return Internal::tile(kb, I.b.cmp(ir::CmpPred::LT, vs[0], vs[1], l, I.fresh("t")));
    case Bin::Le: return Internal::tile(kb, I.b.cmp(ir::CmpPred::LE, vs[0], vs[1], l, I.fresh("t")));
    case Bin::Gt: return Internal::tile(kb, I.b.cmp(ir::CmpPred::GT, vs[0], vs[1], l, I.fresh("t")));
    case Bin::Ge: return Internal::tile(kb, I.b.cmp(ir::CmpPred::GE, vs[0], vs[1], l, I.fresh("t")));
    case Bin::Eq: return Internal::tile(kb, I.b.cmp(ir::CmpPred::EQ, vs[0], vs[1], l, I.fresh("t")));
    case Bin::Ne: return Internal::tile(kb, I.b.cmp(ir::CmpPred::NE, vs[0], vs[1], l, I.fresh("t")));
  }
  return Internal::tile(kb, nullptr);
}

Tile operator+(const Operand& a, const Operand& b) {
  return detail::binary(detail::Bin::Add, a, b, a.loc);
}
Tile operator-(const Operand& a, const Operand& b) {
  return detail::binary(detail::Bin::Sub, a, b, a.loc);
}
Tile operator*(const Operand& a, const Operand& b) {
  return detail::binary(detail::Bin::Mul, a, b, a.loc);
}
Tile operator/(const Operand& a, const Operand& b) {
  return detail::binary(detail::Bin::Div, a, b, a.loc);
}
Tile operator-(const Operand& a) {
  if (a.is_literal) return Tile{};
  return unary(ir::OpKind::Neg, a.tile, a.loc);
}
Tile& operator+=(Tile& a, const Operand& b) {
  return a = detail::binary(detail::Bin::Add, Operand(a, b.loc), b, b.loc);
}
Tile& operator-=(Tile& a, const Operand& b) {
  return a = detail::binary(detail::Bin::Sub, Operand(a, b.loc), b, b.loc);
}
Tile& operator*=(Tile& a, const Operand& b) {
  return a = detail::binary(detail::Bin::Mul, Operand(a, b.loc), b, b.loc);
}
Tile& operator/=(Tile& a, const Operand& b) {
  return a = detail::binary(detail::Bin::Div, Operand(a, b.loc), b, b.loc);
}

Idx operator+(const Idx& a, const IdxOperand& b) {
  return indexBinary(ir::OpKind::Add, IdxOperand(a, b.loc), b);
}
Idx operator-(const Idx& a, const IdxOperand& b) {
  return indexBinary(ir::OpKind::Sub, IdxOperand(a, b.loc), b);
}
Idx operator*(const Idx& a, const IdxOperand& b) {
  return indexBinary(ir::OpKind::Mul, IdxOperand(a, b.loc), b);
}
Idx operator/(const Idx& a, const IdxOperand& b) {
  return indexBinary(ir::OpKind::Div, IdxOperand(a, b.loc), b);
}
Idx operator+(int64_t a, const IdxOperand& b) {
  return indexBinary(ir::OpKind::Add, IdxOperand(a, b.loc), b);
}
Idx operator-(int64_t a, const IdxOperand& b) {
  return indexBinary(ir::OpKind::Sub, IdxOperand(a, b.loc), b);
}
Idx operator*(int64_t a, const IdxOperand& b) {
  return indexBinary(ir::OpKind::Mul, IdxOperand(a, b.loc), b);
}
Idx operator/(int64_t a, const IdxOperand& b) {
  return indexBinary(ir::OpKind::Div, IdxOperand(a, b.loc), b);
}

Tile exp(const Tile& x, SrcLoc loc) {
  return unary(ir::OpKind::Exp, x, loc);
}
Tile log(const Tile& x, SrcLoc loc) {
  return unary(ir::OpKind::Log, x, loc);
}
Tile sqrt(const Tile& x, SrcLoc loc) {
  return unary(ir::OpKind::Sqrt, x, loc);
}
Tile rsqrt(const Tile& x, SrcLoc loc) {
  return unary(ir::OpKind::Rsqrt, x, loc);
}
Tile tanh(const Tile& x, SrcLoc loc) {
  return unary(ir::OpKind::Tanh, x, loc);
}
Tile erf(const Tile& x, SrcLoc loc) {
  return unary(ir::OpKind::Erf, x, loc);
}
Tile abs(const Tile& x, SrcLoc loc) {
  return unary(ir::OpKind::Abs, x, loc);
}

Tile select(const Tile& cond, const Operand& a, const Operand& b, SrcLoc loc) {
  KernelBuilder* kb = cond.builder();
  if (!kb) return Tile{};
  KernelBuilder::Impl& I = Internal::impl(kb);
  ir::Loc l = toLoc(loc);
  ir::Value* vc = cond.value();
  ir::Value* va = a.is_literal ? nullptr : valueOf(kb, a.tile, l);
  ir::Value* vb = b.is_literal ? nullptr : valueOf(kb, b.tile, l);
  bool bothLiteral = a.is_literal && b.is_literal;
  if (a.is_literal) va = materialize(kb, a, vb, !bothLiteral && vb == nullptr, l);
  if (b.is_literal) vb = materialize(kb, b, va, va == nullptr, l);
  if (!vc || !va || !vb) return Internal::tile(kb, nullptr);
  std::vector<ir::Value*> vs = {vc, va, vb};
  if (!unify(kb, vs, l, "select")) return Internal::tile(kb, nullptr);
  return Internal::tile(kb, I.b.select(vs[0], vs[1], vs[2], l, I.fresh("t")));
}

Tile toF32(const Tile& x, SrcLoc loc) {
  return cast(x, ir::Elem::F32, loc);
}
Tile toI64(const Tile& x, SrcLoc loc) {
  return cast(x, ir::Elem::I64, loc);
}
Tile toI1(const Tile& x, SrcLoc loc) {
  return cast(x, ir::Elem::I1, loc);
}

Tile broadcast(const Tile& x, const std::vector<Dim>& dims, SrcLoc loc) {
  KernelBuilder* kb = x.builder();
  if (!kb || !x.ok()) return x;
  KernelBuilder::Impl& I = Internal::impl(kb);
  return Internal::tile(kb, I.b.broadcast(x.value(), ir::Type::tile(x.value()->type.elem, toIrDims(dims)), toLoc(loc),
                                          I.fresh(x.value()->name)));
}

Tile extract(const Tile& x, const std::vector<IdxArg>& indices, SrcLoc loc) {
  KernelBuilder* kb = x.builder();
  if (!kb || !x.ok()) return x;
  KernelBuilder::Impl& I = Internal::impl(kb);
  ir::Loc l = toLoc(loc);
  std::vector<ir::Index> ix;
  for (const IdxArg& a : indices) ix.push_back(indexOf(kb, a, l));
  return Internal::tile(kb, I.b.extract(x.value(), ix, l, I.fresh("t")));
}

Idx extractIndex(const Tile& x, const std::vector<IdxArg>& indices, SrcLoc loc) {
  KernelBuilder* kb = x.builder();
  if (!kb || !x.ok()) return Idx{};
  if (x.value()->type.elem != ir::Elem::I64) {
    kb->error("type", "extractIndex reads an i64 tile, not " + x.type(), loc);
    return Idx{};
  }
  return Internal::idx(kb, extract(x, indices, loc).value());
}

Idx minIndex(const Idx& a, const IdxOperand& b) {
  return indexBinary(ir::OpKind::Min, IdxOperand(a, b.loc), b);
}
Idx maxIndex(const Idx& a, const IdxOperand& b) {
  return indexBinary(ir::OpKind::Max, IdxOperand(a, b.loc), b);
}

// ---- reductions and mma ----

Tile reduceSum(const Tile& x, const std::vector<std::string>& dims, const Operand& init, ReduceOrder order,
               SrcLoc loc) {
  return reduce(ir::ReduceKind::Add, x, dims, init, order, loc);
}
Tile reduceMax(const Tile& x, const std::vector<std::string>& dims, const Operand& init, ReduceOrder order,
               SrcLoc loc) {
  return reduce(ir::ReduceKind::Max, x, dims, init, order, loc);
}
Tile reduceMin(const Tile& x, const std::vector<std::string>& dims, const Operand& init, ReduceOrder order,
               SrcLoc loc) {
  return reduce(ir::ReduceKind::Min, x, dims, init, order, loc);
}
Tile reduceProd(const Tile& x, const std::vector<std::string>& dims, const Operand& init, ReduceOrder order,
                SrcLoc loc) {
  return reduce(ir::ReduceKind::Mul, x, dims, init, order, loc);
}

Tile mma(const Tile& a, const Tile& b, const Tile& acc, const std::vector<std::string>& contract, MmaFlags flags,
         SrcLoc loc) {
  KernelBuilder* kb = a.builder() ? a.builder() : b.builder() ? b.builder() : acc.builder();
  if (!kb) return Tile{};
  KernelBuilder::Impl& I = Internal::impl(kb);
  ir::Loc l = toLoc(loc);
  ir::Value* va = valueOf(kb, a, l);
  ir::Value* vb = valueOf(kb, b, l);
  ir::Value* vacc = valueOf(kb, acc, l);
  ir::MmaPolicy policy{flags.allow_reassociation, flags.allow_fma, flags.fused,
                       flags.partitions,          flags.bf16_dot,  flags.bf16_pairs};
  return Internal::tile(kb, I.b.mma(va, vb, vacc, contract, policy, l, I.fresh("t")));
}

// ---- memory ----

namespace {
std::vector<ir::Dim> toIrAccess(const std::vector<Access>& access) {
  std::vector<ir::Dim> out;
  for (const dsl::Access& a : access) out.push_back(ir::Dim{a.name, a.name.empty() ? 1 : a.extent});
  return out;
}
}  // namespace

Tile load(const View& view, const std::vector<IdxArg>& origin, const std::vector<dsl::Access>& access, double fill,
          SrcLoc loc) {
  KernelBuilder* kb = view.builder();
  if (!kb) return Tile{};
  KernelBuilder::Impl& I = Internal::impl(kb);
  ir::Loc l = toLoc(loc);
  std::vector<ir::Index> ix;
  for (const IdxArg& a : origin) ix.push_back(indexOf(kb, a, l));
  double f = static_cast<double>(static_cast<float>(fill));
  return Internal::tile(kb, I.b.load(view.value(), ix, toIrAccess(access), f, l, I.fresh("t")));
}

void store(const Tile& tile, const View& view, const std::vector<IdxArg>& origin,
           const std::vector<dsl::Access>& access, SrcLoc loc) {
  KernelBuilder* kb = view.builder();
  if (!kb) return;
  KernelBuilder::Impl& I = Internal::impl(kb);
  ir::Loc l = toLoc(loc);
  ir::Value* v = valueOf(kb, tile, l);
  std::vector<ir::Index> ix;
  for (const IdxArg& a : origin) ix.push_back(indexOf(kb, a, l));
  I.b.store(view.value(), ix, toIrAccess(access), v, l);
}

}  // namespace kiln::dsl

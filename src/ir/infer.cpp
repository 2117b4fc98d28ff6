#include "ir/infer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace kiln::ir {
namespace {

InferResult fail(std::string code, std::string message) {
  InferResult r;
  r.error = TypeError{std::move(code), std::move(message)};
  return r;
}

InferResult ok(Type t) {
  InferResult r;
  r.results.push_back(std::move(t));
  return r;
}

InferResult okNone() {
  return InferResult{};
}

std::string dimList(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += fmt::format("{}{}:{}", i ? ", " : "", dims[i].name, dims[i].extent);
  return s + "]";
}

bool isNumeric(Elem e) {
  return e == Elem::F32 || e == Elem::I64;
}

std::optional<TypeError> checkIndexOperand(const Index& ix, const char* what) {
  if (ix.isConstant()) return std::nullopt;
  const Type& t = ix.value->type;
  if (!(t.isScalar() && t.elem == Elem::I64))
    return TypeError{"index-type", fmt::format("{} must be an i64 scalar or an integer literal, but %{} has type {}",
                                               what, ix.value->name, toString(t))};
  return std::nullopt;
}

std::optional<TypeError> checkDimsWellFormed(const std::vector<Dim>& dims, const char* what) {
  std::set<std::string> seen;
  for (const Dim& d : dims) {
    if (d.name.empty()) return TypeError{"dim-name", fmt::format("{} has a dim without a name", what)};
    if (!seen.insert(d.name).second)
      return TypeError{"dim-duplicate", fmt::format("{} names dim '{}' twice", what, d.name)};
    if (d.extent < 0)
      return TypeError{"negative-extent",
                       fmt::format("{} gives dim '{}' the negative extent {}", what, d.name, d.extent)};
  }
  return std::nullopt;
}

InferResult inferUnary(const Op& op) {
  const Type& a = op.operands[0]->type;
  if (!a.isTile()) return fail("operand-kind", fmt::format("{} needs a tile operand, not a view", opName(op.kind)));
  bool intOk = op.kind == OpKind::Neg || op.kind == OpKind::Abs;
  if (!(a.elem == Elem::F32 || (intOk && a.elem == Elem::I64)))
    return fail("elem-type",
                fmt::format("{} needs an f32{} operand, got {}", opName(op.kind), intOk ? " or i64" : "", toString(a)));
  return ok(a);
}

// Elementwise operands: equal types, or rank-0 operands splatted over the others.
std::optional<Type> commonShape(const std::vector<const Type*>& ts, TypeError& err, const char* opname) {
  const Type* shape = nullptr;
  for (const Type* t : ts) {
    if (!t->isTile()) {
      err = {"operand-kind", fmt::format("{} needs tile operands, not a view", opname)};
      return std::nullopt;
    }
    if (t->isScalar()) continue;
    if (!shape) {
      shape = t;
      continue;
    }
    if (shape->dims != t->dims) {
      err = {"shape-mismatch",
             fmt::format("{} operands have dims {} and {}; elementwise operands must have the same dims in the "
                         "same order (use broadcast to add dims, or a rank-0 scalar)",
                         opname, dimList(shape->dims), dimList(t->dims))};
      return std::nullopt;
    }
  }
  if (!shape) return Type::scalar(ts[0]->elem);
  return *shape;
}

InferResult inferBinary(const Op& op, bool isCmp) {
  const Type& a = op.operands[0]->type;
  const Type& b = op.operands[1]->type;
  TypeError err;
  auto shape = commonShape({&a, &b}, err, std::string(opName(op.kind)).c_str());
  if (!shape) return fail(err.code, err.message);
  if (a.elem != b.elem)
    return fail("elem-type", fmt::format("{} operands have element types {} and {}; insert a cast", opName(op.kind),
                                         elemName(a.elem), elemName(b.elem)));
  if (!isNumeric(a.elem) && !(isCmp && a.elem == Elem::I1 && (op.pred == CmpPred::EQ || op.pred == CmpPred::NE)))
    return fail("elem-type", fmt::format("{} needs f32 or i64 operands, got {}", opName(op.kind), elemName(a.elem)));
  Type r = *shape;
  r.elem = isCmp ? Elem::I1 : a.elem;
  return ok(r);
}

InferResult inferSelect(const Op& op) {
  const Type& c = op.operands[0]->type;
  const Type& a = op.operands[1]->type;
  const Type& b = op.operands[2]->type;
  TypeError err;
  auto shape = commonShape({&c, &a, &b}, err, "select");
  if (!shape) return fail(err.code, err.message);
  if (c.elem != Elem::I1)
    return fail("elem-type", fmt::format("select's condition must be i1 (a cmp result), got {}", elemName(c.elem)));
  if (a.elem != b.elem)
    return fail("elem-type",
                fmt::format("select's operands have element types {} and {}", elemName(a.elem), elemName(b.elem)));
  Type r = *shape;
  r.elem = a.elem;
  return ok(r);
}

InferResult inferLoad(const Op& op) {
  const Type& v = op.operands[0]->type;
  if (!v.isView()) return fail("operand-kind", "load reads from a view parameter, not a tile");
  if (op.indices.size() != v.dims.size())
    return fail("arity",
                fmt::format("load origin has {} indices but the view has rank {}", op.indices.size(), v.dims.size()));
  if (op.access.size() != v.dims.size())
    return fail("arity",
                fmt::format("load shape lists {} dims but the view has rank {}", op.access.size(), v.dims.size()));
  for (const Index& ix : op.indices)
    if (auto e = checkIndexOperand(ix, "a load origin")) return fail(e->code, e->message);
  std::vector<Dim> dims;
  for (const Dim& d : op.access)
    if (!d.name.empty()) dims.push_back(d);
  if (auto e = checkDimsWellFormed(dims, "load shape")) return fail(e->code, e->message);
  if (isIntegerStorage(v.elem)) {
    // An integer view loads as an i64 tile; its fill is an integer (of the view's type).
    const double lo = v.elem == Elem::I32 ? -2147483648.0 : -9007199254740992.0;
    const double hi = v.elem == Elem::I32 ? 2147483647.0 : 9007199254740992.0;
    if (op.fconst != std::trunc(op.fconst) || op.fconst < lo || op.fconst > hi)
      return fail("fill", fmt::format("the fill of a load from a view<{}> is an integer of that type, got {}",
                                      elemName(v.elem), op.fconst));
    return ok(Type::tile(Elem::I64, dims));
  }
  return ok(Type::tile(Elem::F32, dims));
}

InferResult inferStore(const Op& op) {
  const Type& v = op.operands[0]->type;
  const Type& t = op.operands[1]->type;
  if (!v.isView()) return fail("operand-kind", "store writes into a view parameter, not a tile");
  if (!t.isTile()) return fail("operand-kind", "store's value must be a tile");
  if (op.indices.size() != v.dims.size())
    return fail("arity",
                fmt::format("store origin has {} indices but the view has rank {}", op.indices.size(), v.dims.size()));
  if (op.access.size() != v.dims.size())
    return fail("arity",
                fmt::format("store shape lists {} dims but the view has rank {}", op.access.size(), v.dims.size()));
  for (const Index& ix : op.indices)
    if (auto e = checkIndexOperand(ix, "a store origin")) return fail(e->code, e->message);
  std::vector<Dim> dims;
  for (const Dim& d : op.access)
    if (!d.name.empty()) dims.push_back(d);
  if (auto e = checkDimsWellFormed(dims, "store shape")) return fail(e->code, e->message);
  if (isIntegerStorage(v.elem)) {
    if (t.elem != Elem::I64)
      return fail("elem-type",
                  fmt::format("a store into a view<{}> needs an i64 tile, got {}", elemName(v.elem), toString(t)));
  } else if (t.elem != Elem::F32) {
    return fail("elem-type", fmt::format("store needs an f32 tile, got {}", toString(t)));
  }
  bool same = dims.size() == t.dims.size();
  for (const Dim& d : dims) {
    int i = t.findDim(d.name);
    if (i < 0 || t.dims[i].extent != d.extent) same = false;
  }
  if (!same)
    return fail("dim-mismatch", fmt::format("store shape {} does not name the dims of the stored tile {} (dims are "
                                            "matched by name)",
                                            dimList(dims), toString(t)));
  return okNone();
}

InferResult inferReduce(const Op& op) {
  const Type& x = op.operands[0]->type;
  const Type& init = op.operands[1]->type;
  if (!x.isTile()) return fail("operand-kind", "reduce needs a tile operand");
  if (op.dims.empty()) return fail("reduce-dims", "reduce needs at least one dim to reduce over");
  std::set<std::string> seen;
  for (const std::string& d : op.dims) {
    if (x.findDim(d) < 0)
      return fail("reduce-dims",
                  fmt::format("reduce over dim '{}', but the operand {} has no such dim", d, toString(x)));
    if (!seen.insert(d).second) return fail("reduce-dims", fmt::format("reduce names dim '{}' twice", d));
  }
  if (!isNumeric(x.elem)) return fail("elem-type", fmt::format("reduce needs f32 or i64, got {}", elemName(x.elem)));
  if (op.reduce_policy.kind == ReducePolicy::Kind::UnorderedTree &&
      (op.reduce_policy.partitions < 0 || op.reduce_policy.partitions > 16))
    return fail("policy",
                fmt::format("unordered_tree partition count {} is outside 1..16", op.reduce_policy.partitions));
  if (op.reduce_policy.kind == ReducePolicy::Kind::Ordered && op.reduce_policy.partitions != 0)
    return fail("policy", "an ordered reduce takes no partition count");
  Type r = Type::tile(x.elem, {});
  for (const Dim& d : x.dims)
    if (!seen.count(d.name)) r.dims.push_back(d);
  if (!(init.isScalar() && init.elem == x.elem) && init != r)
    return fail("shape-mismatch", fmt::format("reduce init has type {}; it must be {} (the operand without the "
                                              "reduced dims) or a rank-0 {}",
                                              toString(init), toString(r), elemName(x.elem)));
  return ok(r);
}

InferResult inferMma(const Op& op) {
  const Type& a = op.operands[0]->type;
  const Type& b = op.operands[1]->type;
  const Type& acc = op.operands[2]->type;
  for (const Type* t : {&a, &b, &acc})
    if (!t->isTile() || t->elem != Elem::F32)
      return fail("elem-type", fmt::format("mma operands must be f32 tiles, got {}", toString(*t)));
  if (op.dims.empty()) return fail("mma-contract", "mma needs at least one dim to contract");
  // The policy (docs/ir.md, MMA), for parsed and DSL-built mmas alike: the bf16 orders stand alone.
  const MmaPolicy& p = op.mma_policy;
  if (p.partitions < 0 || p.partitions > 16)
    return fail("policy", fmt::format("mma partition count {} is outside 1..16", p.partitions));
  if (p.bf16_dot && p.bf16_pairs)
    return fail("policy", "mma policies bf16_dot and bf16_pairs are two different orders; give one");
  if ((p.bf16_dot || p.bf16_pairs) && (p.fused || p.partitions != 0 || p.allow_fma || p.allow_reassociation))
    return fail("policy", p.bf16_dot ? "mma policy bf16_dot is an order of its own (fused steps in blocks of 32); it "
                                       "takes no fused, partitions, allow_fma or allow_reassociation"
                                     : "mma policy bf16_pairs is an order of its own (fused steps in pairs); it takes "
                                       "no fused, partitions, allow_fma or allow_reassociation");
  std::set<std::string> contracted;
  for (const std::string& d : op.dims) {
    int ia = a.findDim(d), ib = b.findDim(d);
    if (ia < 0 || ib < 0)
      return fail("mma-contract", fmt::format("mma contracts dim '{}', which {} lacks", d, ia < 0 ? "a" : "b"));
    if (a.dims[ia].extent != b.dims[ib].extent)
      return fail("dim-mismatch", fmt::format("mma contracts dim '{}' with extents {} (a) and {} (b)", d,
                                              a.dims[ia].extent, b.dims[ib].extent));
    if (!contracted.insert(d).second) return fail("mma-contract", fmt::format("mma contracts dim '{}' twice", d));
  }
  // The free dims of a and b (matched by name) must be exactly the dims of acc.
  std::vector<Dim> free;
  for (const Type* t : {&a, &b})
    for (const Dim& d : t->dims) {
      if (contracted.count(d.name)) continue;
      auto it = std::find_if(free.begin(), free.end(), [&](const Dim& f) { return f.name == d.name; });
      if (it == free.end()) {
        free.push_back(d);
      } else if (it->extent != d.extent) {
        return fail("dim-mismatch",
                    fmt::format("mma: dim '{}' has extent {} in a and {} in b", d.name, it->extent, d.extent));
      }
    }
  bool same = free.size() == acc.dims.size();
  for (const Dim& d : free) {
    int i = acc.findDim(d.name);
    if (i < 0 || acc.dims[i].extent != d.extent) same = false;
  }
  if (!same)
    return fail("shape-mismatch",
                fmt::format("mma: the free dims of a and b are {} but acc has {}", dimList(free), dimList(acc.dims)));
  return ok(acc);
}

}  // namespace

InferResult inferTypes(const Op& op, const Type* declared) {
  auto needOperands = [&](size_t n) { return op.operands.size() == n; };
  auto arity = [&](size_t n) {
    return fail("arity", fmt::format("{} takes {} operand{}, got {}", opName(op.kind), n, n == 1 ? "" : "s",
                                     op.operands.size()));
  };
  if (isUnary(op.kind)) return needOperands(1) ? inferUnary(op) : arity(1);
  if (isBinary(op.kind)) return needOperands(2) ? inferBinary(op, false) : arity(2);
  switch (op.kind) {
    case OpKind::Cmp: return needOperands(2) ? inferBinary(op, true) : arity(2);
    case OpKind::Select: return needOperands(3) ? inferSelect(op) : arity(3);
    case OpKind::Load: return needOperands(1) ? inferLoad(op) : arity(1);
    case OpKind::Store: return needOperands(2) ? inferStore(op) : arity(2);
    case OpKind::Reduce: return needOperands(2) ? inferReduce(op) : arity(2);
    case OpKind::Mma: return needOperands(3) ? inferMma(op) : arity(3);
    case OpKind::Const: {
      if (!needOperands(0)) return arity(0);
      if (!declared || !declared->isTile()) return fail("type-required", "const needs a tile type");
      if (auto e = checkDimsWellFormed(declared->dims, "const type")) return fail(e->code, e->message);
      if (declared->elem != Elem::F32 && declared->elem != Elem::I64 && declared->elem != Elem::I1)
        return fail("elem-type", "const must be f32, i64 or i1");
      return ok(*declared);
    }
    case OpKind::Iota: {
      if (!needOperands(0)) return arity(0);
      if (!declared || !declared->isTile() || declared->elem != Elem::I64)
        return fail("type-required", "iota needs an i64 tile type");
      if (auto e = checkDimsWellFormed(declared->dims, "iota type")) return fail(e->code, e->message);
      if (op.dims.size() != 1 || declared->findDim(op.dims[0]) < 0)
        return fail("iota-dim", fmt::format("iota counts along '{}', which is not a dim of {}",
                                            op.dims.empty() ? "" : op.dims[0], toString(*declared)));
      return ok(*declared);
    }
    case OpKind::Broadcast: {
      if (!needOperands(1)) return arity(1);
      const Type& x = op.operands[0]->type;
      if (!declared || !declared->isTile()) return fail("type-required", "broadcast needs a target tile type");
      if (!x.isTile()) return fail("operand-kind", "broadcast needs a tile operand");
      if (auto e = checkDimsWellFormed(declared->dims, "broadcast target")) return fail(e->code, e->message);
      if (declared->elem != x.elem)
        return fail("elem-type", fmt::format("broadcast keeps the element type: {} cannot become {}", elemName(x.elem),
                                             elemName(declared->elem)));
      for (const Dim& d : x.dims) {
        int i = declared->findDim(d.name);
        if (i < 0)
          return fail("dim-mismatch", fmt::format("broadcast target {} lacks dim '{}' of the operand {}",
                                                  toString(*declared), d.name, toString(x)));
        if (declared->dims[i].extent != d.extent)
          return fail("dim-mismatch", fmt::format("broadcast: dim '{}' has extent {} in the operand but {} in the "
                                                  "target",
                                                  d.name, d.extent, declared->dims[i].extent));
      }
      return ok(*declared);
    }
    case OpKind::Cast: {
      if (!needOperands(1)) return arity(1);
      const Type& x = op.operands[0]->type;
      if (!declared) return fail("type-required", "cast needs a target element type");
      if (!x.isTile()) return fail("operand-kind", "cast needs a tile operand");
      if (declared->elem != Elem::F32 && declared->elem != Elem::I64 && declared->elem != Elem::I1)
        return fail("elem-type", "cast targets f32, i64 or i1");
      // A written type keeps the operand's dims; a rank-0 `declared` gives the element type only.
      if (!declared->dims.empty() && declared->dims != x.dims)
        return fail("shape-mismatch",
                    fmt::format("cast keeps the dims: {} cannot become {}", toString(x), toString(*declared)));
      Type r = x;
      r.elem = declared->elem;
      return ok(r);
    }
    case OpKind::Extract: {
      if (!needOperands(1)) return arity(1);
      const Type& x = op.operands[0]->type;
      if (!x.isTile()) return fail("operand-kind", "extract needs a tile operand");
      if (op.indices.size() != x.dims.size())
        return fail("arity", fmt::format("extract from {} needs {} indices, got {}", toString(x), x.dims.size(),
                                         op.indices.size()));
      for (size_t i = 0; i < op.indices.size(); ++i) {
        const Index& ix = op.indices[i];
        if (auto e = checkIndexOperand(ix, "an extract index")) return fail(e->code, e->message);
        if (ix.isConstant() && (ix.constant < 0 || ix.constant >= x.dims[i].extent))
          return fail("index-range", fmt::format("extract index {} is outside dim '{}' of extent {}", ix.constant,
                                                 x.dims[i].name, x.dims[i].extent));
      }
      return ok(Type::scalar(x.elem));
    }
    case OpKind::Parallel: {
      if (!needOperands(0)) return arity(0);
      if (op.extents.empty()) return fail("parallel-domain", "parallel needs at least one dimension");
      for (int64_t e : op.extents)
        if (e < 1) return fail("parallel-domain", fmt::format("parallel extent {} must be at least 1", e));
      return okNone();
    }
    case OpKind::Serial:
    case OpKind::Pipeline: {
      if (op.indices.size() != 3) return fail("arity", "a loop needs a lower bound, an upper bound and a step");
      for (const Index& ix : op.indices)
        if (auto e = checkIndexOperand(ix, "a loop bound")) return fail(e->code, e->message);
      if (!op.indices[2].isConstant() || op.indices[2].constant < 1)
        return fail("loop-step", "a loop step must be an integer literal of at least 1");
      InferResult r;
      for (const Value* init : op.operands) {
        if (!init->type.isTile()) return fail("operand-kind", "loop-carried values must be tiles");
        r.results.push_back(init->type);
      }
      return r;
    }
    case OpKind::Yield:
    case OpKind::Stage: return okNone();
    default: break;
  }
  return fail("unknown-op", fmt::format("no type rule for op '{}'", opName(op.kind)));
}

bool zeroExtentAllowed(const Value& v, const std::vector<const Op*>& users) {
  if (users.empty()) return false;
  for (const Op* u : users) {
    if (u->kind != OpKind::Mma) return false;
    if (u->operands.size() < 2 || (u->operands[0] != &v && u->operands[1] != &v)) return false;
    for (const Dim& d : v.type.dims)
      if (d.extent == 0 && std::find(u->dims.begin(), u->dims.end(), d.name) == u->dims.end()) return false;
  }
  return true;
}

}  // namespace kiln::ir

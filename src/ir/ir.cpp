#include "ir/ir.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace kiln::ir {

std::string_view elemName(Elem e) {
  switch (e) {
    case Elem::F32: return "f32";
    case Elem::I64: return "i64";
    case Elem::I1: return "i1";
    case Elem::F16: return "f16";
    case Elem::BF16: return "bf16";
    case Elem::I32: return "i32";
  }
  return "?";
}

int64_t elemBytes(Elem e) {
  switch (e) {
    case Elem::F32:
    case Elem::I32: return 4;
    case Elem::I64: return 8;
    case Elem::F16:
    case Elem::BF16: return 2;
    case Elem::I1: return 1;
  }
  return 4;
}

Type Type::view(Elem e, const std::vector<int64_t>& shape) {
  Type t{Kind::View, e, {}};
  for (int64_t s : shape) t.dims.push_back(Dim{"", s});
  return t;
}

int64_t Type::numElements() const {
  int64_t n = 1;
  for (const Dim& d : dims) n *= d.extent;
  return n;
}

int Type::findDim(std::string_view name) const {
  for (size_t i = 0; i < dims.size(); ++i)
    if (dims[i].name == name) return static_cast<int>(i);
  return -1;
}

std::vector<int64_t> Type::shape() const {
  std::vector<int64_t> s;
  for (const Dim& d : dims) s.push_back(d.extent);
  return s;
}

std::string toString(const Type& t) {
  std::string out;
  if (t.isView()) {
    out = fmt::format("view<{}>[", elemName(t.elem));
    for (size_t i = 0; i < t.dims.size(); ++i) out += fmt::format("{}{}", i ? ", " : "", t.dims[i].extent);
    return out + "]";
  }
  out = std::string(elemName(t.elem));
  if (t.dims.empty()) return out;
  out += "[";
  for (size_t i = 0; i < t.dims.size(); ++i)
    out += fmt::format("{}{}:{}", i ? ", " : "", t.dims[i].name, t.dims[i].extent);
  return out + "]";
}

std::string_view opName(OpKind k) {
  switch (k) {
    case OpKind::Parallel: return "parallel";
    case OpKind::Serial: return "serial";
    case OpKind::Pipeline: return "pipeline";
    case OpKind::Yield: return "yield";
    case OpKind::Stage: return "stage";
    case OpKind::Load: return "load";
    case OpKind::Store: return "store";
    case OpKind::Const: return "const";
    case OpKind::Iota: return "iota";
    case OpKind::Broadcast: return "broadcast";
    case OpKind::Reduce: return "reduce";
    case OpKind::Mma: return "mma";
    case OpKind::Extract: return "extract";
    case OpKind::Cast: return "cast";
    case OpKind::Select: return "select";
    case OpKind::Cmp: return "cmp";
    case OpKind::Neg: return "neg";
    case OpKind::Abs: return "abs";
    case OpKind::Exp: return "exp";
    case OpKind::Log: return "log";
    case OpKind::Sqrt: return "sqrt";
    case OpKind::Rsqrt: return "rsqrt";
    case OpKind::Tanh: return "tanh";
    case OpKind::Erf: return "erf";
    case OpKind::Add: return "add";
    case OpKind::Sub: return "sub";
    case OpKind::Mul: return "mul";
    case OpKind::Div: return "div";
    case OpKind::Max: return "max";
    case OpKind::Min: return "min";
  }
  return "?";
}

bool isUnary(OpKind k) {
  return k >= OpKind::Neg && k <= OpKind::Erf;
}
bool isBinary(OpKind k) {
  return k >= OpKind::Add && k <= OpKind::Min;
}
bool isLoop(OpKind k) {
  return k == OpKind::Serial || k == OpKind::Pipeline;
}
bool isElementwise(OpKind k) {
  return isUnary(k) || isBinary(k) || k == OpKind::Cmp || k == OpKind::Select || k == OpKind::Cast;
}

std::string_view cmpName(CmpPred p) {
  static constexpr std::string_view names[] = {"lt", "le", "gt", "ge", "eq", "ne"};
  return names[static_cast<int>(p)];
}

std::string_view reduceName(ReduceKind k) {
  static constexpr std::string_view names[] = {"add", "max", "min", "mul"};
  return names[static_cast<int>(k)];
}

Value* Kernel::newValue(std::string name, Type type, Value::Origin origin, Loc loc) {
  auto v = std::make_unique<Value>();
  v->id = static_cast<int>(values.size());
  v->name = std::move(name);
  v->type = std::move(type);
  v->origin = origin;
  v->loc = std::move(loc);
  values.push_back(std::move(v));
  return values.back().get();
}

Op* Kernel::newOp(OpKind kind, Loc loc) {
  auto op = std::make_unique<Op>();
  op->kind = kind;
  op->loc = std::move(loc);
  ops.push_back(std::move(op));
  return ops.back().get();
}

Region* Kernel::newRegion(Op* parent) {
  auto r = std::make_unique<Region>();
  r->parent = parent;
  regions.push_back(std::move(r));
  return regions.back().get();
}

Op* Kernel::root() const {
  if (!body) return nullptr;
  for (Op* op : body->ops)
    if (op->kind == OpKind::Parallel) return op;
  return nullptr;
}

bool Kernel::runtimeExtents() const {
  for (const Op* r : roots())
    for (const RuntimeExtent& e : r->runtime_extents)
      if (e.runtime()) return true;
  return false;
}

std::vector<Op*> Kernel::roots() const {
  std::vector<Op*> out;
  if (body)
    for (Op* op : body->ops)
      if (op->kind == OpKind::Parallel) out.push_back(op);
  return out;
}

namespace {

class Cloner {
 public:
  explicit Cloner(Kernel& out) : k_(out) {}

  Value* value(const Value* v, Value::Origin origin, int index) {
    Value* n = k_.newValue(v->name, v->type, origin, v->loc);
    n->index = index;
    n->range = v->range;
    map_[v] = n;
    return n;
  }

  void op(const Op& src, Region* into) {
    Op* n = k_.newOp(src.kind, src.loc);
    n->parent = into;
    into->ops.push_back(n);
    for (const Value* v : src.operands) n->operands.push_back(map_.at(v));
    n->fconst = src.fconst;
    n->iconst = src.iconst;
    for (const Index& ix : src.indices) n->indices.push_back({ix.value ? map_.at(ix.value) : nullptr, ix.constant});
    n->access = src.access;
    n->extents = src.extents;
    for (const RuntimeExtent& e : src.runtime_extents)
      n->runtime_extents.push_back({e.param ? map_.at(e.param) : nullptr, e.divisor});
    n->dims = src.dims;
    n->pred = src.pred;
    n->reduce = src.reduce;
    n->reduce_policy = src.reduce_policy;
    n->mma_policy = src.mma_policy;
    for (const Region* r : src.regions) {
      Region* nr = k_.newRegion(n);
      n->regions.push_back(nr);
      for (size_t i = 0; i < r->args.size(); ++i) {
        Value* a = value(r->args[i], Value::Origin::RegionArg, static_cast<int>(i));
        a->region = nr;
        nr->args.push_back(a);
      }
      for (const Op* o : r->ops) op(*o, nr);
    }
    for (size_t i = 0; i < src.results.size(); ++i) {
      Value* r = value(src.results[i], Value::Origin::OpResult, static_cast<int>(i));
      r->def = n;
      n->results.push_back(r);
    }
  }

 private:
  Kernel& k_;
  std::unordered_map<const Value*, Value*> map_;
};

std::vector<Value*> paramsUsedBy(const Kernel& k, OpKind kind) {
  std::vector<bool> used(k.params.size(), false);
  if (k.body)
    walk(k.body, [&](const Op* op) {
      if (op->kind == kind && !op->operands.empty() && op->operands[0]->origin == Value::Origin::Param)
        used[op->operands[0]->index] = true;
    });
  std::vector<Value*> out;
  for (size_t i = 0; i < k.params.size(); ++i)
    if (used[i]) out.push_back(k.params[i]);
  return out;
}
}  // namespace

std::vector<Value*> Kernel::outputs() const {
  return paramsUsedBy(*this, OpKind::Store);
}
std::vector<Value*> Kernel::inputs() const {
  return paramsUsedBy(*this, OpKind::Load);
}

std::unique_ptr<Kernel> phaseKernel(const Kernel& kernel, size_t phase) {
  auto out = std::make_unique<Kernel>();
  out->name = kernel.name;
  out->loc = kernel.loc;
  Cloner c(*out);
  for (const Value* p : kernel.params) out->params.push_back(c.value(p, Value::Origin::Param, p->index));
  for (const Value* w : kernel.workspaces)
    out->params.push_back(c.value(w, Value::Origin::Param, static_cast<int>(out->params.size())));
  out->body = out->newRegion(nullptr);
  c.op(*kernel.roots().at(phase), out->body);
  return out;
}

}  // namespace kiln::ir

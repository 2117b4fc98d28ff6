#include "ir/builder.h"

#include <fmt/format.h>

#include <algorithm>

#include "ir/infer.h"

namespace kiln::ir {

Builder::Builder(Kernel& kernel, DiagEngine& diag) : k_(kernel), diag_(diag) {
  if (!k_.body) k_.body = k_.newRegion(nullptr);
  at_ = k_.body;
}

std::string Builder::freshName(std::string hint) {
  if (hint.empty()) hint = fmt::format("v{}", k_.values.size());
  if (uniquify_) {
    std::string name = hint;
    for (int n = 1; used_.count(name) != 0; ++n) name = fmt::format("{}.{}", hint, n);
    hint = name;
  }
  used_.insert(hint);
  return hint;
}

bool Builder::operandsPresent(const std::vector<Value*>& vs, const std::vector<Index>& ixs) const {
  for (const Value* v : vs)
    if (!v) return false;
  for (const Index& ix : ixs)
    if (ix.value == nullptr && ix.constant == INT64_MIN) return false;
  return true;
}

Value* Builder::param(std::string name, Type type, const Loc& loc) {
  Value* v = k_.newValue(freshName(std::move(name)), std::move(type), Value::Origin::Param, loc);
  v->index = static_cast<int>(k_.params.size());
  k_.params.push_back(v);
  return v;
}

Value* Builder::workspace(std::string name, Type type, const Loc& loc) {
  Value* v = k_.newValue(freshName(std::move(name)), std::move(type), Value::Origin::Workspace, loc);
  v->index = static_cast<int>(k_.workspaces.size());
  k_.workspaces.push_back(v);
  return v;
}

bool Builder::finish(Op* op, const Type* declared, const std::vector<std::string>& resultNames) {
  InferResult r = inferTypes(*op, declared);
  if (!r.ok()) {
    diag_.error(op->loc, r.error->code, r.error->message);
    return false;
  }
  for (size_t i = 0; i < r.results.size(); ++i) {
    std::string name = i < resultNames.size() ? resultNames[i] : std::string();
    Value* v = k_.newValue(freshName(std::move(name)), r.results[i], Value::Origin::OpResult, op->loc);
    v->def = op;
    v->index = static_cast<int>(i);
    op->results.push_back(v);
  }
  op->parent = at_;
  at_->ops.push_back(op);
  return true;
}

Value* Builder::single(Op* op, const Type* declared, std::string name) {
  if (!finish(op, declared, {std::move(name)})) return nullptr;
  return op->results.empty() ? nullptr : op->results[0];
}

Op* Builder::parallel(const std::vector<std::string>& ivNames, const std::vector<int64_t>& extents, const Loc& loc,
                      const std::vector<RuntimeExtent>& runtime) {
  Op* op = k_.newOp(OpKind::Parallel, loc);
  op->extents = extents;
  op->runtime_extents = runtime;
  if (!finish(op, nullptr, {})) return nullptr;
  Region* body = k_.newRegion(op);
  op->regions.push_back(body);
  for (size_t i = 0; i < extents.size(); ++i) {
    std::string name = i < ivNames.size() ? ivNames[i] : std::string();
    Value* iv = k_.newValue(freshName(name), Type::scalar(Elem::I64), Value::Origin::RegionArg, loc);
    iv->region = body;
    iv->index = static_cast<int>(i);
    body->args.push_back(iv);
  }
  return op;
}

Op* Builder::loop(OpKind kind, const std::string& ivName, Index lower, Index upper, int64_t step,
                  const std::vector<std::pair<std::string, Value*>>& carried,
                  const std::vector<std::string>& resultNames, const Loc& loc) {
  std::vector<Value*> inits;
  for (const auto& c : carried) inits.push_back(c.second);
  if (!operandsPresent(inits, {lower, upper})) return nullptr;
  Op* op = k_.newOp(kind, loc);
  op->operands = inits;
  op->indices = {lower, upper, Index{nullptr, step}};
  if (!finish(op, nullptr, resultNames)) return nullptr;
  Region* body = k_.newRegion(op);
  op->regions.push_back(body);
  Value* iv = k_.newValue(freshName(ivName), Type::scalar(Elem::I64), Value::Origin::RegionArg, loc);
  iv->region = body;
  body->args.push_back(iv);
  for (size_t i = 0; i < carried.size(); ++i) {
    Value* a = k_.newValue(freshName(carried[i].first), carried[i].second->type, Value::Origin::RegionArg, loc);
    a->region = body;
    a->index = static_cast<int>(i + 1);
    body->args.push_back(a);
  }
  return op;
}

Op* Builder::yield(const std::vector<Value*>& values, const Loc& loc) {
  if (!operandsPresent(values, {})) return nullptr;
  Op* op = k_.newOp(OpKind::Yield, loc);
  op->operands = values;
  return finish(op, nullptr, {}) ? op : nullptr;
}

Op* Builder::stage(int64_t n, const Loc& loc) {
  Op* op = k_.newOp(OpKind::Stage, loc);
  op->iconst = n;
  return finish(op, nullptr, {}) ? op : nullptr;
}

Value* Builder::load(Value* view, std::vector<Index> origin, std::vector<Dim> access, double fill, const Loc& loc,
                     std::string name) {
  if (!operandsPresent({view}, origin)) return nullptr;
  Op* op = k_.newOp(OpKind::Load, loc);
  op->operands = {view};
  op->indices = std::move(origin);
  op->access = std::move(access);
  op->fconst = fill;
  return single(op, nullptr, std::move(name));
}

Op* Builder::store(Value* view, std::vector<Index> origin, std::vector<Dim> access, Value* tile, const Loc& loc) {
  if (!operandsPresent({view, tile}, origin)) return nullptr;
  Op* op = k_.newOp(OpKind::Store, loc);
  op->operands = {view, tile};
  op->indices = std::move(origin);
  op->access = std::move(access);
  return finish(op, nullptr, {}) ? op : nullptr;
}

Value* Builder::constF32(double v, const Type& type, const Loc& loc, std::string name) {
  Op* op = k_.newOp(OpKind::Const, loc);
  op->fconst = v;
  return single(op, &type, std::move(name));
}

Value* Builder::constInt(int64_t v, const Type& type, const Loc& loc, std::string name) {
  Op* op = k_.newOp(OpKind::Const, loc);
  op->iconst = v;
  op->fconst = static_cast<double>(v);
  return single(op, &type, std::move(name));
}

Value* Builder::iota(const Type& type, const std::string& dim, const Loc& loc, std::string name) {
  Op* op = k_.newOp(OpKind::Iota, loc);
  op->dims = {dim};
  return single(op, &type, std::move(name));
}

Value* Builder::broadcast(Value* x, const Type& to, const Loc& loc, std::string name) {
  if (!x) return nullptr;
  Op* op = k_.newOp(OpKind::Broadcast, loc);
  op->operands = {x};
  return single(op, &to, std::move(name));
}

Value* Builder::unary(OpKind kind, Value* x, const Loc& loc, std::string name) {
  if (!x) return nullptr;
  Op* op = k_.newOp(kind, loc);
  op->operands = {x};
  return single(op, nullptr, std::move(name));
}

Value* Builder::binary(OpKind kind, Value* a, Value* b, const Loc& loc, std::string name) {
  if (!a || !b) return nullptr;
  Op* op = k_.newOp(kind, loc);
  op->operands = {a, b};
  return single(op, nullptr, std::move(name));
}

Value* Builder::cmp(CmpPred pred, Value* a, Value* b, const Loc& loc, std::string name) {
  if (!a || !b) return nullptr;
  Op* op = k_.newOp(OpKind::Cmp, loc);
  op->operands = {a, b};
  op->pred = pred;
  return single(op, nullptr, std::move(name));
}

Value* Builder::select(Value* cond, Value* a, Value* b, const Loc& loc, std::string name) {
  if (!cond || !a || !b) return nullptr;
  Op* op = k_.newOp(OpKind::Select, loc);
  op->operands = {cond, a, b};
  return single(op, nullptr, std::move(name));
}

Value* Builder::cast(Value* x, Elem to, const Loc& loc, std::string name) {
  if (!x) return nullptr;
  Op* op = k_.newOp(OpKind::Cast, loc);
  op->operands = {x};
  Type t = Type::scalar(to);
  return single(op, &t, std::move(name));
}

Value* Builder::reduce(ReduceKind kind, Value* x, std::vector<std::string> dims, Value* init, ReducePolicy policy,
                       const Loc& loc, std::string name) {
  if (!x || !init) return nullptr;
  Op* op = k_.newOp(OpKind::Reduce, loc);
  op->operands = {x, init};
  op->reduce = kind;
  op->dims = std::move(dims);
  op->reduce_policy = policy;
  return single(op, nullptr, std::move(name));
}

Value* Builder::mma(Value* a, Value* b, Value* acc, std::vector<std::string> contract, MmaPolicy policy, const Loc& loc,
                    std::string name) {
  if (!a || !b || !acc) return nullptr;
  Op* op = k_.newOp(OpKind::Mma, loc);
  op->operands = {a, b, acc};
  op->dims = std::move(contract);
  op->mma_policy = policy;
  return single(op, nullptr, std::move(name));
}

Value* Builder::extract(Value* x, std::vector<Index> indices, const Loc& loc, std::string name) {
  if (!operandsPresent({x}, indices)) return nullptr;
  Op* op = k_.newOp(OpKind::Extract, loc);
  op->operands = {x};
  op->indices = std::move(indices);
  return single(op, nullptr, std::move(name));
}

}  // namespace kiln::ir

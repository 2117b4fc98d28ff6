// Verifier: one walk over the kernel in program order checks structure (root parallels only at
// the top level, yield/stage placement, region links), scoping (definition before use, never outside the
// defining region), types (inferTypes re-run on every op), extents and policies.
// Expects: any Kernel: null pointers, values of other kernels, shared or cyclic regions included.
// Guarantees: never aborts; one positioned diagnostic per problem (at most kMaxDiagnostics);
// true only when it reported nothing.
#include "ir/verifier.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "ir/infer.h"

namespace kiln::ir {
namespace {

constexpr int kMaxDiagnostics = 50;
constexpr int kMaxDepth = 256;  // as the parser: deeper recursion risks the stack (ASan frames are large)
constexpr int64_t kMaxTileElements = int64_t{1} << 24;
constexpr int64_t kMaxViewElements = int64_t{1} << 31;
constexpr int64_t kMaxDomainPrograms = int64_t{1} << 31;

// Product of non-negative extents, saturating at 2^62 so huge extents cannot overflow.
int64_t cappedProduct(const std::vector<int64_t>& extents) {
  constexpr int64_t cap = int64_t{1} << 62;
  int64_t n = 1;
  for (int64_t e : extents) {
    if (e <= 0) return 0;
    n = (n > cap / e) ? cap : n * e;
  }
  return n;
}

std::string where(const Loc& l) {
  return fmt::format("{}:{}", l.line, l.col);
}

std::string nameOf(const Value& v) {
  return v.name.empty() ? fmt::format("%<{}>", v.id) : "%" + v.name;
}

std::string_view regionOwnerName(const Region* r) {
  return r && r->parent ? opName(r->parent->kind) : "kernel";
}

class Verifier {
 public:
  Verifier(const Kernel& k, DiagEngine& d) : k_(k), diag_(d) {}

  bool run() {
    owned_.reserve(k_.values.size());
    visible_.reserve(k_.values.size());
    for (const auto& v : k_.values) owned_.insert(v.get());
    collectUsers();
    seenRegions_.insert(k_.body);
    checkParams();
    if (!k_.body) {
      error(k_.loc, "root-domain", "kernel has no body; a kernel holds one or more parallel ops");
      return count_ == 0;
    }
    if (k_.body->parent)
      error(k_.loc, "malformed", "the kernel body region has a parent op; it must be the top-level region");
    if (!k_.body->args.empty()) error(k_.loc, "malformed", "the kernel body region must not have arguments");
    for (const Op* op : k_.body->ops)
      if (op && op->kind == OpKind::Parallel) ++roots_;
    if (roots_ == 0)
      error(k_.loc, "root-domain", "kernel has no root parallel domain; a kernel has one or more (its phases)");
    checkRegion(k_.body, 0);
    return count_ == 0;
  }

 private:
  bool full() const { return count_ > kMaxDiagnostics; }

  void error(const Loc& loc, std::string code, std::string message) {
    if (full()) return;
    if (++count_ > kMaxDiagnostics) {
      diag_.error(loc, "too-many-errors", fmt::format("more than {} problems; stopping here", kMaxDiagnostics));
      return;
    }
    diag_.error(loc, std::move(code), std::move(message));
  }

  // Users of every value, for zeroExtentAllowed(). Iterative, each region once: safe on
  // cycles and deep nesting.
  void collectUsers() {
    std::vector<const Region*> todo{k_.body};
    while (!todo.empty()) {
      const Region* r = todo.back();
      todo.pop_back();
      if (!r || !reachableRegions_.insert(r).second) continue;
      for (const Op* op : r->ops) {
        if (!op) continue;
        reachableOps_.insert(op);
        for (const Value* v : op->operands)
          if (v) users_[v].push_back(op);
        for (const Index& ix : op->indices)
          if (ix.value) users_[ix.value].push_back(op);
        for (const Region* sub : op->regions) todo.push_back(sub);
      }
    }
  }

  void checkParams() {
    for (size_t i = 0; i < k_.params.size(); ++i) {
      const Value* p = k_.params[i];
      if (!p) {
        error(k_.loc, "malformed", fmt::format("kernel parameter {} is missing (null)", i));
        continue;
      }
      if (p->origin != Value::Origin::Param || p->index != static_cast<int>(i))
        error(p->loc, "malformed",
              fmt::format("{} is listed as parameter {} but is not marked as that parameter", nameOf(*p), i));
      declare(p, p->loc);
      const Type& t = p->type;
      if (t.isView()) {
        if (t.elem != Elem::F32 && !isIntegerStorage(t.elem) && !isHalfStorage(t.elem))
          error(p->loc, "param-type",
                fmt::format("{} has type {}; views hold f32, f16, bf16, i32 or i64 elements", nameOf(*p), toString(t)));
        bool negative = false;
        for (const Dim& d : t.dims)
          if (d.extent < 0) negative = true;
        if (negative) {
          error(p->loc, "negative-extent",
                fmt::format("{} has type {}; view extents cannot be negative", nameOf(*p), toString(t)));
        } else if (cappedProduct(t.shape()) > kMaxViewElements) {
          error(p->loc, "view-too-large",
                fmt::format("{} has type {}: more than 2^31 elements", nameOf(*p), toString(t)));
        }
      } else if (!t.isScalar() || (t.elem != Elem::I64 && t.elem != Elem::F32)) {
        error(p->loc, "param-type",
              fmt::format("{} has type {}; a parameter is a view or an i64 / f32 scalar", nameOf(*p), toString(t)));
      }
      if (p->range) checkRange(*p);
    }
    for (size_t i = 0; i < k_.workspaces.size(); ++i) {
      const Value* w = k_.workspaces[i];
      if (!w) {
        error(k_.loc, "malformed", fmt::format("kernel workspace {} is missing (null)", i));
        continue;
      }
      if (w->origin != Value::Origin::Workspace || w->index != static_cast<int>(i))
        error(w->loc, "malformed",
              fmt::format("{} is listed as workspace {} but is not marked as that workspace", nameOf(*w), i));
      declare(w, w->loc);
      const Type& t = w->type;
      if (!t.isView() || t.elem != Elem::F32) {
        error(w->loc, "workspace-type",
              fmt::format("workspace {} has type {}; a workspace is a view<f32>", nameOf(*w), toString(t)));
        continue;
      }
      bool positive = std::all_of(t.dims.begin(), t.dims.end(), [](const Dim& d) { return d.extent >= 1; });
      if (!positive)
        error(w->loc, "negative-extent",
              fmt::format("workspace {} has type {}; workspace extents are at least 1", nameOf(*w), toString(t)));
      else if (cappedProduct(t.shape()) > kMaxViewElements)
        error(w->loc, "view-too-large",
              fmt::format("workspace {} has type {}: more than 2^31 elements", nameOf(*w), toString(t)));
    }
  }

  // A stated range `in [lo, hi]`: on an i64 scalar or an integer view, lo <= hi, within i32 for view<i32>;
  // `ascending` on an integer view only.
  void checkRange(const Value& p) {
    const Type& t = p.type;
    const IntRange r = *p.range;
    const bool integer = t.isView() ? isIntegerStorage(t.elem) : t.isScalar() && t.elem == Elem::I64;
    if (!integer) {
      error(p.loc, "param-range",
            fmt::format("{} has type {}; only an i64 scalar or an integer view (view<i32>, view<i64>) states a range",
                        nameOf(p), toString(t)));
    } else if (r.ascending && !t.isView()) {
      error(p.loc, "param-range",
            fmt::format("{} has type {}; only an integer view states 'ascending' (its elements never decrease)",
                        nameOf(p), toString(t)));
    } else if (r.lo > r.hi) {
      error(p.loc, "param-range",
            fmt::format("{} states the range [{}, {}], whose lower end is above its upper end", nameOf(p), r.lo, r.hi));
    } else if (t.isView() && t.elem == Elem::I32 &&
               (r.lo < std::numeric_limits<int32_t>::min() || r.hi > std::numeric_limits<int32_t>::max())) {
      error(p.loc, "param-range",
            fmt::format("{} has type {}; its range [{}, {}] does not fit in i32", nameOf(p), toString(t), r.lo, r.hi));
    }
  }

  // Runtime extents: an i64 parameter with a range in [0, ..], hi >= 1, a divisor >= 1, and the
  // op's extent is the maximum ceil(hi / divisor).
  void checkRuntimeExtents(const Op& op) {
    if (op.runtime_extents.empty()) return;
    if (op.runtime_extents.size() != op.extents.size()) {
      error(op.loc, "malformed",
            fmt::format("the parallel domain has {} extents but {} runtime extent entries", op.extents.size(),
                        op.runtime_extents.size()));
      return;
    }
    for (size_t i = 0; i < op.extents.size(); ++i) {
      const RuntimeExtent& r = op.runtime_extents[i];
      if (!r.runtime()) continue;
      const Value& p = *r.param;
      const std::string axis = fmt::format("domain extent {}", i);
      if (p.origin != Value::Origin::Param || !p.type.isScalar() || p.type.elem != Elem::I64) {
        error(op.loc, "runtime-extent",
              fmt::format("{} is {}, which is not an i64 scalar parameter; a runtime extent is '%param' or "
                          "'cdiv(%param, N)' of an i64 parameter",
                          axis, nameOf(p)));
      } else if (!p.range) {
        error(op.loc, "runtime-extent",
              fmt::format("{} is {}, which states no range; give it one ('{}: i64 in [0, MAX]'): plans are made for "
                          "the maximum",
                          axis, nameOf(p), nameOf(p)));
      } else if (p.range->lo < 0 || p.range->hi < 1) {
        error(op.loc, "runtime-extent",
              fmt::format("{} is {}, whose range [{}, {}] is not within [0, ..] with an upper end of at least 1", axis,
                          nameOf(p), p.range->lo, p.range->hi));
      } else if (r.divisor < 1) {
        error(op.loc, "runtime-extent", fmt::format("{}: cdiv's divisor is {}; it is at least 1", axis, r.divisor));
      } else if (op.extents[i] != r.maximum()) {
        error(op.loc, "malformed",
              fmt::format("{}: the stated maximum {} is not ceil({} / {}) = {}", axis, op.extents[i], p.range->hi,
                          r.divisor, r.maximum()));
      }
    }
  }

  // Makes `v` visible from here to the end of the current region.
  void declare(const Value* v, const Loc& loc) {
    if (!v) return;
    visible_.insert(v);
    if (!scopes_.empty()) scopes_.back().push_back(v);
    if (v->name.empty()) return;
    auto [it, fresh] = visibleNames_.emplace(v->name, v);
    if (!fresh && it->second != v)
      error(loc, "redefinition",
            fmt::format("{} is defined again; the visible definition is at {}", nameOf(*v), where(it->second->loc)));
  }

  void undeclare(const Value* v) {
    if (!v) return;
    visible_.erase(v);
    auto it = visibleNames_.find(v->name);
    if (it != visibleNames_.end() && it->second == v) visibleNames_.erase(it);
  }

  // The region that defines `v`, or nullptr when it is defined nowhere reachable.
  const Region* definingRegion(const Value& v) const {
    if (v.origin == Value::Origin::RegionArg && reachableRegions_.count(v.region)) return v.region;
    if (v.origin == Value::Origin::OpResult && reachableOps_.count(v.def) && reachableRegions_.count(v.def->parent))
      return v.def->parent;
    return nullptr;
  }

  void checkUse(const Op& user, const Value* v, const char* role) {
    if (!v || visible_.count(v)) return;
    std::string use = fmt::format("{} of {} at {}", role, opName(user.kind), where(user.loc));
    if (!owned_.count(v)) {
      error(user.loc, "undefined-value",
            fmt::format("{} is not defined in this kernel ({}); it belongs to another kernel", nameOf(*v), use));
      return;
    }
    const Region* def = definingRegion(*v);
    if (!def) {
      error(user.loc, "undefined-value",
            fmt::format("{} has no definition in this kernel's body ({})", nameOf(*v), use));
      return;
    }
    if (std::find(stack_.begin(), stack_.end(), def) != stack_.end()) {
      error(user.loc, "undefined-value",
            fmt::format("{} is used before its definition at {} ({})", nameOf(*v), where(v->loc), use));
      return;
    }
    std::string owner =
        def->parent ? fmt::format("the body of the {} at {}", opName(def->parent->kind), where(def->parent->loc))
                    : std::string("another region");
    error(user.loc, "out-of-scope",
          fmt::format("{} is defined inside {} and is not visible here ({}); a value can be used only in its own "
                      "region and the regions nested in it",
                      nameOf(*v), owner, use));
  }

  void checkRegion(const Region* r, int depth) {
    stack_.push_back(r);
    scopes_.emplace_back();
    for (const Value* a : r->args) declare(a, r->parent ? r->parent->loc : k_.loc);
    const Op* parent = r->parent;
    int64_t lastStage = -1;
    int parallels = 0;
    for (size_t i = 0; i < r->ops.size() && !full(); ++i) {
      const Op* op = r->ops[i];
      if (!op) {
        error(parent ? parent->loc : k_.loc, "malformed",
              fmt::format("op {} of the {} body is missing (null)", i, regionOwnerName(r)));
        continue;
      }
      if (!seenOps_.insert(op).second) {
        error(op->loc, "malformed", fmt::format("{} appears twice in the kernel", opName(op->kind)));
        continue;
      }
      if (op->parent != r)
        error(op->loc, "malformed", fmt::format("{} does not point back to the region it sits in", opName(op->kind)));
      checkPlacement(*op, *r, i, parallels, lastStage);
      checkOp(*op, depth);
    }
    if (parent && isLoop(parent->kind) && !parent->operands.empty() &&
        (r->ops.empty() || !r->ops.back() || r->ops.back()->kind != OpKind::Yield))
      error(parent->loc, "missing-yield",
            fmt::format("{} carries {} value(s), so its body must end with a yield of the next values",
                        opName(parent->kind), parent->operands.size()));
    for (const Value* v : scopes_.back()) undeclare(v);
    scopes_.pop_back();
    stack_.pop_back();
  }

  // Rules about where an op may sit.
  void checkPlacement(const Op& op, const Region& r, size_t i, int& parallels, int64_t& lastStage) {
    const Op* parent = r.parent;
    bool topLevel = &r == k_.body;
    if (op.kind == OpKind::Parallel) {
      if (!topLevel) {
        error(op.loc, "bad-nesting",
              fmt::format("parallel inside {}; only the kernel body holds a parallel op (the root domain)",
                          parent ? std::string(opName(parent->kind)) : std::string("a detached region")));
      } else {
        ++parallels;
      }
    } else if (topLevel) {
      error(op.loc, "root-domain",
            fmt::format("{} outside a root parallel domain; the kernel body holds only parallel ops (its phases)",
                        opName(op.kind)));
    }
    if (op.kind == OpKind::Yield) {
      bool inLoop = parent && isLoop(parent->kind);
      if (!inLoop) {
        error(op.loc, "yield-placement",
              fmt::format("yield in a {} body; yield ends a serial or pipeline body", regionOwnerName(&r)));
      } else if (i + 1 != r.ops.size()) {
        error(op.loc, "yield-placement", "yield must be the last op of the loop body");
      } else {
        checkYield(op, *parent);
      }
    }
    if (op.kind == OpKind::Stage) {
      if (!parent || parent->kind != OpKind::Pipeline) {
        error(op.loc, "stage-placement",
              fmt::format("stage marker in a {} body; stage markers go directly inside a pipeline body",
                          regionOwnerName(&r)));
      } else if (lastStage < 0 && op.iconst != 0) {
        error(op.loc, "stage-order", fmt::format("the first stage marker is stage {}; stages start at 0", op.iconst));
      } else if (op.iconst < lastStage) {
        error(op.loc, "stage-order",
              fmt::format("stage {} after stage {}; stage numbers never decrease", op.iconst, lastStage));
      }
      lastStage = std::max(lastStage, op.iconst);
    }
  }

  void checkYield(const Op& yield, const Op& loop) {
    if (yield.operands.size() != loop.operands.size()) {
      error(yield.loc, "yield-type",
            fmt::format("yield gives {} value(s) but the {} carries {}", yield.operands.size(), opName(loop.kind),
                        loop.operands.size()));
      return;
    }
    for (size_t i = 0; i < yield.operands.size(); ++i) {
      const Value* y = yield.operands[i];
      const Value* init = loop.operands[i];
      if (y && init && y->type != init->type)
        error(yield.loc, "yield-type",
              fmt::format("yield value {} ({}) has type {} but the carried value has type {}", i, nameOf(*y),
                          toString(y->type), toString(init->type)));
    }
  }

  void checkOp(const Op& op, int depth) {
    bool operandsPresent = true;
    for (size_t i = 0; i < op.operands.size(); ++i) {
      if (!op.operands[i]) {
        error(op.loc, "malformed", fmt::format("operand {} of {} is missing (null)", i, opName(op.kind)));
        operandsPresent = false;
      }
      checkUse(op, op.operands[i], "operand");
    }
    for (const Index& ix : op.indices) checkUse(op, ix.value, "index");
    bool resultsPresent = checkResults(op);

    bool typed = operandsPresent && resultsPresent && checkTypes(op);
    checkAttributes(op);

    // Regions: the loop bounds and inits above are evaluated outside the body.
    size_t wantRegions = (op.kind == OpKind::Parallel || isLoop(op.kind)) ? 1 : 0;
    if (op.regions.size() != wantRegions)
      error(op.loc, "malformed",
            fmt::format("{} has {} region(s); it takes {}", opName(op.kind), op.regions.size(), wantRegions));
    for (const Region* sub : op.regions) {
      if (!sub) {
        error(op.loc, "malformed", fmt::format("{} has a missing (null) region", opName(op.kind)));
        continue;
      }
      if (sub->parent != &op)
        error(op.loc, "malformed", fmt::format("the body of {} does not point back to it", opName(op.kind)));
      if (!seenRegions_.insert(sub).second) {
        error(op.loc, "malformed", fmt::format("the body of {} is shared with another op", opName(op.kind)));
        continue;
      }
      checkRegionArgs(op, *sub);
      if (depth + 1 > kMaxDepth) {
        error(op.loc, "too-deep", fmt::format("regions nest more than {} deep", kMaxDepth));
        continue;
      }
      checkRegion(sub, depth + 1);
      if (full()) return;
    }

    for (const Value* v : op.results) declare(v, op.loc);
    if (!isLoop(op.kind))  // loop results repeat the inits' types, already checked there
      for (const Value* v : op.results)
        if (v) checkExtents(op, *v, typed);
  }

  bool checkResults(const Op& op) {
    bool ok = true;
    for (size_t i = 0; i < op.results.size(); ++i) {
      const Value* v = op.results[i];
      if (!v) {
        error(op.loc, "malformed", fmt::format("result {} of {} is missing (null)", i, opName(op.kind)));
        ok = false;
      } else if (v->origin != Value::Origin::OpResult || v->def != &op || v->index != static_cast<int>(i)) {
        error(op.loc, "malformed",
              fmt::format("{} is listed as result {} of {} but does not point back to it", nameOf(*v), i,
                          opName(op.kind)));
      }
    }
    return ok;
  }

  bool checkTypes(const Op& op) {
    bool declaredKind =
        op.kind == OpKind::Const || op.kind == OpKind::Iota || op.kind == OpKind::Broadcast || op.kind == OpKind::Cast;
    const Type* declared = declaredKind && !op.results.empty() ? &op.results[0]->type : nullptr;
    InferResult r = inferTypes(op, declared);
    if (!r.ok()) {
      error(op.loc, r.error->code, r.error->message);
      return false;
    }
    if (r.results.size() != op.results.size()) {
      error(op.loc, "type-mismatch",
            fmt::format("{} produces {} value(s) but has {} result(s)", opName(op.kind), r.results.size(),
                        op.results.size()));
      return false;
    }
    bool ok = true;
    for (size_t i = 0; i < r.results.size(); ++i)
      if (r.results[i] != op.results[i]->type) {
        error(op.loc, "type-mismatch",
              fmt::format("{} has type {} but {} gives {}", nameOf(*op.results[i]), toString(op.results[i]->type),
                          opName(op.kind), toString(r.results[i])));
        ok = false;
      }
    return ok;
  }

  void checkAttributes(const Op& op) {
    switch (op.kind) {
      case OpKind::Parallel: {
        bool positive = std::all_of(op.extents.begin(), op.extents.end(), [](int64_t e) { return e >= 1; });
        if (positive && cappedProduct(op.extents) > kMaxDomainPrograms)
          error(op.loc, "domain-too-large", "the parallel domain has more than 2^31 programs");
        checkRuntimeExtents(op);
        break;
      }
      case OpKind::Load:
      case OpKind::Store: {
        const Value* view = op.operands.empty() ? nullptr : op.operands[0];
        if (view && owned_.count(view) && view->type.isView() && view->origin != Value::Origin::Param &&
            view->origin != Value::Origin::Workspace)
          error(op.loc, "operand-kind",
                fmt::format("{} {} {}, which is not a kernel parameter; loads and stores use view parameters",
                            opName(op.kind), op.kind == OpKind::Load ? "reads" : "writes", nameOf(*view)));
        break;
      }
      case OpKind::Const:
        if (!op.results.empty() && op.results[0] && op.results[0]->type.elem == Elem::I1 && op.iconst != 0 &&
            op.iconst != 1)
          error(op.loc, "const-value", fmt::format("an i1 const is 0 or 1, not {}", op.iconst));
        break;
      case OpKind::Stage:
        if (!op.operands.empty()) error(op.loc, "arity", "stage takes no operands");
        break;
      default: break;
    }
  }

  // Region args must be the induction variables (i64) and, for loops, the carried values.
  void checkRegionArgs(const Op& op, const Region& body) {
    std::vector<const Type*> want;
    Type i64 = Type::scalar(Elem::I64);
    if (op.kind == OpKind::Parallel)
      for (size_t i = 0; i < op.extents.size(); ++i) want.push_back(&i64);
    if (isLoop(op.kind)) {
      want.push_back(&i64);
      for (const Value* init : op.operands) want.push_back(init ? &init->type : nullptr);
    }
    if (body.args.size() != want.size()) {
      error(op.loc, "malformed",
            fmt::format("the body of {} has {} argument(s); it needs {}", opName(op.kind), body.args.size(),
                        want.size()));
      return;
    }
    for (size_t i = 0; i < want.size(); ++i) {
      const Value* a = body.args[i];
      if (!a) {
        error(op.loc, "malformed", fmt::format("argument {} of the {} body is missing (null)", i, opName(op.kind)));
      } else if (a->origin != Value::Origin::RegionArg || a->region != &body) {
        error(op.loc, "malformed",
              fmt::format("{} is listed as an argument of the {} body but does not point back to it", nameOf(*a),
                          opName(op.kind)));
      } else if (want[i] && a->type != *want[i]) {
        error(op.loc, "type-mismatch",
              fmt::format("{} in the {} body has type {}; it must be {}", nameOf(*a), opName(op.kind),
                          toString(a->type), toString(*want[i])));
      }
    }
  }

  // Extents of a tile value: >= 0, 0 only where zeroExtentAllowed(), at most 2^24 elements.
  // A problem inherited from an operand was reported at the operand's definition.
  void checkExtents(const Op& op, const Value& v, bool typed) {
    if (!v.type.isTile()) return;
    const auto& dims = v.type.dims;
    auto negative = std::find_if(dims.begin(), dims.end(), [](const Dim& d) { return d.extent < 0; });
    auto zero = std::find_if(dims.begin(), dims.end(), [](const Dim& d) { return d.extent == 0; });
    bool large = negative == dims.end() && zero == dims.end() && cappedProduct(v.type.shape()) > kMaxTileElements;
    if (negative == dims.end() && zero == dims.end() && !large) return;
    auto it = users_.find(&v);
    const std::vector<const Op*> none;
    const std::vector<const Op*>& users = it == users_.end() ? none : it->second;
    if (negative == dims.end() && zero != dims.end() && zeroExtentAllowed(v, users)) return;
    badExtent_.insert(&v);
    bool inherited =
        std::any_of(op.operands.begin(), op.operands.end(), [&](const Value* o) { return o && badExtent_.count(o); });
    if (!typed || inherited) return;
    if (negative != dims.end()) {
      error(op.loc, "negative-extent",
            fmt::format("{} has dim '{}' with the negative extent {}", nameOf(v), negative->name, negative->extent));
    } else if (large) {
      error(op.loc, "tile-too-large",
            fmt::format("{} has type {}: more than 2^24 elements in one tile; split the work with a loop", nameOf(v),
                        toString(v.type)));
    } else {
      std::string why = "it has no use";
      for (const Op* u : users) {
        if (zeroExtentAllowed(v, {u})) continue;
        why = u->kind == OpKind::Mma ? fmt::format("the mma at {} does not contract it", where(u->loc))
                                     : fmt::format("it is used by {} at {}", opName(u->kind), where(u->loc));
        break;
      }
      error(op.loc, "zero-size",
            fmt::format("tile of zero elements: {} has type {}; a dim of extent 0 is allowed only on an mma "
                        "operand that contracts it, but {}",
                        nameOf(v), toString(v.type), why));
    }
  }

  const Kernel& k_;
  DiagEngine& diag_;
  int count_ = 0;
  int roots_ = 0;  // parallel ops in the kernel body
  std::unordered_set<const Value*> owned_;
  std::unordered_map<const Value*, std::vector<const Op*>> users_;
  std::unordered_set<const Value*> visible_;
  std::unordered_map<std::string_view, const Value*> visibleNames_;  // names point into values
  std::vector<const Region*> stack_;               // regions enclosing the op being checked, outermost first
  std::vector<std::vector<const Value*>> scopes_;  // per entry of stack_: the values it declared
  std::unordered_set<const Region*> seenRegions_;  // regions already checked
  std::unordered_set<const Region*> reachableRegions_;
  std::unordered_set<const Op*> reachableOps_;
  std::unordered_set<const Op*> seenOps_;
  std::unordered_set<const Value*> badExtent_;
};

}  // namespace

bool verify(const Kernel& kernel, DiagEngine& diag) {
  return Verifier(kernel, diag).run();
}

}  // namespace kiln::ir

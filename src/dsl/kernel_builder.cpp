// KernelBuilder: parameters, the root domain, loops, constants and finish().
// Expects: DSL calls in program order (a lambda body builds the region it belongs to).
// Guarantees: ops go through ir::Builder at the caller's source position; finish() runs
// ir::verify and never returns a kernel while any diagnostic exists.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstdint>

#include "dsl/impl.h"
#include "ir/verifier.h"

namespace kiln::dsl {

using detail::Internal;

ir::Loc toLoc(const SrcLoc& loc) {
  return ir::Loc{loc.file_name(), static_cast<int>(loc.line()), static_cast<int>(loc.column())};
}

KernelBuilder::Impl::Impl(const std::string& name, const ir::Loc& loc)
    : kernel(std::make_unique<ir::Kernel>()), b(*kernel, diag) {
  b.setUniquifyNames(true);
  kernel->name = fresh(name.empty() ? "kernel" : name);
  kernel->loc = loc;
}

std::string KernelBuilder::Impl::fresh(const std::string& hint) {
  std::string base;
  for (char c : hint) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    base += ok ? c : '_';
  }
  if (base.empty()) base = "t";
  // Suffixes continue from the last one given for this base: linear, not quadratic, in the
  // number of values that share a hint.
  std::string name = base;
  int& next = next_suffix[base];
  while (names.count(name) != 0) name = base + "." + std::to_string(++next);
  names.insert(name);
  return name;
}

namespace {
// `inner` is `outer` or nested inside it.
bool within(const ir::Region* inner, const ir::Region* outer) {
  for (const ir::Region* r = inner; r; r = r->parent ? r->parent->parent : nullptr)
    if (r == outer) return true;
  return false;
}
}  // namespace

ir::Value* KernelBuilder::Impl::scalarConst(ir::Elem elem, double fvalue, int64_t ivalue, const ir::Loc& loc) {
  const float f = static_cast<float>(fvalue);
  uint64_t bits = static_cast<uint64_t>(ivalue);
  if (elem == ir::Elem::F32) bits = std::bit_cast<uint32_t>(f);
  std::vector<ir::Value*>& seen = literals[{elem, bits}];
  for (ir::Value* v : seen)
    if (within(b.insertion(), v->def->parent)) return v;
  ir::Type t = ir::Type::scalar(elem);
  ir::Value* v = elem == ir::Elem::F32 ? b.constF32(static_cast<double>(f), t, loc, fresh("cst"))
                                       : b.constInt(ivalue, t, loc, fresh("cst"));
  if (v) seen.push_back(v);
  return v;
}

ir::Value* valueOf(KernelBuilder* kb, const Tile& t, const ir::Loc& loc) {
  if (t.builder() == nullptr) {
    Internal::impl(kb).error(loc, "unset-tile", "this operand is a Tile that was never assigned a value");
    return nullptr;
  }
  if (t.builder() != kb) {
    Internal::impl(kb).error(loc, "foreign-tile", "this operand belongs to another KernelBuilder's kernel");
    return nullptr;
  }
  return t.value();
}

ir::Index indexOf(KernelBuilder* kb, const IdxArg& a, const ir::Loc& loc) {
  if (a.is_constant) return ir::Index{nullptr, a.constant};
  ir::Value* v = valueOf(kb, a.idx, loc);
  return v ? ir::Index{v, 0} : ir::Index{nullptr, INT64_MIN};  // INT64_MIN: the builder's "missing"
}

std::vector<ir::Dim> toIrDims(const std::vector<Dim>& dims) {
  std::vector<ir::Dim> out;
  for (const Dim& d : dims) out.push_back(ir::Dim{d.name, d.extent});
  return out;
}

// ---- handles ----

int Tile::rank() const {
  return value_ ? value_->type.rank() : 0;
}

std::vector<Dim> Tile::dims() const {
  std::vector<Dim> out;
  if (value_)
    for (const ir::Dim& d : value_->type.dims) out.push_back(Dim{d.name, d.extent});
  return out;
}

int64_t Tile::extent(std::string_view dim) const {
  if (!value_) return -1;
  int i = value_->type.findDim(dim);
  return i < 0 ? -1 : value_->type.dims[i].extent;
}

std::string Tile::type() const {
  return value_ ? ir::toString(value_->type) : "<error>";
}
std::string Tile::name() const {
  return value_ ? value_->name : "";
}

Tile Tile::as(std::string name) const {
  // Parameters keep the names the kernel signature gave them.
  if (!value_ || !kb_ || value_->origin == ir::Value::Origin::Param || value_->name == name) return *this;
  value_->name = Internal::impl(kb_).fresh(name);
  return *this;
}

Idx Idx::as(std::string name) const {
  Tile::as(std::move(name));
  return *this;
}

std::vector<int64_t> View::shape() const {
  return value_ ? value_->type.shape() : std::vector<int64_t>{};
}

BuildResult::BuildResult() = default;
BuildResult::~BuildResult() = default;
BuildResult::BuildResult(BuildResult&&) noexcept = default;
BuildResult& BuildResult::operator=(BuildResult&&) noexcept = default;

std::string BuildResult::message() const {
  std::string out;
  for (const ir::Diagnostic& d : diagnostics) out += ir::format(d) + "\n";
  return out;
}

// ---- regions ----

namespace detail {

Scope::~Scope() {
  if (!closed_) Internal::impl(kb_).b.setInsertion(saved_);
}

std::vector<Idx> Scope::indices() const {
  std::vector<Idx> out;
  if (!op_) return out;
  const std::vector<ir::Value*>& args = op_->regions[0]->args;
  size_t n = op_->kind == ir::OpKind::Parallel ? args.size() : 1;
  for (size_t i = 0; i < n && i < args.size(); ++i) out.push_back(Internal::idx(kb_, args[i]));
  return out;
}

Tiles Scope::carried() const {
  Tiles out;
  if (!op_ || op_->kind == ir::OpKind::Parallel) return out;
  const std::vector<ir::Value*>& args = op_->regions[0]->args;
  for (size_t i = 1; i < args.size(); ++i) out.push_back(Internal::tile(kb_, args[i]));
  return out;
}

Tiles Scope::close(const Tiles* next) {
  KernelBuilder::Impl& I = Internal::impl(kb_);
  if (closed_) return {};
  closed_ = true;
  Tiles results;
  if (op_ && next) {
    ir::Loc loc = toLoc(loc_);
    if (next->size() != op_->operands.size()) {
      I.error(loc, "yield-arity",
              fmt::format("the loop body returned {} value{} but the loop carries {}; return one next value per "
                          "carried value, in order",
                          next->size(), next->size() == 1 ? "" : "s", op_->operands.size()));
    } else {
      std::vector<ir::Value*> vs;
      for (const Tile& t : *next) vs.push_back(valueOf(kb_, t, loc));
      I.b.yield(vs, loc);
    }
  }
  I.b.setInsertion(saved_);
  for (size_t i = 0; i < count_; ++i)
    results.push_back(Internal::tile(kb_, op_ && i < op_->results.size() ? op_->results[i] : nullptr));
  return results;
}

}  // namespace detail

// ---- KernelBuilder ----

KernelBuilder::KernelBuilder(std::string name, SrcLoc loc) : impl_(std::make_unique<Impl>(name, toLoc(loc))) {}
KernelBuilder::~KernelBuilder() = default;

View KernelBuilder::view(std::string name, std::vector<int64_t> shape, SrcLoc loc) {
  return view(std::move(name), std::move(shape), FloatElem::F32, loc);
}

View KernelBuilder::view(std::string name, std::vector<int64_t> shape, FloatElem elem, SrcLoc loc) {
  Impl& I = *impl_;
  if (I.names.count(name))
    I.error(toLoc(loc), "duplicate-name", fmt::format("parameter name '{}' is already used", name));
  const ir::Elem e = elem == FloatElem::F16 ? ir::Elem::F16 : elem == FloatElem::BF16 ? ir::Elem::BF16 : ir::Elem::F32;
  ir::Value* v = I.b.param(I.fresh(name), ir::Type::view(e, shape), toLoc(loc));
  return Internal::view(this, v);
}

View KernelBuilder::intView(std::string name, std::vector<int64_t> shape, IntElem elem, std::optional<Range> range,
                            SrcLoc loc) {
  Impl& I = *impl_;
  if (I.names.count(name))
    I.error(toLoc(loc), "duplicate-name", fmt::format("parameter name '{}' is already used", name));
  ir::Value* v =
      I.b.param(I.fresh(name), ir::Type::view(elem == IntElem::I32 ? ir::Elem::I32 : ir::Elem::I64, shape), toLoc(loc));
  if (range) v->range = ir::IntRange{range->lo, range->hi, range->ascending};
  return Internal::view(this, v);
}

View KernelBuilder::workspace(std::string name, std::vector<int64_t> shape, SrcLoc loc) {
  Impl& I = *impl_;
  if (I.names.count(name))
    I.error(toLoc(loc), "duplicate-name", fmt::format("workspace name '{}' is already used", name));
  ir::Value* v = I.b.workspace(I.fresh(name), ir::Type::view(ir::Elem::F32, shape), toLoc(loc));
  return Internal::view(this, v);
}

Tile KernelBuilder::scalarF32(std::string name, SrcLoc loc) {
  Impl& I = *impl_;
  if (I.names.count(name))
    I.error(toLoc(loc), "duplicate-name", fmt::format("parameter name '{}' is already used", name));
  return Internal::tile(this, I.b.param(I.fresh(name), ir::Type::scalar(ir::Elem::F32), toLoc(loc)));
}

Idx KernelBuilder::scalarI64(std::string name, SrcLoc loc) {
  Impl& I = *impl_;
  if (I.names.count(name))
    I.error(toLoc(loc), "duplicate-name", fmt::format("parameter name '{}' is already used", name));
  return Internal::idx(this, I.b.param(I.fresh(name), ir::Type::scalar(ir::Elem::I64), toLoc(loc)));
}

Idx KernelBuilder::scalarI64(std::string name, Range range, SrcLoc loc) {
  Idx i = scalarI64(std::move(name), loc);
  if (i.ok()) i.value()->range = ir::IntRange{range.lo, range.hi};
  return i;
}

Dim KernelBuilder::runtimeAxis(std::string name, const Idx& param, int64_t divisor, SrcLoc loc) {
  Dim d{std::move(name), 1, param.value(), divisor};
  ir::Value* p = param.value();
  if (!p || p->origin != ir::Value::Origin::Param || !p->range || divisor < 1) {
    error("runtime-extent",
          "runtimeAxis '" + d.name +
              "' needs an i64 parameter with a stated range (scalarI64(name, {lo, hi})) and "
              "a divisor of at least 1",
          loc);
    d.runtime = nullptr;
    return d;
  }
  d.extent = ir::RuntimeExtent{p, divisor}.maximum();
  return d;
}

detail::Scope KernelBuilder::openParallel(const std::vector<Dim>& domain, SrcLoc loc) {
  Impl& I = *impl_;
  ir::Region* saved = I.b.insertion();
  std::vector<std::string> names;
  std::vector<int64_t> extents;
  std::vector<ir::RuntimeExtent> runtime;
  bool any = false;
  for (const Dim& d : domain) {
    names.push_back(I.fresh(d.name));
    extents.push_back(d.extent);
    runtime.push_back({d.runtime, d.divisor});
    any = any || d.runtime;
  }
  if (!any) runtime.clear();
  ir::Op* op = I.b.parallel(names, extents, toLoc(loc), runtime);
  if (op) I.b.setInsertion(op->regions[0]);
  return detail::Scope(this, op, saved, 0, loc);
}

detail::Scope KernelBuilder::openLoop(bool pipeline, const LoopVar& iv, IdxArg lower, IdxArg upper,
                                      const std::vector<Carry>& carried, SrcLoc loc) {
  Impl& I = *impl_;
  ir::Loc l = toLoc(loc);
  ir::Region* saved = I.b.insertion();
  std::vector<std::pair<std::string, ir::Value*>> inits;
  std::vector<std::string> resultNames;
  for (const Carry& c : carried) {
    ir::Value* v = valueOf(this, c.init, l);
    std::string base = !c.name.empty() ? c.name : v ? v->name : "carried";
    inits.emplace_back(I.fresh(base), v);
    resultNames.push_back(I.fresh(base));
  }
  ir::Index lo = indexOf(this, lower, l), hi = indexOf(this, upper, l);
  ir::Op* op = nullptr;
  bool present = true;
  for (const auto& c : inits) present = present && c.second != nullptr;
  if (present)
    op = I.b.loop(pipeline ? ir::OpKind::Pipeline : ir::OpKind::Serial, I.fresh(iv.name), lo, hi, iv.step, inits,
                  resultNames, l);
  if (op) I.b.setInsertion(op->regions[0]);
  return detail::Scope(this, op, saved, carried.size(), loc);
}

void KernelBuilder::stage(int64_t n, SrcLoc loc) {
  impl_->b.stage(n, toLoc(loc));
}

Tile KernelBuilder::full(const std::vector<Dim>& dims, double value, SrcLoc loc) {
  Impl& I = *impl_;
  // An f32 const holds an f32: round here so the kernel equals its printed form.
  double v = static_cast<double>(static_cast<float>(value));
  return Internal::tile(this,
                        I.b.constF32(v, ir::Type::tile(ir::Elem::F32, toIrDims(dims)), toLoc(loc), I.fresh("cst")));
}

Tile KernelBuilder::zeros(const std::vector<Dim>& dims, SrcLoc loc) {
  return full(dims, 0.0, loc);
}

Tile KernelBuilder::fullI64(const std::vector<Dim>& dims, int64_t value, SrcLoc loc) {
  Impl& I = *impl_;
  return Internal::tile(this,
                        I.b.constInt(value, ir::Type::tile(ir::Elem::I64, toIrDims(dims)), toLoc(loc), I.fresh("cst")));
}

Idx KernelBuilder::index(int64_t value, SrcLoc loc) {
  // Not shared with literals: the author may name it.
  Impl& I = *impl_;
  return Internal::idx(this, I.b.constInt(value, ir::Type::scalar(ir::Elem::I64), toLoc(loc), I.fresh("cst")));
}

Tile KernelBuilder::iota(const std::vector<Dim>& dims, const std::string& along, SrcLoc loc) {
  Impl& I = *impl_;
  return Internal::tile(
      this, I.b.iota(ir::Type::tile(ir::Elem::I64, toIrDims(dims)), along, toLoc(loc), I.fresh("iota_" + along)));
}

void KernelBuilder::error(std::string code, std::string message, SrcLoc loc) {
  impl_->error(toLoc(loc), std::move(code), std::move(message));
}

bool KernelBuilder::hasErrors() const {
  return impl_->diag.hasErrors();
}

BuildResult KernelBuilder::finish() {
  Impl& I = *impl_;
  BuildResult r;
  if (I.finished) {
    I.error(I.kernel ? I.kernel->loc : ir::Loc{}, "finished", "finish() was already called on this KernelBuilder");
    r.diagnostics = I.diag.all();
    return r;
  }
  I.finished = true;
  // After a DSL error the kernel is incomplete (failed ops were not appended); verifying it
  // would only repeat the same mistake in other words.
  if (!I.diag.hasErrors()) ir::verify(*I.kernel, I.diag);
  if (I.diag.hasErrors()) {
    r.diagnostics = I.diag.all();
  } else {
    r.kernel = std::move(I.kernel);
  }
  return r;
}

}  // namespace kiln::dsl

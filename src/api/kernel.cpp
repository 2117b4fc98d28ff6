// The public API (include/kiln/kernel.h) over the driver: compile → load → launch. Every entry
// point turns internal errors, and any exception from below, into a kiln::Error: nothing
// thrown inside Kiln crosses the API.
#include "kiln/kernel.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <functional>

#include "driver/compile.h"
#include "driver/library_target.h"
#include "host/data.h"
#include "host/storage.h"
#include "interp/interp.h"
#include "ir/diag.h"
#include "ir/parser.h"
#include "ir/printer.h"
#include "jit/object_file.h"
#include "kernels/registry.h"
#include "kiln/dsl.h"
#include "plan/knobs.h"
#include "runtime/runtime.h"

namespace kiln {

struct Kernel::Impl {
  std::string name;
  std::vector<Param> params;
  std::string report;
  std::string text;
  std::unique_ptr<runtime::LoadedKernel> loaded;
  // For evaluate(): the kernel's IR (parsed back from its canonical text) and the knob the
  // interpreter shares with the plan (the partition count of `unordered_tree` without one).
  std::unique_ptr<ir::Kernel> ir;
  int reduction_partitions = 4;

  // An argument's fields (Impl is a member of Kernel, which Arg befriends).
  static void* data(const Arg& a) { return a.data_; }
  static std::size_t elements(const Arg& a) { return a.elements_; }
  static Param::Elem elem(const Arg& a) { return a.elem_; }
  static bool readOnly(const Arg& a) { return a.read_only_; }
  static int64_t i64(const Arg& a) { return a.i64_; }
  static float f32(const Arg& a) { return a.f32_; }
};

namespace {

// Runs `body`; an exception escaping it becomes an Error (the API never lets one through).
template <class R>
R guarded(const char* what, const std::function<R()>& body) {
  try {
    return body();
  } catch (const std::exception& e) {
    return Error(fmt::format("{}: internal error: {}", what, e.what()));
  } catch (...) {
    return Error(fmt::format("{}: internal error (unknown exception)", what));
  }
}

std::optional<std::string> knobsFrom(const Options& options, plan::Knobs& knobs) {
  for (const auto& [name, value] : options.knobs)
    if (auto e = knobs.set(name, value)) return "option " + name + "=" + value + ": " + *e;
  return std::nullopt;
}

// Param::Kind mirrors runtime::ParamKind (the public header cannot include the runtime's).
runtime::ParamKind runtimeKind(Param::Kind k) {
  switch (k) {
    case Param::Kind::View: return runtime::ParamKind::View;
    case Param::Kind::I64: return runtime::ParamKind::I64;
    case Param::Kind::F32: return runtime::ParamKind::F32;
  }
  return runtime::ParamKind::View;
}

Param::Kind publicKind(runtime::ParamKind k) {
  switch (k) {
    case runtime::ParamKind::View: return Param::Kind::View;
    case runtime::ParamKind::I64: return Param::Kind::I64;
    case runtime::ParamKind::F32: return Param::Kind::F32;
  }
  return Param::Kind::View;
}

const char* kindName(Param::Kind k) {
  return runtime::paramKindName(runtimeKind(k));
}

// Compiles and loads a verified kernel; `library` (optional) adds the library's choices to the report.
Result<std::shared_ptr<const Kernel::Impl>> build(const ir::Kernel& kernel, const Options& options,
                                                  const kernels::LibraryRequest* library) {
  plan::Knobs knobs;
  if (auto e = knobsFrom(options, knobs)) return Error(*e);
  driver::Compilation c;
  if (auto e = driver::compile(kernel, knobs, c, driver::Stage::Report))
    return Error(fmt::format("kernel @{}: {}", kernel.name, *e));
  if (library) {
    std::map<std::string, std::string> choices;
    if (!kernels::libraryChoices(*library, choices)) c.report["library"] = choices;
  }
  auto impl = std::make_shared<Kernel::Impl>();
  if (auto e = driver::load(c.object, kernel, knobs.isa, static_cast<int>(knobs.threads), impl->loaded))
    return Error(fmt::format("kernel @{}: {}", kernel.name, *e));
  impl->name = kernel.name;
  impl->report = c.report.dump(2);
  impl->text = ir::print(kernel);
  {
    ir::DiagEngine diag;
    impl->ir = ir::parseKernel(impl->text, kernel.name, diag);
    if (!impl->ir)
      return Error(fmt::format("kernel @{}: internal error: its canonical text does not parse back: {}", kernel.name,
                               diag.str()));
  }
  impl->reduction_partitions = static_cast<int>(knobs.reduction_partitions);
  const std::vector<ir::Value*> ins = kernel.inputs(), outs = kernel.outputs();
  for (const runtime::ParamSpec& spec : impl->loaded->params()) {
    Param p;
    p.name = spec.name;
    p.kind = publicKind(spec.kind);
    p.elem = spec.elem == runtime::ViewElem::I32    ? Param::Elem::I32
             : spec.elem == runtime::ViewElem::I64  ? Param::Elem::I64
             : spec.elem == runtime::ViewElem::F16  ? Param::Elem::F16
             : spec.elem == runtime::ViewElem::BF16 ? Param::Elem::BF16
                                                    : Param::Elem::F32;
    p.shape = spec.shape;
    p.range = spec.range;
    p.ascending = spec.ascending;
    auto named = [&](const std::vector<ir::Value*>& vs) {
      return std::any_of(vs.begin(), vs.end(), [&](const ir::Value* v) { return v->name == spec.name; });
    };
    p.read = named(ins);
    p.written = named(outs);
    impl->params.push_back(std::move(p));
  }
  return std::shared_ptr<const Kernel::Impl>(std::move(impl));
}

}  // namespace

const char* version() {
  return jit::kilnVersion();
}

int64_t Param::elements() const {
  int64_t n = 1;
  for (int64_t e : shape) n *= e;
  return n;
}

namespace {
runtime::ViewElem runtimeElem(Param::Elem e) {
  switch (e) {
    case Param::Elem::I32: return runtime::ViewElem::I32;
    case Param::Elem::I64: return runtime::ViewElem::I64;
    case Param::Elem::F16: return runtime::ViewElem::F16;
    case Param::Elem::BF16: return runtime::ViewElem::BF16;
    case Param::Elem::F32: break;
  }
  return runtime::ViewElem::F32;
}
}  // namespace

std::string Param::type() const {
  return runtime::describe(runtime::ParamSpec{name, runtimeKind(kind), shape, 0, runtimeElem(elem)});
}

Arg Arg::typed(Arg a, void* data, std::size_t elements, Param::Elem elem) {
  a.data_ = data;
  a.elements_ = elements;
  a.elem_ = elem;
  return a;
}

// Read-only integer views are never written: launch() refuses them for a written parameter.
Arg Arg::input(std::span<const int32_t> data) {
  return typed(input(nullptr, 0), const_cast<int32_t*>(data.data()), data.size(), Param::Elem::I32);
}
Arg Arg::input(std::span<const int64_t> data) {
  return typed(input(nullptr, 0), const_cast<int64_t*>(data.data()), data.size(), Param::Elem::I64);
}
Arg Arg::output(std::span<int32_t> data) {
  return typed(output(nullptr, 0), data.data(), data.size(), Param::Elem::I32);
}
Arg Arg::output(std::span<int64_t> data) {
  return typed(output(nullptr, 0), data.data(), data.size(), Param::Elem::I64);
}

Arg Arg::inputF16(std::span<const uint16_t> bits) {
  return typed(input(nullptr, 0), const_cast<uint16_t*>(bits.data()), bits.size(), Param::Elem::F16);
}
Arg Arg::outputF16(std::span<uint16_t> bits) {
  return typed(output(nullptr, 0), bits.data(), bits.size(), Param::Elem::F16);
}
Arg Arg::inputBF16(std::span<const uint16_t> bits) {
  return typed(input(nullptr, 0), const_cast<uint16_t*>(bits.data()), bits.size(), Param::Elem::BF16);
}
Arg Arg::outputBF16(std::span<uint16_t> bits) {
  return typed(output(nullptr, 0), bits.data(), bits.size(), Param::Elem::BF16);
}

Arg Arg::input(const float* data, std::size_t elements) {
  Arg a;
  a.data_ = const_cast<float*>(data);  // never written: launch() refuses it for a written parameter
  a.elements_ = elements;
  a.read_only_ = true;
  return a;
}

Arg Arg::output(float* data, std::size_t elements) {
  Arg a;
  a.data_ = data;
  a.elements_ = elements;
  return a;
}

Arg Arg::i64(int64_t value) {
  Arg a;
  a.kind_ = Param::Kind::I64;
  a.i64_ = value;
  return a;
}

Arg Arg::f32(float value) {
  Arg a;
  a.kind_ = Param::Kind::F32;
  a.f32_ = value;
  return a;
}

Kernel::~Kernel() = default;

Result<Kernel> Kernel::fromImpl(Result<std::shared_ptr<const Impl>> impl) {
  if (!impl) return impl.error();
  return Kernel(std::move(*impl));
}

Result<Kernel> Kernel::compile(const dsl::BuildResult& built, const Options& options) {
  return guarded<Result<Kernel>>("kiln::Kernel::compile", [&]() -> Result<Kernel> {
    if (!built.kernel) {
      std::string m = built.message();
      while (!m.empty() && m.back() == '\n') m.pop_back();
      return Error(m.empty() ? "the DSL build produced no kernel" : "the DSL build failed:\n" + m);
    }
    return fromImpl(build(*built.kernel, options, nullptr));
  });
}

Result<Kernel> Kernel::fromText(std::string_view tile_text, const Options& options, std::string_view source_name) {
  return guarded<Result<Kernel>>("kiln::Kernel::fromText", [&]() -> Result<Kernel> {
    ir::DiagEngine diag;
    std::unique_ptr<ir::Kernel> kernel = ir::parseKernel(tile_text, std::string(source_name), diag);
    if (!kernel) {
      std::string m = diag.str();
      while (!m.empty() && m.back() == '\n') m.pop_back();
      return Error(m);
    }
    return fromImpl(build(*kernel, options, nullptr));
  });
}

Result<Kernel> Kernel::library(std::string_view name, std::string_view shape,
                               const std::map<std::string, std::string>& library_options, const Options& options) {
  return guarded<Result<Kernel>>("kiln::Kernel::library", [&]() -> Result<Kernel> {
    kernels::LibraryRequest request;
    request.name = name;
    request.shape = shape;
    request.options = library_options;
    // What the library sizes programs for: the knobs' target and threads (as `kiln run`).
    plan::Knobs knobs;
    if (auto e = knobsFrom(options, knobs)) return Error(*e);
    request.target = driver::libraryTarget(knobs);
    std::unique_ptr<ir::Kernel> kernel;
    if (auto e = kernels::buildLibraryKernel(request, kernel)) return Error(*e);
    return fromImpl(build(*kernel, options, &request));
  });
}

std::vector<std::pair<std::string, std::string>> Kernel::libraryKernels() {
  std::vector<std::pair<std::string, std::string>> out;
  for (const kernels::LibraryKernelInfo& k : kernels::libraryKernels()) out.emplace_back(k.name, k.shape_fields);
  return out;
}

namespace {

// The checks launch() and evaluate() make before anything runs (the count, each argument's
// kind, element type and size, read-only inputs not written); the arguments as the runtime
// takes them.
Status checkArgs(const Kernel::Impl& impl, std::span<const Arg> args, std::vector<runtime::Arg>& raw) {
  const std::vector<Param>& ps = impl.params;
  if (args.size() != ps.size())
    return Error(fmt::format("kernel @{} takes {} arguments but {} were given", impl.name, ps.size(), args.size()));
  raw.clear();
  raw.reserve(args.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    const Param& p = ps[i];
    const Arg& a = args[i];
    const std::string where = fmt::format("kernel @{}, argument {} (%{}: {})", impl.name, i, p.name, p.type());
    if (a.kind() != p.kind)
      return Error(fmt::format("{}: expected a {} but got a {}", where, kindName(p.kind), kindName(a.kind())));
    if (p.kind == Param::Kind::I64) {
      raw.push_back(runtime::Arg::i64(Kernel::Impl::i64(a)));
    } else if (p.kind == Param::Kind::F32) {
      raw.push_back(runtime::Arg::f32(Kernel::Impl::f32(a)));
    } else {
      if (!Kernel::Impl::data(a)) return Error(where + ": the buffer is null");
      const runtime::ViewElem want = runtimeElem(p.elem), got = runtimeElem(Kernel::Impl::elem(a));
      if (want != got)
        return Error(fmt::format("{}: a buffer of {} for a view of {}", where, runtime::viewElemName(got),
                                 runtime::viewElemName(want)));
      if (static_cast<int64_t>(Kernel::Impl::elements(a)) < p.elements())
        return Error(fmt::format("{}: needs {} {} but the buffer holds {}", where, p.elements(),
                                 p.elem == Param::Elem::F32 ? "floats" : "elements", Kernel::Impl::elements(a)));
      if (Kernel::Impl::readOnly(a) && p.written)
        return Error(where +
                     ": the kernel writes this parameter but it was passed as a read-only input "
                     "(use kiln::Arg::output)");
      raw.push_back(runtime::Arg::view(Kernel::Impl::data(a),
                                       static_cast<int64_t>(Kernel::Impl::elements(a)) * runtime::viewElemBytes(want)));
    }
  }
  return Status();
}

}  // namespace

Status Kernel::launch(std::span<const Arg> args) const {
  return guarded<Status>("kiln::Kernel::launch", [&]() -> Status {
    if (!impl_) return Error("launch of a moved-from kiln::Kernel");
    std::vector<runtime::Arg> raw;
    if (Status s = checkArgs(*impl_, args, raw); !s) return s;
    if (auto e = impl_->loaded->launch(raw)) return Error(fmt::format("kernel @{}: {}", impl_->name, *e));
    return Status();
  });
}

Status Kernel::evaluate(std::span<const Arg> args, EvalMode mode, std::vector<std::vector<double>>* f64_views) const {
  return guarded<Status>("kiln::Kernel::evaluate", [&]() -> Status {
    if (!impl_) return Error("evaluate of a moved-from kiln::Kernel");
    std::vector<runtime::Arg> raw;
    if (Status s = checkArgs(*impl_, args, raw); !s) return s;
    // The interpreter works on its own copies (host::ParamData); the outputs are copied back.
    const std::vector<Param>& ps = impl_->params;
    std::vector<host::ParamData> data(ps.size());
    for (size_t i = 0; i < ps.size(); ++i) {
      const Param& p = ps[i];
      const size_t n = static_cast<size_t>(p.elements());
      if (p.kind == Param::Kind::I64) {
        data[i].i64 = raw[i].i64_value;
      } else if (p.kind == Param::Kind::F32) {
        data[i].f32 = raw[i].f32_value;
      } else if (p.elem == Param::Elem::F32) {
        const float* f = static_cast<const float*>(raw[i].data);
        data[i].data.assign(f, f + n);
      } else if (p.elem == Param::Elem::F16 || p.elem == Param::Elem::BF16) {
        host::halvesFromBytes(raw[i].data, n * 2, p.elem == Param::Elem::BF16, data[i].data);
      } else if (p.elem == Param::Elem::I32) {
        const int32_t* v = static_cast<const int32_t*>(raw[i].data);
        data[i].ints.assign(v, v + n);
      } else {
        const int64_t* v = static_cast<const int64_t*>(raw[i].data);
        data[i].ints.assign(v, v + n);
      }
    }
    interp::Options io;
    io.mode = mode == EvalMode::F64 ? interp::Mode::F64 : interp::Mode::StrictF32;
    io.reduction_partitions = impl_->reduction_partitions;
    interp::F64Views doubles;
    if (auto e = interp::evaluate(*impl_->ir, data, io, &doubles))
      return Error(fmt::format("kernel @{}: {}", impl_->name, *e));
    for (size_t i = 0; i < ps.size(); ++i) {
      const Param& p = ps[i];
      if (p.kind != Param::Kind::View || !p.written) continue;
      if (p.elem == Param::Elem::F32) {
        std::copy(data[i].data.begin(), data[i].data.end(), static_cast<float*>(raw[i].data));
      } else if (p.elem == Param::Elem::F16 || p.elem == Param::Elem::BF16) {
        std::string bits;
        if (auto e = host::halfBytes(data[i].data, p.elem == Param::Elem::BF16, bits))
          return Error(fmt::format("kernel @{}: internal error: %{}: {}", impl_->name, p.name, *e));
        std::memcpy(raw[i].data, bits.data(), bits.size());
      } else if (p.elem == Param::Elem::I32) {
        int32_t* v = static_cast<int32_t*>(raw[i].data);
        for (size_t j = 0; j < data[i].ints.size(); ++j) v[j] = static_cast<int32_t>(data[i].ints[j]);
      } else {
        std::copy(data[i].ints.begin(), data[i].ints.end(), static_cast<int64_t*>(raw[i].data));
      }
    }
    if (f64_views) {
      f64_views->assign(ps.size(), {});
      if (mode == EvalMode::F64)
        for (size_t i = 0; i < ps.size() && i < doubles.size(); ++i)
          if (ps[i].kind == Param::Kind::View && ps[i].elem != Param::Elem::I32 && ps[i].elem != Param::Elem::I64)
            (*f64_views)[i] = std::move(doubles[i]);
    }
    return Status();
  });
}

namespace {
const Kernel::Impl& movedFrom() {
  static const Kernel::Impl empty;
  return empty;
}
}  // namespace

const std::string& Kernel::name() const {
  return (impl_ ? *impl_ : movedFrom()).name;
}

const std::vector<Param>& Kernel::params() const {
  return (impl_ ? *impl_ : movedFrom()).params;
}

const Param* Kernel::param(std::string_view name) const {
  for (const Param& p : params())
    if (p.name == name) return &p;
  return nullptr;
}

int Kernel::threads() const {
  return impl_ ? impl_->loaded->threads() : 0;
}

const std::string& Kernel::report() const {
  return (impl_ ? *impl_ : movedFrom()).report;
}

const std::string& Kernel::text() const {
  return (impl_ ? *impl_ : movedFrom()).text;
}

Status useObjectCache(const std::string& dir, int64_t max_megabytes) {
  return guarded<Status>("kiln::useObjectCache", [&]() -> Status {
    if (dir == "off") {
      driver::setObjectCache(nullptr);
      return Status();
    }
    if (max_megabytes < 1) return Error(fmt::format("object cache size {} MB: must be at least 1", max_megabytes));
    std::unique_ptr<jit::DiskObjectCache> cache;
    if (dir.empty()) {
      if (auto e = jit::cacheFromEnvironment(cache)) return Error(*e);
    } else {
      cache = std::make_unique<jit::DiskObjectCache>(dir, max_megabytes << 20);
    }
    driver::setObjectCache(std::shared_ptr<jit::ObjectCache>(std::move(cache)));
    return Status();
  });
}

}  // namespace kiln

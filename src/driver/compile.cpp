#include "driver/compile.h"
#include "host/isa.h"
#include "host/storage.h"

#include <fmt/format.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <span>

#include "codegen/lower.h"
#include "driver/report.h"
#include "host/data.h"
#include "ir/diag.h"
#include "ir/printer.h"
#include "ir/verifier.h"
#include "jit/compile.h"
#include "jit/session.h"
#include "runtime/guard.h"
#include "target/target.h"

namespace kiln::driver {

namespace {

llvm::Expected<jit::CompiledObject> emitObject(std::unique_ptr<llvm::Module> module, const plan::Knobs& knobs,
                                               Stage until) {
  jit::JitOptions jo;
  jo.fast_math = knobs.fast_math;
  jo.emit_assembly = until == Stage::Asm;
  jo.isa = knobs.isa;
  jo.tune_cpu = knobs.tune_cpu;
  return target::of(knobs.target).emit(std::move(module), jo);
}

// The ABI's symbols (runtime/abi.h) under `prefix` instead of "kiln_".
void renameExports(llvm::Module& m, const std::string& prefix) {
  static const std::string kAbiPrefix = "kiln_";
  if (prefix == kAbiPrefix) return;
  for (const char* name :
       {runtime::kBlocksSymbol, runtime::kLaunchSymbol, runtime::kNumBlocksSymbol, runtime::kNumPhasesSymbol,
        runtime::kPhaseEndsSymbol, runtime::kPhaseBlocksSymbol, runtime::kAbiVersionSymbol})
    if (llvm::GlobalValue* g = m.getNamedValue(name)) g->setName(prefix + std::string(name).substr(kAbiPrefix.size()));
}

std::shared_ptr<jit::ObjectCache>& objectCache() {
  static std::shared_ptr<jit::ObjectCache> cache;
  return cache;
}

jit::ObjectCacheKey cacheKey(const ir::Kernel& kernel, const plan::Knobs& knobs, const ExportOptions& exports) {
  jit::ObjectCacheKey key;
  key.ir_text = ir::print(kernel);
  for (const plan::KnobInfo& info : plan::knobTable())
    if (info.name != "threads") key.knobs += info.name + "=" + knobs.get(info.name) + "\n";
  if (exports.symbol_prefix != ExportOptions().symbol_prefix)
    key.knobs += "symbol_prefix=" + exports.symbol_prefix + "\n";
  const jit::HostTarget& host = jit::hostTarget();
  const jit::TargetCpu target = jit::targetCpu(knobs.isa);
  key.cpu = target.features.empty() ? target.cpu : target.cpu + " " + target.features;
  // amx=auto compiles AMX code only on a host with AMX (plan/lanes.cpp): a cache shared between
  // hosts must not hand that object to one without.
  if (knobs.amx == "auto" && host::cpuHasAmxBf16()) key.cpu += " +amx-bf16 (amx=auto)";
  if (knobs.avx512_bf16 == "auto" && host::cpuHasAvx512Bf16()) key.cpu += " +avx512-bf16 (avx512_bf16=auto)";
  key.llvm_version = host.llvm_version;
  key.kiln_version = jit::kilnBuildId();
  return key;
}

// A cache entry: the report's JSON text, a newline, then the object.
std::string packEntry(const Compilation& c) {
  return c.report.dump() + "\n" + c.object;
}

bool unpackEntry(const std::string& bytes, Compilation& out) {
  const size_t nl = bytes.find('\n');
  if (nl == std::string::npos) return false;
  nlohmann::json report = nlohmann::json::parse(bytes.substr(0, nl), nullptr, false);
  if (report.is_discarded() || !report.is_object() || !report.contains("object")) return false;
  std::string object = bytes.substr(nl + 1);
  if (report["object"].value("sha256", "") != host::sha256Hex(object.data(), object.size())) return false;
  out.report = std::move(report);
  out.object = std::move(object);
  return true;
}

// Plan, lower, optimise and emit; the report of each. A kernel is N >= 1 phases (its root
// domains): one that is not phased is its own one phase; a phased kernel's phase i is planned
// as a kernel of its own (ir::phaseKernel) with the same knobs, and all are lowered into one
// object.
std::optional<std::string> compileUncached(const ir::Kernel& kernel, const plan::Knobs& knobs, Compilation& out,
                                           Stage until, const ExportOptions& exports,
                                           std::chrono::steady_clock::time_point start) {
  const size_t n = kernel.roots().size();
  std::vector<std::unique_ptr<ir::Kernel>> owned;
  out.plans.assign(n, plan::Plan{});
  std::vector<codegen::Phase> phases;
  for (size_t i = 0; i < n; ++i) {
    if (kernel.phased()) owned.push_back(ir::phaseKernel(kernel, i));
    const ir::Kernel& k = kernel.phased() ? *owned.back() : kernel;
    // 2. plan
    if (auto e = plan::buildPlan(k, knobs, out.plans[i]))
      return kernel.phased() ? fmt::format("phase {}: {}", i, *e) : *e;
    phases.push_back({&k, &out.plans[i]});
  }
  out.report = planReport(kernel, phases);
  if (until == Stage::Ir || until == Stage::Plan) return std::nullopt;
  // 3. lower
  llvm::LLVMContext ctx;
  codegen::Lowered lowered;
  if (auto e = codegen::lower(kernel, phases, ctx, lowered)) return e;
  renameExports(*lowered.module, exports.symbol_prefix);
  if (until == Stage::Llvm) {
    llvm::raw_string_ostream os(out.llvm_text);
    lowered.module->print(os, nullptr);
    return std::nullopt;
  }
  // 4. optimise (O2) and 5. emit the object
  auto obj = emitObject(std::move(lowered.module), knobs, until);
  if (!obj) return "LLVM compilation failed: " + llvm::toString(obj.takeError());
  if (auto e = target::of(knobs.target).refuse(*obj, knobs)) return e;
  out.object = obj->object_bytes;
  out.assembly = std::move(obj->assembly);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  addRealized(phases, lowered, *obj, ms, out.report);
  return std::nullopt;
}

}  // namespace

void setObjectCache(std::shared_ptr<jit::ObjectCache> cache) {
  objectCache() = std::move(cache);
}

std::optional<std::string> checkSymbolPrefix(const std::string& prefix) {
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (prefix.empty() || !alpha(prefix[0]) ||
      !std::all_of(prefix.begin(), prefix.end(), [&](char c) { return alpha(c) || (c >= '0' && c <= '9'); }))
    return fmt::format("symbol prefix '{}' is not a C identifier (letters, digits and '_', not starting with a digit)",
                       prefix);
  if (prefix.size() > 64) return fmt::format("symbol prefix '{}' is longer than 64 characters", prefix);
  return std::nullopt;
}

std::optional<std::string> compile(const ir::Kernel& kernel, const plan::Knobs& knobs, Compilation& out, Stage until,
                                   const ExportOptions& exports) {
  auto start = std::chrono::steady_clock::now();
  if (auto e = checkSymbolPrefix(exports.symbol_prefix)) return e;
  // 1. verify
  ir::DiagEngine diag;
  if (!ir::verify(kernel, diag)) return diag.str();
  const std::shared_ptr<jit::ObjectCache> cache = objectCache();
  const bool cacheable = cache && (until == Stage::Obj || until == Stage::Report);
  if (!cacheable) {
    auto e = compileUncached(kernel, knobs, out, until, exports, start);
    if (!e && (until == Stage::Obj || until == Stage::Report)) out.report["cache"] = {{"status", "off"}};
    return e;
  }
  const std::string key = cacheKey(kernel, knobs, exports).hash();
  if (std::optional<std::string> entry = cache->get(key)) {
    Compilation hit;
    if (unpackEntry(*entry, hit)) {
      out = std::move(hit);
      out.from_cache = true;
      const double saved = out.report.value("compile_ms", 0.0);
      out.report["knobs"]["threads"] = knobs.threads;
      out.report["compile_ms"] =
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
      out.report["cache"] = {{"status", "hit"}, {"key", key}, {"saved_ms", saved}};
      return std::nullopt;
    }
  }
  if (auto e = compileUncached(kernel, knobs, out, until, exports, start)) return e;
  out.report["cache"] = {{"status", "miss"}, {"key", key}};
  cache->put(key, packEntry(out));
  return std::nullopt;
}

runtime::ViewElem runtimeElem(ir::Elem e) {
  switch (e) {
    case ir::Elem::I32: return runtime::ViewElem::I32;
    case ir::Elem::I64: return runtime::ViewElem::I64;
    case ir::Elem::F16: return runtime::ViewElem::F16;
    case ir::Elem::BF16: return runtime::ViewElem::BF16;
    default: return runtime::ViewElem::F32;
  }
}

std::vector<runtime::ParamSpec> signature(const ir::Kernel& kernel) {
  std::vector<runtime::ParamSpec> sig;
  for (const ir::Value* p : kernel.params) {
    if (p->type.isView())
      sig.push_back(runtime::ParamSpec::view(p->name, p->type.shape(), runtimeElem(p->type.elem)));
    else if (p->type.elem == ir::Elem::I64)
      sig.push_back(runtime::ParamSpec::i64(p->name));
    else
      sig.push_back(runtime::ParamSpec::f32(p->name));
    if (p->range) sig.back().range = std::pair{p->range->lo, p->range->hi};
    sig.back().ascending = p->range && p->range->ascending;
  }
  return sig;
}

std::optional<std::string> load(const std::string& object, const ir::Kernel& kernel, const std::string& isa,
                                int threads, std::unique_ptr<runtime::LoadedKernel>& out) {
  if (object.rfind("\x7f"
                   "ELF",
                   0) != 0)
    return object.find(".entry") != std::string::npos
               ? std::string(
                     "this is PTX (target=nvptx), which runs on an NVIDIA GPU, not in this process: capture it "
                     "with `kiln gpu-capture` and run it with kiln-replay (docs/gpu.md)")
               : std::string("the object is not an ELF object");
  auto session = jit::Session::load(object, isa);
  if (!session) return "cannot load the object: " + llvm::toString(session.takeError());
  std::shared_ptr<jit::Session> shared(std::move(*session));
  std::vector<runtime::ParamSpec> workspaces;
  for (const ir::Value* w : kernel.workspaces) workspaces.push_back(runtime::ParamSpec::view(w->name, w->type.shape()));
  const runtime::KernelEntry entry = jit::kernelEntry(shared);
  const size_t phases = std::max<size_t>(1, kernel.roots().size());
  if (entry.phase_ends.size() != phases)
    return fmt::format("the object has {} phases but kernel @{} has {}", entry.phase_ends.size(), kernel.name, phases);
  out = std::make_unique<runtime::LoadedKernel>(entry, signature(kernel), threads, std::move(workspaces));
  return std::nullopt;
}

namespace {

// An integer view's ParamData must hold its elements (a caller may pass none for an f32 view).
std::optional<std::string> checkIntegerView(const runtime::ParamSpec& p, const host::ParamData& d) {
  const int64_t elements = p.byte_size / runtime::viewElemBytes(p.elem);
  if (static_cast<int64_t>(d.ints.size()) != elements)
    return fmt::format("parameter '{}': {} integer elements given, view {} has {}", p.name, d.ints.size(),
                       runtime::describe(p), elements);
  return std::nullopt;
}

}  // namespace

namespace {

// Views whose memory is not f32 travel as bytes: integers (host::integerBytes) and 16-bit
// floats (host::halfBytes, exact: their values are values of the type).
bool halfView(const runtime::ParamSpec& p) {
  return p.kind == runtime::ParamKind::View && (p.elem == runtime::ViewElem::F16 || p.elem == runtime::ViewElem::BF16);
}
bool packedView(const runtime::ParamSpec& p) {
  return p.kind == runtime::ParamKind::View && p.elem != runtime::ViewElem::F32;
}

// packed[i]: parameter i's bytes where it is a packed view.
std::optional<std::string> packViews(const std::vector<runtime::ParamSpec>& sig,
                                     const std::vector<host::ParamData>& params, std::vector<std::string>& packed) {
  if (params.size() != sig.size())
    return fmt::format("the kernel has {} parameters but {} values were given", sig.size(), params.size());
  packed.assign(sig.size(), {});
  for (size_t i = 0; i < sig.size(); ++i)
    if (halfView(sig[i])) {
      if (auto e = host::halfBytes(params[i].data, sig[i].elem == runtime::ViewElem::BF16, packed[i]))
        return fmt::format("parameter '{}': {}", sig[i].name, *e);
    } else if (packedView(sig[i])) {
      if (auto e = checkIntegerView(sig[i], params[i])) return e;
      packed[i] = host::integerBytes(params[i].ints, sig[i].elem == runtime::ViewElem::I32);
    }
  return std::nullopt;
}

void unpackView(const runtime::ParamSpec& p, const void* bytes, size_t size, host::ParamData& d) {
  if (halfView(p))
    host::halvesFromBytes(bytes, size, p.elem == runtime::ViewElem::BF16, d.data);
  else
    host::integersFromBytes(bytes, size, p.elem == runtime::ViewElem::I32, d.ints);
}

}  // namespace

std::optional<std::string> LaunchArgs::pack(const runtime::LoadedKernel& kernel, std::vector<host::ParamData>& params) {
  sig_ = kernel.params();
  args_.clear();
  if (auto e = packViews(sig_, params, packed_)) return e;
  for (size_t i = 0; i < sig_.size(); ++i) {
    if (packedView(sig_[i]))
      args_.push_back(runtime::Arg::view(packed_[i].data(), static_cast<int64_t>(packed_[i].size())));
    else if (sig_[i].kind == runtime::ParamKind::View)
      args_.push_back(runtime::Arg::view(params[i].data));
    else if (sig_[i].kind == runtime::ParamKind::I64)
      args_.push_back(runtime::Arg::i64(params[i].i64));
    else
      args_.push_back(runtime::Arg::f32(params[i].f32));
  }
  return std::nullopt;
}

void LaunchArgs::unpack(std::vector<host::ParamData>& params) const {
  for (size_t i = 0; i < sig_.size(); ++i)
    if (packedView(sig_[i])) unpackView(sig_[i], packed_[i].data(), packed_[i].size(), params[i]);
}

std::optional<std::string> run(const runtime::LoadedKernel& kernel, std::vector<host::ParamData>& params, bool guarded,
                               runtime::KilnLaunchRecord* record) {
  const auto& sig = kernel.params();
  if (!guarded) {
    LaunchArgs a;
    if (auto e = a.pack(kernel, params)) return e;
    if (auto e = kernel.launch(a.args(), record)) return e;
    a.unpack(params);
    return std::nullopt;
  }
  std::vector<std::string> packed;
  if (auto e = packViews(sig, params, packed)) return e;
  runtime::GuardedArgs g(sig);
  for (size_t i = 0; i < sig.size(); ++i) {
    std::optional<std::string> e;
    if (packedView(sig[i]))
      e = g.setViewBytes(i, std::as_bytes(std::span<const char>(packed[i])));
    else if (sig[i].kind == runtime::ParamKind::View)
      e = g.setView(i, params[i].data);
    else if (sig[i].kind == runtime::ParamKind::I64)
      e = g.setI64(i, params[i].i64);
    else
      e = g.setF32(i, params[i].f32);
    if (e) return e;
  }
  if (auto e = kernel.launch(g.args(), record)) return e;
  if (auto e = g.checkGuards()) return "guard zones corrupted: " + *e;
  for (size_t i = 0; i < sig.size(); ++i)
    if (packedView(sig[i])) {
      unpackView(sig[i], g.viewBytes(i).data(), g.viewBytes(i).size(), params[i]);
    } else if (sig[i].kind == runtime::ParamKind::View) {
      auto v = g.view(i);
      params[i].data.assign(v.begin(), v.end());
    }
  return std::nullopt;
}

}  // namespace kiln::driver

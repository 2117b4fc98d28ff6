// Launch: check every argument against the signature, allocate the workspaces, then run the
// blocks, on the calling thread (threads == 1) or over a oneTBB arena of `threads` slots, one
// task per block (dynamic: an idle worker takes the next block), each task with its own launch
// record, phase after phase (the arena's run returns when every block of the phase has run).
#include "runtime/runtime.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "ir/range.h"
#include "runtime/pool.h"

namespace kiln::runtime {
namespace {

void internalCheck(bool ok, const char* what, const char* file, int line) {
  if (ok) return;
  std::fprintf(stderr, "%s:%d: internal error: %s\n", file, line, what);
  std::abort();
}
#define KILN_RUNTIME_CHECK(cond) internalCheck((cond), #cond, __FILE__, __LINE__)

std::string joinNames(const std::vector<ParamSpec>& params) {
  std::string s;
  for (const ParamSpec& p : params) {
    if (!s.empty()) s += ", ";
    s += p.name;
  }
  return s;
}

}  // namespace

const char* paramKindName(ParamKind kind) {
  switch (kind) {
    case ParamKind::View: return "view";
    case ParamKind::I64: return "i64 scalar";
    case ParamKind::F32: return "f32 scalar";
  }
  return "?";
}

const char* viewElemName(ViewElem e) {
  switch (e) {
    case ViewElem::F32: return "f32";
    case ViewElem::I32: return "i32";
    case ViewElem::I64: return "i64";
    case ViewElem::F16: return "f16";
    case ViewElem::BF16: return "bf16";
  }
  return "?";
}

int64_t viewElemBytes(ViewElem e) {
  switch (e) {
    case ViewElem::I64: return 8;
    case ViewElem::F16:
    case ViewElem::BF16: return 2;
    default: return 4;
  }
}

ParamSpec ParamSpec::view(std::string name, std::vector<int64_t> shape, ViewElem elem) {
  int64_t elements = 1;
  for (int64_t extent : shape) elements *= extent;
  return {std::move(name), ParamKind::View, std::move(shape), elements * viewElemBytes(elem), elem};
}
ParamSpec ParamSpec::i64(std::string name) {
  return {std::move(name), ParamKind::I64, {}, sizeof(int64_t)};
}
ParamSpec ParamSpec::f32(std::string name) {
  return {std::move(name), ParamKind::F32, {}, sizeof(float)};
}

std::string describe(const ParamSpec& param) {
  if (param.kind == ParamKind::I64) return "i64";
  if (param.kind == ParamKind::F32) return "f32";
  std::string s = std::string(viewElemName(param.elem)) + "[";
  for (size_t i = 0; i < param.shape.size(); ++i) {
    if (i) s += ',';
    s += std::to_string(param.shape[i]);
  }
  return s + "]";
}

Arg Arg::view(void* data, int64_t byte_size) {
  Arg a;
  a.data = data;
  a.byte_size = byte_size;
  return a;
}
Arg Arg::view(std::span<float> data) {
  Arg a = view(data.data(), static_cast<int64_t>(data.size_bytes()));
  a.elem = ViewElem::F32;
  return a;
}
Arg Arg::i32s(std::span<int32_t> data) {
  Arg a = view(data.data(), static_cast<int64_t>(data.size_bytes()));
  a.elem = ViewElem::I32;
  return a;
}
Arg Arg::i64s(std::span<int64_t> data) {
  Arg a = view(data.data(), static_cast<int64_t>(data.size_bytes()));
  a.elem = ViewElem::I64;
  return a;
}
Arg Arg::halves(std::span<uint16_t> data, ViewElem elem) {
  Arg a = view(data.data(), static_cast<int64_t>(data.size_bytes()));
  a.elem = elem;
  return a;
}
Arg Arg::i64(int64_t value) {
  Arg a;
  a.kind = ParamKind::I64;
  a.i64_value = value;
  return a;
}
Arg Arg::f32(float value) {
  Arg a;
  a.kind = ParamKind::F32;
  a.f32_value = value;
  return a;
}

struct LoadedKernel::Pool : BlockPool {
  using BlockPool::BlockPool;
};

LoadedKernel::LoadedKernel(KernelEntry entry, std::vector<ParamSpec> params, int threads,
                           std::vector<ParamSpec> workspaces)
    : entry_(std::move(entry)), params_(std::move(params)), workspaces_(std::move(workspaces)) {
  KILN_RUNTIME_CHECK(entry_.blocks != nullptr);
  KILN_RUNTIME_CHECK(entry_.num_blocks >= 0);
  if (entry_.phase_ends.empty()) entry_.phase_ends = {entry_.num_blocks};
  KILN_RUNTIME_CHECK(entry_.phase_ends.back() == entry_.num_blocks);
  for (size_t i = 1; i < entry_.phase_ends.size(); ++i)
    KILN_RUNTIME_CHECK(entry_.phase_ends[i - 1] <= entry_.phase_ends[i]);
  for (const ParamSpec& w : workspaces_)
    KILN_RUNTIME_CHECK(w.kind == ParamKind::View && w.byte_size == ParamSpec::view(w.name, w.shape).byte_size);
  for (const ParamSpec& p : params_) {
    if (p.kind == ParamKind::View)
      KILN_RUNTIME_CHECK(p.byte_size == ParamSpec::view(p.name, p.shape, p.elem).byte_size);
    if (p.kind == ParamKind::I64) KILN_RUNTIME_CHECK(p.byte_size == sizeof(int64_t));
    if (p.kind == ParamKind::F32) KILN_RUNTIME_CHECK(p.byte_size == sizeof(float));
  }
  setThreads(threads);
}

LoadedKernel::~LoadedKernel() = default;
LoadedKernel::LoadedKernel(LoadedKernel&&) noexcept = default;
LoadedKernel& LoadedKernel::operator=(LoadedKernel&&) noexcept = default;

int LoadedKernel::concurrency() const {
  return pool_ ? pool_->concurrency() : 1;
}

void LoadedKernel::setThreads(int threads) {
  KILN_RUNTIME_CHECK(threads >= 1);
  threads_ = threads;
  pool_ = threads == 1 ? nullptr : std::make_unique<Pool>(threads);
}

std::optional<std::string> LoadedKernel::checkArgs(std::span<const Arg> args) const {
  if (args.size() != params_.size())
    return "kernel takes " + std::to_string(params_.size()) + " parameters (" + joinNames(params_) + "), got " +
           std::to_string(args.size()) + " arguments";
  for (size_t i = 0; i < args.size(); ++i) {
    const ParamSpec& p = params_[i];
    const Arg& a = args[i];
    std::string which = "parameter '" + p.name + "' (#" + std::to_string(i) + ")";
    if (a.kind != p.kind)
      return which + " is " + (p.kind == ParamKind::View ? "a " : "an ") + paramKindName(p.kind) + ", got " +
             (a.kind == ParamKind::View ? "a " : "an ") + paramKindName(a.kind);
    if (p.kind == ParamKind::I64 && p.range)
      if (auto e = ir::rangeViolation(which, p.range->first, p.range->second, a.i64_value)) return e;
    if (p.kind != ParamKind::View) continue;
    if (a.data == nullptr) return which + ": null buffer for view " + describe(p);
    if (a.elem && *a.elem != p.elem)
      return which + ": a buffer of " + viewElemName(*a.elem) + " elements for view " + describe(p);
    if (a.byte_size != p.byte_size)
      return which + ": buffer has " + std::to_string(a.byte_size) + " bytes, view " + describe(p) + " needs " +
             std::to_string(p.byte_size) + " bytes";
    if (p.range) {
      const int64_t n = p.byte_size / viewElemBytes(p.elem);
      for (int64_t e = 0; e < n; ++e) {
        const int64_t v =
            p.elem == ViewElem::I32 ? static_cast<const int32_t*>(a.data)[e] : static_cast<const int64_t*>(a.data)[e];
        if (auto err = ir::rangeViolation(which, p.range->first, p.range->second, v, e)) return err;
        if (p.ascending && e > 0) {
          const int64_t before = p.elem == ViewElem::I32 ? static_cast<const int32_t*>(a.data)[e - 1]
                                                         : static_cast<const int64_t*>(a.data)[e - 1];
          if (auto err = ir::orderViolation(which, before, v, e)) return err;
        }
      }
    }
  }
  return std::nullopt;
}

std::optional<std::string> LoadedKernel::launch(std::span<const Arg> args, KilnLaunchRecord* record) const {
  if (auto error = checkArgs(args)) return error;

  // params[i]: the view's buffer, or a copy of the scalar that lives for the launch.
  struct Scalar {
    int64_t i64;
    float f32;
  };
  std::vector<Scalar> scalars(args.size());
  std::vector<void*> params(args.size() + workspaces_.size());
  std::vector<std::vector<float>> workspaces;  // zero-filled for every launch
  for (size_t j = 0; j < workspaces_.size(); ++j) {
    workspaces.emplace_back(static_cast<size_t>(workspaces_[j].byte_size) / sizeof(float), 0.0f);
    params[args.size() + j] = workspaces.back().data();
  }
  for (size_t i = 0; i < args.size(); ++i) {
    switch (args[i].kind) {
      case ParamKind::View: params[i] = args[i].data; break;
      case ParamKind::I64: scalars[i].i64 = args[i].i64_value, params[i] = &scalars[i].i64; break;
      case ParamKind::F32: scalars[i].f32 = args[i].f32_value, params[i] = &scalars[i].f32; break;
    }
  }

  KilnLaunchRecord total;
  // Each phase's block range for these arguments: all of them, or as many as the runtime
  // extents give (kiln_phase_blocks; never more than the phase has).
  std::vector<std::pair<int64_t, int64_t>> ranges;
  std::vector<int64_t> run(entry_.phase_ends.size());
  if (entry_.phase_blocks) entry_.phase_blocks(params.data(), run.data());
  int64_t blocks = 0;
  for (size_t i = 0; i < run.size(); ++i) {
    const int64_t start = i == 0 ? 0 : entry_.phase_ends[i - 1];
    const int64_t all = entry_.phase_ends[i] - start;
    const int64_t n = entry_.phase_blocks ? std::clamp<int64_t>(run[i], 0, all) : all;
    ranges.emplace_back(start, start + n);
    blocks += n;
  }
  if (!pool_ || blocks <= 1) {
    // One call runs the phases in order (the generated dispatch walks them; blocks past a
    // runtime domain find no program).
    if (blocks > 0) entry_.blocks(params.data(), 0, entry_.num_blocks, &total);
  } else {
    std::atomic<int64_t> full{0}, masked{0};
    pool_->run(ranges, [&](int64_t begin, int64_t end) {
      KilnLaunchRecord task;
      entry_.blocks(params.data(), begin, end, &task);
      full.fetch_add(task.packets_full, std::memory_order_relaxed);
      masked.fetch_add(task.packets_masked, std::memory_order_relaxed);
    });
    total.packets_full = full.load();
    total.packets_masked = masked.load();
  }
  if (record) *record = total;
  return std::nullopt;
}

}  // namespace kiln::runtime

#include "bench/native.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace kiln::bench {
namespace {

// The first element (of `size` bytes) whose bits differ, or -1; the byte counts differing: the
// shorter count of elements.
int64_t firstDifference(std::string_view got, std::string_view want, int64_t size) {
  if (got.size() != want.size()) return static_cast<int64_t>(std::min(got.size(), want.size())) / size;
  if (got.empty() || std::memcmp(got.data(), want.data(), got.size()) == 0) return -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != want[i]) return static_cast<int64_t>(i) / size;
  return -1;
}

// Element `e` of a view's bytes as hex of its width ("0x3f800000", bf16 "0x3f80").
std::string bitsOf(std::string_view bytes, int64_t e, int64_t size) {
  uint64_t u = 0;
  std::memcpy(&u, bytes.data() + e * size, static_cast<size_t>(size));
  return fmt::format("0x{:0{}x}", u, 2 * size);
}

}  // namespace

std::optional<std::string> prepareNative(const std::string& object, const std::string& isa,
                                         const std::vector<ParamInfo>& params, std::vector<std::string> initial,
                                         NativeKernel& out, const std::vector<int64_t>& workspaces) {
  auto session = jit::Session::load(object, isa);
  if (!session) return "cannot load the object: " + llvm::toString(session.takeError());
  out.session = std::shared_ptr<jit::Session>(std::move(*session));
  out.launch = out.session->launch();
  if (!out.launch) return "the object has no kiln_launch entry";
  out.params = params;
  out.initial = std::move(initial);
  out.expected.assign(params.size(), {});
  if (out.initial.size() != params.size()) return "internal: initial values for the wrong parameter count";
  const std::vector<runtime::ParamSpec> sig = signatureOf(params);
  out.buffers = std::make_unique<runtime::GuardedArgs>(sig);
  out.i64s.assign(params.size(), 0);
  out.f32s.assign(params.size(), 0.0f);
  out.pointers.assign(params.size(), nullptr);
  for (size_t i = 0; i < params.size(); ++i) {
    const ParamInfo& p = params[i];
    switch (p.kind) {
      case runtime::ParamKind::View:
        if (auto e = out.buffers->setViewBytes(i, std::as_bytes(std::span<const char>(out.initial[i])))) return e;
        out.pointers[i] = const_cast<std::byte*>(std::as_const(*out.buffers).viewBytes(i).data());
        break;
      case runtime::ParamKind::I64:
        out.i64s[i] = p.i64;
        out.pointers[i] = &out.i64s[i];
        break;
      case runtime::ParamKind::F32:
        out.f32s[i] = p.f32;
        out.pointers[i] = &out.f32s[i];
        break;
    }
  }
  out.workspaces.clear();
  for (int64_t n : workspaces) out.workspaces.emplace_back(static_cast<size_t>(n), 0.0f);
  for (std::vector<float>& w : out.workspaces) out.pointers.push_back(w.data());
  return std::nullopt;
}

void resetViews(NativeKernel& k) {
  for (size_t i = 0; i < k.params.size(); ++i)
    if (k.params[i].kind == runtime::ParamKind::View)
      (void)k.buffers->setViewBytes(i, std::as_bytes(std::span<const char>(k.initial[i])));
  for (std::vector<float>& w : k.workspaces) std::fill(w.begin(), w.end(), 0.0f);
}

std::optional<std::string> checkState(const NativeKernel& k) {
  std::string problems;
  auto add = [&](const std::string& s) { problems += (problems.empty() ? "" : "; ") + s; };
  for (size_t i = 0; i < k.params.size(); ++i) {
    const ParamInfo& p = k.params[i];
    if (p.kind == runtime::ParamKind::I64 && k.i64s[i] != p.i64) add("scalar '" + p.name + "' changed");
    if (p.kind == runtime::ParamKind::F32 && std::bit_cast<uint32_t>(k.f32s[i]) != std::bit_cast<uint32_t>(p.f32))
      add("scalar '" + p.name + "' changed");
    if (p.kind != runtime::ParamKind::View) continue;
    const std::span<const std::byte> bytes = std::as_const(*k.buffers).viewBytes(i);
    const std::string_view got(reinterpret_cast<const char*>(bytes.data()), bytes.size());
    const std::string_view want = p.output ? k.expected[i] : k.initial[i];
    const int64_t size = p.elemBytes();
    const int64_t bad = firstDifference(got, want, size);
    if (bad < 0) continue;
    if (got.size() != want.size())
      add(fmt::format("view '{}' has {} elements, expected {}", p.name, int64_t(got.size()) / size,
                      int64_t(want.size()) / size));
    else if (p.output)
      add(fmt::format("output '{}' differs from the capture at element {} ({} vs {})", p.name, bad,
                      bitsOf(got, bad, size), bitsOf(want, bad, size)));
    else
      add(fmt::format("input '{}' changed at element {} ({} vs {})", p.name, bad, bitsOf(got, bad, size),
                      bitsOf(want, bad, size)));
  }
  if (auto g = k.buffers->checkGuards()) add("guard bytes corrupted: " + *g);
  if (problems.empty()) return std::nullopt;
  return problems;
}

}  // namespace kiln::bench

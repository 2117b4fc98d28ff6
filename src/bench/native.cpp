#include "bench/native.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cstring>

namespace kiln::bench {
namespace {

// The first element whose bits differ, or -1.
int64_t firstDifference(std::span<const float> got, std::span<const float> want) {
  if (got.size() != want.size()) return static_cast<int64_t>(std::min(got.size(), want.size()));
  if (got.empty() || std::memcmp(got.data(), want.data(), got.size_bytes()) == 0) return -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (std::bit_cast<uint32_t>(got[i]) != std::bit_cast<uint32_t>(want[i])) return static_cast<int64_t>(i);
  return -1;
}

std::string bitsOf(float f) {
  return fmt::format("0x{:08x}", std::bit_cast<uint32_t>(f));
}

}  // namespace

std::optional<std::string> prepareNative(const std::string& object, const std::string& isa,
                                         const std::vector<ParamInfo>& params, std::vector<std::vector<float>> initial,
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
        if (auto e = out.buffers->setView(i, out.initial[i])) return e;
        out.pointers[i] = out.buffers->view(i).data();
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
    if (k.params[i].kind == runtime::ParamKind::View) {
      std::span<float> v = k.buffers->view(i);
      if (!v.empty()) std::memcpy(v.data(), k.initial[i].data(), v.size_bytes());
    }
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
    std::span<const float> got = std::as_const(*k.buffers).view(i);
    const std::vector<float>& want = p.output ? k.expected[i] : k.initial[i];
    const int64_t bad = firstDifference(got, want);
    if (bad < 0) continue;
    if (bad >= static_cast<int64_t>(got.size()) || bad >= static_cast<int64_t>(want.size()))
      add(fmt::format("view '{}' has {} elements, expected {}", p.name, got.size(), want.size()));
    else if (p.output)
      add(fmt::format("output '{}' differs from the capture at element {} ({} vs {})", p.name, bad, bitsOf(got[bad]),
                      bitsOf(want[bad])));
    else
      add(fmt::format("input '{}' changed at element {} ({} vs {})", p.name, bad, bitsOf(got[bad]), bitsOf(want[bad])));
  }
  if (auto g = k.buffers->checkGuards()) add("guard bytes corrupted: " + *g);
  if (problems.empty()) return std::nullopt;
  return problems;
}

}  // namespace kiln::bench

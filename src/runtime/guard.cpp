// Guarded buffers: [lead guard | payload | trail guard], the payload 64-byte aligned and the
// trail guard starting right at the payload's last byte + 1, so that a write one element
// past the end lands in it.
#include "runtime/guard.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace kiln::runtime {
namespace {

constexpr int64_t kAlign = 64;

int64_t roundUp(int64_t n, int64_t to) {
  return (n + to - 1) / to * to;
}

// The canary at byte `k` of an allocation: varies with the position, never a run of one
// value, so a stray store of zeros, ones or a copied guard byte is still seen.
uint8_t canary(int64_t k) {
  return static_cast<uint8_t>(0xA5 ^ (k * 131 + (k >> 8) * 29));
}

}  // namespace

void GuardedArgs::Free::operator()(std::byte* p) const {
  std::free(p);
}

GuardedArgs::GuardedArgs(std::span<const ParamSpec> params, int64_t guard_bytes)
    : params_(params.begin(), params.end()), buffers_(params.size()), args_(params.size()) {
  const int64_t guard = roundUp(std::max(guard_bytes, kGuardBytes), kAlign);
  for (size_t i = 0; i < params_.size(); ++i) {
    const ParamSpec& p = params_[i];
    if (p.kind == ParamKind::I64) args_[i] = Arg::i64(0);
    if (p.kind == ParamKind::F32) args_[i] = Arg::f32(0.0f);
    if (p.kind != ParamKind::View) continue;
    Buffer& b = buffers_[i];
    b.lead = guard;
    b.payload = p.byte_size;
    b.total = roundUp(2 * guard + p.byte_size, kAlign);
    b.memory.reset(static_cast<std::byte*>(std::aligned_alloc(kAlign, static_cast<size_t>(b.total))));
    if (!b.memory) {
      std::fprintf(stderr, "%s:%d: out of memory allocating %lld guarded bytes\n", __FILE__, __LINE__,
                   static_cast<long long>(b.total));
      std::abort();
    }
    auto* bytes = reinterpret_cast<uint8_t*>(b.memory.get());
    for (int64_t k = 0; k < b.total; ++k) bytes[k] = canary(k);
    std::memset(bytes + b.lead, 0, static_cast<size_t>(b.payload));
    args_[i] = Arg::view(bytes + b.lead, b.payload);
  }
}

std::optional<std::string> GuardedArgs::setView(size_t i, std::span<const float> data) {
  if (i < params_.size() && params_[i].kind == ParamKind::View && params_[i].elem != ViewElem::F32)
    return "parameter '" + params_[i].name + "': f32 data for view " + describe(params_[i]);
  return setViewBytes(i, std::as_bytes(data));
}

std::optional<std::string> GuardedArgs::setViewBytes(size_t i, std::span<const std::byte> bytes) {
  if (i >= params_.size()) return "no parameter #" + std::to_string(i);
  const ParamSpec& p = params_[i];
  if (p.kind != ParamKind::View) return "parameter '" + p.name + "' is not a view";
  if (static_cast<int64_t>(bytes.size()) != p.byte_size)
    return "parameter '" + p.name + "': data has " + std::to_string(bytes.size()) + " bytes, view " + describe(p) +
           " needs " + std::to_string(p.byte_size);
  if (!bytes.empty()) std::memcpy(args_[i].data, bytes.data(), bytes.size());
  return std::nullopt;
}

std::optional<std::string> GuardedArgs::setI64(size_t i, int64_t value) {
  if (i >= params_.size()) return "no parameter #" + std::to_string(i);
  if (params_[i].kind != ParamKind::I64) return "parameter '" + params_[i].name + "' is not an i64 scalar";
  args_[i].i64_value = value;
  return std::nullopt;
}

std::optional<std::string> GuardedArgs::setF32(size_t i, float value) {
  if (i >= params_.size()) return "no parameter #" + std::to_string(i);
  if (params_[i].kind != ParamKind::F32) return "parameter '" + params_[i].name + "' is not an f32 scalar";
  args_[i].f32_value = value;
  return std::nullopt;
}

std::span<float> GuardedArgs::view(size_t i) {
  if (i >= params_.size() || params_[i].kind != ParamKind::View) return {};
  return {static_cast<float*>(args_[i].data), static_cast<size_t>(buffers_[i].payload / sizeof(float))};
}

std::span<const float> GuardedArgs::view(size_t i) const {
  return const_cast<GuardedArgs*>(this)->view(i);
}

std::span<const std::byte> GuardedArgs::viewBytes(size_t i) const {
  if (i >= params_.size() || params_[i].kind != ParamKind::View) return {};
  return {static_cast<const std::byte*>(args_[i].data), static_cast<size_t>(buffers_[i].payload)};
}

std::optional<std::string> GuardedArgs::checkGuards() const {
  std::string report;
  auto note = [&](size_t i, const char* side, int64_t changed, const std::string& where) {
    if (!report.empty()) report += "; ";
    report += std::string("guard zone ") + side + " parameter '" + params_[i].name + "' (#" + std::to_string(i) +
              ") corrupted: " + std::to_string(changed) + " bytes changed, " + where;
  };
  for (size_t i = 0; i < buffers_.size(); ++i) {
    const Buffer& b = buffers_[i];
    if (!b.memory) continue;
    const auto* bytes = reinterpret_cast<const uint8_t*>(b.memory.get());
    // Before the view: report the changed byte nearest to the payload.
    int64_t changed = 0, nearest = 0;
    for (int64_t k = 0; k < b.lead; ++k)
      if (bytes[k] != canary(k)) ++changed, nearest = b.lead - k;
    if (changed)
      note(i, "before", changed, "the nearest at byte offset -" + std::to_string(nearest) + " from its start");
    // After the view: offsets count from the first byte past its end.
    changed = 0;
    int64_t first = -1;
    for (int64_t k = b.lead + b.payload; k < b.total; ++k)
      if (bytes[k] != canary(k)) {
        ++changed;
        if (first < 0) first = k - (b.lead + b.payload);
      }
    if (changed) note(i, "after", changed, "the first at byte offset " + std::to_string(first) + " past its end");
  }
  if (report.empty()) return std::nullopt;
  return report;
}

}  // namespace kiln::runtime

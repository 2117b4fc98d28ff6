// makeInputs: deterministic kernel inputs (the generator is specified in data.h).
#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdlib>

#include "host/data.h"
#include "host/storage.h"

#include <cstring>

namespace kiln::host {
namespace {

uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t state) : state_(state) {}
  uint64_t next() {
    state_ += 0x9E3779B97F4A7C15ull;
    return mix(state_);
  }
  // Uniform in [-1, 1) on a 2^-23 grid.
  float draw() {
    int64_t u = static_cast<int64_t>(next() >> 40);
    return static_cast<float>(u - (int64_t{1} << 23)) * 0x1p-23f;
  }

 private:
  uint64_t state_;
};

std::optional<int64_t> parseI64(const std::string& s) {
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (b != e && *b == '+') ++b;
  int64_t v = 0;
  auto [p, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || p != e || b == e) return std::nullopt;
  return v;
}

std::optional<float> parseF32(const std::string& s) {
  if (s.empty() || s.front() == ' ' || s.front() == '\t') return std::nullopt;
  char* end = nullptr;
  errno = 0;
  float v = std::strtof(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;  // out-of-range decimals round to +-inf / 0 as strtof does
}

}  // namespace

std::string integerBytes(const std::vector<int64_t>& ints, bool int32) {
  std::string bytes(ints.size() * (int32 ? 4 : 8), '\0');
  for (size_t i = 0; i < ints.size(); ++i) {
    if (int32) {
      const auto v = static_cast<int32_t>(ints[i]);
      std::memcpy(bytes.data() + 4 * i, &v, 4);
    } else {
      std::memcpy(bytes.data() + 8 * i, &ints[i], 8);
    }
  }
  return bytes;
}

void integersFromBytes(const void* bytes, size_t size, bool int32, std::vector<int64_t>& out) {
  const auto* p = static_cast<const char*>(bytes);
  out.assign(size / (int32 ? 4 : 8), 0);
  for (size_t i = 0; i < out.size(); ++i) {
    if (int32) {
      int32_t v = 0;
      std::memcpy(&v, p + 4 * i, 4);
      out[i] = v;
    } else {
      std::memcpy(&out[i], p + 8 * i, 8);
    }
  }
}

std::optional<std::string> makeInputs(const ir::Kernel& kernel, uint64_t seed,
                                      const std::map<std::string, std::string>& overrides,
                                      std::vector<ParamData>& out) {
  const size_t n = kernel.params.size();
  out.assign(n, ParamData{});
  std::vector<bool> loaded(n, false);
  for (const ir::Value* v : kernel.inputs()) loaded[v->index] = true;
  for (size_t i = 0; i < n; ++i) {
    const ir::Type& t = kernel.params[i]->type;
    SplitMix64 rng(seed ^ mix(static_cast<uint64_t>(i) + 1));
    const std::optional<ir::IntRange> range = kernel.params[i]->range;
    // A value in the stated range: lo + next() % (hi - lo + 1) (the span as uint64_t, wrapping).
    auto ranged = [&] {
      const uint64_t span = static_cast<uint64_t>(range->hi) - static_cast<uint64_t>(range->lo) + 1;
      return static_cast<int64_t>(static_cast<uint64_t>(range->lo) + (span == 0 ? rng.next() : rng.next() % span));
    };
    if (t.isView() && ir::isIntegerStorage(t.elem)) {
      out[i].ints.assign(static_cast<size_t>(t.numElements()), range && !range->contains(0) ? range->lo : 0);
      if (loaded[i]) {
        for (int64_t& x : out[i].ints) x = range ? ranged() : static_cast<int64_t>(rng.next() >> 58) - 8;
        // An ascending range (cu_seqlens): the same draws in ascending order.
        if (range && range->ascending) std::sort(out[i].ints.begin(), out[i].ints.end());
      }
    } else if (t.isView()) {
      out[i].data.assign(static_cast<size_t>(t.numElements()), 0.0f);
      if (loaded[i])
        for (float& x : out[i].data) x = roundToStorage(t.elem, rng.draw());  // a 16-bit view: rounded to its type
    } else if (t.elem == ir::Elem::F32) {
      out[i].f32 = rng.draw();
    } else if (range) {
      out[i].i64 = ranged();
    }
  }
  for (const auto& [key, text] : overrides) {
    std::string name = !key.empty() && key.front() == '%' ? key.substr(1) : key;
    const ir::Value* param = nullptr;
    for (const ir::Value* p : kernel.params)
      if (p->name == name) param = p;
    if (param && param->type.isView() && ir::isIntegerStorage(param->type.elem)) {
      // An integer view: its elements, comma-separated, each within the stated range.
      std::vector<int64_t> values;
      size_t at = 0;
      while (at <= text.size()) {
        const size_t comma = std::min(text.find(',', at), text.size());
        auto v = parseI64(text.substr(at, comma - at));
        if (!v) return fmt::format("override '{}': '{}' is not an integer", key, text.substr(at, comma - at));
        if (param->range && !param->range->contains(*v))
          return fmt::format("override '{}': {} is outside %{}'s range [{}, {}]", key, *v, name, param->range->lo,
                             param->range->hi);
        if (param->range && param->range->ascending && !values.empty() && *v < values.back())
          return fmt::format("override '{}': {} follows {}, but %{}'s stated range is ascending", key, *v,
                             values.back(), name);
        values.push_back(*v);
        at = comma + 1;
      }
      if (static_cast<int64_t>(values.size()) != param->type.numElements())
        return fmt::format("override '{}': {} integers for %{}, which has {} elements", key, values.size(), name,
                           param->type.numElements());
      out[param->index].ints = std::move(values);
      continue;
    }
    if (!param || param->type.isView())
      return fmt::format("override '{}': @{} has no scalar parameter %{}", key, kernel.name, name);
    ParamData& d = out[param->index];
    if (param->type.elem == ir::Elem::I64) {
      auto v = parseI64(text);
      if (!v) return fmt::format("override '{}': '{}' is not an i64 integer", key, text);
      d.i64 = *v;
    } else {
      auto v = parseF32(text);
      if (!v) return fmt::format("override '{}': '{}' is not an f32 number", key, text);
      d.f32 = *v;
    }
  }
  return std::nullopt;
}

}  // namespace kiln::host

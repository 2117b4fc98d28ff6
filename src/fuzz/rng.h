// Rng: the fuzzer's own deterministic PRNG (SplitMix64), so a seed means the same program and
// the same knob point on every machine and standard library.
// Expects: nothing. Guarantees: next() is SplitMix64 exactly (docs/fuzz.md): state +=
// 0x9E3779B97F4A7C15, then the mix z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9,
// z = (z ^ (z >> 27)) * 0x94D049BB133111EB, z ^ (z >> 31). below(n) is next() % n (the bias
// is irrelevant here and keeps the definition one line).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace kiln::fuzz {

class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  // 0 .. n-1 (n >= 1).
  int64_t below(int64_t n) { return static_cast<int64_t>(next() % static_cast<uint64_t>(n)); }
  // lo .. hi inclusive.
  int64_t range(int64_t lo, int64_t hi) { return lo + below(hi - lo + 1); }
  // True with probability num/den.
  bool chance(int64_t num, int64_t den) { return below(den) < num; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[static_cast<size_t>(below(static_cast<int64_t>(v.size())))];
  }
  template <class T>
  T pick(std::initializer_list<T> v) {
    return *(v.begin() + below(static_cast<int64_t>(v.size())));
  }

 private:
  uint64_t state_;
};

}  // namespace kiln::fuzz

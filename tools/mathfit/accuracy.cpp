// accuracy: exhaustive accuracy run of Kiln's f32 math (src/math) over all 2^32 float bit
// patterns, against the double-precision libm functions. Offline tool, not part of the build:
//   g++ -O2 -std=c++20 -ffp-contract=off -Isrc tools/mathfit/accuracy.cpp src/math/kmath.cpp \
//       -o /tmp/accuracy -lpthread && /tmp/accuracy exp   (or log, tanh, erf)
// Prints, per function: the largest distance in floats between the result and the double
// reference rounded to float; the largest error in units of the last place of the exact
// (double) value; and the number of class mismatches (NaN / inf / finite).
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <thread>
#include <vector>

#include "math/kmath.h"

namespace {

int64_t ordinal(float f) {
  int32_t i = std::bit_cast<int32_t>(f);
  return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : i;
}

struct Result {
  int64_t max_ulp = 0;
  float max_ulp_at = 0;
  double max_exact_ulp = 0;
  float max_exact_ulp_at = 0;
  int64_t class_mismatches = 0;
};

template <class Fn, class Ref>
Result run(Fn fn, Ref ref, uint64_t lo, uint64_t hi) {
  Result r;
  for (uint64_t u = lo; u < hi; ++u) {
    const float x = std::bit_cast<float>(static_cast<uint32_t>(u));
    const float got = fn(x);
    const double exact = ref(static_cast<double>(x));
    const float want = static_cast<float>(exact);
    if (!std::isfinite(want) || !std::isfinite(got)) {
      bool same = std::isnan(want) ? std::isnan(got) : got == want;
      if (!same) ++r.class_mismatches;
      continue;
    }
    const int64_t d = std::llabs(ordinal(got) - ordinal(want));
    if (d > r.max_ulp) r.max_ulp = d, r.max_ulp_at = x;
    int e = 0;
    std::frexp(want == 0 ? exact : static_cast<double>(want), &e);
    const double ulp = std::ldexp(1.0, std::max(e - 24, -149));
    const double err = std::fabs(static_cast<double>(got) - exact) / ulp;
    if (err > r.max_exact_ulp) r.max_exact_ulp = err, r.max_exact_ulp_at = x;
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  const char* name = argc > 1 ? argv[1] : "exp";
  float (*fn)(float) = kiln::math::exp;
  double (*ref)(double) = [](double x) { return std::exp(x); };
  if (!std::strcmp(name, "log")) fn = kiln::math::log, ref = [](double x) { return std::log(x); };
  if (!std::strcmp(name, "tanh")) fn = kiln::math::tanh, ref = [](double x) { return std::tanh(x); };
  if (!std::strcmp(name, "erf")) fn = kiln::math::erf, ref = [](double x) { return std::erf(x); };
  const unsigned threads = std::max(1u, std::thread::hardware_concurrency());
  const uint64_t n = uint64_t{1} << 32;
  std::vector<Result> parts(threads);
  std::vector<std::thread> pool;
  for (unsigned t = 0; t < threads; ++t)
    pool.emplace_back(
        [&, t] { parts[t] = run(fn, ref, n / threads * t, t + 1 == threads ? n : n / threads * (t + 1)); });
  for (auto& th : pool) th.join();
  Result all;
  for (const Result& r : parts) {
    if (r.max_ulp > all.max_ulp) all.max_ulp = r.max_ulp, all.max_ulp_at = r.max_ulp_at;
    if (r.max_exact_ulp > all.max_exact_ulp)
      all.max_exact_ulp = r.max_exact_ulp, all.max_exact_ulp_at = r.max_exact_ulp_at;
    all.class_mismatches += r.class_mismatches;
  }
  std::printf(
      "%s: max %lld ulp from the rounded reference (at %a); max %.3f ulp of the exact value (at %a); "
      "%lld class mismatches\n",
      name, static_cast<long long>(all.max_ulp), all.max_ulp_at, all.max_exact_ulp, all.max_exact_ulp_at,
      static_cast<long long>(all.class_mismatches));
  return 0;
}

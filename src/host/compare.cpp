// Output comparison against the FP64 oracle and bit for bit, and buffer statistics.
#include <cmath>
#include <cstring>
#include <limits>

#include "host/data.h"
#include "host/storage.h"

namespace kiln::host {

CompareResult compareF64(const std::vector<float>& got, const std::vector<double>& ref, double atol, double rtol) {
  return compareF64(got, ref, atol, rtol, ir::Elem::F32);
}

namespace {

// One unit in the last place of a 16-bit type at |x| (subnormal spacing below its normals).
double storageUlp(ir::Elem storage, double x) {
  const int mant = storage == ir::Elem::F16 ? 10 : 7, emin = storage == ir::Elem::F16 ? -14 : -126;
  int e = 0;
  std::frexp(x, &e);  // |x| in [2^(e-1), 2^e)
  return std::ldexp(1.0, std::max(e - 1, emin) - mant);
}

}  // namespace

CompareResult compareF64(const std::vector<float>& got, const std::vector<double>& ref, double atol, double rtol,
                         ir::Elem storage, const std::vector<double>* allowance) {
  const bool half = ir::isHalfStorage(storage);
  CompareResult r;
  const size_t n = std::min(got.size(), ref.size());
  for (size_t i = 0; i < n; ++i) {
    const double g = got[i];
    const double e = ref[i];
    bool ok;
    if (!std::isfinite(e)) {
      ok = std::isnan(e) ? std::isnan(g) : g == e;
    } else if (!std::isfinite(g)) {
      ok = half && got[i] == roundToStorage(storage, static_cast<float>(e));  // an overflow to inf
    } else {
      const double abs = std::fabs(g - e);
      const double extra = allowance && i < allowance->size() ? (*allowance)[i] : 0.0;
      ok = abs <= atol + rtol * std::fabs(e) + extra || (half && abs <= storageUlp(storage, e));
      r.max_abs_err = std::max(r.max_abs_err, abs);
      if (e != 0.0) r.max_rel_err = std::max(r.max_rel_err, abs / std::fabs(e));
    }
    if (!ok) {
      ++r.failing;
      if (r.pass) r.first_bad = static_cast<int64_t>(i);
      r.pass = false;
    }
  }
  if (got.size() != ref.size()) {
    ++r.failing;
    if (r.pass) r.first_bad = static_cast<int64_t>(n);
    r.pass = false;
  }
  return r;
}

namespace {

// Element-wise equality under `same`; a size difference counts as one mismatch at the end.
template <class T, class Same>
BitexactResult compareElements(const std::vector<T>& a, const std::vector<T>& b, Same same) {
  BitexactResult r;
  const size_t n = std::min(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    if (same(a[i], b[i])) continue;
    if (r.first_bad < 0) r.first_bad = static_cast<int64_t>(i);
    ++r.mismatches;
  }
  if (a.size() != b.size()) {
    if (r.first_bad < 0) r.first_bad = static_cast<int64_t>(n);
    ++r.mismatches;
  }
  r.pass = r.mismatches == 0;
  return r;
}

}  // namespace

BitexactResult compareInts(const std::vector<int64_t>& a, const std::vector<int64_t>& b) {
  return compareElements(a, b, [](int64_t x, int64_t y) { return x == y; });
}

BitexactResult compareBitexact(const std::vector<float>& a, const std::vector<float>& b) {
  return compareElements(a, b, [](const float& x, const float& y) {
    return std::memcmp(&x, &y, sizeof(float)) == 0 || (std::isnan(x) && std::isnan(y));
  });
}

Stats stats(const std::vector<float>& values) {
  Stats s;
  s.count = static_cast<int64_t>(values.size());
  const double nan = std::numeric_limits<double>::quiet_NaN();
  if (values.empty()) {
    s.min = s.max = s.mean = nan;
    return s;
  }
  double lo = values[0], hi = values[0], sum = 0.0;
  bool anyNaN = false;
  for (float v : values) {
    if (std::isnan(v)) {
      anyNaN = true;
      break;
    }
    lo = std::min(lo, static_cast<double>(v));
    hi = std::max(hi, static_cast<double>(v));
    sum += v;
  }
  if (anyNaN) {
    s.min = s.max = s.mean = nan;
    return s;
  }
  s.min = lo;
  s.max = hi;
  s.mean = sum / static_cast<double>(values.size());
  return s;
}

}  // namespace kiln::host

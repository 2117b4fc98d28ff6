#include "bench/statistics.h"

#include <algorithm>
#include <cstdint>

namespace kiln::bench {

std::optional<double> median(std::vector<double> values) {
  if (values.empty()) return std::nullopt;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n % 2 == 1) return values[n / 2];
  return (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

double sampleMicros(int64_t batch_ns, int64_t reps) {
  return static_cast<double>(batch_ns) / 1000.0 / static_cast<double>(reps);
}

std::vector<double> pairedRatios(const std::vector<double>& m) {
  std::vector<double> out;
  for (size_t c = 0; c + 4 <= m.size(); c += 4) {
    out.push_back(m[c + 1] / m[c + 0]);
    out.push_back(m[c + 2] / m[c + 3]);
  }
  return out;
}

std::optional<Range> range(const std::vector<double>& values) {
  auto mid = median(values);
  if (!mid) return std::nullopt;
  auto [lo, hi] = std::minmax_element(values.begin(), values.end());
  return Range{*mid, *lo, *hi};
}

}  // namespace kiln::bench

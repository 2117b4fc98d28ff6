// The protocol's statistics, in one place so that the bench and the audit compute them by the
// same steps (the audit re-derives every number from samples.json with these functions and
// compares; it never reads a statistic from results.json).
// Time of an arm = median of its visit medians. Ratio B/A = median of the paired ratios: in
// each A,B,B,A cycle, B(visit 2) / A(visit 1) and B(visit 3) / A(visit 4). Never a division
// of two medians.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace kiln::bench {

// The median: the middle value, or the mean of the two middle values of an even count.
// nullopt for an empty list.
std::optional<double> median(std::vector<double> values);

// A sample: the batch's wall time per launch, in microseconds.
double sampleMicros(int64_t batch_ns, int64_t reps);

// The paired ratios of one case, from the visit medians in visit order (4 per cycle, positions
// A,B,B,A); only complete cycles count.
std::vector<double> pairedRatios(const std::vector<double>& visit_medians_in_order);

struct Range {
  double median = 0.0;
  double min = 0.0;
  double max = 0.0;
};
std::optional<Range> range(const std::vector<double>& values);

}  // namespace kiln::bench

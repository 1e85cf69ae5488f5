// Small statistics the planner and its tools (tandem-profile, tandem-validate) share.
// Thread rule: pure functions.
#pragma once

#include <algorithm>
#include <vector>

namespace tandem::planner {

// The middle value (the mean of the middle two for an even count); 0 when empty.
inline double Median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace tandem::planner

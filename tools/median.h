// The median of a sample, for the benchmarks' repeated timings.
#ifndef SPLITSPEC_TOOLS_MEDIAN_H_
#define SPLITSPEC_TOOLS_MEDIAN_H_

#include <algorithm>
#include <vector>

namespace splitspec::tools {

// The middle value, or the mean of the two middle ones; 0 for an empty sample.
inline double Median(std::vector<double> values) {
  if (values.empty()) return 0.0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_MEDIAN_H_

#include "tests/testing/sequence_law.h"

#include <algorithm>
#include <cmath>

namespace splitspec::spec::testing {

std::map<std::vector<int32_t>, double> ExactSequenceLaw(
    int length,
    const std::function<std::vector<double>(const std::vector<int32_t>& generated)>& next) {
  std::map<std::vector<int32_t>, double> law;
  std::vector<int32_t> generated;
  const std::function<void(double)> expand = [&](double probability) {
    if (static_cast<int>(generated.size()) == length) {
      law[generated] = probability;
      return;
    }
    const std::vector<double> p = next(generated);
    for (size_t v = 0; v < p.size(); ++v) {
      if (p[v] == 0.0) continue;
      generated.push_back(static_cast<int32_t>(v));
      expand(probability * p[v]);
      generated.pop_back();
    }
  };
  expand(1.0);
  return law;
}

std::vector<int32_t> GreedySequence(
    int length,
    const std::function<std::vector<float>(const std::vector<int32_t>& generated)>& next) {
  std::vector<int32_t> generated;
  for (int i = 0; i < length; ++i) {
    const std::vector<float> p = next(generated);
    generated.push_back(static_cast<int32_t>(std::max_element(p.begin(), p.end()) - p.begin()));
  }
  return generated;
}

std::vector<double> TopKSoftmax(const std::vector<double>& support,
                                const std::vector<double>& weights, const SamplingParams& params) {
  std::vector<double> sorted = support;
  std::sort(sorted.rbegin(), sorted.rend());
  const double cutoff = sorted[params.top_k - 1];
  const double max = *std::max_element(weights.begin(), weights.end());
  std::vector<double> p(support.size(), 0.0);
  double total = 0.0;
  for (size_t v = 0; v < p.size(); ++v) {
    if (support[v] >= cutoff) total += p[v] = std::exp((weights[v] - max) / params.temperature);
  }
  for (double& x : p) x /= total;
  return p;
}

}  // namespace splitspec::spec::testing

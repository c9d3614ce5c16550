#include "tests/testing/chi_square.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace splitspec::spec::testing {
namespace {

// Regularized lower incomplete gamma P(a, x) by its power series (x < a + 1).
double LowerGammaSeries(double a, double x) {
  double term = 1.0 / a;
  double sum = term;
  for (int n = 1; n < 10000; ++n) {
    term *= x / (a + n);
    sum += term;
    if (std::fabs(term) < std::fabs(sum) * 1e-16) break;
  }
  return sum * std::exp(-x + a * std::log(x) - std::lgamma(a));
}

// Regularized upper incomplete gamma Q(a, x) by its continued fraction (x >= a + 1),
// evaluated with the modified Lentz method.
double UpperGammaFraction(double a, double x) {
  constexpr double kTiny = 1e-300;
  double b = x + 1.0 - a;
  double c = 1.0 / kTiny;
  double d = 1.0 / b;
  double h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(-x + a * std::log(x) - std::lgamma(a)) * h;
}

}  // namespace

double ChiSquareUpperTail(double x, int dof) {
  if (!(x > 0.0)) return 1.0;
  if (std::isinf(x)) return 0.0;
  const double a = dof / 2.0, half = x / 2.0;
  return half < a + 1.0 ? 1.0 - LowerGammaSeries(a, half) : UpperGammaFraction(a, half);
}

ChiSquareResult ChiSquareTest(const std::vector<int64_t>& counts,
                              const std::vector<double>& expected) {
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  ChiSquareResult result;
  double pooled_expected = 0.0, pooled_observed = 0.0;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    const double e = expected[i] * static_cast<double>(total);
    if (expected[i] <= 0.0) {
      if (counts[i] > 0) return {std::numeric_limits<double>::infinity(), 1, 0.0};
      continue;
    }
    if (e < 5.0) {
      pooled_expected += e;
      pooled_observed += counts[i];
      continue;
    }
    result.statistic += (counts[i] - e) * (counts[i] - e) / e;
    ++cells;
  }
  if (pooled_expected >= 5.0) {
    result.statistic +=
        (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++cells;
  }
  result.dof = cells > 1 ? cells - 1 : 1;
  result.p_value = cells > 1 ? ChiSquareUpperTail(result.statistic, result.dof) : 1.0;
  return result;
}

ChiSquareResult ChiSquareTestAgainstLaw(const std::map<std::vector<int32_t>, double>& law,
                                        const std::map<std::vector<int32_t>, int64_t>& seen) {
  std::vector<int64_t> counts;
  std::vector<double> expected;
  int64_t inside = 0, total = 0;
  for (const auto& [sequence, p] : law) {
    const auto it = seen.find(sequence);
    counts.push_back(it == seen.end() ? 0 : it->second);
    expected.push_back(p);
    inside += counts.back();
  }
  for (const auto& [sequence, n] : seen) total += n;
  if (total > inside) {  // continuations the law gives probability 0
    counts.push_back(total - inside);
    expected.push_back(0.0);
  }
  return ChiSquareTest(counts, expected);
}

void PrintChiSquare(const std::string& name, const ChiSquareResult& result) {
  std::printf("chi2[%s]: statistic=%.3f dof=%d p=%.4g\n", name.c_str(), result.statistic,
              result.dof, result.p_value);
  std::fflush(stdout);
}

bool PassesOneOfTwoDraws(const std::function<bool(int draw)>& draw) {
  if (draw(0)) return true;
  std::printf("two-stage chi-square: the first draw failed; drawing an independent second\n");
  std::fflush(stdout);
  return draw(1);
}

}  // namespace splitspec::spec::testing

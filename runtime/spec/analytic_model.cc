#include "runtime/spec/analytic_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace splitspec::spec {

absl::Status ValidateModelInputs(double alpha, double cost_ratio) {
  if (!(alpha >= 0.0 && alpha <= 1.0)) {
    return absl::InvalidArgumentError(absl::StrCat("alpha must be in [0, 1], got ", alpha));
  }
  if (!(cost_ratio > 0.0) || !std::isfinite(cost_ratio)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cost ratio must be finite and > 0, got ", cost_ratio));
  }
  return absl::OkStatus();
}

double ExpectedTokensPerStep(double alpha, int k) {
  if (alpha >= 1.0) return k + 1.0;
  return (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
}

double StepCost(double cost_ratio, int k, Schedule schedule) {
  const double draft = k / cost_ratio;
  return schedule == Schedule::kSequential ? 1.0 + draft : std::max(1.0, draft);
}

double Speedup(double alpha, double cost_ratio, int k, Schedule schedule) {
  return ExpectedTokensPerStep(alpha, k) / StepCost(cost_ratio, k, schedule);
}

PlanChoice OptimalK(double alpha, double cost_ratio, Schedule schedule, int min_k, int max_k) {
  PlanChoice best;
  for (int k = min_k; k <= max_k; ++k) {
    const double s = Speedup(alpha, cost_ratio, k, schedule);
    if (k == min_k || s > best.speedup) best = {k, ExpectedTokensPerStep(alpha, k), s};
  }
  return best;
}

double SpeedupWithVerifyCost(double alpha, double cost_ratio, int k, Schedule schedule,
                             double verify_slope) {
  const double verify = 1.0 + verify_slope * k;
  const double draft = k / cost_ratio;
  const double cost = schedule == Schedule::kSequential ? verify + draft : std::max(verify, draft);
  return ExpectedTokensPerStep(alpha, k) / cost;
}

PlanChoice OptimalKWithVerifyCost(double alpha, double cost_ratio, Schedule schedule,
                                  double verify_slope, int min_k, int max_k) {
  PlanChoice best;
  for (int k = min_k; k <= max_k; ++k) {
    const double s = SpeedupWithVerifyCost(alpha, cost_ratio, k, schedule, verify_slope);
    if (k == min_k || s > best.speedup) best = {k, ExpectedTokensPerStep(alpha, k), s};
  }
  return best;
}

}  // namespace splitspec::spec

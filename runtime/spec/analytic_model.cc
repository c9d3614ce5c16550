#include "runtime/spec/analytic_model.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

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

absl::Status ValidatePipelineInputs(const PipelineModelInputs& in) {
  RETURN_IF_ERROR(ValidateModelInputs(in.alpha, in.cost_ratio));
  if (in.k < 1) return absl::InvalidArgumentError(absl::StrCat("k must be >= 1, got ", in.k));
  if (!(in.verify_slope >= 0.0) || !std::isfinite(in.verify_slope)) {
    return absl::InvalidArgumentError(
        absl::StrCat("verify slope must be finite and >= 0, got ", in.verify_slope));
  }
  if (!(in.cache_hit_rate >= 0.0 && in.cache_hit_rate <= 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cache hit rate must be in [0, 1], got ", in.cache_hit_rate));
  }
  if (!(in.result_wait >= 0.0) || !std::isfinite(in.result_wait)) {
    return absl::InvalidArgumentError(
        absl::StrCat("result wait must be finite and >= 0, got ", in.result_wait));
  }
  if (!(in.block_overhead >= 0.0) || !std::isfinite(in.block_overhead)) {
    return absl::InvalidArgumentError(
        absl::StrCat("block overhead must be finite and >= 0, got ", in.block_overhead));
  }
  return absl::OkStatus();
}

namespace {

// T_verify of a forward that feeds `fed` tokens, in units of T_target.
double VerifyCost(const PipelineModelInputs& in, int fed) {
  return 1.0 + in.verify_slope * (fed - 1);
}

double DraftCost(const PipelineModelInputs& in) { return in.k / in.cost_ratio; }

// The draft is hidden when a block is drafted before the queued one is decided.
bool DraftHidden(const PipelineModelInputs& in) { return DraftCost(in) <= VerifyCost(in, in.k); }

}  // namespace

double PipelineTokensPerBlock(const PipelineModelInputs& in, PipelineMode mode) {
  const double tokens = ExpectedTokensPerStep(in.alpha, in.k);
  if (mode != PipelineMode::kOverlapped || !DraftHidden(in)) return tokens;
  return tokens - std::pow(in.alpha, in.k);  // the forfeited bonus
}

double PipelineBlockCost(const PipelineModelInputs& in, PipelineMode mode) {
  const double draft = DraftCost(in);
  switch (mode) {
    case PipelineMode::kSequential:
      return draft + VerifyCost(in, in.k + 1) + in.block_overhead;
    case PipelineMode::kOverlappedCache: {
      // A hit was pre-drafted during the verification; what did not fit is drafted after.
      const double verify = VerifyCost(in, in.k + 1);
      return verify + in.result_wait + in.block_overhead + (1.0 - in.cache_hit_rate) * draft +
             in.cache_hit_rate * std::max(0.0, draft - verify);
    }
    case PipelineMode::kOverlapped:
      break;
  }
  if (!DraftHidden(in)) return 2.0 * draft + in.block_overhead;
  const double all_accepted = std::pow(in.alpha, in.k);
  return all_accepted * VerifyCost(in, in.k) +
         (1.0 - all_accepted) * (VerifyCost(in, in.k + 1) + draft + in.block_overhead);
}

double PipelineSpeedup(const PipelineModelInputs& in, PipelineMode mode) {
  return PipelineTokensPerBlock(in, mode) / PipelineBlockCost(in, mode);
}

PlanChoice PipelineOptimalK(PipelineModelInputs in, PipelineMode mode, int min_k, int max_k) {
  PlanChoice best;
  for (int k = min_k; k <= max_k; ++k) {
    in.k = k;
    const double s = PipelineSpeedup(in, mode);
    if (k == min_k || s > best.speedup) best = {k, PipelineTokensPerBlock(in, mode), s};
  }
  return best;
}

double RunSpeedupWithPrefill(double steady_speedup, int tokens, double prefill_steps) {
  return (prefill_steps + tokens) / (prefill_steps + tokens / steady_speedup);
}

}  // namespace splitspec::spec

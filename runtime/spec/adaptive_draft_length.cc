#include "runtime/spec/adaptive_draft_length.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::spec {

absl::Status AdaptiveDraftLengthConfig::Validate() const {
  auto bad = [](const char* field, double value, const char* want) {
    return absl::InvalidArgumentError(
        absl::StrCat("adaptive k: ", field, " must be ", want, ", got ", value));
  };
  if (min_k < 1) return bad("min_k", min_k, ">= 1");
  if (max_k < min_k || max_k > kPlanMaxK) return bad("max_k", max_k, "in [min_k, 20]");
  if (!(prior_alpha >= 0.0 && prior_alpha <= 1.0))
    return bad("prior_alpha", prior_alpha, "in [0, 1]");
  if (!(prior_weight > 0.0) || !std::isfinite(prior_weight))
    return bad("prior_weight", prior_weight, "> 0");
  if (!(decay > 0.0 && decay < 1.0)) return bad("decay", decay, "in (0, 1)");
  if (!(initial_cost_ratio > 0.0) || !std::isfinite(initial_cost_ratio)) {
    return bad("initial_cost_ratio", initial_cost_ratio, "> 0");
  }
  if (!(min_speedup > 0.0) || !std::isfinite(min_speedup))
    return bad("min_speedup", min_speedup, "> 0");
  if (probe_interval < 1) return bad("probe_interval", probe_interval, ">= 1");
  if (!(verify_cost_slope >= 0.0) || !std::isfinite(verify_cost_slope)) {
    return bad("verify_cost_slope", verify_cost_slope, ">= 0");
  }
  return absl::OkStatus();
}

AdaptiveDraftLength::AdaptiveDraftLength(const AdaptiveDraftLengthConfig& config,
                                         std::shared_ptr<VerifyCostCurve> curve)
    : config_(config),
      curve_(curve != nullptr
                 ? std::move(curve)
                 : std::make_shared<VerifyCostCurve>(config.verify_cost_slope, config.decay)),
      accepted_(config.prior_weight * config.prior_alpha),
      verified_(config.prior_weight) {}

double AdaptiveDraftLength::EstimatedAlpha() const { return accepted_ / verified_; }

double AdaptiveDraftLength::EstimatedCostRatio() const {
  return have_costs_ ? target_seconds_ / draft_seconds_ : config_.initial_cost_ratio;
}

int AdaptiveDraftLength::NextK() const {
  const PlanChoice best =
      OptimalKWithVerifyCost(EstimatedAlpha(), EstimatedCostRatio(), config_.schedule,
                             curve_->Slope(), config_.min_k, config_.max_k);
  if (best.speedup > config_.min_speedup) return best.k;
  return target_only_steps_ >= config_.probe_interval ? config_.min_k : 0;
}

void AdaptiveDraftLength::RecordBlock(int drafted, int accepted, bool rejected) {
  target_only_steps_ = 0;
  const int verified = accepted + (rejected ? 1 : 0);
  if (verified == 0) return;
  accepted_ = config_.decay * accepted_ + accepted;
  verified_ = config_.decay * verified_ + verified;
}

void AdaptiveDraftLength::RecordCosts(double target_step_seconds, double draft_token_seconds) {
  const bool usable = target_step_seconds > 0.0 && std::isfinite(target_step_seconds) &&
                      draft_token_seconds > 0.0 && std::isfinite(draft_token_seconds);
  if (!usable) return;
  if (!have_costs_) {
    target_seconds_ = target_step_seconds;
    draft_seconds_ = draft_token_seconds;
    have_costs_ = true;
    return;
  }
  const double w = 1.0 - config_.decay;
  target_seconds_ = (1.0 - w) * target_seconds_ + w * target_step_seconds;
  draft_seconds_ = (1.0 - w) * draft_seconds_ + w * draft_token_seconds;
}

}  // namespace splitspec::spec

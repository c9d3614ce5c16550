#include "runtime/spec/adaptive_draft_length.h"

#include <algorithm>
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
  if (min_guard_blocks < 1) return bad("min_guard_blocks", min_guard_blocks, ">= 1");
  if (max_probe_interval < probe_interval) {
    return bad("max_probe_interval", max_probe_interval, ">= probe_interval");
  }
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
      verified_(config.prior_weight),
      target_only_steps_(config.probe_interval),
      probe_interval_(config.probe_interval) {}

double AdaptiveDraftLength::EstimatedAlpha() const { return accepted_ / verified_; }

double AdaptiveDraftLength::EstimatedCostRatio() const {
  return have_costs_ ? target_seconds_ / draft_seconds_ : config_.initial_cost_ratio;
}

PlanChoice AdaptiveDraftLength::Best() const { return BestAt(EstimatedAlpha()); }

bool AdaptiveDraftLength::Hopeless() const {
  if (lost_at_high_alpha_) return true;
  // Measured costs only: the prior cost ratio is a guess the first block tests.
  return have_costs_ && !(BestAt(kBestCaseAlpha).speedup > config_.min_speedup);
}

PlanChoice AdaptiveDraftLength::BestAt(double alpha) const {
  if (config_.schedule == Schedule::kSequential) {
    return OptimalKWithVerifyCost(alpha, EstimatedCostRatio(), config_.schedule, VerifySlope(),
                                  config_.min_k, config_.max_k);
  }
  // Overlapped, the bonus of a fully accepted block is forfeited (the queued
  // block feeds in its place): the pipeline model counts it, the iid model does not.
  return PipelineOptimalK({.alpha = alpha,
                           .cost_ratio = EstimatedCostRatio(),
                           .k = config_.min_k,
                           .verify_slope = VerifySlope(),
                           .cache_hit_rate = 0.0},
                          PipelineMode::kOverlapped, config_.min_k, config_.max_k);
}

int AdaptiveDraftLength::NextK() const {
  if (Hopeless()) return 0;
  const PlanChoice best = Best();
  if (PredictedToWin(best)) return best.k;
  return target_only_steps_ >= probe_interval_ && !Hopeless() ? config_.min_k : 0;
}

int AdaptiveDraftLength::TargetOnlyStepsBeforeProbe() const {
  if (Hopeless()) return config_.max_probe_interval;
  return std::max(1, probe_interval_ - target_only_steps_);
}

void AdaptiveDraftLength::RecordBlock(int drafted, int accepted, bool rejected) {
  // A block after target-only steps is a probe (speculation was off).
  const bool probe = target_only_steps_ > 0;
  target_only_steps_ = 0;
  const int verified = accepted + (rejected ? 1 : 0);
  if (verified > 0) {
    accepted_ = config_.decay * accepted_ + accepted;
    verified_ = config_.decay * verified_ + verified;
  }
  if (PredictedToWin(Best())) {
    probe_interval_ = config_.probe_interval;
  } else if (probe) {
    probe_interval_ = std::min(config_.max_probe_interval, 2 * probe_interval_);
  }
}

void AdaptiveDraftLength::RecordShadowBlock(int accepted, bool rejected) {
  const int verified = accepted + (rejected ? 1 : 0);
  if (verified == 0) return;
  accepted_ = config_.decay * accepted_ + accepted;
  verified_ = config_.decay * verified_ + verified;
  if (PredictedToWin(Best())) probe_interval_ = config_.probe_interval;
}

void AdaptiveDraftLength::RecordBlockTime(int committed_tokens, double seconds) {
  if (committed_tokens < 0 || !(seconds > 0.0) || !std::isfinite(seconds)) return;
  const double w = timed_blocks_ == 0 ? 1.0 : 1.0 - config_.decay;
  block_tokens_ = (1.0 - w) * block_tokens_ + w * committed_tokens;
  block_seconds_ = (1.0 - w) * block_seconds_ + w * seconds;
  ++timed_blocks_;
  // Losing in wall time although nearly every draft token is accepted: what
  // loses is the cost of drafting beside the target, which no probe can change.
  if (MeasuredSpeedup() <= 1.0 && EstimatedAlpha() >= kHighAlpha) lost_at_high_alpha_ = true;
}

void AdaptiveDraftLength::RecordTargetCurve(double base_seconds, double slope) {
  if (!(base_seconds > 0.0) || !std::isfinite(base_seconds) || !(slope >= 0.0) ||
      !std::isfinite(slope)) {
    return;
  }
  target_base_seconds_ = base_seconds;
  target_slope_ = slope;
}

double AdaptiveDraftLength::PlainStepSeconds() const {
  if (target_base_seconds_ > 0.0) return target_base_seconds_;
  return curve_->MeanSeconds(0) > 0.0 ? curve_->MeanSeconds(0) : curve_->BaseSeconds();
}

double AdaptiveDraftLength::VerifySlope() const {
  return target_base_seconds_ > 0.0 ? target_slope_ : curve_->Slope();
}

double AdaptiveDraftLength::MeasuredSpeedup() const {
  if (timed_blocks_ < config_.min_guard_blocks) return INFINITY;
  const double plain_step = PlainStepSeconds();
  if (!(plain_step > 0.0)) return INFINITY;
  return block_tokens_ / block_seconds_ * plain_step;
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

std::string AdaptiveDraftLength::DebugString() const {
  const PlanChoice best = Best();
  return absl::StrCat("next_k=", NextK(), " alpha=", EstimatedAlpha(),
                      " cost_ratio=", EstimatedCostRatio(), " slope=", VerifySlope(),
                      " t0=", PlainStepSeconds(), " fit_t0=", curve_->BaseSeconds(),
                      " mean_t0=", curve_->MeanSeconds(0),
                      " best_k=", best.k, " predicted=", best.speedup,
                      " measured=", MeasuredSpeedup(), " off_steps=", target_only_steps_,
                      " probe_interval=", probe_interval_);
}

}  // namespace splitspec::spec

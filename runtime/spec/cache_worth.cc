#include "runtime/spec/cache_worth.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace splitspec::spec {
namespace {

// The first sample sets an EWMA; later ones blend in with weight 1 - decay.
void Blend(double& average, int& samples, double value, double decay) {
  average = samples == 0 ? value : decay * average + (1.0 - decay) * value;
  ++samples;
}

}  // namespace

absl::Status CacheWorthConfig::Validate() const {
  if (probe_interval < 2)
    return absl::InvalidArgumentError(
        absl::StrCat("probe_interval must be >= 2, got ", probe_interval));
  if (bootstrap_interval < 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("bootstrap_interval must be >= 2, got ", bootstrap_interval));
  }
  if (min_samples < 1)
    return absl::InvalidArgumentError(absl::StrCat("min_samples must be >= 1, got ", min_samples));
  if (!(decay >= 0.0 && decay < 1.0))
    return absl::InvalidArgumentError(absl::StrCat("decay must be in [0, 1), got ", decay));
  return absl::OkStatus();
}

CacheWorth::CacheWorth(CacheWorthConfig config) : config_(config) {}

bool CacheWorth::Measured() const {
  return busy_samples_ >= config_.min_samples && idle_samples_ >= config_.min_samples &&
         lookups_ > 0;
}

double CacheWorth::CostSeconds() const {
  if (busy_samples_ == 0 || idle_samples_ == 0) return 0.0;
  return (busy_ - idle_) * last_verify_s_;
}

double CacheWorth::GainSeconds() const { return gain_; }

bool CacheWorth::Worth() const {
  // Pre-drafts that never hit cannot pay on any hardware: that needs no cost.
  if (lookups_ >= config_.min_samples && gain_ <= 0.0) return false;
  return !Measured() || GainSeconds() >= CostSeconds();
}

bool CacheWorth::PlanNext() {
  ++blocks_;
  const int interval =
      idle_samples_ < config_.min_samples ? config_.bootstrap_interval : config_.probe_interval;
  const bool probe = blocks_ % interval == 0;
  const bool plan = probe ? !Worth() : Worth();
  if (!plan) ++unplanned_;
  return plan;
}

void CacheWorth::RecordRoundTrip(bool pre_drafted, double round_trip_s, double target_verify_s) {
  if (!(round_trip_s > 0.0) || !std::isfinite(round_trip_s) || !(target_verify_s > 0.0) ||
      !std::isfinite(target_verify_s)) {
    return;
  }
  last_verify_s_ = target_verify_s;
  const double ratio = round_trip_s / target_verify_s;
  if (pre_drafted) {
    Blend(busy_, busy_samples_, ratio, config_.decay);
  } else {
    Blend(idle_, idle_samples_, ratio, config_.decay);
  }
}

void CacheWorth::RecordLookup(double saved_s) {
  if (!(saved_s >= 0.0) || !std::isfinite(saved_s)) return;
  Blend(gain_, lookups_, saved_s, config_.decay);
}

}  // namespace splitspec::spec

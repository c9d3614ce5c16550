#include "runtime/spec/verify_cost_curve.h"

#include <algorithm>
#include <cmath>

namespace splitspec::spec {
namespace {

// A bucket's weight in the fit stops growing here, so a k seen a thousand times
// does not drown a k seen ten times.
constexpr double kMaxBucketWeight = 16.0;
// A bucket joins the line fit only after this many samples: one early verify
// next to a few slow first decode steps fitted a slope of 0 (clamped from
// negative), and the controller then took 8-token blocks to be free.
constexpr double kMinFitWeight = 3.0;

}  // namespace

VerifyCostCurve::VerifyCostCurve(double prior_slope, double decay, int max_k)
    : prior_slope_(prior_slope),
      decay_(decay),
      mean_seconds_(max_k + 1, 0.0),
      weight_(max_k + 1, 0.0) {}

void VerifyCostCurve::Record(int drafted, double seconds) {
  if (drafted < 0 || drafted >= static_cast<int>(mean_seconds_.size())) return;
  if (!(seconds > 0.0) || !std::isfinite(seconds)) return;
  double& mean = mean_seconds_[drafted];
  double& weight = weight_[drafted];
  mean = weight == 0.0 ? seconds : decay_ * mean + (1.0 - decay_) * seconds;
  weight = std::min(weight + 1.0, kMaxBucketWeight);
  ++samples_;
}

VerifyCostCurve::Line VerifyCostCurve::Fit() const {
  double w = 0.0, wx = 0.0, wy = 0.0, wxx = 0.0, wxy = 0.0;
  int buckets = 0;
  int only_k = -1;  // the heaviest bucket: the prior's shape goes through it
  for (size_t k = 0; k < weight_.size(); ++k) {
    if (weight_[k] == 0.0) continue;
    if (only_k < 0 || weight_[k] > weight_[only_k]) only_k = static_cast<int>(k);
    if (weight_[k] < kMinFitWeight) continue;
    const double x = static_cast<double>(k), y = mean_seconds_[k];
    w += weight_[k];
    wx += weight_[k] * x;
    wy += weight_[k] * y;
    wxx += weight_[k] * x * x;
    wxy += weight_[k] * x * y;
    ++buckets;
  }
  if (only_k < 0) return {0.0, prior_slope_};
  if (buckets >= 2) {
    const double variance = wxx - wx * wx / w;
    const double b = (wxy - wx * wy / w) / variance;
    const double a = (wy - b * wx) / w;
    if (a > 0.0 && std::isfinite(b)) return {a, std::max(0.0, b / a)};
  }
  // Fewer than two well-sampled k (or a degenerate fit): the prior's shape
  // through the most sampled point.
  return {mean_seconds_[only_k] / (1.0 + prior_slope_ * only_k), prior_slope_};
}

double VerifyCostCurve::Slope() const { return Fit().slope; }

double VerifyCostCurve::BaseSeconds() const { return Fit().base; }

}  // namespace splitspec::spec

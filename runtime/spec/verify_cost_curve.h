// The measured cost of verifying a block as a function of its draft length:
// T(k) = seconds of one target step that verifies k draft tokens (a forward of
// k + 1 positions; k = 0 is a plain decode step). On a bandwidth-bound CPU T(k)
// grows slowly with k, but it does grow (a block of 5 costs ~2x one token before
// multi-token kernels), and a controller that ignores it speculates when it loses.
//
//   VerifyCostCurve curve(/*prior_slope=*/0.25, /*decay=*/0.9);
//   curve.Record(/*drafted=*/4, /*seconds=*/0.021);
//   double r = curve.Relative(4);   // T(4) / T(0)
//
// Model: T(k) = T0 * (1 + slope * k). Each k keeps an exponentially weighted
// mean of its samples; with at least 3 samples at each of two or more distinct
// k, T0 and slope come from a least-squares line through those means (weighted
// by their sample counts, capped so old buckets do not dominate), else slope =
// prior_slope and T0 is derived from the most sampled k. The slope is never
// negative.
// Thread-compatible.
#ifndef SPLITSPEC_RUNTIME_SPEC_VERIFY_COST_CURVE_H_
#define SPLITSPEC_RUNTIME_SPEC_VERIFY_COST_CURVE_H_

#include <vector>

namespace splitspec::spec {

class VerifyCostCurve {
 public:
  // REQUIRES prior_slope >= 0, decay in (0, 1), max_k >= 1.
  VerifyCostCurve(double prior_slope, double decay, int max_k = 64);

  // One verification of `drafted` tokens took `seconds`. Ignored when drafted is
  // outside [0, max_k] or seconds is not finite and > 0.
  void Record(int drafted, double seconds);

  // T(k) / T(0) = 1 + Slope() * k.
  double Relative(int k) const { return 1.0 + Slope() * k; }
  double Slope() const;
  // T(0) in seconds; 0 before any sample.
  double BaseSeconds() const;
  // The weighted mean of the samples at exactly k drafts; 0 if none (or k out of range).
  double MeanSeconds(int k) const {
    return k >= 0 && k < static_cast<int>(weight_.size()) && weight_[k] > 0.0 ? mean_seconds_[k]
                                                                              : 0.0;
  }
  bool measured() const { return samples_ > 0; }

 private:
  struct Line {
    double base = 0.0;
    double slope = 0.0;
  };
  Line Fit() const;

  double prior_slope_;
  double decay_;
  std::vector<double> mean_seconds_;  // [max_k + 1] EWMA per k
  std::vector<double> weight_;        // [max_k + 1] samples per k, capped
  int samples_ = 0;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_VERIFY_COST_CURVE_H_

// Per-request choice of the draft length k from measured acceptance and cost,
// using the analytic model (runtime/spec/analytic_model.h).
//
//   AdaptiveDraftLength controller(config);       // config.Validate() first
//   int k = controller.NextK();                   // 0: decode target-only this step
//   ... verify a block of k tokens ...
//   controller.RecordBlock(k, outcome.accepted, outcome.rejected);
//   controller.RecordCosts(target_step_seconds, draft_token_seconds);
//   ... or, after a step taken at k = 0:
//   controller.RecordTargetOnlyStep();
//
// The rule:
//   alpha_hat = A / V, where A and V are the accepted and verified draft tokens
//     with exponential forgetting: they start at prior_weight * prior_alpha and
//     prior_weight (pseudo-tokens), and each block that verified at least one
//     token first multiplies both by `decay`, so the prior fades like old data;
//   C_hat = (EWMA of target step time) / (EWMA of draft time per token), both
//     EWMAs with weight (1 - decay) on the newest sample; initial_cost_ratio until
//     the first measurement;
//   best = OptimalK(alpha_hat, C_hat, schedule, min_k, max_k);
//   NextK = best.k if best.speedup > min_speedup; otherwise 0 (speculation off),
//     except that after probe_interval consecutive target-only steps it returns
//     min_k once (a probe); the probe's RecordBlock refreshes alpha_hat and the
//     rule starts over.
// Thread-compatible: one instance per request, used by one thread at a time.
#ifndef SPLITSPEC_RUNTIME_SPEC_ADAPTIVE_DRAFT_LENGTH_H_
#define SPLITSPEC_RUNTIME_SPEC_ADAPTIVE_DRAFT_LENGTH_H_

#include "absl/status/status.h"
#include "runtime/spec/analytic_model.h"

namespace splitspec::spec {

struct AdaptiveDraftLengthConfig {
  int min_k = 1;                    // smallest k while speculating; >= 1
  int max_k = 8;                    // largest k; >= min_k, <= kPlanMaxK
  double prior_alpha = 0.6;         // acceptance assumed before measurements; [0, 1]
  double prior_weight = 4.0;        // pseudo-tokens behind prior_alpha; > 0
  double decay = 0.9;               // forgetting per block / per cost sample; (0, 1)
  double initial_cost_ratio = 10.0; // T_target / T_draft before measurements; > 0
  double min_speedup = 1.0;         // speculate only if the predicted speedup exceeds this; > 0
  int probe_interval = 32;          // target-only steps between probes; >= 1
  Schedule schedule = Schedule::kSequential;

  // OK, or InvalidArgument naming the first field out of range and its value.
  absl::Status Validate() const;
};

class AdaptiveDraftLength {
 public:
  // REQUIRES config.Validate().ok().
  explicit AdaptiveDraftLength(const AdaptiveDraftLengthConfig& config);

  // The k to draft for the next block; 0 = do not speculate.
  int NextK() const;

  // A verified block: `drafted` tokens, the first `accepted` accepted, and
  // `rejected` if the block stopped at a rejection. REQUIRES 0 <= accepted <= drafted.
  void RecordBlock(int drafted, int accepted, bool rejected);

  // A step decoded without a draft (k = 0).
  void RecordTargetOnlyStep() { ++target_only_steps_; }

  // Measured wall-clock costs: one target step (a verification forward) and one
  // draft forward per drafted token. Non-positive or non-finite samples are ignored.
  void RecordCosts(double target_step_seconds, double draft_token_seconds);

  double EstimatedAlpha() const;
  double EstimatedCostRatio() const;

 private:
  AdaptiveDraftLengthConfig config_;
  double accepted_;  // decayed accepted draft tokens, prior included
  double verified_;  // decayed verified draft tokens, prior included; > 0
  double target_seconds_ = 0.0;
  double draft_seconds_ = 0.0;
  bool have_costs_ = false;
  int target_only_steps_ = 0;  // consecutive steps at k = 0 since the last block
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_ADAPTIVE_DRAFT_LENGTH_H_

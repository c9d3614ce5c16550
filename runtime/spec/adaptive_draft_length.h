// Per-request choice of the draft length k from measured acceptance and cost,
// using the analytic model (runtime/spec/analytic_model.h).
//
//   AdaptiveDraftLength controller(config);       // config.Validate() first
//   int k = controller.NextK();                   // 0: decode target-only this step
//   ... verify a block of k tokens ...
//   controller.RecordBlock(k, outcome.accepted, outcome.rejected);
//   controller.RecordVerify(k, block_verify_seconds);     // the verify-cost curve
//   controller.RecordCosts(target_step_seconds, draft_token_seconds);
//   ... or, after a step taken at k = 0:
//   controller.RecordTargetOnlyStep();
//   controller.RecordVerify(0, step_seconds);
//   ... while NextK() is 0 the target may decode alone for
//   controller.TargetOnlyStepsBeforeProbe() tokens (an off window), each
//   recorded with RecordTargetOnlyStep().
//
// The rule:
//   alpha_hat = A / V, where A and V are the accepted and verified draft tokens
//     with exponential forgetting: they start at prior_weight * prior_alpha and
//     prior_weight (pseudo-tokens), and each block that verified at least one
//     token first multiplies both by `decay`, so the prior fades like old data;
//   C_hat = (EWMA of target step time) / (EWMA of draft time per token), both
//     EWMAs with weight (1 - decay) on the newest sample; initial_cost_ratio until
//     the first measurement;
//   slope_hat = the verify-cost curve's slope (runtime/spec/verify_cost_curve.h:
//     T_verify(k) = T_target * (1 + slope * k), fitted to RecordVerify samples,
//     verify_cost_slope before there are two distinct k);
//   best = OptimalKWithVerifyCost(alpha_hat, C_hat, kSequential, slope_hat, min_k, max_k)
//     with lookahead 1; with lookahead 2 (kOverlapped) the pipeline model's
//     PipelineOptimalK(kOverlapped), which forfeits the bonus of a fully accepted
//     block (k = 1 then commits one token per block: it never wins);
//   NextK = best.k if best.speedup > min_speedup; otherwise 0 (speculation off),
//     except that after `interval` consecutive target-only steps it returns
//     min_k once (a probe); the probe's RecordBlock refreshes alpha_hat and the
//     rule starts over. A request's first block is such a probe when the prior
//     predicts a loss: the prior says nothing about how this request's text suits
//     the drafter, and one block of min_k costs little.
//   interval starts at probe_interval and doubles (up to max_probe_interval)
//     after every probe that leaves speculation predicted to lose: a drafter
//     that keeps failing costs a probe ever more rarely (geometric back-off).
//     Any block after which speculation is predicted to win resets it.
// min_speedup is above 1 because the model is optimistic at the margin (iid
// acceptance, no protocol cost per round): a predicted 1.02x is a coin toss.
// A measured guard overrides it: once min_guard_blocks speculative blocks were
// timed (RecordBlockTime), the measured speedup = (EWMA tokens committed per
// block / EWMA seconds per block) * T(0), with T(0) the curve's mean plain step
// (its fitted base before any plain step), must exceed 1, or speculation is
// off however good the model's prediction: what the model leaves out (non-iid
// acceptance, drafts shorter than k, protocol cost) is in the measurement.
// Shadow blocks (RecordShadowBlock): while speculation is off, a drafter that
// costs next to nothing (model-free) can still propose at each position; what
// the target then commits alone shows what those blocks would have accepted.
// They teach acceptance without a probe's cost, so a request whose text turns
// copyable (a summary reaching its quoted passage) speculates again at once.
// The curve may be shared by the controllers of one draft worker (it is a
// property of the target, not of a request): pass it to the constructor.
// Thread-compatible: one instance per request, used by one thread at a time.
#ifndef SPLITSPEC_RUNTIME_SPEC_ADAPTIVE_DRAFT_LENGTH_H_
#define SPLITSPEC_RUNTIME_SPEC_ADAPTIVE_DRAFT_LENGTH_H_

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "runtime/spec/analytic_model.h"
#include "runtime/spec/verify_cost_curve.h"

namespace splitspec::spec {

struct AdaptiveDraftLengthConfig {
  int min_k = 1;                     // smallest k while speculating; >= 1
  int max_k = 8;                     // largest k; >= min_k, <= kPlanMaxK
  double prior_alpha = 0.5;          // acceptance assumed before measurements; [0, 1]
  double prior_weight = 2.0;         // pseudo-tokens behind prior_alpha; > 0
  double decay = 0.9;                // forgetting per block / per cost sample; (0, 1)
  double initial_cost_ratio = 10.0;  // T_target / T_draft before measurements; > 0
  double min_speedup = 1.05;         // speculate only if the predicted speedup exceeds this; > 0
  double verify_cost_slope = 0.25;   // prior T_verify(k) / T_target - 1 per draft token; >= 0
  int probe_interval = 32;           // target-only steps before the first probe; >= 1
  int max_probe_interval = 512;      // back-off limit; >= probe_interval
  int min_guard_blocks = 8;          // timed blocks before the measured guard applies; >= 1
  Schedule schedule = Schedule::kSequential;

  // OK, or InvalidArgument naming the first field out of range and its value.
  absl::Status Validate() const;
};

class AdaptiveDraftLength {
 public:
  // REQUIRES config.Validate().ok(). `curve`: a verify-cost curve shared with
  // other controllers; null: this controller keeps its own.
  explicit AdaptiveDraftLength(const AdaptiveDraftLengthConfig& config,
                               std::shared_ptr<VerifyCostCurve> curve = nullptr);

  // The schedule the request runs from now on (a draft worker may choose it per
  // request, runtime/spec/adaptive_window.h): the model behind NextK follows it.
  void set_schedule(Schedule schedule) { config_.schedule = schedule; }

  // The k to draft for the next block; 0 = do not speculate.
  int NextK() const;

  // A verified block: `drafted` tokens, the first `accepted` accepted, and
  // `rejected` if the block stopped at a rejection. REQUIRES 0 <= accepted <= drafted.
  void RecordBlock(int drafted, int accepted, bool rejected);

  // A shadow block while speculation is off: the drafter proposed tokens that
  // were never sent, and the target's own next tokens matched the first
  // `accepted` of them (`rejected`: then one differed). It refreshes acceptance
  // like RecordBlock, at no cost to the target, but is no probe: the back-off is
  // left as it is, unless speculation is now predicted to win (then reset).
  // REQUIRES accepted >= 0.
  void RecordShadowBlock(int accepted, bool rejected);
  // The k a shadow block drafts: the model's best k at the current estimates.
  int ShadowK() const { return Best().k; }

  // The target's own measured cost curve (VerifyResult.target_step_seconds and
  // target_verify_slope): once reported, it replaces what round trips estimate
  // for the plain step T(0) (the measured guard's yardstick) and the verify
  // slope. Ignored unless base_seconds > 0 and slope >= 0, both finite.
  void RecordTargetCurve(double base_seconds, double slope);
  // T(0): the target's report, else the window's plain steps, else the fit.
  double PlainStepSeconds() const;
  // The verify-cost slope the model uses: the target's report, else the fit.
  double VerifySlope() const;

  // A step decoded without a draft (k = 0).
  void RecordTargetOnlyStep() { ++target_only_steps_; }

  // While NextK() is 0: the target-only steps left before the next probe (>= 1),
  // i.e. how many tokens the target may decode alone without asking again.
  int TargetOnlyStepsBeforeProbe() const;
  // True once the measured costs say speculation cannot win even if every draft
  // token were accepted (a draft as slow as the target), or once speculation
  // measured a loss in wall time at an acceptance >= kHighAlpha (the model's
  // costs missed what drafting beside the target costs): then no probe is made,
  // since none could turn speculation on (a probe of a costly drafter costs a
  // few plain steps: the draft's catch-up, its token and a verification).
  bool Hopeless() const;
  // Starts Hopeless: the draft worker saw this drafter's cost lose at any
  // acceptance in an earlier request (the cost is the drafter's, not the text's).
  void AssumeHopeless() { lost_at_high_alpha_ = true; }
  // Whether the draft's and the target's costs were measured (RecordCosts).
  bool measured_costs() const { return have_costs_; }
  // The current gap between probes (probe_interval, doubled per failed probe).
  int probe_interval() const { return probe_interval_; }

  // One target step that verified `drafted` tokens (0: a plain step) took
  // `seconds`: a sample of the verify-cost curve.
  void RecordVerify(int drafted, double seconds) { curve_->Record(drafted, seconds); }

  // A speculative block (drafted > 0) committed `committed_tokens` and took the
  // target `seconds`: a sample of the measured speedup. Unusable samples are ignored.
  void RecordBlockTime(int committed_tokens, double seconds);
  // The measured speedup over plain decoding; +inf until min_guard_blocks samples
  // and a T(0) estimate exist.
  double MeasuredSpeedup() const;

  // Measured wall-clock costs: one target step (a verification forward) and one
  // draft forward per drafted token. Non-positive or non-finite samples are ignored.
  void RecordCosts(double target_step_seconds, double draft_token_seconds);

  double EstimatedAlpha() const;
  double EstimatedCostRatio() const;
  double EstimatedVerifySlope() const { return VerifySlope(); }
  const VerifyCostCurve& curve() const { return *curve_; }
  // The inputs and outcome of the next decision, for decision logs.
  std::string DebugString() const;

 private:
  // The model's best k and whether it is predicted to beat target-only decoding.
  PlanChoice Best() const;
  // The model's best k if every draft token were accepted (alpha = kBestCaseAlpha).
  PlanChoice BestAt(double alpha) const;
  static constexpr double kBestCaseAlpha = 0.99;
  // Measured speedup <= 1 at an estimated acceptance at least this high makes
  // the request Hopeless: the draft's cost, not its acceptance, is what loses.
  static constexpr double kHighAlpha = 0.9;
  bool PredictedToWin(const PlanChoice& best) const {
    return best.speedup > config_.min_speedup && MeasuredSpeedup() > 1.0;
  }

  AdaptiveDraftLengthConfig config_;
  std::shared_ptr<VerifyCostCurve> curve_;
  double accepted_;  // decayed accepted draft tokens, prior included
  double verified_;  // decayed verified draft tokens, prior included; > 0
  double target_seconds_ = 0.0;
  double draft_seconds_ = 0.0;
  bool have_costs_ = false;
  bool lost_at_high_alpha_ = false;  // see kHighAlpha and AssumeHopeless
  double target_base_seconds_ = 0.0;  // RecordTargetCurve; 0: none
  double target_slope_ = 0.0;
  // Consecutive steps at k = 0 since the last block; a request starts as if a
  // whole probe interval had passed, so its first block is a probe.
  int target_only_steps_;
  int probe_interval_;          // target-only steps between probes (backs off)
  double block_tokens_ = 0.0;   // EWMA of tokens committed per speculative block
  double block_seconds_ = 0.0;  // EWMA of target seconds per speculative block
  int timed_blocks_ = 0;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_ADAPTIVE_DRAFT_LENGTH_H_

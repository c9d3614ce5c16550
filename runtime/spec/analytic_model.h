// The analytic model of speculative decoding speed (Leviathan et al. 2023, §3),
// for sequential and for overlapped draft/verify. Used by `splitspec plan` and by
// the adaptive draft-length controller.
//
//   const double s = Speedup(/*alpha=*/0.8, /*cost_ratio=*/20, /*k=*/8);   // 3.09
//   const PlanChoice best = OptimalK(0.8, 20, Schedule::kSequential);      // k = 8
//
// Inputs: alpha = probability that a draft token is accepted, assumed iid per
// position; C = cost_ratio = T_target / T_draft (one target forward, which also
// verifies a block, over one draft forward); k = draft tokens per block.
//
// Tokens per step: the block commits the accepted prefix plus one correction or
// bonus token, N = min(first rejection index, k) + 1, so
//     E[N] = sum_{i=0..k} alpha^i = (1 - alpha^{k+1}) / (1 - alpha)   (alpha = 1: k + 1).
// Sequential: a step costs k * T_draft + T_target (draft, then verify). Target-only
// decoding makes one token per T_target, so the speedup is
//     S_seq(k) = E[N] / (1 + k / C).
// Overlapped: the draft drafts the next block while the target verifies this one,
// so in steady state a step costs max(k * T_draft, T_target); in units of T_target
//     S_ovl(k) = E[N] / max(1, k / C).
// The overlapped figure is an upper bound: it assumes the next block's drafting is
// always hidden behind verification, and ignores the refill after a rejection (the
// block drafted in parallel is stale and the draft must start again from the
// correction). Both ignore the cost of sampling and of moving blocks.
//
// Pure functions; thread-safe.
#ifndef SPLITSPEC_RUNTIME_SPEC_ANALYTIC_MODEL_H_
#define SPLITSPEC_RUNTIME_SPEC_ANALYTIC_MODEL_H_

#include "absl/status/status.h"

namespace splitspec::spec {

enum class Schedule { kSequential, kOverlapped };

inline constexpr int kPlanMaxK = 20;  // OptimalK searches k = 1..kPlanMaxK by default

// OK, or InvalidArgument naming the value: alpha must be in [0, 1], cost_ratio
// finite and > 0.
absl::Status ValidateModelInputs(double alpha, double cost_ratio);

// E[N] for k >= 0 draft tokens. REQUIRES alpha in [0, 1], k >= 0.
double ExpectedTokensPerStep(double alpha, int k);

// Step cost in units of T_target. REQUIRES cost_ratio > 0, k >= 0.
double StepCost(double cost_ratio, int k, Schedule schedule);

// E[N] / StepCost: the speedup over target-only decoding. k = 0 gives 1.
double Speedup(double alpha, double cost_ratio, int k, Schedule schedule = Schedule::kSequential);

struct PlanChoice {
  int k = 0;
  double expected_tokens = 0.0;
  double speedup = 0.0;
};

// The k in [min_k, max_k] with the largest speedup (the smallest k among ties).
// REQUIRES valid inputs and 0 <= min_k <= max_k.
PlanChoice OptimalK(double alpha, double cost_ratio, Schedule schedule, int min_k = 1,
                    int max_k = kPlanMaxK);

// The same with a verification cost that grows with k: verifying a block of k
// drafts costs verify_slope * k more than a plain step, T_verify(k) = T_target *
// (1 + verify_slope * k) (runtime/spec/verify_cost_curve.h), so a step costs
// (1 + verify_slope * k) + k / C sequentially and max(1 + verify_slope * k, k / C)
// overlapped, in units of T_target. verify_slope = 0 gives Speedup / OptimalK.
// REQUIRES verify_slope >= 0.
double SpeedupWithVerifyCost(double alpha, double cost_ratio, int k, Schedule schedule,
                             double verify_slope);
PlanChoice OptimalKWithVerifyCost(double alpha, double cost_ratio, Schedule schedule,
                                  double verify_slope, int min_k, int max_k);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_ANALYTIC_MODEL_H_

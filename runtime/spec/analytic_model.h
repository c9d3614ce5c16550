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

// ---------------------------------------------------------------------------
// The pipeline model: what the protocol actually does (docs/protocol.md; the
// target's no-bonus rule in target_worker/target_engine_verify.cc, the draft's lookahead
// in draft_worker/draft_engine.h), with a verification cost that grows with k,
// T_verify = T_target * (1 + verify_slope * (fed - 1)) for a forward of `fed` tokens.
// d = k / C is one block's drafting time, in units of T_target; s = verify_slope.
//
// kSequential (lookahead 1): draft, then verify the k drafts and the previous
// result's correction or bonus (k + 1 tokens fed); every block keeps its bonus:
//     tokens E[N] = (1 - alpha^{k+1}) / (1 - alpha),   cost d + 1 + s k.
// kOverlapped (lookahead 2), draft hidden (d <= 1 + s (k - 1)): the next block is
// queued at the target when this one is decided, so
//   - the bonus is forfeited: a block commits its accepted prefix plus a
//     correction on a rejection, E[N'] = E[N] - alpha^k = (1 - alpha^k) / (1 - alpha);
//   - a fully accepted block (alpha^k) is followed at once by the queued one,
//     which feeds its k drafts only (cost 1 + s (k - 1));
//   - a rejection (1 - alpha^k) makes the queued block stale: the target waits
//     while the draft drafts again from the correction (the refill, d), then feeds
//     the correction and k drafts (1 + s k):
//     cost = alpha^k (1 + s (k - 1)) + (1 - alpha^k) (1 + s k + d).
// kOverlapped, draft-bound (d > 1 + s (k - 1)): the target decides each block
// before the next arrives, so it keeps the bonus, and the block drafted meanwhile
// is stale; the draft finishes it before it reads the result, then drafts again:
// E[N] tokens per 2d.
// kOverlappedCache (the speculation cache, draft_worker/draft_engine.h): one block
// in flight, so the target keeps the bonus; while it verifies, the draft
// pre-drafts the next block for the likeliest outcomes. A result whose block is
// cached (probability h = cache_hit_rate) is answered at once; a miss drafts as
// the sequential loop does: E[N] tokens per 1 + s k + (1 - h) d + h max(0, d - V),
// V = 1 + s k (a hit's block was pre-drafted during the verification; what did not
// fit in it is drafted after). h = 0 is the sequential loop; h = 1 hides the draft
// up to V. (A partial hit, which drafts only the rest of its block, counts as a miss.)
// The result itself may wait: the draft pre-drafts one forward at a time and reads
// a result when the forward in progress ends, half a draft token on average
// (result_wait = 0.5 / C; measured, `bench spec --sim-grid`: the median result trip
// is 0.2 ms with the cache against 0.06 ms without at C 10), added to every block.
// The block overhead o (block_overhead, units of T_target) is the time a block
// spends on the critical path outside the target's step and the drafting: its trip
// to the target, the result's trip back, the draft's wake-up and turnaround
// (measured, `bench spec --sim-grid`: 0.1-0.2 ms per block sequentially, 3-6% of a
// 3.3 ms step). Sequential and cached blocks pay it every block (on a hit the
// result still travels to the draft and the cached block back); overlapped blocks
// pay it on a refill only, since a queued block already made its trip. What a
// step costs beyond its forward (reading rows, the verification) is inside V:
// measure the slope s on the target's steps, not on bare forwards.
enum class PipelineMode { kSequential, kOverlapped, kOverlappedCache };

struct PipelineModelInputs {
  double alpha = 0.0;           // [0, 1]
  double cost_ratio = 1.0;      // C = T_target / T_draft, > 0
  int k = 1;                    // draft tokens per block, >= 1
  double verify_slope = 0.0;    // s >= 0
  double cache_hit_rate = 0.0;  // h in [0, 1]; kOverlappedCache only
  // The result's wait for the pre-draft forward in progress, in units of T_target
  // (>= 0; kOverlappedCache only): 0.5 / C for the draft worker's cache.
  double result_wait = 0.0;
  // o: per-block trips and turnaround on the critical path (>= 0), see above.
  double block_overhead = 0.0;
};

// OK, or InvalidArgument naming the field and value.
absl::Status ValidatePipelineInputs(const PipelineModelInputs& in);

// Tokens committed per block. REQUIRES valid inputs.
double PipelineTokensPerBlock(const PipelineModelInputs& in, PipelineMode mode);
// Expected time per block in units of T_target. REQUIRES valid inputs.
double PipelineBlockCost(const PipelineModelInputs& in, PipelineMode mode);
// Tokens per block / cost per block: the steady-state speedup over target-only.
double PipelineSpeedup(const PipelineModelInputs& in, PipelineMode mode);
// The k in [min_k, max_k] (in.k ignored) with the largest PipelineSpeedup.
PlanChoice PipelineOptimalK(PipelineModelInputs in, PipelineMode mode, int min_k, int max_k);

// A whole run's speedup when a prefill that speculation does not shorten comes
// first: (P + n) / (P + n / steady_speedup) for n generated tokens and a prefill
// of P target steps. REQUIRES steady_speedup > 0, n > 0, P >= 0.
double RunSpeedupWithPrefill(double steady_speedup, int tokens, double prefill_steps);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_ANALYTIC_MODEL_H_

// Speculative verification of draft blocks (docs/protocol.md), request-level front
// door over the kernels in kernels/cpu/verify.h.
//
//   VerifyRequest request;
//   request.mode = VerifyMode::kRejection;
//   request.target_probs = p;            // [k + 1, vocab], after LogitsToProbs
//   request.draft_tokens = tokens;       // [k]
//   request.draft_q_sparse = q;          // [k] the draft's top-q_top_k distributions
//   request.seed = params.seed;
//   request.start_position = frontier;   // position of tokens[0]
//   ASSIGN_OR_RETURN(VerifyOutcome outcome, VerifyBlock(request, vocab));
//   // commit outcome.committed; bump the epoch if outcome.rejected or a bonus was taken
//
// Rules, for draft tokens x_0..x_{k-1} at positions t..t+k-1 and target rows
// p_0..p_k (p_i is the target's distribution for position t + i):
//   greedy:    accept x_i iff x_i == argmax p_i (lowest id on ties); at the first
//              mismatch commit argmax p_i.
//   rejection: accept x_i with probability min(1, p_i(x_i) / q_i(x_i)); at the
//              first rejection commit a sample of norm(max(0, p_i - q_i)). The
//              committed tokens are distributed exactly as sampling p sequentially
//              (Leviathan et al. 2023; Chen et al. 2023).
//   coupled:   the target's token at position t + i is argmax(log p_i + g), g the
//              Gumbel noise of (seed, t + i) shared with the draft; accept x_i iff it
//              equals that token, else commit it. Each committed token is then a
//              function of (committed prefix, seed, position) only, so a seeded
//              request gives the same output whatever the drafter, k or batch.
//   bonus:     if all k are accepted and want_bonus, commit the mode's own choice
//              from p_k at position t + k (argmax, a sample of p_k, or Gumbel-argmax);
//              if want_bonus is false nothing is committed after the k tokens and
//              p_k is not read (it must still be present).
// Edge cases: p_i(x_i) == 0 always rejects; q_i(x_i) == 0 is refused (the draft
// cannot have sampled x_i); if the residual has no mass (p == q up to round-off)
// the correction is sampled from p_i; round-off never yields NaN or negative
// mass (the residual is clamped at 0 per entry).
// Classifier-free guidance: for a guided request every row p_i (the block's rows and
// the bonus row alike) is the guided distribution p_g,i = GuidedLogitsToProbs(l_c,i,
// l_u,i) (runtime/spec/sampling.h), while the draft still proposes from its plain q.
// This stays exact because none of the rules above assumes any relation between p
// and q: the acceptance test uses p_g,i(x_i) / q_i(x_i) and the residual is
// max(0, p_g,i - q_i), so the usual argument (accepted mass min(p_g, q) plus residual
// mass max(0, p_g - q) sums to p_g) gives tokens distributed exactly as guided
// decoding of the target alone; greedy and coupled commit argmax p_g,i and
// Gumbel-argmax p_g,i, the same functions guided plain decoding computes. A guided q
// would only change the acceptance rate, never the law.
// Randomness: UniformDouble(seed, position, purpose) from kernels/cpu/sampling_philox.h,
// so verification is reproducible and independent of batching.
//
// Thread-compatible: pure functions of their inputs.
#ifndef SPLITSPEC_RUNTIME_SPEC_VERIFY_H_
#define SPLITSPEC_RUNTIME_SPEC_VERIFY_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/spec/sparse_distribution.h"
#include "runtime/spec/verify_mode.h"

namespace splitspec::spec {

// One draft block of one request. Spans are borrowed for the duration of the call.
struct VerifyRequest {
  VerifyMode mode = VerifyMode::kRejection;
  absl::Span<const float> target_probs;    // [k + 1, vocab] rows p_0..p_k
  absl::Span<const int32_t> draft_tokens;  // [k], k >= 0
  // Rejection mode with k > 0: the draft's distributions, exactly one of the two.
  absl::Span<const SparseDistribution> draft_q_sparse;  // [k]
  absl::Span<const float> draft_q_dense;                // [k, vocab]
  uint64_t seed = 0;
  int64_t start_position = 0;  // position of draft_tokens[0] (the frontier), >= 0
  bool want_bonus = true;
};

struct VerifyOutcome {
  int32_t accepted = 0;            // draft tokens accepted: committed[0, accepted) == draft prefix
  std::vector<int32_t> committed;  // accepted tokens, then the correction or bonus if any
  bool rejected = false;           // true iff committed.back() is a correction
};

// Verifies one block. Errors (InvalidArgument, naming the value at fault):
// vocab < 1; target_probs not [k + 1, vocab]; rejection mode without exactly one
// well-formed q of k rows (a sparse row with an id out of range, repeated, or a
// negative/non-finite probability); a draft token outside [0, vocab); a draft
// token with q == 0; a target row read by the rule with a negative or
// non-finite entry or no mass. Nothing is committed on error.
absl::StatusOr<VerifyOutcome> VerifyBlock(const VerifyRequest& request, int32_t vocab);

// VerifyBlock's outcome in greedy mode when row i of the target's p is the one-hot of
// target_tokens[i] (what LogitsToProbs makes of a greedy row: GreedyToken), without
// the [k + 1, vocab] rows: target_tokens [k + 1] (k = draft_tokens.size()), the same
// errors for a draft token outside [0, vocab) (named as VerifyBlock names them).
// REQUIRES: every target token in [0, vocab).
absl::StatusOr<VerifyOutcome> VerifyGreedyTokens(absl::Span<const int32_t> target_tokens,
                                                 absl::Span<const int32_t> draft_tokens,
                                                 int64_t start_position, bool want_bonus,
                                                 int32_t vocab);

// Verifies many blocks (ragged k) in one kernel call; outcome j is exactly what
// VerifyBlock(requests[j], vocab) returns. A request's error never affects the
// others. Errors of the whole call: vocab < 1 (InvalidArgument).
absl::StatusOr<std::vector<absl::StatusOr<VerifyOutcome>>> VerifyBatch(
    absl::Span<const VerifyRequest> requests, int32_t vocab);

// The status of a verification kernel's per-sequence error `code`
// (kernels/cpu/verify_types.h) at draft index `index` of a block starting at
// `start_position`, naming the token, index and position at fault; shared by
// every executor of the kernels (this file's and device_verify_plan.h's).
absl::Status VerifyKernelError(absl::Span<const int32_t> draft_tokens, int64_t start_position,
                               int32_t code, int32_t index);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_VERIFY_H_

// From logits to a token: the sampling transforms (temperature, top-k, top-p,
// min-p) that turn a row of logits into the distribution p, and the seeded
// choices made from such a row by the target and by a draft.
//
//   std::vector<float> p(vocab);
//   RETURN_IF_ERROR(LogitsToProbs(params, logits, absl::MakeSpan(p)));
//   ASSIGN_OR_RETURN(int32_t token, ChooseTargetToken(mode, p, params.seed, position));
//
// The same LogitsToProbs runs on the target's and the draft's logits, so the
// request's parameters shape both p and q. All randomness is counter-based
// (kernels/cpu/sampling_philox.h): a choice is a pure function of (probabilities,
// seed, position), which is what makes seeded output reproducible across
// threads, batches and devices. Pure functions; thread-safe.
#ifndef SPLITSPEC_RUNTIME_SPEC_SAMPLING_H_
#define SPLITSPEC_RUNTIME_SPEC_SAMPLING_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/spec/sampling_params.h"
#include "runtime/spec/sparse_distribution.h"
#include "runtime/spec/verify_mode.h"

namespace splitspec::spec {

// Default size of the draft's truncated distribution q (docs/protocol.md).
inline constexpr int kDefaultQTopK = 64;

// logits [vocab] -> probs [vocab], in this order:
//   1. temperature: softmax((logits - max) / T); T == 0 gives a one-hot p at the
//      argmax (the lowest id among ties) and skips steps 2-4;
//   2. top-k: keep the top_k most probable tokens (ties: lower id first);
//   3. top-p: keep the shortest most-probable prefix of the survivors whose mass
//      is >= top_p times their total (at least one token);
//   4. min-p: drop survivors below min_p * (largest probability);
// then renormalize the survivors (every other entry is exactly 0).
// -inf logits are masked tokens (probability 0).
// Errors (InvalidArgument, naming the value): params.Validate() fails; sizes differ
// or are 0; a logit is NaN or +inf; every logit is -inf. On error probs is unspecified.
// logits and probs may be the same buffer. params.guidance_scale is not read here.
absl::Status LogitsToProbs(const SamplingParams& params, absl::Span<const float> logits,
                           absl::Span<float> probs);

// The token whose one-hot LogitsToProbs makes p in greedy mode (T == 0): the argmax
// of `logits`, the lowest id among ties; the same errors as LogitsToProbs (a NaN or
// +inf logit, every logit -inf, an empty row). For callers that need only that token
// and not the [vocab] row (TargetEngine's greedy rows).
absl::StatusOr<int32_t> GreedyToken(absl::Span<const float> logits);

// The target's distribution under classifier-free guidance: the guided logits
// l_u + s * (l_c - l_u) of the conditional row `cond` and the unconditional
// companion's row `uncond` (kernels/cpu/guidance.h, s = params.guidance_scale),
// then LogitsToProbs. The guided logits are built in `probs` itself, so no extra
// vocabulary-sized buffer is used. With s == 1 `uncond` is not read and the result
// is bitwise LogitsToProbs(params, cond). Errors as LogitsToProbs (a guided logit
// that overflowed names its token), plus InvalidArgument when the sizes differ.
absl::Status GuidedLogitsToProbs(const SamplingParams& params, absl::Span<const float> cond,
                                 absl::Span<const float> uncond, absl::Span<float> probs);

// The target's own token at `position` from p [vocab], as the verification kernels
// choose it for a bonus token or when there is no draft: greedy -> argmax p;
// rejection -> sample p with the kSample stream; coupled -> Gumbel-argmax.
// InvalidArgument if p has a negative or non-finite entry or no mass.
absl::StatusOr<int32_t> ChooseTargetToken(VerifyMode mode, absl::Span<const float> probs,
                                          uint64_t seed, int64_t position);

// The draft's truncated distribution: the q_top_k most probable entries of
// probs [vocab] with probability > 0 (ties: lower id first), renormalized,
// ordered by decreasing probability. REQUIRES q_top_k >= 1.
// InvalidArgument if q_top_k < 1 or probs is not a distribution.
absl::StatusOr<SparseDistribution> TopQDistribution(absl::Span<const float> probs, int q_top_k);

// One drafted token and the distribution it was drawn from (what the draft ships).
struct DraftChoice {
  int32_t token = -1;
  SparseDistribution q;  // rejection mode only; empty for greedy and coupled
};

// The draft's token at `position` from its distribution probs [vocab]:
// greedy -> argmax; coupled -> Gumbel-argmax with the target's noise (same seed
// and position, so a draft equal to the target is always accepted);
// rejection -> sample TopQDistribution(probs, q_top_k) with the kDraftSample
// stream and return that q. Errors as TopQDistribution / ChooseTargetToken.
absl::StatusOr<DraftChoice> ChooseDraftToken(VerifyMode mode, absl::Span<const float> probs,
                                             int q_top_k, uint64_t seed, int64_t position);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_SAMPLING_H_

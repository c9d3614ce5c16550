// Log probabilities of committed tokens (OpenAI's logprobs / top_logprobs): for
// each token, its log-probability and the most likely alternatives, read from
// the target's row at the token's position: the row verification used, so
// speculation costs no extra forward and a speculative run reports, position
// for position, what a plain run does (rows are batch invariant: a position's
// logits are bitwise the same alone or inside a verification block).
//
//   std::vector<float> row(vocab);
//   RETURN_IF_ERROR(LogprobRow(params, context, cond, uncond, probs, absl::MakeSpan(row)));
//   ...                                   // verification commits `token` at this position
//   TokenLogprob entry = TokenLogprobAt(row, token, *params.logprobs);
//
// The row (params.logprobs_mode, vLLM's --logprobs-mode):
//   raw        log_softmax(cond): the target model's logits as they came out of
//              the forward (the conditional row of a guided request);
//   processed  the pipeline's row (runtime/spec/logits_pipeline.h) before it
//              becomes probabilities: guidance and steps 1-4 (grammar mask,
//              logit_bias, penalties), then, when sampling, divided by the
//              temperature and restricted to the tokens top-k / top-p / min-p
//              kept (those with p > 0; -inf elsewhere) and log-normalized over
//              them, so exp(row) is the very p that was sampled or verified;
//              greedy (temperature 0): log_softmax after steps 1-4, with no
//              temperature and no truncation (vLLM's processed logprobs).
// A token a mask or a truncation removed has log-probability -inf.
//
// Pure functions; thread-safe.
#ifndef SPLITSPEC_RUNTIME_SPEC_TOKEN_LOGPROBS_H_
#define SPLITSPEC_RUNTIME_SPEC_TOKEN_LOGPROBS_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/spec/logits_pipeline.h"
#include "runtime/spec/sampling_params.h"

namespace splitspec::spec {

// One committed token's log-probability and its top alternatives.
struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;  // -inf when the row excludes the token
  // The top_n most likely tokens of the row, by decreasing log-probability
  // (ties: lower id first); the committed token is among them only if it ranks there.
  std::vector<int32_t> top_ids;
  std::vector<float> top_logprobs;  // same length as top_ids

  bool operator==(const TokenLogprob&) const = default;
};

// out[v] = logits[v] - log(sum_u exp(logits[u])), accumulated in double and
// rounded once; -inf entries stay -inf. REQUIRES: equal sizes, some logit
// finite, none NaN or +inf. logits and out may be the same buffer.
void LogSoftmax(absl::Span<const float> logits, absl::Span<float> out);

// The row logprobs are read from at one position (see the top of this file).
// `cond` is the target's logits [vocab]; `uncond` its unconditional companion's
// (read only when params.guided()); `probs` the pipeline's p for this position
// (read only in processed mode when sampling). Errors: InvalidArgument on sizes
// that differ, and the pipeline's (ProcessedLogits).
absl::Status LogprobRow(const SamplingParams& params, const RowContext& context,
                        absl::Span<const float> cond, absl::Span<const float> uncond,
                        absl::Span<const float> probs, absl::Span<float> out);

// The entry of `token` in `row` (a LogprobRow) with the row's top `top_n`
// tokens. REQUIRES: 0 <= token < row.size(), 0 <= top_n.
TokenLogprob TokenLogprobAt(absl::Span<const float> row, int32_t token, int top_n);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_TOKEN_LOGPROBS_H_

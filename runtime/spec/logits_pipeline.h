// The per-request logits-processing pipeline: the one place where a row of
// logits at one position becomes the probabilities that are sampled or
// verified. It runs alike on the target's rows (every position of a
// verification block, each conditioned on the drafted tokens before it) and on
// the draft's rows, so p and q are shaped by the same request features
// (SamplingParams; on the wire proto::SamplingParams, which travels in
// SubmitRequest and Assignment to both workers).
//
//   RowContext context{.tokens = sequence_before_position, .prompt_length = prompt};
//   RETURN_IF_ERROR(ProcessRow(params, context, logits, absl::MakeSpan(probs)));
//
// Fixed order (vLLM's), each step skipped when off:
//   (guidance)     target only: the row is l_u + s * (l_c - l_u) of the conditional
//                  and unconditional rows (GuidedProcessRow), before step 1;
//   1. grammar mask: tokens whose bit is clear in context.allowed get -inf;
//   2. logit_bias:   logit[id] += bias;
//   3. repetition:   a token in tokens[0, n) (prompt or output): logit / r if
//                    logit > 0, else logit * r;
//   4. frequency / presence: logit -= count * frequency + (count > 0) * presence,
//                    count = occurrences in the output tokens[prompt_length, n);
//   5-8. temperature, top-k, top-p, min-p (LogitsToProbs, runtime/spec/sampling.h).
// Steps 1-4 are the context processors: they read the tokens before the row's
// position, which is why a verification block needs one context per row and
// why exactness under speculation holds (row i of a block is exactly the row
// plain decoding would compute after those tokens were committed).
//
// Grammar mask (step 1) interface, for runtime/grammar (structured outputs):
// the caller's matcher, having accepted context.tokens[prompt_length, n) (with
// rollback when drafted tokens are rejected), fills a token bitmask and passes it
// as context.allowed; this pipeline only applies it. The bitmask is xgrammar's
// layout: ceil(vocab / 32) words, bit (v % 32) of word v / 32 set = token v
// allowed. An all-clear mask is an error (no token can be sampled). The rows are
// made in two places, where the mask is to be filled: TargetEngine::ReadRows
// (target_worker/target_engine.cc: row r of a block follows the drafted tokens
// before it, so the matcher takes them and rolls back past the first rejected
// one; done: target_worker/grammar_rows.h) and ModelDrafter::Choose
// (runtime/spec/model_drafter.cc: each drafted position; not done yet: the model
// drafter drafts nothing for a request with a grammar).
//
// Adding a processor: one transform on the logits row in ProcessContext (its
// place in the order above), its parameter in SamplingParams and
// proto::LogitsProcessors, and its tests. The CUDA verifier does not run
// steps 1-4: a target that verifies on the device copies the rows of requests
// that use them to the host and runs this pipeline there (target_worker/device_rows.h).
//
// Pure functions; thread-safe.
#ifndef SPLITSPEC_RUNTIME_SPEC_LOGITS_PIPELINE_H_
#define SPLITSPEC_RUNTIME_SPEC_LOGITS_PIPELINE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/spec/sampling_params.h"

namespace splitspec::spec {

// What the context processors read at one position.
struct RowContext {
  // Every token before the position: prompt, generated, and (inside a
  // verification block or a draft) the drafted tokens before it. Borrowed.
  absl::Span<const int32_t> tokens;
  // tokens[0, prompt_length) are the prompt (frequency and presence count only
  // the tokens after it). Clamped to [0, tokens.size()].
  int prompt_length = 0;
  // The grammar mask (see above); empty: no mask.
  absl::Span<const uint32_t> allowed;
};

// Steps 1-4 on `logits` in place. No-op when params has no context processors
// and context.allowed is empty. InvalidArgument (naming the id or size) if a
// logit_bias id or a mask is outside the row's vocabulary, or if the mask
// allows no token.
absl::Status ProcessContext(const SamplingParams& params, const RowContext& context,
                            absl::Span<float> logits);

// The whole pipeline without guidance: steps 1-8, logits [vocab] -> probs
// [vocab]. With no context processor this is bitwise LogitsToProbs. Errors:
// ProcessContext's and LogitsToProbs'. logits and probs may not overlap unless
// they are the same buffer.
absl::Status ProcessRow(const SamplingParams& params, const RowContext& context,
                        absl::Span<const float> logits, absl::Span<float> probs);

// The target's row under classifier-free guidance: the guided logits of `cond`
// and `uncond` (GuidedLogitsToProbs' combination), then steps 1-8. With
// guidance off `uncond` is not read and this is ProcessRow(cond).
absl::Status GuidedProcessRow(const SamplingParams& params, const RowContext& context,
                              absl::Span<const float> cond, absl::Span<const float> uncond,
                              absl::Span<float> probs);

// Guidance (when params.guided(); `uncond` is read only then) and steps 1-4 of
// the target's row `cond` into `out` [vocab]: the logits that temperature and
// truncation (steps 5-8) turn into p. The processed row of log probabilities
// (runtime/spec/token_logprobs.h) starts here. Errors: ProcessContext's, and
// InvalidArgument on sizes that differ. `out` may not overlap the inputs.
absl::Status ProcessedLogits(const SamplingParams& params, const RowContext& context,
                             absl::Span<const float> cond, absl::Span<const float> uncond,
                             absl::Span<float> out);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_LOGITS_PIPELINE_H_

// Sampling parameters of one request, applied identically to the target's and
// the draft's logits (runtime/spec/sampling.h), whether speculation is on or not.
//
//   SamplingParams params;            // defaults: plain sampling at temperature 1
//   params.temperature = 0.7f;
//   params.top_p = 0.9f;
//   RETURN_IF_ERROR(params.Validate());
#ifndef SPLITSPEC_RUNTIME_SPEC_SAMPLING_PARAMS_H_
#define SPLITSPEC_RUNTIME_SPEC_SAMPLING_PARAMS_H_

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "runtime/grammar/grammar_spec.h"

namespace splitspec::spec {

// Which row a request's log probabilities are read from (vLLM's --logprobs-mode,
// runtime/spec/token_logprobs.h): kRaw, log_softmax of the target model's logits
// at the position; kProcessed, of the row after the request's processors
// (guidance, grammar mask, logit_bias, penalties) and temperature, with the
// tokens top-k / top-p / min-p removed at -inf (greedy: no temperature, no
// truncation, as vLLM).
enum class LogprobsMode { kRaw, kProcessed };

// The most alternatives a request may ask per token (OpenAI's top_logprobs
// limit; completions' logprobs=N up to this too, as vLLM allows).
inline constexpr int kMaxTopLogprobs = 20;

// The seed of choice `index` of a request with n > 1 choices: seed + index
// (mod 2^64), so choice 0 is the request itself and choice i reproduces as a
// single request with that seed.
inline uint64_t ChoiceSeed(uint64_t seed, int index) { return seed + static_cast<uint64_t>(index); }

struct SamplingParams {
  // Logits are divided by this before the softmax. 0 = greedy (a one-hot p at
  // the argmax of the logits). Must be finite and >= 0. Default 1.
  float temperature = 1.0f;
  // Keep only the top_k most probable tokens (ties broken by lower token id).
  // 0 = off. Must be >= 0. Default 0.
  int32_t top_k = 0;
  // Nucleus: keep the smallest most-probable prefix whose mass is >= top_p of the
  // mass left after top-k. 1 = off. Must be in (0, 1]. Default 1.
  float top_p = 1.0f;
  // Drop tokens whose probability is below min_p times the largest one.
  // 0 = off. Must be in [0, 1]. Default 0.
  float min_p = 0.0f;
  // Key of the request's counter-based random stream (kernels/cpu/sampling_philox.h).
  uint64_t seed = 0;
  // Classifier-free guidance scale s: the target's logits become
  // l_u + s * (l_c - l_u) before the transforms above (GuidedLogitsToProbs).
  // 1 = off (no unconditional sequence runs). Applies to the target only: the
  // draft keeps its plain distribution. Must be in [0, kMaxGuidanceScale]. Default 1.
  float guidance_scale = 1.0f;

  // --- Context processors (runtime/spec/logits_pipeline.h): they read the tokens
  // before the row's position, so a verification block's rows each see the
  // drafted tokens before them. All off by default.
  // Added to the logit of a token id (OpenAI's logit_bias), ids ascending, each
  // once. Bias in [-kMaxLogitBias, kMaxLogitBias]; ids >= 0 (and < the
  // vocabulary, checked where the row is known).
  std::vector<std::pair<int32_t, float>> logit_bias;
  // Subtracted once from the logit of every token generated so far (prompt
  // excluded). In [-2, 2].
  float presence_penalty = 0.0f;
  // Subtracted from a token's logit once per time it was generated. In [-2, 2].
  float frequency_penalty = 0.0f;
  // A token seen in the prompt or the output has its logit divided by this when
  // positive, multiplied when negative (CTRL's penalty, as vLLM applies it).
  // 1 = off. In (0, kMaxRepetitionPenalty].
  float repetition_penalty = 1.0f;

  // Structured outputs: the output must match this grammar (step 1 of the
  // pipeline, the mask). The mask is made by the caller's GrammarMatcher and
  // passed in RowContext::allowed (logits_pipeline.h). nullopt: unconstrained.
  std::optional<grammar::GrammarSpec> grammar;

  // Log probabilities (OpenAI's logprobs / top_logprobs): with a value, every
  // committed token comes back with its log-probability and the `*logprobs`
  // most likely alternatives at its position, in [0, kMaxTopLogprobs].
  // nullopt: none (the default). Output only: never changes what is sampled.
  std::optional<int> logprobs;
  LogprobsMode logprobs_mode = LogprobsMode::kRaw;

  static constexpr float kMaxGuidanceScale = 100.0f;
  static constexpr float kMaxLogitBias = 100.0f;
  static constexpr float kMaxRepetitionPenalty = 10.0f;

  bool greedy() const { return temperature == 0.0f; }
  bool guided() const { return guidance_scale != 1.0f; }
  // True if a row's probabilities depend on the tokens before it (a context processor is on).
  bool has_context_processors() const {
    return !logit_bias.empty() || presence_penalty != 0.0f || frequency_penalty != 0.0f ||
           repetition_penalty != 1.0f;
  }

  // OK, or InvalidArgument naming the first field out of range and its value.
  absl::Status Validate() const;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_SAMPLING_PARAMS_H_

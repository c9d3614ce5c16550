#include "runtime/spec/logits_pipeline.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/guidance.h"
#include "runtime/base/status_macros.h"
#include "runtime/spec/sampling.h"

namespace splitspec::spec {
namespace {

absl::Status ApplyGrammarMask(absl::Span<const uint32_t> allowed, absl::Span<float> logits) {
  const size_t vocab = logits.size();
  const size_t words = (vocab + 31) / 32;
  if (allowed.size() != words) {
    return absl::InvalidArgumentError(absl::StrCat("grammar mask has ", allowed.size(),
                                                   " words; a vocabulary of ", vocab, " needs ",
                                                   words));
  }
  bool any = false;
  for (size_t v = 0; v < vocab; ++v) {
    if ((allowed[v / 32] >> (v % 32) & 1u) == 0) {
      logits[v] = -INFINITY;
    } else {
      any = any || logits[v] != -INFINITY;
    }
  }
  if (!any) return absl::InvalidArgumentError("the grammar mask allows no token");
  return absl::OkStatus();
}

absl::Status ApplyLogitBias(const SamplingParams& params, absl::Span<float> logits) {
  for (const auto& [id, bias] : params.logit_bias) {
    if (id < 0 || static_cast<size_t>(id) >= logits.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "logit_bias names token ", id, ", outside the vocabulary [0, ", logits.size(), ")"));
    }
    logits[id] += bias;
  }
  return absl::OkStatus();
}

// Steps 3 and 4: every distinct token of the context is visited once.
absl::Status ApplyPenalties(const SamplingParams& params, const RowContext& context,
                            absl::Span<float> logits) {
  const bool repetition = params.repetition_penalty != 1.0f;
  const bool counted = params.frequency_penalty != 0.0f || params.presence_penalty != 0.0f;
  if (!repetition && !counted) return absl::OkStatus();
  const size_t prompt =
      std::min(static_cast<size_t>(std::max(context.prompt_length, 0)), context.tokens.size());
  // token -> times in the output (0: only in the prompt).
  absl::flat_hash_map<int32_t, int> output_count;
  for (size_t i = 0; i < context.tokens.size(); ++i) {
    const int32_t token = context.tokens[i];
    if (token < 0 || static_cast<size_t>(token) >= logits.size()) {
      return absl::InvalidArgumentError(absl::StrCat("context token ", token, " at index ", i,
                                                     " is outside the vocabulary [0, ",
                                                     logits.size(), ")"));
    }
    if (i < prompt && !repetition) continue;  // the prompt only matters to repetition
    output_count[token] += i >= prompt ? 1 : 0;
  }
  for (const auto& [token, count] : output_count) {
    float& logit = logits[token];
    if (repetition) {
      logit = logit > 0.0f ? logit / params.repetition_penalty : logit * params.repetition_penalty;
    }
    if (count > 0) {
      logit -= static_cast<float>(count) * params.frequency_penalty + params.presence_penalty;
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ProcessContext(const SamplingParams& params, const RowContext& context,
                            absl::Span<float> logits) {
  if (!context.allowed.empty()) RETURN_IF_ERROR(ApplyGrammarMask(context.allowed, logits));
  RETURN_IF_ERROR(ApplyLogitBias(params, logits));
  return ApplyPenalties(params, context, logits);
}

absl::Status ProcessRow(const SamplingParams& params, const RowContext& context,
                        absl::Span<const float> logits, absl::Span<float> probs) {
  if (!params.has_context_processors() && context.allowed.empty()) {
    return LogitsToProbs(params, logits, probs);
  }
  RETURN_IF_ERROR(params.Validate());
  if (logits.size() != probs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("ProcessRow: logits has ", logits.size(),
                                                   " entries, probs ", probs.size()));
  }
  if (logits.data() != probs.data()) std::copy(logits.begin(), logits.end(), probs.begin());
  RETURN_IF_ERROR(ProcessContext(params, context, probs));
  return LogitsToProbs(params, probs, probs);
}

absl::Status GuidedProcessRow(const SamplingParams& params, const RowContext& context,
                              absl::Span<const float> cond, absl::Span<const float> uncond,
                              absl::Span<float> probs) {
  if (!params.guided()) return ProcessRow(params, context, cond, probs);
  if (!params.has_context_processors() && context.allowed.empty()) {
    return GuidedLogitsToProbs(params, cond, uncond, probs);
  }
  RETURN_IF_ERROR(params.Validate());
  if (cond.empty() || cond.size() != uncond.size() || cond.size() != probs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GuidedProcessRow: cond has ", cond.size(), " entries, uncond ", uncond.size(),
        ", probs ", probs.size(), " (need equal, >= 1)"));
  }
  kernels::GuidedLogitsRows(cond.data(), uncond.data(), &params.guidance_scale, probs.data(), 1,
                            static_cast<int>(probs.size()));
  RETURN_IF_ERROR(ProcessContext(params, context, probs));
  const absl::Status status = LogitsToProbs(params, probs, probs);
  if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat("guided ", status.message()));
  return absl::OkStatus();
}

absl::Status ProcessedLogits(const SamplingParams& params, const RowContext& context,
                             absl::Span<const float> cond, absl::Span<const float> uncond,
                             absl::Span<float> out) {
  if (cond.size() != out.size() || (params.guided() && uncond.size() != cond.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("ProcessedLogits: cond has ", cond.size(), " entries, uncond ", uncond.size(),
                     ", out ", out.size(), " (need equal; uncond read only when guided)"));
  }
  if (params.guided()) {
    kernels::GuidedLogitsRows(cond.data(), uncond.data(), &params.guidance_scale, out.data(), 1,
                              static_cast<int>(out.size()));
  } else {
    std::copy(cond.begin(), cond.end(), out.begin());
  }
  return ProcessContext(params, context, out);
}

}  // namespace splitspec::spec

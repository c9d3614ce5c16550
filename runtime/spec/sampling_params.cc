#include "runtime/spec/sampling_params.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace splitspec::spec {

absl::Status SamplingParams::Validate() const {
  if (!std::isfinite(temperature) || temperature < 0.0f) {
    return absl::InvalidArgumentError(
        absl::StrCat("temperature must be finite and >= 0, got ", temperature));
  }
  if (top_k < 0) return absl::InvalidArgumentError(absl::StrCat("top_k must be >= 0, got ", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("top_p must be in (0, 1], got ", top_p));
  }
  if (!(min_p >= 0.0f && min_p <= 1.0f)) {
    return absl::InvalidArgumentError(absl::StrCat("min_p must be in [0, 1], got ", min_p));
  }
  if (!(guidance_scale >= 0.0f && guidance_scale <= kMaxGuidanceScale)) {
    return absl::InvalidArgumentError(absl::StrCat("guidance_scale must be in [0, ",
                                                   kMaxGuidanceScale, "], got ", guidance_scale));
  }
  int32_t previous_id = -1;
  for (const auto& [id, bias] : logit_bias) {
    if (id <= previous_id) {
      return absl::InvalidArgumentError(absl::StrCat(
          "logit_bias token ids must be >= 0, ascending and distinct; got ", id, " after ",
          previous_id));
    }
    if (!(bias >= -kMaxLogitBias && bias <= kMaxLogitBias)) {
      return absl::InvalidArgumentError(absl::StrCat("logit_bias of token ", id, " must be in [",
                                                     -kMaxLogitBias, ", ", kMaxLogitBias,
                                                     "], got ", bias));
    }
    previous_id = id;
  }
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("presence_penalty must be in [-2, 2], got ", presence_penalty));
  }
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f)) {
    return absl::InvalidArgumentError(
        absl::StrCat("frequency_penalty must be in [-2, 2], got ", frequency_penalty));
  }
  if (!(repetition_penalty > 0.0f && repetition_penalty <= kMaxRepetitionPenalty)) {
    return absl::InvalidArgumentError(absl::StrCat("repetition_penalty must be in (0, ",
                                                   kMaxRepetitionPenalty, "], got ",
                                                   repetition_penalty));
  }
  if (logprobs.has_value() && (*logprobs < 0 || *logprobs > kMaxTopLogprobs)) {
    return absl::InvalidArgumentError(absl::StrCat("logprobs (top alternatives) must be in [0, ",
                                                   kMaxTopLogprobs, "], got ", *logprobs));
  }
  return absl::OkStatus();
}

}  // namespace splitspec::spec

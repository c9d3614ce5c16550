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
  return absl::OkStatus();
}

}  // namespace splitspec::spec

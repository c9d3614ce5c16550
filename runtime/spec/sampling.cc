#include "runtime/spec/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/guidance.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/sampling_philox.h"
#include "kernels/cpu/softmax.h"
#include "runtime/base/status_macros.h"

namespace splitspec::spec {
namespace {

// The largest logit (lowest id among ties) and whether any logit is NaN or
// +inf, in one pass. Eight independent lanes (lane j holds ids j, j + 8, ...)
// keep the loop free of a loop-carried dependency through memory, which the
// one-accumulator form paid on every element: ~5x faster over a 49k vocabulary,
// and this runs for every row a verification forward produces. A lane keeps its
// first maximum (strict >), so the lowest id among ties wins after the merge.
struct LogitScan {
  int32_t argmax = 0;
  float max = -INFINITY;
  bool bad = false;  // some logit is NaN or +inf
};

LogitScan ScanLogits(absl::Span<const float> logits) {
  constexpr int kLanes = 8;
  const int32_t n = static_cast<int32_t>(logits.size());
  float lane_max[kLanes];
  int32_t lane_arg[kLanes];
  bool bad = false;
  for (int j = 0; j < kLanes; ++j) {
    lane_max[j] = -INFINITY;
    lane_arg[j] = j;
  }
  int32_t v = 0;
  for (; v + kLanes <= n; v += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const float x = logits[v + j];
      bad |= !(x < INFINITY);  // NaN or +inf
      const bool larger = x > lane_max[j];
      lane_max[j] = larger ? x : lane_max[j];
      lane_arg[j] = larger ? v + j : lane_arg[j];
    }
  }
  LogitScan scan;
  for (int j = 0; j < kLanes; ++j) {
    if (lane_max[j] > scan.max || (lane_max[j] == scan.max && lane_arg[j] < scan.argmax)) {
      scan.max = lane_max[j];
      scan.argmax = lane_arg[j];
    }
  }
  for (; v < n; ++v) {  // the tail: ids above every lane's, so strict > keeps ties low
    bad |= !(logits[v] < INFINITY);
    if (logits[v] > scan.max) {
      scan.max = logits[v];
      scan.argmax = v;
    }
  }
  if (scan.max == -INFINITY) scan.argmax = 0;  // every logit -inf (an error for the caller)
  scan.bad = bad;
  return scan;
}

// The values' part of ValidateLogits (logits non-empty).
absl::Status ValidateLogitValues(absl::Span<const float> logits) {
  bool any_finite = false;
  for (size_t v = 0; v < logits.size(); ++v) {
    if (std::isnan(logits[v]) || logits[v] == INFINITY) {
      return absl::InvalidArgumentError(absl::StrCat("logit of token ", v, " is ", logits[v]));
    }
    any_finite = any_finite || std::isfinite(logits[v]);
  }
  if (!any_finite)
    return absl::InvalidArgumentError("every logit is -inf: no token can be sampled");
  return absl::OkStatus();
}

absl::Status ValidateLogits(absl::Span<const float> logits, absl::Span<float> probs) {
  if (logits.empty() || logits.size() != probs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("LogitsToProbs: logits has ", logits.size(),
                                                   " entries, probs ", probs.size(),
                                                   " (need equal, >= 1)"));
  }
  return ValidateLogitValues(logits);
}

// True if a is ranked before b: higher probability, then lower id.
struct RankBefore {
  absl::Span<const float> probs;
  bool operator()(int32_t a, int32_t b) const {
    return probs[a] != probs[b] ? probs[a] > probs[b] : a < b;
  }
};

// Steps 2-4 of LogitsToProbs on a normalized probs row.
void TruncateAndRenormalize(const SamplingParams& params, absl::Span<float> probs) {
  const int32_t vocab = static_cast<int32_t>(probs.size());
  std::vector<int32_t> kept;
  kept.reserve(vocab);
  for (int32_t v = 0; v < vocab; ++v) {
    if (probs[v] > 0.0f) kept.push_back(v);
  }
  const RankBefore rank{probs};
  bool sorted = false;
  if (params.top_k > 0 && params.top_k < static_cast<int32_t>(kept.size())) {
    std::partial_sort(kept.begin(), kept.begin() + params.top_k, kept.end(), rank);
    kept.resize(params.top_k);
    sorted = true;
  }
  if (params.top_p < 1.0f) {
    if (!sorted) std::sort(kept.begin(), kept.end(), rank);
    double total = 0.0;
    for (int32_t v : kept) total += probs[v];
    const double wanted = static_cast<double>(params.top_p) * total;
    double running = 0.0;
    size_t keep = 0;
    while (keep < kept.size() && (keep == 0 || running < wanted)) running += probs[kept[keep++]];
    kept.resize(keep);
  }
  if (params.min_p > 0.0f) {
    float largest = 0.0f;
    for (int32_t v : kept) largest = std::max(largest, probs[v]);
    const float threshold = params.min_p * largest;
    kept.erase(
        std::remove_if(kept.begin(), kept.end(), [&](int32_t v) { return probs[v] < threshold; }),
        kept.end());
  }
  double total = 0.0;
  for (int32_t v : kept) total += probs[v];
  std::vector<float> survivors(kept.size());
  for (size_t j = 0; j < kept.size(); ++j)
    survivors[j] = static_cast<float>(probs[kept[j]] / total);
  std::fill(probs.begin(), probs.end(), 0.0f);
  for (size_t j = 0; j < kept.size(); ++j) probs[kept[j]] = survivors[j];
}

bool NeedsTruncation(const SamplingParams& params) {
  return params.top_k > 0 || params.top_p < 1.0f || params.min_p > 0.0f;
}

absl::Status BadRow(absl::string_view what) {
  return absl::InvalidArgumentError(
      absl::StrCat(what, ": probabilities have a negative or non-finite entry, or no mass"));
}

}  // namespace

absl::Status LogitsToProbs(const SamplingParams& params, absl::Span<const float> logits,
                           absl::Span<float> probs) {
  RETURN_IF_ERROR(params.Validate());
  const LogitScan scan = ScanLogits(logits);
  // The full check (and its message) only when the scan found a problem.
  if (scan.bad || scan.max == -INFINITY || logits.empty() || logits.size() != probs.size()) {
    RETURN_IF_ERROR(ValidateLogits(logits, probs));
  }
  if (params.greedy()) {
    std::fill(probs.begin(), probs.end(), 0.0f);
    probs[scan.argmax] = 1.0f;
    return absl::OkStatus();
  }
  const float max_logit = scan.max;
  for (size_t v = 0; v < logits.size(); ++v)
    probs[v] = (logits[v] - max_logit) / params.temperature;
  kernels::SoftmaxRows(probs.data(), probs.data(), 1, static_cast<int>(probs.size()));
  if (NeedsTruncation(params)) TruncateAndRenormalize(params, probs);
  return absl::OkStatus();
}

absl::StatusOr<int32_t> GreedyToken(absl::Span<const float> logits) {
  if (logits.empty()) return absl::InvalidArgumentError("GreedyToken: logits has 0 entries");
  const LogitScan scan = ScanLogits(logits);
  if (scan.bad || scan.max == -INFINITY) RETURN_IF_ERROR(ValidateLogitValues(logits));
  return scan.argmax;
}

absl::Status GuidedLogitsToProbs(const SamplingParams& params, absl::Span<const float> cond,
                                 absl::Span<const float> uncond, absl::Span<float> probs) {
  if (!params.guided()) return LogitsToProbs(params, cond, probs);
  RETURN_IF_ERROR(params.Validate());
  if (cond.empty() || cond.size() != uncond.size() || cond.size() != probs.size()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "GuidedLogitsToProbs: cond has ", cond.size(), " entries, uncond ", uncond.size(),
        ", probs ", probs.size(), " (need equal, >= 1)"));
  }
  kernels::GuidedLogitsRows(cond.data(), uncond.data(), &params.guidance_scale, probs.data(), 1,
                            static_cast<int>(probs.size()));
  const absl::Status status = LogitsToProbs(params, probs, probs);
  if (!status.ok()) return absl::InvalidArgumentError(absl::StrCat("guided ", status.message()));
  return absl::OkStatus();
}

absl::StatusOr<int32_t> ChooseTargetToken(VerifyMode mode, absl::Span<const float> probs,
                                          uint64_t seed, int64_t position) {
  const int n = static_cast<int>(probs.size());
  if (n == 0) return absl::InvalidArgumentError("ChooseTargetToken: empty probabilities");
  int32_t token = -1;
  switch (mode) {
    case VerifyMode::kGreedy:
      token = kernels::ArgmaxProbs(probs.data(), n);
      break;
    case VerifyMode::kCoupled:
      token = kernels::GumbelArgmax(probs.data(), n, seed, position);
      break;
    case VerifyMode::kRejection:
      token = kernels::SampleFromWeights(
          probs.data(), n, kernels::UniformDouble(seed, position, kernels::RandomPurpose::kSample));
      break;
  }
  if (token < 0) return BadRow(absl::StrCat("target row at position ", position));
  return token;
}

absl::StatusOr<SparseDistribution> TopQDistribution(absl::Span<const float> probs, int q_top_k) {
  if (q_top_k < 1)
    return absl::InvalidArgumentError(absl::StrCat("q_top_k must be >= 1, got ", q_top_k));
  std::vector<int32_t> support;
  for (size_t v = 0; v < probs.size(); ++v) {
    if (!kernels::IsValidWeight(probs[v])) return BadRow("draft row");
    if (probs[v] > 0.0f) support.push_back(static_cast<int32_t>(v));
  }
  if (support.empty()) return BadRow("draft row");
  const size_t keep = std::min<size_t>(support.size(), q_top_k);
  std::partial_sort(support.begin(), support.begin() + keep, support.end(), RankBefore{probs});
  support.resize(keep);
  double total = 0.0;
  for (int32_t v : support) total += probs[v];
  SparseDistribution q;
  q.token_ids = support;
  q.probs.reserve(keep);
  for (int32_t v : support) q.probs.push_back(static_cast<float>(probs[v] / total));
  return q;
}

absl::StatusOr<DraftChoice> ChooseDraftToken(VerifyMode mode, absl::Span<const float> probs,
                                             int q_top_k, uint64_t seed, int64_t position) {
  DraftChoice choice;
  if (mode != VerifyMode::kRejection) {
    ASSIGN_OR_RETURN(choice.token, ChooseTargetToken(mode, probs, seed, position));
    return choice;
  }
  ASSIGN_OR_RETURN(choice.q, TopQDistribution(probs, q_top_k));
  const double u = kernels::UniformDouble(seed, position, kernels::RandomPurpose::kDraftSample);
  const int index =
      kernels::SampleFromWeights(choice.q.probs.data(), static_cast<int>(choice.q.probs.size()), u);
  if (index < 0) return BadRow(absl::StrCat("draft row at position ", position));
  choice.token = choice.q.token_ids[index];
  return choice;
}

}  // namespace splitspec::spec

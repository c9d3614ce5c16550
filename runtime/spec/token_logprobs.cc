#include "runtime/spec/token_logprobs.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace splitspec::spec {
namespace {

// log(sum exp(x[v] / scale)) over the entries `keep` accepts, in double.
template <typename Keep>
double LogSumExp(absl::Span<const float> x, double scale, Keep keep) {
  double max = -INFINITY;
  for (size_t v = 0; v < x.size(); ++v) {
    if (keep(v) && x[v] != -INFINITY) max = std::max(max, static_cast<double>(x[v]) / scale);
  }
  if (max == -INFINITY) return -INFINITY;
  double sum = 0.0;
  for (size_t v = 0; v < x.size(); ++v) {
    if (keep(v) && x[v] != -INFINITY) sum += std::exp(static_cast<double>(x[v]) / scale - max);
  }
  return max + std::log(sum);
}

}  // namespace

void LogSoftmax(absl::Span<const float> logits, absl::Span<float> out) {
  const double norm = LogSumExp(logits, 1.0, [](size_t) { return true; });
  for (size_t v = 0; v < logits.size(); ++v) {
    out[v] = logits[v] == -INFINITY ? -INFINITY
                                    : static_cast<float>(static_cast<double>(logits[v]) - norm);
  }
}

absl::Status LogprobRow(const SamplingParams& params, const RowContext& context,
                        absl::Span<const float> cond, absl::Span<const float> uncond,
                        absl::Span<const float> probs, absl::Span<float> out) {
  if (cond.empty() || cond.size() != out.size()) {
    return absl::InvalidArgumentError(absl::StrCat("LogprobRow: logits has ", cond.size(),
                                                   " entries, the row ", out.size(),
                                                   " (need equal, >= 1)"));
  }
  if (params.logprobs_mode == LogprobsMode::kRaw) {
    LogSoftmax(cond, out);
    return absl::OkStatus();
  }
  RETURN_IF_ERROR(ProcessedLogits(params, context, cond, uncond, out));
  if (params.greedy()) {
    LogSoftmax(out, out);
    return absl::OkStatus();
  }
  if (probs.size() != out.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("LogprobRow: probs has ", probs.size(), " entries, the row ", out.size()));
  }
  // The survivors of top-k / top-p / min-p are the tokens p keeps.
  const double temperature = params.temperature;
  const double norm = LogSumExp(out, temperature, [&](size_t v) { return probs[v] > 0.0f; });
  for (size_t v = 0; v < out.size(); ++v) {
    out[v] = probs[v] > 0.0f && out[v] != -INFINITY
                 ? static_cast<float>(static_cast<double>(out[v]) / temperature - norm)
                 : -INFINITY;
  }
  return absl::OkStatus();
}

TokenLogprob TokenLogprobAt(absl::Span<const float> row, int32_t token, int top_n) {
  TokenLogprob entry;
  entry.token = token;
  entry.logprob = row[token];
  const size_t n = std::min(static_cast<size_t>(std::max(top_n, 0)), row.size());
  if (n == 0) return entry;
  // One pass keeping the n best, sorted (n <= kMaxTopLogprobs: insertion is cheap,
  // and most entries fail the first comparison).
  std::vector<int32_t>& ids = entry.top_ids;
  ids.reserve(n + 1);
  auto better = [&](int32_t a, int32_t b) {
    return row[a] > row[b] || (row[a] == row[b] && a < b);
  };
  for (int32_t v = 0; v < static_cast<int32_t>(row.size()); ++v) {
    if (ids.size() == n && !better(v, ids.back())) continue;
    ids.insert(std::upper_bound(ids.begin(), ids.end(), v, better), v);
    if (ids.size() > n) ids.pop_back();
  }
  for (int32_t id : ids) entry.top_logprobs.push_back(row[id]);
  return entry;
}

}  // namespace splitspec::spec

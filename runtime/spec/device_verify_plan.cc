#include "runtime/spec/device_verify_plan.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/verify.h"
#include "runtime/spec/sampling.h"

namespace splitspec::spec {
namespace {

template <typename T>
size_t BytesOf(const std::vector<T>& v) {
  return v.size() * sizeof(T);
}

bool NeedsQ(const DeviceVerifyRequest& r) {
  return r.mode == VerifyMode::kRejection && !r.draft_tokens.empty();
}

absl::Status ValidateRequest(const DeviceVerifyRequest& r, int32_t vocab, int64_t num_logit_rows) {
  if (absl::Status status = r.params.Validate(); !status.ok()) return status;
  const size_t k = r.draft_tokens.size();
  if (r.logit_rows.size() != k + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("logit_rows has ", r.logit_rows.size(), " rows, need k + 1 = ", k + 1));
  }
  for (size_t i = 0; i <= k; ++i) {
    if (r.logit_rows[i] < 0 || r.logit_rows[i] >= num_logit_rows) {
      return absl::InvalidArgumentError(absl::StrCat("logit_rows[", i, "] = ", r.logit_rows[i],
                                                     " is outside the ", num_logit_rows,
                                                     " rows of logits"));
    }
  }
  if (r.start_position < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("start_position must be >= 0, got ", r.start_position));
  }
  if (!NeedsQ(r)) return absl::OkStatus();
  if (r.draft_q.size() != k) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft_q has ", r.draft_q.size(), " rows, need k = ", k));
  }
  for (size_t i = 0; i < k; ++i) {
    if (absl::Status status = r.draft_q[i].Validate(vocab); !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("q of draft index ", i, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

void Pack(const DeviceVerifyRequest& r, VerifyUpload& u) {
  u.modes.push_back(static_cast<int32_t>(r.mode));
  u.draft_tokens.insert(u.draft_tokens.end(), r.draft_tokens.begin(), r.draft_tokens.end());
  u.draft_offsets.push_back(static_cast<int32_t>(u.draft_tokens.size()));
  u.seeds.push_back(r.params.seed);
  u.start_positions.push_back(r.start_position);
  u.want_bonus.push_back(r.want_bonus ? 1 : 0);
  u.row_sources.insert(u.row_sources.end(), r.logit_rows.begin(), r.logit_rows.end());
  u.row_params.insert(u.row_params.end(), r.logit_rows.size(), RowParams(r.params));
  if (u.q_format != kernels::kDraftQSparse) return;
  for (size_t i = 0; i < r.draft_tokens.size(); ++i) {
    if (NeedsQ(r)) {
      u.q_ids.insert(u.q_ids.end(), r.draft_q[i].token_ids.begin(), r.draft_q[i].token_ids.end());
      u.q_probs.insert(u.q_probs.end(), r.draft_q[i].probs.begin(), r.draft_q[i].probs.end());
    }
    u.q_offsets.push_back(static_cast<int32_t>(u.q_ids.size()));
  }
}

absl::Status RowError(const DeviceVerifyRequest& r, int row, int32_t code, int32_t index) {
  const std::string where = absl::StrCat("target row ", row, " (position ", r.start_position + row,
                                         ", logits row ", r.logit_rows[row], ")");
  if (code == kernels::kLogitsRowNonFinite) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": logit of token ", index, " is NaN or +inf"));
  }
  if (code == kernels::kLogitsRowAllMasked) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": every logit is -inf: no token can be sampled"));
  }
  return absl::InternalError(absl::StrCat(where, ": logits kernel error code ", code));
}

}  // namespace

size_t VerifyUpload::Bytes() const {
  return BytesOf(modes) + BytesOf(draft_offsets) + BytesOf(draft_tokens) + BytesOf(seeds) +
         BytesOf(start_positions) + BytesOf(want_bonus) + BytesOf(q_offsets) + BytesOf(q_ids) +
         BytesOf(q_probs) + BytesOf(row_sources) + BytesOf(row_params);
}

VerifyDownload VerifyDownload::For(const VerifyUpload& upload) {
  const size_t n = upload.modes.size(), rows = upload.row_sources.size();
  VerifyDownload d;
  d.accepted.assign(n, 0);
  d.num_committed.assign(n, 0);
  d.error.assign(n, 0);
  d.error_index.assign(n, 0);
  d.rejected.assign(n, 0);
  d.committed.assign(upload.draft_tokens.size() + n, 0);
  d.row_error.assign(rows, 0);
  d.row_error_index.assign(rows, 0);
  return d;
}

size_t VerifyDownload::Bytes() const {
  return BytesOf(accepted) + BytesOf(num_committed) + BytesOf(error) + BytesOf(error_index) +
         BytesOf(rejected) + BytesOf(committed) + BytesOf(row_error) + BytesOf(row_error_index);
}

kernels::RowSamplingParams RowParams(const SamplingParams& params) {
  kernels::RowSamplingParams row;
  row.temperature = params.temperature;
  row.top_k = params.top_k;
  row.top_p = params.top_p;
  row.min_p = params.min_p;
  return row;
}

absl::StatusOr<VerifyUpload> PlanDeviceVerify(
    absl::Span<const DeviceVerifyRequest> requests, int32_t vocab, int64_t num_logit_rows,
    std::vector<absl::StatusOr<VerifyOutcome>>* outcomes) {
  if (vocab < 1 || num_logit_rows < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "vocab = ", vocab, ", num_logit_rows = ", num_logit_rows, " (need >= 1 and >= 0)"));
  }
  outcomes->assign(requests.size(), absl::UnknownError("not verified"));
  VerifyUpload u;
  u.vocab = vocab;
  std::vector<bool> valid(requests.size());
  for (size_t j = 0; j < requests.size(); ++j) {
    const absl::Status status = ValidateRequest(requests[j], vocab, num_logit_rows);
    valid[j] = status.ok();
    if (!status.ok()) (*outcomes)[j] = status;
    if (status.ok() && NeedsQ(requests[j])) u.q_format = kernels::kDraftQSparse;
  }
  for (size_t j = 0; j < requests.size(); ++j) {
    if (!valid[j]) continue;
    u.request_index.push_back(j);
    Pack(requests[j], u);
  }
  return u;
}

void CollectOutcomes(absl::Span<const DeviceVerifyRequest> requests, const VerifyUpload& upload,
                     const VerifyDownload& download,
                     std::vector<absl::StatusOr<VerifyOutcome>>* outcomes) {
  for (int32_t s = 0; s < upload.num_sequences(); ++s) {
    const DeviceVerifyRequest& r = requests[upload.request_index[s]];
    absl::StatusOr<VerifyOutcome>& outcome = (*outcomes)[upload.request_index[s]];
    const int32_t first_row = upload.draft_offsets[s] + s;
    const int rows = static_cast<int>(r.logit_rows.size());
    bool row_failed = false;
    for (int i = 0; i < rows && !row_failed; ++i) {
      const int32_t code = download.row_error[first_row + i];
      row_failed = code != kernels::kLogitsRowOk;
      if (row_failed) outcome = RowError(r, i, code, download.row_error_index[first_row + i]);
    }
    if (row_failed) continue;
    if (download.error[s] != kernels::kVerifyOk) {
      outcome = VerifyKernelError(r.draft_tokens, r.start_position, download.error[s],
                                  download.error_index[s]);
      continue;
    }
    VerifyOutcome result;
    result.accepted = download.accepted[s];
    result.rejected = download.rejected[s] != 0;
    const int32_t* first = download.committed.data() + first_row;
    result.committed.assign(first, first + download.num_committed[s]);
    outcome = std::move(result);
  }
}

std::pair<int32_t, int32_t> CheckLogitsRow(absl::Span<const float> logits) {
  bool any_finite = false;
  for (size_t v = 0; v < logits.size(); ++v) {
    if (std::isnan(logits[v]) || logits[v] == INFINITY) {
      return {kernels::kLogitsRowNonFinite, static_cast<int32_t>(v)};
    }
    any_finite = any_finite || logits[v] != -INFINITY;
  }
  if (!any_finite) return {kernels::kLogitsRowAllMasked, -1};
  return {kernels::kLogitsRowOk, -1};
}

absl::StatusOr<std::vector<absl::StatusOr<VerifyOutcome>>> VerifyOnHost(
    absl::Span<const DeviceVerifyRequest> requests, absl::Span<const float> logits,
    int64_t row_stride, int32_t vocab) {
  if (row_stride < vocab || row_stride < 1 || logits.size() % row_stride != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("logits of ", logits.size(), " floats with row_stride ", row_stride,
                     " (need a whole number of rows >= vocab ", vocab, ")"));
  }
  std::vector<absl::StatusOr<VerifyOutcome>> outcomes;
  const int64_t num_logit_rows = static_cast<int64_t>(logits.size()) / row_stride;
  absl::StatusOr<VerifyUpload> planned =
      PlanDeviceVerify(requests, vocab, num_logit_rows, &outcomes);
  if (!planned.ok()) return planned.status();
  const VerifyUpload& u = *planned;
  VerifyDownload d = VerifyDownload::For(u);
  std::vector<float> probs(static_cast<size_t>(u.num_rows()) * vocab);
  for (int32_t s = 0; s < u.num_sequences(); ++s) {
    const SamplingParams& params = requests[u.request_index[s]].params;
    for (int32_t row = u.draft_offsets[s] + s; row <= u.draft_offsets[s + 1] + s; ++row) {
      const absl::Span<const float> in = logits.subspan(u.row_sources[row] * row_stride, vocab);
      std::tie(d.row_error[row], d.row_error_index[row]) = CheckLogitsRow(in);
      absl::Span<float> out =
          absl::MakeSpan(probs).subspan(static_cast<size_t>(row) * vocab, vocab);
      if (d.row_error[row] != kernels::kLogitsRowOk || !LogitsToProbs(params, in, out).ok()) {
        std::fill(out.begin(), out.end(), 0.0f);  // as the device leaves a bad row
      }
    }
  }
  kernels::VerifyBatchView view;
  view.num_sequences = u.num_sequences();
  view.vocab = vocab;
  view.modes = u.modes.data();
  view.draft_offsets = u.draft_offsets.data();
  view.seeds = u.seeds.data();
  view.start_positions = u.start_positions.data();
  view.want_bonus = u.want_bonus.data();
  view.draft_tokens = u.draft_tokens.data();
  view.probs = probs.data();
  view.q_format = u.q_format;
  view.q_offsets = u.q_offsets.data();
  view.q_ids = u.q_ids.data();
  view.q_probs = u.q_probs.data();
  view.out_accepted = d.accepted.data();
  view.out_num_committed = d.num_committed.data();
  view.out_rejected = d.rejected.data();
  view.out_error = d.error.data();
  view.out_error_index = d.error_index.data();
  view.out_committed = d.committed.data();
  kernels::VerifyBatchReference(view);
  CollectOutcomes(requests, u, d, &outcomes);
  return outcomes;
}

}  // namespace splitspec::spec

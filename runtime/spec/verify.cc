#include "runtime/spec/verify.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/verify.h"
#include "runtime/base/status_macros.h"

namespace splitspec::spec {
namespace {

bool NeedsQ(const VerifyRequest& r) {
  return r.mode == VerifyMode::kRejection && !r.draft_tokens.empty();
}

absl::Status ValidateRequest(const VerifyRequest& r, int32_t vocab) {
  const size_t k = r.draft_tokens.size();
  if (r.target_probs.size() != (k + 1) * static_cast<size_t>(vocab)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target_probs has ", r.target_probs.size(),
        " floats, need (k + 1) * vocab = ", (k + 1) * vocab, " for k = ", k, ", vocab = ", vocab));
  }
  if (r.start_position < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("start_position must be >= 0, got ", r.start_position));
  }
  if (!NeedsQ(r)) return absl::OkStatus();
  const bool sparse = !r.draft_q_sparse.empty();
  const bool dense = !r.draft_q_dense.empty();
  if (sparse == dense) {
    return absl::InvalidArgumentError(absl::StrCat(
        "rejection mode needs exactly one of draft_q_sparse / draft_q_dense, got ",
        r.draft_q_sparse.size(), " sparse rows and ", r.draft_q_dense.size(), " dense floats"));
  }
  if (dense && r.draft_q_dense.size() != k * vocab) {
    return absl::InvalidArgumentError(absl::StrCat("draft_q_dense has ", r.draft_q_dense.size(),
                                                   " floats, need k * vocab = ", k * vocab));
  }
  if (sparse) {
    if (r.draft_q_sparse.size() != k) {
      return absl::InvalidArgumentError(
          absl::StrCat("draft_q_sparse has ", r.draft_q_sparse.size(), " rows, need k = ", k));
    }
    for (size_t i = 0; i < k; ++i) {
      const absl::Status status = r.draft_q_sparse[i].Validate(vocab);
      if (!status.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("q of draft index ", i, ": ", status.message()));
      }
    }
  }
  return absl::OkStatus();
}

// The kernel inputs for the requests that passed validation.
struct PackedBatch {
  std::vector<size_t> request_index;  // packed sequence -> request
  std::vector<int32_t> modes, draft_offsets{0}, draft_tokens;
  std::vector<uint64_t> seeds;
  std::vector<int64_t> start_positions;
  std::vector<uint8_t> want_bonus;
  // The target rows [sum of (k + 1), vocab]: a single request's own rows (no copy:
  // 5 rows of a 49k vocabulary are 1 MB), else copied here.
  std::vector<float> probs;
  const float* probs_data = nullptr;
  int32_t q_format = kernels::kDraftQNone;
  std::vector<int32_t> q_offsets{0}, q_ids;
  std::vector<float> q_probs;
};

// Appends request r's q rows in the batch's format (empty/zero rows where r has no q).
void PackQ(const VerifyRequest& r, int32_t vocab, PackedBatch& b) {
  const size_t k = r.draft_tokens.size();
  for (size_t i = 0; i < k; ++i) {
    if (b.q_format == kernels::kDraftQDense) {
      if (NeedsQ(r)) {
        b.q_probs.insert(b.q_probs.end(), r.draft_q_dense.begin() + i * vocab,
                         r.draft_q_dense.begin() + (i + 1) * vocab);
      } else {
        b.q_probs.resize(b.q_probs.size() + vocab, 0.0f);
      }
      continue;
    }
    if (NeedsQ(r) && !r.draft_q_sparse.empty()) {
      b.q_ids.insert(b.q_ids.end(), r.draft_q_sparse[i].token_ids.begin(),
                     r.draft_q_sparse[i].token_ids.end());
      b.q_probs.insert(b.q_probs.end(), r.draft_q_sparse[i].probs.begin(),
                       r.draft_q_sparse[i].probs.end());
    } else if (NeedsQ(r)) {  // a dense row in a sparse batch: list its support
      for (int32_t v = 0; v < vocab; ++v) {
        const float q = r.draft_q_dense[i * vocab + v];
        if (q != 0.0f) {
          b.q_ids.push_back(v);
          b.q_probs.push_back(q);
        }
      }
    }
    b.q_offsets.push_back(static_cast<int32_t>(b.q_ids.size()));
  }
}

PackedBatch Pack(absl::Span<const VerifyRequest> requests, const std::vector<bool>& valid,
                 int32_t vocab) {
  PackedBatch b;
  bool any_sparse = false, any_dense = false;
  for (size_t j = 0; j < requests.size(); ++j) {
    if (!valid[j] || !NeedsQ(requests[j])) continue;
    any_sparse = any_sparse || !requests[j].draft_q_sparse.empty();
    any_dense = any_dense || !requests[j].draft_q_dense.empty();
  }
  b.q_format = any_sparse  ? kernels::kDraftQSparse
               : any_dense ? kernels::kDraftQDense
                           : kernels::kDraftQNone;
  size_t valid_count = 0, rows_size = 0;
  for (size_t j = 0; j < requests.size(); ++j) {
    if (!valid[j]) continue;
    ++valid_count;
    rows_size += requests[j].target_probs.size();
  }
  if (valid_count > 1) b.probs.reserve(rows_size);
  for (size_t j = 0; j < requests.size(); ++j) {
    if (!valid[j]) continue;
    const VerifyRequest& r = requests[j];
    b.request_index.push_back(j);
    b.modes.push_back(static_cast<int32_t>(r.mode));
    b.draft_tokens.insert(b.draft_tokens.end(), r.draft_tokens.begin(), r.draft_tokens.end());
    b.draft_offsets.push_back(static_cast<int32_t>(b.draft_tokens.size()));
    b.seeds.push_back(r.seed);
    b.start_positions.push_back(r.start_position);
    b.want_bonus.push_back(r.want_bonus ? 1 : 0);
    if (valid_count == 1) {
      b.probs_data = r.target_probs.data();
    } else {
      b.probs.insert(b.probs.end(), r.target_probs.begin(), r.target_probs.end());
    }
    if (b.q_format != kernels::kDraftQNone) PackQ(r, vocab, b);
  }
  if (valid_count > 1) b.probs_data = b.probs.data();
  return b;
}

}  // namespace

absl::Status VerifyKernelError(absl::Span<const int32_t> draft_tokens, int64_t start_position,
                               int32_t code, int32_t index) {
  const int64_t position = start_position + index;
  const std::string where = absl::StrCat("draft index ", index, " (position ", position, ")");
  const int32_t token =
      index >= 0 && index < static_cast<int32_t>(draft_tokens.size()) ? draft_tokens[index] : -1;
  switch (code) {
    case kernels::kVerifyTokenOutOfRange:
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": draft token ", token, " is outside the vocabulary"));
    case kernels::kVerifyTokenHasZeroQ:
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": draft token ", token, " has q = 0, so the draft cannot have sampled it"));
    case kernels::kVerifyBadDraftQ:
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": q has a negative or non-finite entry"));
    case kernels::kVerifyBadTargetRow:
      return absl::InvalidArgumentError(
          absl::StrCat("target row ", index, " (position ", position,
                       "): negative or non-finite entry, or no mass"));
    default:
      return absl::InternalError(
          absl::StrCat("verification kernel error code ", code, " at ", where));
  }
}

absl::StatusOr<std::vector<absl::StatusOr<VerifyOutcome>>> VerifyBatch(
    absl::Span<const VerifyRequest> requests, int32_t vocab) {
  if (vocab < 1) return absl::InvalidArgumentError(absl::StrCat("vocab must be >= 1, got ", vocab));
  std::vector<absl::StatusOr<VerifyOutcome>> outcomes(requests.size());
  std::vector<bool> valid(requests.size());
  for (size_t j = 0; j < requests.size(); ++j) {
    const absl::Status status = ValidateRequest(requests[j], vocab);
    valid[j] = status.ok();
    if (!status.ok()) outcomes[j] = status;
  }
  PackedBatch b = Pack(requests, valid, vocab);
  const size_t n = b.request_index.size();
  std::vector<int32_t> accepted(n), num_committed(n), error(n), error_index(n);
  std::vector<uint8_t> rejected(n);
  std::vector<int32_t> committed(b.draft_tokens.size() + n);

  kernels::VerifyBatchView view;
  view.num_sequences = static_cast<int32_t>(n);
  view.vocab = vocab;
  view.modes = b.modes.data();
  view.draft_offsets = b.draft_offsets.data();
  view.seeds = b.seeds.data();
  view.start_positions = b.start_positions.data();
  view.want_bonus = b.want_bonus.data();
  view.draft_tokens = b.draft_tokens.data();
  view.probs = b.probs_data;
  view.q_format = b.q_format;
  view.q_offsets = b.q_offsets.data();
  view.q_ids = b.q_ids.data();
  view.q_probs = b.q_probs.data();
  view.out_accepted = accepted.data();
  view.out_num_committed = num_committed.data();
  view.out_rejected = rejected.data();
  view.out_error = error.data();
  view.out_error_index = error_index.data();
  view.out_committed = committed.data();
  kernels::VerifyBatchReference(view);

  for (size_t s = 0; s < n; ++s) {
    const VerifyRequest& r = requests[b.request_index[s]];
    if (error[s] != kernels::kVerifyOk) {
      outcomes[b.request_index[s]] =
          VerifyKernelError(r.draft_tokens, r.start_position, error[s], error_index[s]);
      continue;
    }
    VerifyOutcome outcome;
    outcome.accepted = accepted[s];
    outcome.rejected = rejected[s] != 0;
    const int32_t* first = committed.data() + b.draft_offsets[s] + s;
    outcome.committed.assign(first, first + num_committed[s]);
    outcomes[b.request_index[s]] = std::move(outcome);
  }
  return outcomes;
}

absl::StatusOr<VerifyOutcome> VerifyGreedyTokens(absl::Span<const int32_t> target_tokens,
                                                 absl::Span<const int32_t> draft_tokens,
                                                 int64_t start_position, bool want_bonus,
                                                 int32_t vocab) {
  const size_t k = draft_tokens.size();
  if (target_tokens.size() != k + 1) {
    return absl::InvalidArgumentError(absl::StrCat("target_tokens has ", target_tokens.size(),
                                                   " tokens, need k + 1 = ", k + 1));
  }
  if (start_position < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("start_position must be >= 0, got ", start_position));
  }
  // The kernel's greedy rule (kernels/cpu/verify.cc, VerifySequence) on one-hot rows:
  // a draft token is accepted while it is the row's argmax, the first other argmax is
  // the correction, and after a full acceptance the last row's argmax is the bonus.
  VerifyOutcome outcome;
  for (size_t i = 0; i < k; ++i) {
    if (draft_tokens[i] < 0 || draft_tokens[i] >= vocab) {
      return VerifyKernelError(draft_tokens, start_position, kernels::kVerifyTokenOutOfRange,
                               static_cast<int32_t>(i));
    }
    outcome.committed.push_back(target_tokens[i]);
    if (target_tokens[i] != draft_tokens[i]) {
      outcome.rejected = true;
      return outcome;
    }
    ++outcome.accepted;
  }
  if (want_bonus) outcome.committed.push_back(target_tokens[k]);
  return outcome;
}

absl::StatusOr<VerifyOutcome> VerifyBlock(const VerifyRequest& request, int32_t vocab) {
  ASSIGN_OR_RETURN(std::vector<absl::StatusOr<VerifyOutcome>> outcomes,
                   VerifyBatch(absl::MakeConstSpan(&request, 1), vocab));
  return std::move(outcomes[0]);
}

}  // namespace splitspec::spec

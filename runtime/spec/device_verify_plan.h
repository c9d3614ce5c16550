// Verification where the target's logits are: the host-side contract of the
// device verifier (runtime/spec/cuda_verifier.h, CUDA builds) and a CPU
// executor of the very same plan (VerifyOnHost), which is what the device is
// tested against.
//
//   std::vector<DeviceVerifyRequest> requests = ...;   // logit_rows index the forward's logits
//   ASSIGN_OR_RETURN(auto outcomes, verifier->Verify(requests, d_logits, rows, stride, vocab));
//
// Each request names the rows of the forward's logits matrix that hold p_0..p_k
// (LogitsToProbs of those rows under the request's SamplingParams), its draft
// tokens and, in rejection mode, the draft's sparse q; the rules are those of
// runtime/spec/verify.h, the randomness (seed, position) the same, so a request's
// outcome equals VerifyBlock on the rows LogitsToProbs makes (up to the round-off
// stated in kernels/cuda/sampling.h when the rows are made on the device).
//
// What crosses the host boundary per call (VerifyUpload / VerifyDownload):
//   up:   per sequence mode, seed, start position, want_bonus, draft offset; per
//         draft token the id and the sparse q; per target row the logits row it
//         reads and the request's temperature, top-k, top-p, min-p;
//   down: per sequence accepted, committed count, rejected, error code and
//         index; per target row an error code and index; the committed ids.
// Neither depends on the vocabulary size: no probability or logit row crosses.
#ifndef SPLITSPEC_RUNTIME_SPEC_DEVICE_VERIFY_PLAN_H_
#define SPLITSPEC_RUNTIME_SPEC_DEVICE_VERIFY_PLAN_H_

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cpu/logits_rows_types.h"
#include "kernels/cpu/verify_types.h"
#include "runtime/spec/sampling_params.h"
#include "runtime/spec/sparse_distribution.h"
#include "runtime/spec/verify.h"
#include "runtime/spec/verify_mode.h"

namespace splitspec::spec {

// One draft block of one request, with its target rows left as logits.
// Spans are borrowed for the duration of the call.
struct DeviceVerifyRequest {
  VerifyMode mode = VerifyMode::kRejection;
  SamplingParams params;                         // shapes p; params.seed keys every choice
  absl::Span<const int64_t> logit_rows;          // [k + 1] rows of the logits matrix: p_0..p_k
  absl::Span<const int32_t> draft_tokens;        // [k], k >= 0
  absl::Span<const SparseDistribution> draft_q;  // [k] in rejection mode with k > 0, else unread
  int64_t start_position = 0;                    // position of draft_tokens[0], >= 0
  bool want_bonus = true;
};

// Everything the host sends for one call, in the kernels' flat layouts
// (kernels/cpu/verify_types.h, kernels/cpu/logits_rows_types.h). Sequences are
// the valid requests in order; target row r of sequence s is packed row
// draft_offsets[s] + s + r.
struct VerifyUpload {
  int32_t vocab = 0;
  std::vector<size_t> request_index;  // packed sequence -> request (host only, not sent)
  std::vector<int32_t> modes, draft_offsets{0}, draft_tokens;
  std::vector<uint64_t> seeds;
  std::vector<int64_t> start_positions;
  std::vector<uint8_t> want_bonus;
  int32_t q_format = kernels::kDraftQNone;  // sparse when any sequence carries q
  std::vector<int32_t> q_offsets{0}, q_ids;
  std::vector<float> q_probs;
  std::vector<int64_t> row_sources;                    // [rows] logits row of each target row
  std::vector<kernels::RowSamplingParams> row_params;  // [rows]

  int32_t num_sequences() const { return static_cast<int32_t>(modes.size()); }
  int32_t num_rows() const { return static_cast<int32_t>(row_sources.size()); }
  // Bytes of the arrays sent (request_index excluded).
  size_t Bytes() const;
};

// Everything the host receives for one call.
struct VerifyDownload {
  std::vector<int32_t> accepted, num_committed, error, error_index;  // [sequences]
  std::vector<uint8_t> rejected;                                     // [sequences]
  std::vector<int32_t> committed;                                    // [draft tokens + sequences]
  std::vector<int32_t> row_error, row_error_index;  // [rows] kernels::LogitsRowError

  // Arrays sized for `upload`, zeroed.
  static VerifyDownload For(const VerifyUpload& upload);
  size_t Bytes() const;
};

// kernels::RowSamplingParams of `params` (the seed travels per sequence).
kernels::RowSamplingParams RowParams(const SamplingParams& params);

// Validates and packs. outcomes (resized to requests.size()) receives each
// invalid request's error (InvalidArgument naming the field: params, a logit row
// outside [0, num_logit_rows), logit_rows not k + 1, start_position < 0, q not k
// well-formed rows in rejection mode); the others are packed and left Unknown.
// Errors of the whole call: vocab < 1 or num_logit_rows < 0 (InvalidArgument).
absl::StatusOr<VerifyUpload> PlanDeviceVerify(absl::Span<const DeviceVerifyRequest> requests,
                                              int32_t vocab, int64_t num_logit_rows,
                                              std::vector<absl::StatusOr<VerifyOutcome>>* outcomes);

// Turns the download into the packed requests' outcomes: a target row with a
// logits error (InvalidArgument naming the row, its position and the token),
// else a kernel error (VerifyKernelError), else the outcome.
void CollectOutcomes(absl::Span<const DeviceVerifyRequest> requests, const VerifyUpload& upload,
                     const VerifyDownload& download,
                     std::vector<absl::StatusOr<VerifyOutcome>>* outcomes);

// The logits row check both executors make: kLogitsRowNonFinite with the first
// NaN or +inf token, kLogitsRowAllMasked if every logit is -inf, else kLogitsRowOk
// (index -1). logits: [vocab >= 1].
std::pair<int32_t, int32_t> CheckLogitsRow(absl::Span<const float> logits);

// The CPU executor of the plan: LogitsToProbs per target row, the CPU
// verification kernel, CollectOutcomes. logits: [num_logit_rows, row_stride]
// host floats, row_stride >= vocab. Errors of the whole call as PlanDeviceVerify,
// plus a row_stride < vocab or a logits size that is not a whole number of rows.
absl::StatusOr<std::vector<absl::StatusOr<VerifyOutcome>>> VerifyOnHost(
    absl::Span<const DeviceVerifyRequest> requests, absl::Span<const float> logits,
    int64_t row_stride, int32_t vocab);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_DEVICE_VERIFY_PLAN_H_

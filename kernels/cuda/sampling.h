// CUDA logits -> probabilities under per-row sampling parameters: the device
// twin of runtime/spec/sampling.h's LogitsToProbs, so the target's
// probabilities are made where its logits are and never cross to the host.
//
//   LogitsToProbsView view = ...;   // device pointers, layout in kernels/cpu/logits_rows_types.h
//   RETURN_IF_ERROR(LaunchLogitsToProbs(view, stream));
//
// Same steps and order as LogitsToProbs: temperature (0: one-hot at the argmax of
// the logits, lowest id on ties), softmax, top-k (ties: lower id first), top-p
// (the shortest most-probable prefix of the survivors whose mass is >= top_p of
// theirs), min-p, then renormalization of the survivors (every other entry is
// exactly 0). One thread block per row; no sort: each cut is found by bisecting
// the float bit pattern of the threshold (probabilities are >= 0, so bits order
// as values) with block-wide counts or masses, then the lowest ids among the
// entries equal to the threshold are kept.
//
// Agreement with the CPU: the support is the same and each probability is within
// a few ulps (exp is the device's expf; sums are in double in a fixed tree rather
// than in index or rank order). The support differs only where a cut falls
// within that round-off: a top-p prefix mass within ~1e-15 relative of top_p
// times the total, or a probability within ~1e-6 relative of min_p times the
// largest. Each row's result depends only on that row (batch invariant).
// Errors: InvalidArgument for num_rows < 0, vocab < 1, a stride < vocab, or a
// null pointer (named); Internal if the launch fails. Per-row logits errors go to
// out_error / out_error_index (the row is then all zeros). Asynchronous on `stream`.
#ifndef SPLITSPEC_KERNELS_CUDA_SAMPLING_H_
#define SPLITSPEC_KERNELS_CUDA_SAMPLING_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"
#include "kernels/cpu/logits_rows_types.h"

namespace splitspec::kernels {

absl::Status LaunchLogitsToProbs(const LogitsToProbsView& view, cudaStream_t stream);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CUDA_SAMPLING_H_

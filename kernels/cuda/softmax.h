// CUDA twin of kernels/cpu/softmax.h: row-wise softmax on device memory.
//
//   RETURN_IF_ERROR(LaunchSoftmaxRows(d_logits, d_probs, rows, vocab, stream));
//
// Same contract as SoftmaxRowsReference: d_logits [rows, cols] in, d_probs
// [rows, cols] out (may alias), one thread block per row with a fixed reduction
// tree, so a row's result does not depend on `rows`.
// Errors: InvalidArgument for rows < 0 or cols < 1; Internal if the launch fails.
// The launch is asynchronous on `stream`; nothing is written on error.
#ifndef SPLITSPEC_KERNELS_CUDA_SOFTMAX_H_
#define SPLITSPEC_KERNELS_CUDA_SOFTMAX_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace splitspec::kernels {

absl::Status LaunchSoftmaxRows(const float* d_logits, float* d_probs, int rows, int cols,
                               cudaStream_t stream);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CUDA_SOFTMAX_H_

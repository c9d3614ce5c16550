// CUDA twin of kernels/cpu/guidance.h: classifier-free guidance's guided logits
// l_g = l_u + s * (l_c - l_u) per row, on device memory.
//
//   RETURN_IF_ERROR(LaunchGuidedLogitsRows(d_cond, d_uncond, d_scales, d_guided, rows, vocab,
//                                          stream));
//   // then the usual temperature / top-k / top-p / min-p and softmax (LaunchSoftmaxRows)
//
// Same contract as GuidedLogitsRowsReference, bit for bit: a row whose scale is
// exactly 1 is cond copied unchanged; otherwise each entry is -inf where cond or
// uncond is -inf, else __fmaf_rn(s, __fsub_rn(c, u), u) (one rounding for the
// difference, one fused multiply-add: the same operations as the CPU paths, with
// no contraction left to the compiler). d_cond, d_uncond, d_out: [rows, cols];
// d_scales: [rows], all device memory. d_out may alias d_cond or d_uncond (each
// entry is read by the thread that writes it), so no extra vocabulary-sized
// buffer is needed.
// Errors: InvalidArgument for rows < 0 or cols < 1; Internal if the launch fails.
// The launch is asynchronous on `stream`; nothing is written on error.
#ifndef SPLITSPEC_KERNELS_CUDA_GUIDANCE_H_
#define SPLITSPEC_KERNELS_CUDA_GUIDANCE_H_

#include <cuda_runtime_api.h>

#include "absl/status/status.h"

namespace splitspec::kernels {

absl::Status LaunchGuidedLogitsRows(const float* d_cond, const float* d_uncond,
                                    const float* d_scales, float* d_out, int rows, int cols,
                                    cudaStream_t stream);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CUDA_GUIDANCE_H_

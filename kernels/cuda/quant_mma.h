// The tensor-core matmul of quantized weights (kernels/cuda/mma_tiling.h holds its
// arithmetic, tiling and the rule mma::UseTensorCores that picks it): internal to
// kernels/cuda; LaunchMatMuls (quant_matmul.h) calls it for the token counts the
// rule gives it, so its callers see one matmul whose bits do not depend on the path.
#ifndef SPLITSPEC_KERNELS_CUDA_QUANT_MMA_H_
#define SPLITSPEC_KERNELS_CUDA_QUANT_MMA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/matvec_tiling.h"
#include "kernels/cuda/quant_matmul.h"

namespace splitspec::kernels {

// y[t * y_stride + r] = dot(row r of w, token t of xq) for r < w.rows, t < tokens,
// bitwise the matvec's (mma_tiling.h). xq: the activations quantized in the type's
// CudaMatMulActivationLayout (per 32, per 256 for the K-quants), qs 4-byte aligned.
// Asynchronous on `stream`.
// Errors: InvalidArgument (mma::PlanMmaGrid's, or weights / activations not 4-byte
// aligned), Internal when the launch fails.
absl::Status LaunchMmaMatMul(const DeviceMatrix& w, const matvec::Q8View& xq, int64_t tokens,
                             float* y, int64_t y_stride, cudaStream_t stream);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CUDA_QUANT_MMA_H_

#include "kernels/cuda/softmax.h"

#include <cfloat>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"

namespace splitspec::kernels {
namespace {

constexpr int kThreads = 256;

// Block-wide max in a fixed tree order (warp shuffles, then one warp over the
// warp partials), so the result depends only on the row's values and cols.
__device__ float BlockMax(float value, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < kThreads / 32 ? scratch[lane] : -FLT_MAX;
    for (int offset = 16; offset > 0; offset /= 2)
      value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
    if (lane == 0) scratch[0] = value;
  }
  __syncthreads();
  const float result = scratch[0];
  __syncthreads();  // scratch is reused by the caller
  return result;
}

__global__ void SoftmaxRowsKernel(const float* __restrict__ logits, float* probs, int cols) {
  __shared__ float scratch[32];
  const long row = blockIdx.x;
  const float* in = logits + row * cols;
  float* out = probs + row * cols;

  float local_max = -FLT_MAX;
  for (int c = threadIdx.x; c < cols; c += kThreads) local_max = fmaxf(local_max, in[c]);
  const float row_max = BlockMax(local_max, scratch);

  float local_sum = 0.0f;
  for (int c = threadIdx.x; c < cols; c += kThreads) {
    const float e = expf(in[c] - row_max);
    out[c] = e;
    local_sum += e;
  }
  // Sum: pad the second stage with zeros rather than duplicates.
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2)
    local_sum += __shfl_xor_sync(0xffffffffu, local_sum, offset);
  if (lane == 0) scratch[warp] = local_sum;
  __syncthreads();
  if (warp == 0) {
    float v = lane < kThreads / 32 ? scratch[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) scratch[0] = v;
  }
  __syncthreads();
  const float inv_sum = 1.0f / scratch[0];
  for (int c = threadIdx.x; c < cols; c += kThreads) out[c] *= inv_sum;
}

}  // namespace

absl::Status LaunchSoftmaxRows(const float* d_logits, float* d_probs, int rows, int cols,
                               cudaStream_t stream) {
  if (rows < 0 || cols < 1) {
    return absl::InvalidArgumentError(absl::StrCat("LaunchSoftmaxRows: rows=", rows, " cols=", cols,
                                                   " (need rows >= 0, cols >= 1)"));
  }
  if (rows == 0) return absl::OkStatus();
  DiscardStaleCudaError();
  SoftmaxRowsKernel<<<rows, kThreads, 0, stream>>>(d_logits, d_probs, cols);
  return CudaLaunchStatus("SoftmaxRowsKernel", __FILE__, __LINE__);
}

}  // namespace splitspec::kernels

#include "kernels/cuda/guidance.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"

namespace splitspec::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int kMaxColumnBlocks = 1024;
constexpr int kMaxRowBlocks = 65535;  // gridDim.y limit

// Grid-stride in both dimensions: blockIdx.y walks rows, blockIdx.x the columns.
// Every entry is read and written by one thread, so out may alias cond or uncond.
__global__ void GuidedLogitsRowsKernel(const float* cond, const float* uncond,
                                       const float* __restrict__ scales, float* out, int rows,
                                       int cols) {
  for (int r = blockIdx.y; r < rows; r += gridDim.y) {
    const long offset = static_cast<long>(r) * cols;
    const float s = scales[r];
    for (int v = blockIdx.x * kThreads + threadIdx.x; v < cols; v += gridDim.x * kThreads) {
      const float c = cond[offset + v];
      if (s == 1.0f) {
        out[offset + v] = c;
        continue;
      }
      const float u = uncond[offset + v];
      out[offset + v] =
          (c == -INFINITY || u == -INFINITY) ? -INFINITY : __fmaf_rn(s, __fsub_rn(c, u), u);
    }
  }
}

}  // namespace

absl::Status LaunchGuidedLogitsRows(const float* d_cond, const float* d_uncond,
                                    const float* d_scales, float* d_out, int rows, int cols,
                                    cudaStream_t stream) {
  if (rows < 0 || cols < 1) {
    return absl::InvalidArgumentError(absl::StrCat("LaunchGuidedLogitsRows: rows=", rows,
                                                   " cols=", cols, " (need rows >= 0, cols >= 1)"));
  }
  if (rows == 0) return absl::OkStatus();
  const int column_blocks = (cols + kThreads - 1) / kThreads;
  const dim3 grid(column_blocks < kMaxColumnBlocks ? column_blocks : kMaxColumnBlocks,
                  rows < kMaxRowBlocks ? rows : kMaxRowBlocks);
  DiscardStaleCudaError();
  GuidedLogitsRowsKernel<<<grid, kThreads, 0, stream>>>(d_cond, d_uncond, d_scales, d_out, rows,
                                                        cols);
  return CudaLaunchStatus("GuidedLogitsRowsKernel", __FILE__, __LINE__);
}

}  // namespace splitspec::kernels

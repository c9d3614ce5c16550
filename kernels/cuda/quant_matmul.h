// CUDA matmuls of ggml-typed weights that stay in their file format on the
// device (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K):
// y[t, r] = dot(row r of w, token t of x).
//
//   DeviceQ8Activations xq = {qs, d, d_sum, sum};
//   RETURN_IF_ERROR(LaunchQuantizeActivations(CudaMatMulActivationLayout(w.type), x, tokens,
//                                             cols, xq, stream));   // no-op for float weights
//   RETURN_IF_ERROR(LaunchMatMul(w, x, &xq, tokens, y, rows, stream));
//
// Activations. Float weights are dotted with the float activations. Q8_0 / Q4_0 /
// Q4_1 weights are dotted with activations quantized per block of 32 by
// LaunchQuantizeQ8Blocks with the CPU packer's exact float operations (d =
// amax / 127, q = rint(x * (127 / amax)), d and d * sum(q) rounded to half), so
// each block's product is the same exact integer as on the CPU (dp4a). K-quant
// weights (super-blocks of 256) are dotted with activations quantized per 256 by
// LaunchQuantizeQ8SuperBlocks (d = amax / 127 kept in float: the CPU's kBlock256
// family), again with the CPU's integers per super-block.
//
// Two kernels, one arithmetic. Up to 16 tokens (a decode step, a verify block of
// k + 1 <= 16), and for every token count of the float types, a weight-streaming
// matvec (matvec_tiling.h holds its tiling, index math and reduction order as
// host + device code, with a CPU emulation; matvec_plan.h its launch planner): a
// warp per weight row and tile of up to 16 tokens, four rows per thread block, the
// kernel compiled for tiles of 1, 2, 4, 8 and 16 tokens, so a decode step or a
// verify block of up to 16 tokens reads each weight once. Beyond 16 tokens
// (prefill, large batches) quantized weights run on the tensor cores
// (mma_tiling.h: int8 mma.sync on the same quants and quantized activations, the
// same float operations in the same order; mma::UseTensorCores is the rule), so
// y[t, r] has the same bits whichever kernel runs. Batch invariance by
// construction: the operations behind y[t, r] depend on cols and the weight type
// only, not on the number of tokens, the kernel, the tile a token lands in, the
// tile's width, the other rows or the matrices fused into the same launch. There
// is no split-K, no atomics and no library GEMM (cuBLAS picks algorithms by shape,
// and rounds differently from the matvec).
//
// All launches are asynchronous on `stream`. Errors: InvalidArgument for a type
// without a kernel, a cols not a multiple of the block size, no quantized
// activations for a quantized type, weights or quantized activations not 16-byte
// aligned, or more than 65535 * 16 tokens; Internal
// when the launch fails.
#ifndef SPLITSPEC_KERNELS_CUDA_QUANT_MATMUL_H_
#define SPLITSPEC_KERNELS_CUDA_QUANT_MATMUL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "kernels/cpu/ggml_types.h"

namespace splitspec::kernels {

// A weight matrix in device memory: rows of RowBytes(type, cols) bytes, the
// first at `data` (aligned to at least 16 bytes: the kernel reads Q4_K / Q5_K
// quants in 16-byte loads; cudaMalloc and the model's device layout give 256).
struct DeviceMatrix {
  GgmlType type = GgmlType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// Activations of `tokens` tokens of `cols` quantized to int8, in device memory.
// qs is 16-byte aligned (the matvec reads it in 8- and 16-byte loads).
// Per 32 elements (LaunchQuantizeQ8Blocks): qs [tokens, cols], and
// [tokens, cols / 32] of d (half-rounded scale), d_sum (half(d * sum)) and sum
// (the block's integer sum, as a float).
// Per 256 elements (LaunchQuantizeQ8SuperBlocks): qs [tokens, cols] and
// d [tokens, cols / 256] (float scale, not rounded); d_sum and sum are not used.
struct DeviceQ8Activations {
  int8_t* qs = nullptr;
  float* d = nullptr;
  float* d_sum = nullptr;
  float* sum = nullptr;
};

// True for the types LaunchMatMul and LaunchEmbedRows (transformer_kernels.h) handle.
bool CudaSupportsWeightType(GgmlType type);

// The activations LaunchMatMul reads for a weight type: the floats (F32, F16,
// BF16), per-32 blocks (Q8_0, Q4_0, Q4_1) or per-256 blocks (Q4_K, Q5_K, Q6_K).
enum class CudaActivationLayout { kFloat, kBlock32, kBlock256 };

// REQUIRES: CudaSupportsWeightType(type).
CudaActivationLayout CudaMatMulActivationLayout(GgmlType type);

// True when LaunchMatMul reads DeviceQ8Activations for `type` (every quantized type).
bool CudaMatMulQuantizesActivations(GgmlType type);

// x [tokens, cols] float -> out. REQUIRES: cols % 32 == 0.
absl::Status LaunchQuantizeQ8Blocks(const float* x, int64_t tokens, int64_t cols,
                                    const DeviceQ8Activations& out, cudaStream_t stream);

// x [tokens, cols] float -> out (per 256). REQUIRES: cols % 256 == 0.
absl::Status LaunchQuantizeQ8SuperBlocks(const float* x, int64_t tokens, int64_t cols,
                                         const DeviceQ8Activations& out, cudaStream_t stream);

// The quantization `layout` needs (nothing for kFloat). The two quantized layouts
// share the buffers of `out`: quantize for one, launch its matmuls, then the other
// (stream order keeps the second from overwriting what the first's matmuls read).
absl::Status LaunchQuantizeActivations(CudaActivationLayout layout, const float* x, int64_t tokens,
                                       int64_t cols, const DeviceQ8Activations& out,
                                       cudaStream_t stream);

// One matmul of a LaunchMatMuls call: y[t * y_stride + r] = dot(row r of w, token t).
struct MatMulJob {
  DeviceMatrix w;
  float* y = nullptr;
  int64_t y_stride = 0;
};

// Every job over the same activations x [tokens, cols] (xq: the same x quantized in
// the jobs' layout; jobs of several layouts need several calls, as the layouts share
// xq's buffers). Jobs of one type and cols share a launch (Q/K/V, gate/up: one pass
// over x); the bits of each output are those LaunchMatMul gives it alone.
absl::Status LaunchMatMuls(absl::Span<const MatMulJob> jobs, const float* x,
                           const DeviceQ8Activations* xq, int64_t tokens, cudaStream_t stream);

// y[t * y_stride + r] for r < w.rows, t < tokens. `x` [tokens, w.cols] float is
// read for float weights, `xq` (quantized from the same x in the type's
// CudaMatMulActivationLayout) for quantized ones.
absl::Status LaunchMatMul(const DeviceMatrix& w, const float* x, const DeviceQ8Activations* xq,
                          int64_t tokens, float* y, int64_t y_stride, cudaStream_t stream);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CUDA_QUANT_MATMUL_H_

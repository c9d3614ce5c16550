// CUDA matmuls of ggml-typed weights that stay in their file format on the
// device (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K):
// y[t, r] = dot(row r of w, token t of x).
//
//   DeviceQ8Activations xq = {qs, d, d_sum, sum};
//   RETURN_IF_ERROR(LaunchQuantizeActivations(CudaMatMulActivationLayout(w.type), x, tokens,
//                                             cols, xq, stream));   // no-op for float weights
//   RETURN_IF_ERROR(LaunchMatMul(w, x, &xq, tokens, y, rows, stream));
//
// Algorithm (the CPU kernels' integer algorithm, kernels/cpu/matmul.h). Float
// weights are dequantized in the kernel and dotted with the float activations.
// Q8_0 / Q4_0 / Q4_1 weights are dotted with activations quantized per block of
// 32 by LaunchQuantizeQ8Blocks with the CPU packer's exact float operations (d =
// amax / 127, q = rint(x * (127 / amax)), d and d * sum(q) rounded to half), so
// each block's product is the same exact integer as on the CPU (dp4a); only the
// float sum across blocks runs in another order. Per block b of weight row r and
// token t:  Q8_0  acc += (d_w * d_x) * isum
//           Q4_0  acc += (d_w * d_x) * (isum - 8 * sum(q_x))
//           Q4_1  acc += (d_w * d_x) * isum;  acc_min += m_w * half(d_x * sum(q_x))
// and y = warp_sum(acc) (+ warp_sum(acc_min) for Q4_1).
// K-quant weights (super-blocks of 256) are dotted with activations quantized per
// 256 by LaunchQuantizeQ8SuperBlocks, again with the CPU packer's operations (d =
// amax / 127 kept in float, no half rounding: the CPU's kBlock256 family). Per
// super-block b the integers are the CPU's (MatMulRowsReference):
//           Q4_K, Q5_K  isum = sum_s scale_s * dot_s,  imin = sum_s min_s * sum_s(q_x)
//                       acc += isum * (d_w * d_x);  acc_min += imin * (dmin_w * d_x)
//           Q6_K        isum = sum_g scale_g * dot_g(q_w - 32, q_x)
//                       acc += isum * (d_w * d_x)
// and y = warp_sum(acc) - warp_sum(acc_min). Eight lanes share a super-block (one
// 32-element sub-block each) and add their integers with shuffles: integer
// addition is exact, so the per-super-block isum / imin equal the CPU's whatever
// the order; only the float sum across super-blocks runs in another order.
//
// Batch invariance by construction. One warp computes one weight row for a tile
// of up to 8 tokens; lane l takes blocks (or float columns) l, l + 32, l + 64, ...
// in increasing order (K-quants: lane l takes sub-block l % 8 of super-blocks
// l / 8, l / 8 + 4, ...), with explicitly rounded multiply and fma (__fmul_rn,
// __fmaf_rn: no contraction choices), then the lanes are summed by a fixed
// xor-shuffle tree (16, 8, 4, 2, 1; K-quants: 8, 16 across the four groups). The
// operations behind y[t, r] depend on cols and the weight type only: not on the
// number of tokens, on which tile or tile slot token t lands in, or on the other
// rows. There is no split-K, no atomics and no library GEMM (cuBLAS picks
// algorithms by shape) on these paths.
//
// Not yet run on a GPU: the K-quant kernels were written and compiled in a
// session without a device; tests/gpu/quant_matmul_cuda_test.cc checks them
// against the CPU reference when a device is there.
//
// All launches are asynchronous on `stream`. Errors: InvalidArgument for a type
// without a kernel or a cols not a multiple of the block size; Internal when
// the launch fails.
#ifndef SPLITSPEC_KERNELS_CUDA_QUANT_MATMUL_H_
#define SPLITSPEC_KERNELS_CUDA_QUANT_MATMUL_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cpu/ggml_types.h"

namespace splitspec::kernels {

// A weight matrix in device memory: rows of RowBytes(type, cols) bytes, the
// first at `data` (aligned to at least 4 bytes).
struct DeviceMatrix {
  GgmlType type = GgmlType::kF32;
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
};

// Activations of `tokens` tokens of `cols` quantized to int8, in device memory.
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

// y[t * y_stride + r] for r < w.rows, t < tokens. `x` [tokens, w.cols] float is
// read for float weights, `xq` (quantized from the same x in the type's
// CudaMatMulActivationLayout) for quantized ones.
absl::Status LaunchMatMul(const DeviceMatrix& w, const float* x, const DeviceQ8Activations* xq,
                          int64_t tokens, float* y, int64_t y_stride, cudaStream_t stream);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CUDA_QUANT_MATMUL_H_

#include "kernels/cuda/quant_matmul.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"

namespace splitspec::kernels {
namespace {

constexpr int kWarpsPerBlock = 4;  // one weight row per warp
constexpr int kTokenTile = 8;      // tokens per warp pass over a row

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

__device__ __forceinline__ float HalfBitsToFloat(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}

__device__ __forceinline__ float RoundToHalf(float x) { return __half2float(__float2half_rn(x)); }

// 4 bytes at a 2-byte aligned address.
__device__ __forceinline__ int LoadU16Pair(const uint8_t* p) {
  const uint16_t* h = reinterpret_cast<const uint16_t*>(p);
  return static_cast<int>(static_cast<uint32_t>(h[0]) | (static_cast<uint32_t>(h[1]) << 16));
}

// ---------------------------------------------------------------- activations

// One warp per block of 32: lane i quantizes element i exactly as the CPU packer.
__global__ void QuantizeQ8BlocksKernel(const float* __restrict__ x, int64_t blocks,
                                       DeviceQ8Activations out) {
  const int64_t block = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (block >= blocks) return;
  const int lane = threadIdx.x % 32;
  const float v = x[block * 32 + lane];
  float amax = fabsf(v);
  for (int offset = 16; offset > 0; offset /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  const float d = __fdiv_rn(amax, 127.0f);
  const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  const float r = fminf(127.0f, fmaxf(-127.0f, rintf(__fmul_rn(v, id))));
  const int q = static_cast<int>(r);
  out.qs[block * 32 + lane] = static_cast<int8_t>(q);
  int sum = q;
  for (int offset = 16; offset > 0; offset /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, offset);
  if (lane == 0) {
    out.d[block] = RoundToHalf(d);
    out.sum[block] = static_cast<float>(sum);
    out.d_sum[block] = RoundToHalf(__fmul_rn(d, static_cast<float>(sum)));
  }
}

// ---------------------------------------------------------------- 32-blocks

struct Q8_0 {
  static constexpr int kBytes = 34;
};
struct Q4_0 {
  static constexpr int kBytes = 18;
};
struct Q4_1 {
  static constexpr int kBytes = 20;
};

// Integer dot product of one weight block with 32 quantized activations (8 ints).
template <typename Block>
__device__ __forceinline__ int BlockDot(const uint8_t* qs, const int* a);

template <>
__device__ __forceinline__ int BlockDot<Q8_0>(const uint8_t* qs, const int* a) {
  int isum = 0;
#pragma unroll
  for (int k = 0; k < 8; ++k) isum = __dp4a(LoadU16Pair(qs + 4 * k), a[k], isum);
  return isum;
}

// Nibble layout: byte j holds element j (low) and element j + 16 (high).
__device__ __forceinline__ int NibbleDot(const uint8_t* qs, const int* a) {
  int isum = 0;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int w = LoadU16Pair(qs + 4 * k);
    isum = __dp4a(w & 0x0F0F0F0F, a[k], isum);
    isum = __dp4a((w >> 4) & 0x0F0F0F0F, a[k + 4], isum);
  }
  return isum;
}

template <>
__device__ __forceinline__ int BlockDot<Q4_0>(const uint8_t* qs, const int* a) {
  return NibbleDot(qs, a);
}
template <>
__device__ __forceinline__ int BlockDot<Q4_1>(const uint8_t* qs, const int* a) {
  return NibbleDot(qs, a);
}

template <typename Block>
__global__ void MatMulBlock32Kernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                                    DeviceQ8Activations x, int64_t tokens, float* y,
                                    int64_t y_stride) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokenTile;
  const int n = tokens - t0 < kTokenTile ? static_cast<int>(tokens - t0) : kTokenTile;
  const int64_t nb = cols / 32;
  const uint8_t* w_row = w + row * nb * Block::kBytes;
  float acc[kTokenTile];
  float acc_min[kTokenTile];
#pragma unroll
  for (int j = 0; j < kTokenTile; ++j) acc[j] = acc_min[j] = 0.0f;
  for (int64_t b = lane; b < nb; b += 32) {
    const uint8_t* block = w_row + b * Block::kBytes;
    const float d_w = HalfBitsToFloat(reinterpret_cast<const uint16_t*>(block)[0]);
    const float m_w = Block::kBytes == Q4_1::kBytes
                          ? HalfBitsToFloat(reinterpret_cast<const uint16_t*>(block)[1])
                          : 0.0f;
    const uint8_t* qs = block + (Block::kBytes == Q4_1::kBytes ? 4 : 2);
#pragma unroll
    for (int j = 0; j < kTokenTile; ++j) {
      if (j < n) {
        const int64_t t = t0 + j;
        const int* a = reinterpret_cast<const int*>(x.qs + t * cols + b * 32);
        int isum = BlockDot<Block>(qs, a);
        if (Block::kBytes == Q4_0::kBytes) isum -= 8 * static_cast<int>(x.sum[t * nb + b]);
        const float scale = __fmul_rn(d_w, x.d[t * nb + b]);
        acc[j] = __fmaf_rn(scale, static_cast<float>(isum), acc[j]);
        if (Block::kBytes == Q4_1::kBytes) {
          acc_min[j] = __fmaf_rn(m_w, x.d_sum[t * nb + b], acc_min[j]);
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kTokenTile; ++j) {
    float sum = WarpSum(acc[j]);
    if (Block::kBytes == Q4_1::kBytes) sum = __fadd_rn(sum, WarpSum(acc_min[j]));
    if (lane == 0 && j < n) y[(t0 + j) * y_stride + row] = sum;
  }
}

// ---------------------------------------------------------------- float weights

template <GgmlType kType>
__device__ __forceinline__ float LoadFloatWeight(const uint8_t* row, int64_t c) {
  if constexpr (kType == GgmlType::kF32) {
    return reinterpret_cast<const float*>(row)[c];
  } else if constexpr (kType == GgmlType::kF16) {
    return HalfBitsToFloat(reinterpret_cast<const uint16_t*>(row)[c]);
  } else {
    return __bfloat162float(__ushort_as_bfloat16(reinterpret_cast<const uint16_t*>(row)[c]));
  }
}

template <GgmlType kType>
__global__ void MatMulFloatKernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                                  const float* __restrict__ x, int64_t tokens, float* y,
                                  int64_t y_stride) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;
  const int lane = threadIdx.x % 32;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokenTile;
  const int n = tokens - t0 < kTokenTile ? static_cast<int>(tokens - t0) : kTokenTile;
  const int64_t elem_bytes = kType == GgmlType::kF32 ? 4 : 2;
  const uint8_t* w_row = w + row * cols * elem_bytes;
  float acc[kTokenTile];
#pragma unroll
  for (int j = 0; j < kTokenTile; ++j) acc[j] = 0.0f;
  for (int64_t c = lane; c < cols; c += 32) {
    const float wv = LoadFloatWeight<kType>(w_row, c);
#pragma unroll
    for (int j = 0; j < kTokenTile; ++j) {
      if (j < n) acc[j] = __fmaf_rn(wv, x[(t0 + j) * cols + c], acc[j]);
    }
  }
#pragma unroll
  for (int j = 0; j < kTokenTile; ++j) {
    const float sum = WarpSum(acc[j]);
    if (lane == 0 && j < n) y[(t0 + j) * y_stride + row] = sum;
  }
}

absl::Status LastLaunchStatus(const char* what) {
  return CudaStatus(cudaGetLastError(), what, __FILE__, __LINE__);
}

}  // namespace

bool CudaSupportsWeightType(GgmlType type) {
  switch (type) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
      return true;
    default:
      return false;
  }
}

bool CudaMatMulQuantizesActivations(GgmlType type) {
  return type == GgmlType::kQ8_0 || type == GgmlType::kQ4_0 || type == GgmlType::kQ4_1;
}

absl::Status LaunchQuantizeQ8Blocks(const float* x, int64_t tokens, int64_t cols,
                                    const DeviceQ8Activations& out, cudaStream_t stream) {
  if (cols % 32 != 0 || tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantize: cols ", cols, " not a multiple of 32 or tokens ", tokens, " < 0"));
  }
  const int64_t blocks = tokens * (cols / 32);
  if (blocks == 0) return absl::OkStatus();
  constexpr int kThreads = 256;
  const int64_t grid = (blocks + kThreads / 32 - 1) / (kThreads / 32);
  QuantizeQ8BlocksKernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(x, blocks, out);
  return LastLaunchStatus("QuantizeQ8BlocksKernel");
}

absl::Status LaunchMatMul(const DeviceMatrix& w, const float* x, const DeviceQ8Activations* xq,
                          int64_t tokens, float* y, int64_t y_stride, cudaStream_t stream) {
  if (!CudaSupportsWeightType(w.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("no CUDA matmul for ggml type ", GetGgmlTypeTraits(w.type).name));
  }
  if (CudaMatMulQuantizesActivations(w.type) && (w.cols % 32 != 0 || xq == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA matmul of ", GetGgmlTypeTraits(w.type).name, ": cols ", w.cols,
                     " not a multiple of 32, or no quantized activations"));
  }
  if (tokens <= 0 || w.rows <= 0) return absl::OkStatus();
  if ((tokens + kTokenTile - 1) / kTokenTile > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA matmul of ", tokens, " tokens exceeds its limit of ", 65535 * kTokenTile));
  }
  const dim3 grid(static_cast<unsigned>((w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>((tokens + kTokenTile - 1) / kTokenTile));
  const dim3 block(32 * kWarpsPerBlock);
  const auto* wd = static_cast<const uint8_t*>(w.data);
  switch (w.type) {
    case GgmlType::kQ8_0:
      MatMulBlock32Kernel<Q8_0>
          <<<grid, block, 0, stream>>>(wd, w.rows, w.cols, *xq, tokens, y, y_stride);
      break;
    case GgmlType::kQ4_0:
      MatMulBlock32Kernel<Q4_0>
          <<<grid, block, 0, stream>>>(wd, w.rows, w.cols, *xq, tokens, y, y_stride);
      break;
    case GgmlType::kQ4_1:
      MatMulBlock32Kernel<Q4_1>
          <<<grid, block, 0, stream>>>(wd, w.rows, w.cols, *xq, tokens, y, y_stride);
      break;
    case GgmlType::kF32:
      MatMulFloatKernel<GgmlType::kF32>
          <<<grid, block, 0, stream>>>(wd, w.rows, w.cols, x, tokens, y, y_stride);
      break;
    case GgmlType::kF16:
      MatMulFloatKernel<GgmlType::kF16>
          <<<grid, block, 0, stream>>>(wd, w.rows, w.cols, x, tokens, y, y_stride);
      break;
    default:
      MatMulFloatKernel<GgmlType::kBF16>
          <<<grid, block, 0, stream>>>(wd, w.rows, w.cols, x, tokens, y, y_stride);
      break;
  }
  return LastLaunchStatus("MatMul kernel");
}

}  // namespace splitspec::kernels

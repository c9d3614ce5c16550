#include "kernels/cuda/quant_matmul.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kquant_device.cuh"

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

// ---------------------------------------------------------------- K-quants

// One warp per super-block of 256: lane i quantizes elements 8i .. 8i + 8 with the
// CPU packer's float operations (QuantizeSpan: d = amax / 127, q = rint(x * (127 / amax))).
__global__ void QuantizeQ8SuperBlocksKernel(const float* __restrict__ x, int64_t blocks,
                                            DeviceQ8Activations out) {
  const int64_t block = static_cast<int64_t>(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (block >= blocks) return;
  const int lane = threadIdx.x % 32;
  const float* src = x + block * 256 + 8 * lane;
  float v[8];
  float amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    v[i] = src[i];
    amax = fmaxf(amax, fabsf(v[i]));
  }
  for (int offset = 16; offset > 0; offset /= 2)
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, offset));
  const float id = amax != 0.0f ? __fdiv_rn(127.0f, amax) : 0.0f;
  uint32_t packed[2] = {0, 0};
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float r = fminf(127.0f, fmaxf(-127.0f, rintf(__fmul_rn(v[i], id))));
    const uint32_t byte = static_cast<uint8_t>(static_cast<int8_t>(static_cast<int>(r)));
    packed[i / 4] |= byte << (8 * (i % 4));
  }
  uint32_t* dst = reinterpret_cast<uint32_t*>(out.qs + block * 256 + 8 * lane);
  dst[0] = packed[0];
  dst[1] = packed[1];
  if (lane == 0) out.d[block] = __fdiv_rn(amax, 127.0f);
}

// The part of one super-block a lane holds: its 32-element sub-block `sub` as 8
// words of 4 quants each (signed bytes), the integer scale(s) and min, and the
// super-block's float scales.
struct KSubBlock {
  int q[8];
  int scale0 = 0;  // Q4_K / Q5_K: the sub-block's scale; Q6_K: elements 0..15's
  int scale1 = 0;  // Q6_K: elements 16..31's
  int min = 0;     // Q4_K / Q5_K
  float d = 0.0f;
  float dmin = 0.0f;
};

template <GgmlType kType>
__device__ __forceinline__ void LoadKSubBlock(const uint8_t* block, int sub, KSubBlock* out);

template <>
__device__ __forceinline__ void LoadKSubBlock<GgmlType::kQ4_K>(const uint8_t* block, int sub,
                                                               KSubBlock* out) {
  const uint8_t* qs = block + 16 + 32 * (sub / 2);
  const int shift = 4 * (sub % 2);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    out->q[k] = static_cast<int>((kquant::LoadU16Pair(qs + 4 * k) >> shift) & 0x0F0F0F0Fu);
  }
  kquant::ScaleMinK4(block + 4, sub, &out->scale0, &out->min);
  out->d = kquant::HalfAt(block);
  out->dmin = kquant::HalfAt(block + 2);
}

template <>
__device__ __forceinline__ void LoadKSubBlock<GgmlType::kQ5_K>(const uint8_t* block, int sub,
                                                               KSubBlock* out) {
  const uint8_t* qh = block + 16;
  const uint8_t* qs = block + 48 + 32 * (sub / 2);
  const int shift = 4 * (sub % 2);
#pragma unroll
  for (int k = 0; k < 8; ++k) {
    const uint32_t low = (kquant::LoadU16Pair(qs + 4 * k) >> shift) & 0x0F0F0F0Fu;
    const uint32_t high = ((kquant::LoadU16Pair(qh + 4 * k) >> sub) & 0x01010101u) << 4;
    out->q[k] = static_cast<int>(low | high);
  }
  kquant::ScaleMinK4(block + 4, sub, &out->scale0, &out->min);
  out->d = kquant::HalfAt(block);
  out->dmin = kquant::HalfAt(block + 2);
}

// Sub-block s = 4 * half + k holds elements 128 * half + 32 * k + l (quant_blocks.h).
template <>
__device__ __forceinline__ void LoadKSubBlock<GgmlType::kQ6_K>(const uint8_t* block, int sub,
                                                               KSubBlock* out) {
  const int half = sub / 4;
  const int k = sub % 4;
  const uint8_t* ql = block + 64 * half + 32 * (k % 2);
  const uint8_t* qh = block + 128 + 32 * half;
  const int shift_low = 4 * (k / 2);
  const int shift_high = 2 * k;
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const uint32_t low = (kquant::LoadU16Pair(ql + 4 * i) >> shift_low) & 0x0F0F0F0Fu;
    const uint32_t high = ((kquant::LoadU16Pair(qh + 4 * i) >> shift_high) & 0x03030303u) << 4;
    out->q[i] = static_cast<int>(__vsub4(low | high, 0x20202020u));  // q - 32, per byte
  }
  const int8_t* scales = reinterpret_cast<const int8_t*>(block + 192);
  out->scale0 = scales[2 * sub];
  out->scale1 = scales[2 * sub + 1];
  out->d = kquant::HalfAt(block + 208);
}

template <GgmlType kType>
constexpr int kKBlockBytes = kType == GgmlType::kQ4_K   ? kquant::kQ4KBytes
                             : kType == GgmlType::kQ5_K ? kquant::kQ5KBytes
                                                        : kquant::kQ6KBytes;

// Integer sum over the 8 lanes of a group (lanes 8g .. 8g + 7): exact.
__device__ __forceinline__ int GroupSum(int v) {
  for (int offset = 4; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

// Float sum over the four groups in a fixed tree: (g0 + g1) + (g2 + g3).
__device__ __forceinline__ float AcrossGroups(float v) {
  v = __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 8));
  return __fadd_rn(v, __shfl_xor_sync(0xffffffffu, v, 16));
}

template <GgmlType kType>
__global__ void MatMulSuperBlockKernel(const uint8_t* __restrict__ w, int64_t rows, int64_t cols,
                                       DeviceQ8Activations x, int64_t tokens, float* y,
                                       int64_t y_stride) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= rows) return;  // whole warps leave: the shuffles below see all 32 lanes
  const int lane = threadIdx.x % 32;
  const int sub = lane % 8;
  const int group = lane / 8;
  const int64_t t0 = static_cast<int64_t>(blockIdx.y) * kTokenTile;
  const int n = tokens - t0 < kTokenTile ? static_cast<int>(tokens - t0) : kTokenTile;
  const int64_t nb = cols / 256;
  const uint8_t* w_row = w + row * nb * kKBlockBytes<kType>;
  float acc[kTokenTile];
  float acc_min[kTokenTile];
#pragma unroll
  for (int j = 0; j < kTokenTile; ++j) acc[j] = acc_min[j] = 0.0f;
  // Every lane runs every iteration (the shuffles need the whole warp); a group
  // past the last super-block contributes nothing.
  for (int64_t b0 = 0; b0 < nb; b0 += 4) {
    const int64_t b = b0 + group;
    const bool valid = b < nb;
    KSubBlock wb;
    if (valid) {
      LoadKSubBlock<kType>(w_row + b * kKBlockBytes<kType>, sub, &wb);
    } else {
#pragma unroll
      for (int k = 0; k < 8; ++k) wb.q[k] = 0;
    }
#pragma unroll
    for (int j = 0; j < kTokenTile; ++j) {
      if (j < n) {  // n is the same on every lane
        const int64_t t = t0 + j;
        const int* a =
            reinterpret_cast<const int*>(x.qs + t * cols + (valid ? b : 0) * 256 + 32 * sub);
        int dot0 = 0, dot1 = 0, xsum = 0;
#pragma unroll
        for (int k = 0; k < 4; ++k) dot0 = __dp4a(wb.q[k], a[k], dot0);
#pragma unroll
        for (int k = 4; k < 8; ++k) dot1 = __dp4a(wb.q[k], a[k], dot1);
        int isum, imin = 0;
        if constexpr (kType == GgmlType::kQ6_K) {
          isum = wb.scale0 * dot0 + wb.scale1 * dot1;
        } else {
#pragma unroll
          for (int k = 0; k < 8; ++k) xsum = __dp4a(0x01010101, a[k], xsum);
          isum = wb.scale0 * (dot0 + dot1);
          imin = wb.min * xsum;
        }
        isum = GroupSum(valid ? isum : 0);
        if constexpr (kType != GgmlType::kQ6_K) imin = GroupSum(valid ? imin : 0);
        if (valid) {
          const float d_x = x.d[t * nb + b];
          acc[j] = __fmaf_rn(static_cast<float>(isum), __fmul_rn(wb.d, d_x), acc[j]);
          if constexpr (kType != GgmlType::kQ6_K) {
            acc_min[j] = __fmaf_rn(static_cast<float>(imin), __fmul_rn(wb.dmin, d_x), acc_min[j]);
          }
        }
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kTokenTile; ++j) {
    const float sum = __fsub_rn(AcrossGroups(acc[j]), AcrossGroups(acc_min[j]));
    if (lane == 0 && j < n) y[(t0 + j) * y_stride + row] = sum;
  }
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
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return true;
    default:
      return false;
  }
}

CudaActivationLayout CudaMatMulActivationLayout(GgmlType type) {
  switch (type) {
    case GgmlType::kQ8_0:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
      return CudaActivationLayout::kBlock32;
    case GgmlType::kQ4_K:
    case GgmlType::kQ5_K:
    case GgmlType::kQ6_K:
      return CudaActivationLayout::kBlock256;
    default:
      return CudaActivationLayout::kFloat;
  }
}

bool CudaMatMulQuantizesActivations(GgmlType type) {
  return CudaMatMulActivationLayout(type) != CudaActivationLayout::kFloat;
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
  DiscardStaleCudaError();
  QuantizeQ8BlocksKernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(x, blocks, out);
  return CudaLaunchStatus("QuantizeQ8BlocksKernel", __FILE__, __LINE__);
}

absl::Status LaunchQuantizeQ8SuperBlocks(const float* x, int64_t tokens, int64_t cols,
                                         const DeviceQ8Activations& out, cudaStream_t stream) {
  if (cols % 256 != 0 || tokens < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("quantize: cols ", cols, " not a multiple of 256 or tokens ", tokens, " < 0"));
  }
  const int64_t blocks = tokens * (cols / 256);
  if (blocks == 0) return absl::OkStatus();
  constexpr int kThreads = 256;
  const int64_t grid = (blocks + kThreads / 32 - 1) / (kThreads / 32);
  DiscardStaleCudaError();
  QuantizeQ8SuperBlocksKernel<<<static_cast<unsigned>(grid), kThreads, 0, stream>>>(x, blocks, out);
  return CudaLaunchStatus("QuantizeQ8SuperBlocksKernel", __FILE__, __LINE__);
}

absl::Status LaunchQuantizeActivations(CudaActivationLayout layout, const float* x, int64_t tokens,
                                       int64_t cols, const DeviceQ8Activations& out,
                                       cudaStream_t stream) {
  switch (layout) {
    case CudaActivationLayout::kBlock32:
      return LaunchQuantizeQ8Blocks(x, tokens, cols, out, stream);
    case CudaActivationLayout::kBlock256:
      return LaunchQuantizeQ8SuperBlocks(x, tokens, cols, out, stream);
    default:
      return absl::OkStatus();
  }
}

absl::Status LaunchMatMul(const DeviceMatrix& w, const float* x, const DeviceQ8Activations* xq,
                          int64_t tokens, float* y, int64_t y_stride, cudaStream_t stream) {
  if (!CudaSupportsWeightType(w.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("no CUDA matmul for ggml type ", GetGgmlTypeTraits(w.type).name));
  }
  const int block = GetGgmlTypeTraits(w.type).block_size;
  if (CudaMatMulQuantizesActivations(w.type) && (w.cols % block != 0 || xq == nullptr)) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA matmul of ", GetGgmlTypeTraits(w.type).name, ": cols ", w.cols,
                     " not a multiple of ", block, ", or no quantized activations"));
  }
  if (tokens <= 0 || w.rows <= 0) return absl::OkStatus();
  if ((tokens + kTokenTile - 1) / kTokenTile > 65535) {
    return absl::InvalidArgumentError(absl::StrCat(
        "CUDA matmul of ", tokens, " tokens exceeds its limit of ", 65535 * kTokenTile));
  }
  const dim3 grid(static_cast<unsigned>((w.rows + kWarpsPerBlock - 1) / kWarpsPerBlock),
                  static_cast<unsigned>((tokens + kTokenTile - 1) / kTokenTile));
  const dim3 block_dim(32 * kWarpsPerBlock);
  const auto* wd = static_cast<const uint8_t*>(w.data);
  DiscardStaleCudaError();
  switch (w.type) {
    case GgmlType::kQ8_0:
      MatMulBlock32Kernel<Q8_0>
          <<<grid, block_dim, 0, stream>>>(wd, w.rows, w.cols, *xq, tokens, y, y_stride);
      break;
    case GgmlType::kQ4_0:
      MatMulBlock32Kernel<Q4_0>
          <<<grid, block_dim, 0, stream>>>(wd, w.rows, w.cols, *xq, tokens, y, y_stride);
      break;
    case GgmlType::kQ4_1:
      MatMulBlock32Kernel<Q4_1>
          <<<grid, block_dim, 0, stream>>>(wd, w.rows, w.cols, *xq, tokens, y, y_stride);
      break;
    case GgmlType::kQ4_K:
      MatMulSuperBlockKernel<GgmlType::kQ4_K>
          <<<grid, block_dim, 0, stream>>>(wd, w.rows, w.cols, *xq, tokens, y, y_stride);
      break;
    case GgmlType::kQ5_K:
      MatMulSuperBlockKernel<GgmlType::kQ5_K>
          <<<grid, block_dim, 0, stream>>>(wd, w.rows, w.cols, *xq, tokens, y, y_stride);
      break;
    case GgmlType::kQ6_K:
      MatMulSuperBlockKernel<GgmlType::kQ6_K>
          <<<grid, block_dim, 0, stream>>>(wd, w.rows, w.cols, *xq, tokens, y, y_stride);
      break;
    case GgmlType::kF32:
      MatMulFloatKernel<GgmlType::kF32>
          <<<grid, block_dim, 0, stream>>>(wd, w.rows, w.cols, x, tokens, y, y_stride);
      break;
    case GgmlType::kF16:
      MatMulFloatKernel<GgmlType::kF16>
          <<<grid, block_dim, 0, stream>>>(wd, w.rows, w.cols, x, tokens, y, y_stride);
      break;
    default:
      MatMulFloatKernel<GgmlType::kBF16>
          <<<grid, block_dim, 0, stream>>>(wd, w.rows, w.cols, x, tokens, y, y_stride);
      break;
  }
  return CudaLaunchStatus("MatMul kernel", __FILE__, __LINE__);
}

}  // namespace splitspec::kernels

#include "kernels/cuda/transformer_kernels.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>

#include "absl/strings/str_cat.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/kquant_device.cuh"

namespace splitspec::kernels {
namespace {

constexpr int kRowThreads = 256;        // RMSNorm, embedding, RoPE: one block per row
constexpr int kAttentionThreads = 128;  // one block per (head, token)
// Shared memory a block may use without cudaFuncSetAttribute's opt-in.
constexpr int64_t kDefaultSharedBytesPerBlock = 48 * 1024;

__device__ __forceinline__ float HalfBits(uint16_t bits) {
  return __half2float(__ushort_as_half(bits));
}
__device__ __forceinline__ float RoundToHalf(float x) { return __half2float(__float2half_rn(x)); }
__device__ __forceinline__ uint16_t ToHalfBits(float x) {
  return __half_as_ushort(__float2half_rn(x));
}

// Element c of a row in `type` (the CPU's DequantizeRow, element by element).
__device__ float DequantElement(GgmlType type, const uint8_t* row, int64_t c) {
  switch (type) {
    case GgmlType::kF32:
      return reinterpret_cast<const float*>(row)[c];
    case GgmlType::kF16:
      return HalfBits(reinterpret_cast<const uint16_t*>(row)[c]);
    case GgmlType::kBF16:
      return __bfloat162float(__ushort_as_bfloat16(reinterpret_cast<const uint16_t*>(row)[c]));
    case GgmlType::kQ8_0: {
      const uint8_t* block = row + (c / 32) * 34;
      const float d = HalfBits(reinterpret_cast<const uint16_t*>(block)[0]);
      return __fmul_rn(d, static_cast<float>(reinterpret_cast<const int8_t*>(block + 2)[c % 32]));
    }
    case GgmlType::kQ4_0: {
      const uint8_t* block = row + (c / 32) * 18;
      const float d = HalfBits(reinterpret_cast<const uint16_t*>(block)[0]);
      const int i = static_cast<int>(c % 32);
      const int nib = i < 16 ? (block[2 + i] & 0xF) : (block[2 + i - 16] >> 4);
      return __fmul_rn(d, static_cast<float>(nib - 8));
    }
    case GgmlType::kQ4_1: {
      const uint8_t* block = row + (c / 32) * 20;
      const float d = HalfBits(reinterpret_cast<const uint16_t*>(block)[0]);
      const float m = HalfBits(reinterpret_cast<const uint16_t*>(block)[1]);
      const int i = static_cast<int>(c % 32);
      const int nib = i < 16 ? (block[4 + i] & 0xF) : (block[4 + i - 16] >> 4);
      return __fadd_rn(__fmul_rn(d, static_cast<float>(nib)), m);
    }
    case GgmlType::kQ4_K:
      return kquant::DequantK4Element(row, c, /*q5=*/false);
    case GgmlType::kQ5_K:
      return kquant::DequantK4Element(row, c, /*q5=*/true);
    case GgmlType::kQ6_K:
      return kquant::DequantQ6KElement(row, c);
    default:
      return 0.0f;  // unreachable: the launcher refuses other types
  }
}

__global__ void EmbedRowsKernel(GgmlType type, const uint8_t* __restrict__ table, int64_t row_bytes,
                                int64_t cols, const int32_t* __restrict__ ids, float* x) {
  const int64_t t = blockIdx.x;
  const uint8_t* row = table + static_cast<int64_t>(ids[t]) * row_bytes;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    x[t * cols + c] = DequantElement(type, row, c);
  }
}

// Sum of `value` over the block in a fixed tree: shuffles within each warp, then
// the first warp over the warp partials. `scratch`: 32 doubles.
__device__ double BlockSumDouble(double value, double* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  for (int offset = 16; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    value = lane < static_cast<int>(blockDim.x / 32) ? scratch[lane] : 0.0;
    for (int offset = 16; offset > 0; offset /= 2)
      value += __shfl_xor_sync(0xffffffffu, value, offset);
    if (lane == 0) scratch[0] = value;
  }
  __syncthreads();
  const double result = scratch[0];
  __syncthreads();
  return result;
}

__global__ void RmsNormRowsKernel(const float* __restrict__ x, const int32_t* __restrict__ rows,
                                  int n, const float* __restrict__ weight, float eps, float* y) {
  __shared__ double scratch[32];
  const int64_t i = blockIdx.x;
  const int64_t src = rows != nullptr ? rows[i] : i;
  const float* in = x + src * n;
  double partial = 0.0;
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    const float v = in[c];
    partial += static_cast<double>(__fmul_rn(v, v));
  }
  const double sum = BlockSumDouble(partial, scratch);
  const float scale = __fdiv_rn(1.0f, __fsqrt_rn(__fadd_rn(static_cast<float>(sum / n), eps)));
  for (int c = threadIdx.x; c < n; c += blockDim.x) {
    y[i * n + c] = __fmul_rn(__fmul_rn(in[c], scale), weight[c]);
  }
}

__global__ void AddBiasKernel(float* y, const float* __restrict__ bias, int64_t total, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < total) y[i] = __fadd_rn(y[i], bias[i % n]);
}

__global__ void AddInPlaceKernel(float* x, const float* __restrict__ delta, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) x[i] = __fadd_rn(x[i], delta[i]);
}

__global__ void SiluMulKernel(float* gate, const float* __restrict__ up, int64_t n) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= n) return;
  const float g = gate[i];
  const float silu = __fdiv_rn(g, __fadd_rn(1.0f, expf(-g)));
  gate[i] = __fmul_rn(silu, up[i]);
}

// Rotates the pairs of `heads` head vectors at v (one thread per pair), in place.
__device__ void RotateHeads(float* v, int heads, const float* cos, const float* sin,
                            const RopeStoreShape& s) {
  const int pairs = s.rope_dim / 2;
  for (int p = threadIdx.x; p < heads * pairs; p += blockDim.x) {
    const int h = p / pairs;
    const int i = p % pairs;
    float* head = v + static_cast<int64_t>(h) * s.head_dim;
    const int a = s.half_split ? i : 2 * i;
    const int b = s.half_split ? i + pairs : 2 * i + 1;
    const float x0 = head[a];
    const float x1 = head[b];
    head[a] = __fmaf_rn(x0, cos[i], -__fmul_rn(x1, sin[i]));
    head[b] = __fmaf_rn(x0, sin[i], __fmul_rn(x1, cos[i]));
  }
}

__global__ void RopeAndStoreKernel(float* q, const float* __restrict__ k,
                                   const float* __restrict__ v, const float* __restrict__ cos,
                                   const float* __restrict__ sin, const int32_t* __restrict__ pos,
                                   const DeviceKvRef* __restrict__ refs, RopeStoreShape s) {
  extern __shared__ float k_rot[];  // [kv_heads * head_dim]
  const int64_t t = blockIdx.x;
  const int pairs = s.rope_dim / 2;
  const int q_dim = s.q_heads * s.head_dim;
  const int kv_dim = s.kv_heads * s.head_dim;
  const float* c = cos + t * pairs;
  const float* sn = sin + t * pairs;
  float* q_t = q + t * q_dim;
  for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) k_rot[i] = k[t * kv_dim + i];
  __syncthreads();
  RotateHeads(q_t, s.q_heads, c, sn, s);
  RotateHeads(k_rot, s.kv_heads, c, sn, s);
  __syncthreads();
  const DeviceKvRef ref = refs[t];
  uint16_t* k_row = ref.base + (static_cast<int64_t>(2 * s.layer) * ref.capacity + pos[t]) * kv_dim;
  uint16_t* v_row = k_row + static_cast<int64_t>(ref.capacity) * kv_dim;
  for (int i = threadIdx.x; i < q_dim; i += blockDim.x) q_t[i] = RoundToHalf(q_t[i]);
  for (int i = threadIdx.x; i < kv_dim; i += blockDim.x) {
    k_row[i] = ToHalfBits(k_rot[i]);
    v_row[i] = ToHalfBits(v[t * kv_dim + i]);
  }
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}
__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset /= 2)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

// Block-wide reduction of one float per thread (kAttentionThreads threads) in a fixed
// tree; `is_max` picks max instead of sum. scratch: 32 floats.
__device__ float BlockReduce(float value, bool is_max, float* scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  value = is_max ? WarpMax(value) : WarpSum(value);
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  if (warp == 0) {
    const float neutral = is_max ? -FLT_MAX : 0.0f;
    value = lane < kAttentionThreads / 32 ? scratch[lane] : neutral;
    value = is_max ? WarpMax(value) : WarpSum(value);
    if (lane == 0) scratch[0] = value;
  }
  __syncthreads();
  const float result = scratch[0];
  __syncthreads();
  return result;
}

__global__ void AttentionKernel(const float* __restrict__ q, const DeviceKvRef* __restrict__ refs,
                                const int32_t* __restrict__ pos, AttentionShape s, float* out) {
  // attention_layout.h: every offset below comes from there (and is checked on the CPU).
  extern __shared__ __align__(16) unsigned char attention_shared[];
  const AttentionSharedLayout layout = AttentionSharedLayoutFor(s.max_positions);
  auto* sum_scratch = reinterpret_cast<double*>(attention_shared + layout.sum_scratch);
  auto* scratch = reinterpret_cast<float*>(attention_shared + layout.max_scratch);
  auto* scores = reinterpret_cast<float*>(attention_shared + layout.scores);  // [score_floats]
  const int h = blockIdx.x;
  const int64_t t = blockIdx.y;
  const int n_pos = pos[t] + 1;
  const int kv_dim = s.kv_heads * s.head_dim;
  const int kv_head = AttentionKvHead(s, h);
  const DeviceKvRef ref = refs[t];
  const uint16_t* keys = ref.base + AttentionKeyOffset(s, ref.capacity, kv_head, 0, 0);
  const uint16_t* values = ref.base + AttentionValueOffset(s, ref.capacity, kv_head, 0, 0);
  const float* q_h = q + AttentionQueryOffset(s, t, h, 0);
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  constexpr int kWarps = kAttentionThreads / 32;

  for (int j = warp; j < n_pos; j += kWarps) {
    const uint16_t* k_j = keys + static_cast<int64_t>(j) * kv_dim;
    float partial = 0.0f;
    for (int i = lane; i < s.head_dim; i += 32)
      partial = __fmaf_rn(q_h[i], HalfBits(k_j[i]), partial);
    partial = WarpSum(partial);
    if (lane == 0) scores[j] = __fmul_rn(partial, s.scale);
  }
  __syncthreads();
  float local_max = -FLT_MAX;
  for (int j = threadIdx.x; j < n_pos; j += kAttentionThreads)
    local_max = fmaxf(local_max, scores[j]);
  const float max_score = BlockReduce(local_max, /*is_max=*/true, scratch);
  double local_sum = 0.0;
  for (int j = threadIdx.x; j < n_pos; j += kAttentionThreads) {
    const float e = expf(__fsub_rn(scores[j], max_score));
    scores[j] = e;
    local_sum += static_cast<double>(e);
  }
  const double sum = BlockSumDouble(local_sum, sum_scratch);
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int j = threadIdx.x; j < n_pos; j += kAttentionThreads) {
    scores[j] = RoundToHalf(__fmul_rn(scores[j], inv_sum));
  }
  __syncthreads();
  for (int d = threadIdx.x; d < s.head_dim; d += kAttentionThreads) {
    float acc = 0.0f;
    for (int j = 0; j < n_pos; ++j) {
      acc = __fmaf_rn(HalfBits(values[static_cast<int64_t>(j) * kv_dim + d]), scores[j], acc);
    }
    out[AttentionQueryOffset(s, t, h, d)] = acc;
  }
}

unsigned ElementBlocks(int64_t n) { return static_cast<unsigned>((n + 255) / 256); }

}  // namespace

absl::Status LaunchEmbedRows(const DeviceMatrix& table, const int32_t* ids, int64_t tokens,
                             float* x, cudaStream_t stream) {
  if (!CudaSupportsWeightType(table.type)) {
    return absl::InvalidArgumentError(
        absl::StrCat("no CUDA embedding for ggml type ", GetGgmlTypeTraits(table.type).name));
  }
  if (tokens <= 0) return absl::OkStatus();
  DiscardStaleCudaError();
  EmbedRowsKernel<<<static_cast<unsigned>(tokens), kRowThreads, 0, stream>>>(
      table.type, static_cast<const uint8_t*>(table.data),
      static_cast<int64_t>(RowBytes(table.type, table.cols)), table.cols, ids, x);
  return CudaLaunchStatus("EmbedRowsKernel", __FILE__, __LINE__);
}

absl::Status LaunchRmsNormRows(const float* x, const int32_t* rows, int64_t count, int n,
                               const float* weight, float eps, float* y, cudaStream_t stream) {
  if (count <= 0) return absl::OkStatus();
  DiscardStaleCudaError();
  RmsNormRowsKernel<<<static_cast<unsigned>(count), kRowThreads, 0, stream>>>(x, rows, n, weight,
                                                                              eps, y);
  return CudaLaunchStatus("RmsNormRowsKernel", __FILE__, __LINE__);
}

absl::Status LaunchAddBias(float* y, const float* bias, int64_t tokens, int64_t n,
                           cudaStream_t stream) {
  const int64_t total = tokens * n;
  if (total <= 0) return absl::OkStatus();
  DiscardStaleCudaError();
  AddBiasKernel<<<ElementBlocks(total), 256, 0, stream>>>(y, bias, total, n);
  return CudaLaunchStatus("AddBiasKernel", __FILE__, __LINE__);
}

absl::Status LaunchAddInPlace(float* x, const float* delta, int64_t n, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  DiscardStaleCudaError();
  AddInPlaceKernel<<<ElementBlocks(n), 256, 0, stream>>>(x, delta, n);
  return CudaLaunchStatus("AddInPlaceKernel", __FILE__, __LINE__);
}

absl::Status LaunchSiluMul(float* gate, const float* up, int64_t n, cudaStream_t stream) {
  if (n <= 0) return absl::OkStatus();
  DiscardStaleCudaError();
  SiluMulKernel<<<ElementBlocks(n), 256, 0, stream>>>(gate, up, n);
  return CudaLaunchStatus("SiluMulKernel", __FILE__, __LINE__);
}

absl::Status LaunchRopeAndStore(float* q, const float* k, const float* v, const float* cos,
                                const float* sin, const int32_t* pos, const DeviceKvRef* refs,
                                const RopeStoreShape& shape, int64_t tokens, cudaStream_t stream) {
  if (tokens <= 0) return absl::OkStatus();
  const size_t shared = static_cast<size_t>(shape.kv_heads) * shape.head_dim * sizeof(float);
  if (shared > 48 * 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("RoPE: kv_dim ", shape.kv_heads * shape.head_dim, " exceeds 12288"));
  }
  DiscardStaleCudaError();
  RopeAndStoreKernel<<<static_cast<unsigned>(tokens), kRowThreads, shared, stream>>>(
      q, k, v, cos, sin, pos, refs, shape);
  return CudaLaunchStatus("RopeAndStoreKernel", __FILE__, __LINE__);
}

absl::Status LaunchAttention(const float* q, const DeviceKvRef* refs, const int32_t* pos,
                             const AttentionShape& shape, int64_t tokens, float* out,
                             cudaStream_t stream) {
  if (shape.max_positions > kCudaMaxAttentionPositions) {
    return absl::InvalidArgumentError(absl::StrCat("CUDA attention over ", shape.max_positions,
                                                   " positions exceeds its limit of ",
                                                   kCudaMaxAttentionPositions));
  }
  if (tokens <= 0) return absl::OkStatus();
  if (tokens > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA attention over ", tokens, " tokens in one call exceeds 65535"));
  }
  if (shape.max_positions < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("CUDA attention needs max_positions >= 1, got ", shape.max_positions));
  }
  const int64_t shared = AttentionSharedLayoutFor(shape.max_positions).total_bytes;
  if (shared > kDefaultSharedBytesPerBlock) {
    // Past 48 KiB a kernel must opt in, up to what the device allows a block.
    int device = 0;
    int optin = 0;
    CUDA_RETURN_IF_ERROR(cudaGetDevice(&device));
    CUDA_RETURN_IF_ERROR(
        cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
    if (shared > optin) {
      return absl::InvalidArgumentError(absl::StrCat(
          "CUDA attention over ", shape.max_positions, " positions needs ", shared,
          " bytes of shared memory per block; cuda:", device, " allows ", optin));
    }
    CUDA_RETURN_IF_ERROR(cudaFuncSetAttribute(
        AttentionKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  }
  const dim3 grid(static_cast<unsigned>(shape.q_heads), static_cast<unsigned>(tokens));
  DiscardStaleCudaError();
  AttentionKernel<<<grid, kAttentionThreads, static_cast<size_t>(shared), stream>>>(q, refs, pos,
                                                                                    shape, out);
  return CudaLaunchStatus("AttentionKernel", __FILE__, __LINE__);
}

}  // namespace splitspec::kernels

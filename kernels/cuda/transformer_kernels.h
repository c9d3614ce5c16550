// The row operations of the transformer forward on the device (the CUDA
// backend's, runtime/model/cuda_backend.h): embedding, RMSNorm, RoPE with the
// K/V store into per-sequence device caches, GQA attention, SiLU gating and
// residual adds. The matmuls are quant_matmul.h's.
//
// Batch invariance by construction: each kernel computes an output row (a
// token, or a (token, head) pair) in one thread block whose size is a constant
// of the kernel, with per-thread partial sums in a fixed stride order and a
// fixed reduction tree; nothing depends on how many rows the launch has or on
// which block a row lands in. So a token's results are bitwise identical alone,
// in a multi-token block or batched with other sequences.
//
// KV cache layout (one allocation per sequence, DeviceKvRef::base): half
// precision [n_layers][2 (K, V)][capacity][kv_dim]: the K row of position p in
// layer l at base + ((2 l) capacity + p) kv_dim, its V row capacity * kv_dim
// later. Rows past a sequence's length are dead: Truncate moves the host-side
// length back and the next forward overwrites them (O(1) rollback).
//
// All launches are asynchronous on `stream`; errors: Internal when a launch
// fails, InvalidArgument for a shape the kernel cannot take (named).
#ifndef SPLITSPEC_KERNELS_CUDA_TRANSFORMER_KERNELS_H_
#define SPLITSPEC_KERNELS_CUDA_TRANSFORMER_KERNELS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "absl/status/status.h"
#include "kernels/cuda/attention_layout.h"
#include "kernels/cuda/quant_matmul.h"

namespace splitspec::kernels {

// One token's cache: the sequence's allocation (fp16 bits) and its capacity in positions.
struct DeviceKvRef {
  uint16_t* base = nullptr;
  int32_t capacity = 0;
  int32_t unused = 0;
};
static_assert(sizeof(DeviceKvRef) == 16);

// The longest sequence LaunchAttention takes (its scores live in shared memory).
inline constexpr int kCudaMaxAttentionPositions = 48 * 1024;

// x[t, :] = row ids[t] of `table` dequantized (n_embd = table.cols).
absl::Status LaunchEmbedRows(const DeviceMatrix& table, const int32_t* ids, int64_t tokens,
                             float* x, cudaStream_t stream);

// y[i, :] = x[row_i, :] / sqrt(mean(x[row_i]^2) + eps) * weight, row_i = rows[i] (or i
// when rows is null), for i < count; n columns. The squares are summed in double.
absl::Status LaunchRmsNormRows(const float* x, const int32_t* rows, int64_t count, int n,
                               const float* weight, float eps, float* y, cudaStream_t stream);

// y[t, :] += bias for t < tokens (n columns).
absl::Status LaunchAddBias(float* y, const float* bias, int64_t tokens, int64_t n,
                           cudaStream_t stream);

// x[i] += delta[i], i < n.
absl::Status LaunchAddInPlace(float* x, const float* delta, int64_t n, cudaStream_t stream);

// gate[i] = gate[i] / (1 + exp(-gate[i])) * up[i], i < n.
absl::Status LaunchSiluMul(float* gate, const float* up, int64_t n, cudaStream_t stream);

struct RopeStoreShape {
  int head_dim = 0;
  int rope_dim = 0;         // even, <= head_dim: the rotated prefix of each head
  bool half_split = false;  // true: pairs (i, i + rope_dim/2) (NeoX); false: (2i, 2i+1)
  int q_heads = 0;          // query heads in q's rows
  int kv_heads = 0;         // KV heads in k's and v's rows
  int layer = 0;
};

// Per token t: RoPE on q [t, q_heads * head_dim] and k [t, kv_heads * head_dim] with
// the angles cos/sin [t, rope_dim / 2] (x0' = fma(x0, c, -(x1 s)), x1' = fma(x0, s, x1 c)),
// then q rounded to half in place and k, v (rounded) stored at position pos[t] of
// layer `layer` of cache refs[t].
absl::Status LaunchRopeAndStore(float* q, const float* k, const float* v, const float* cos,
                                const float* sin, const int32_t* pos, const DeviceKvRef* refs,
                                const RopeStoreShape& shape, int64_t tokens, cudaStream_t stream);

// out[t, h, :] = softmax_j(q[t, h] . k_j * scale) v_j over positions j in [0, pos[t]] of
// cache refs[t], for each of this rank's heads h (GQA: head h reads KV head
// (head_begin + h) / group - kv_head_begin). One block of 128 threads per (h, t):
// scores by warps over positions, the max and the sum of exp(s - max) (in double)
// by fixed trees, p = half(exp(s - max) * float(1 / sum)) (the CPU's probabilities:
// half precision, as llama.cpp multiplies its F16 V cache by F16 probabilities), then
// each output element summed over positions in increasing order.
// Shared memory: attention_layout.h (max_positions rounded up to 4 floats, plus scratch).
// InvalidArgument when max_positions > kCudaMaxAttentionPositions or when its shared
// memory exceeds what the current device allows a block (named).
absl::Status LaunchAttention(const float* q, const DeviceKvRef* refs, const int32_t* pos,
                             const AttentionShape& shape, int64_t tokens, float* out,
                             cudaStream_t stream);

}  // namespace splitspec::kernels

#endif  // SPLITSPEC_KERNELS_CUDA_TRANSFORMER_KERNELS_H_

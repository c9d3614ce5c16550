// Row-wise building blocks of the transformer forward pass. Internal to
// runtime/model (transformer.cc and the tests' reference forward use them).
//
// Batch invariance: every function here computes each output row with a fixed
// sequence of float operations that depends only on the row's own inputs and
// sizes (n, head_dim, number of positions), never on how many rows a call
// processes, so a token's result is bitwise the same alone or in a batch.
// All functions are pure and thread-safe.
#ifndef SPLITSPEC_RUNTIME_MODEL_TRANSFORMER_OPS_H_
#define SPLITSPEC_RUNTIME_MODEL_TRANSFORMER_OPS_H_

#include <cstdint>
#include <vector>

#include "runtime/model/model_config.h"

namespace splitspec::model::internal {

// Dot product of a[n] and b[n]: eight interleaved partial sums (lane j takes
// elements i with i % 8 == j), combined pairwise, then the tail. Fixed order.
float Dot(const float* a, const float* b, int n);

// y[n] = x[n] / sqrt(mean(x^2) + eps) * weight[n]; the sum of squares is taken in
// double, sequentially. x and y may alias.
void RmsNormRow(const float* x, const float* weight, float eps, int n, float* y);

// cos/sin of the RoPE angles of one position: for pair i in [0, rope_dim / 2),
// angle = pos * freq_scale * base^(-2i / rope_dim) / factor[i] (factor 1 when
// `freq_factors` is empty). Computed in double, stored as float.
// cos_out, sin_out: [rope_dim / 2].
void RopeAngles(const ModelConfig& config, const std::vector<float>& freq_factors, int pos,
                float* cos_out, float* sin_out);

// Rotates the first rope_dim elements of each of `heads` vectors of head_dim floats
// at x (x [heads, head_dim]) by the angles, pairing elements per config.rope_layout.
void ApplyRope(const ModelConfig& config, const float* cos_angles, const float* sin_angles,
               int heads, float* x);

// One attention head of one query at position `pos`:
//   s_j = dot(q, k_j) * scale for j in [0, pos], p = softmax(s), out = sum_j p_j v_j
// in increasing j. k_j = keys + j * kv_stride (head_dim floats), same for values.
// scratch: at least pos + 1 floats. out: [head_dim].
// Path: AVX2+FMA (8-lane FMA chains, fixed reduction tree) when the CPU has it and
// head_dim % 8 == 0, else Dot() and scalar multiply-adds; chosen once per process
// (CpuFeatures(), so SPLITSPEC_CPU_ISA=scalar forces the scalar path).
void AttendOneHead(const float* q, const float* keys, const float* values, int64_t kv_stride,
                   int pos, int head_dim, float scale, float* scratch, float* out);

// gate[n] <- silu(gate[n]) * up[n], silu(x) = x / (1 + exp(-x)).
void SiluMul(float* gate, const float* up, int64_t n);

}  // namespace splitspec::model::internal

#endif  // SPLITSPEC_RUNTIME_MODEL_TRANSFORMER_OPS_H_

// Row-wise building blocks of the transformer forward pass. Internal to
// runtime/model (cpu_backend.cc and the tests' reference forward use them).
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

#include "kernels/cpu/cpu_features.h"
#include "runtime/model/model_config.h"

namespace splitspec::model::internal {

// y[n] = x[n] / sqrt(mean(x^2) + eps) * weight[n]: the float squares are summed in
// double, sequentially, as llama.cpp does (bitwise the same result). x and y may alias.
void RmsNormRow(const float* x, const float* weight, float eps, int n, float* y);

// cos/sin of the RoPE angles of one position: for pair i in [0, rope_dim / 2),
// angle = freq_scale * (theta_i / factor[i]) (factor 1 when `freq_factors` is
// empty), theta_0 = pos, theta_{i+1} = theta_i * base^(-2 / rope_dim), all in float
// as llama.cpp computes them (not the exact angle: the engines must agree bitwise).
// cos_out, sin_out: [rope_dim / 2].
void RopeAngles(const ModelConfig& config, const std::vector<float>& freq_factors, int pos,
                float* cos_out, float* sin_out);
// The same with another base and scale than the config's (the sliding-window layers of a
// model whose layer kinds rotate differently, model_config.h).
void RopeAngles(const ModelConfig& config, float freq_base, float freq_scale,
                const std::vector<float>& freq_factors, int pos, float* cos_out, float* sin_out);

// Rotates the first rope_dim elements of each of `heads` vectors of head_dim floats
// at x (x [heads, head_dim]) by the angles, pairing elements per config.rope_layout.
void ApplyRope(const ModelConfig& config, const float* cos_angles, const float* sin_angles,
               int heads, float* x);

// x[n] <- x rounded to the nearest half-precision (fp16) value, ties to even.
// F16C conversions when the CPU has AVX2 (CpuFeatures()), else the scalar
// conversion; both give the same bits (the rounding is exactly defined).
void RoundToHalf(float* x, int64_t n);

// The attention inputs of one token at llama.cpp's precision: RoPE on q
// [q_heads, head_dim] and k [kv_heads, head_dim], then q, k and v [kv_heads,
// head_dim] rounded to half precision. llama.cpp keeps K and V in an F16 cache
// and converts Q to F16 for the K*Q product by default; doing the same keeps the
// two engines' logits within their own noise of each other.
void PrepareAttentionInputs(const ModelConfig& config, const float* cos_angles,
                            const float* sin_angles, int q_heads, int kv_heads, float* q, float* k,
                            float* v);

// One attention head of one query at position `pos` (transformer_attention.cc):
//   s_j = dot(q, k_j) * scale for j in [0, pos], p = softmax(s), out = sum_j p_j v_j
// in the order of float operations of llama.cpp's CPU backend built for `order`
// (kernels::GgmlOrder: 16-lane sums for kAvx512, 8-lane for kAvx2; that build's
// expf; the softmax sum in double per chunk of lanes), with p rounded to half
// precision (llama.cpp multiplies its F16 V cache by F16 probabilities). The model
// passes kernels::NativeGgmlOrder(). k_j = keys + j * kv_stride (head_dim floats),
// same for values. scratch: at least pos + 1 floats. out: [head_dim].
// Path: AVX2+FMA+F16C when the CPU has it (CpuFeatures(), so SPLITSPEC_CPU_ISA=scalar
// forces the reference) and head_dim % 16 == 0, head_dim <= 256; else the reference.
// Both give the same bits for either order.
void AttendOneHead(kernels::GgmlOrder order, const float* q, const float* keys, const float* values,
                   int64_t kv_stride, int pos, int head_dim, float scale, float* scratch,
                   float* out);
// Several queries of one KV head at once: for each i < count, queries[i].out gets
// exactly AttendOneHead(order, queries[i].q, keys, values, kv_stride, queries[i].pos,
// head_dim, scale, ..., queries[i].out), bit for bit, whatever the other queries (the
// tokens of a verification block or prefill chunk, times the query heads sharing the KV
// head under grouped-query attention). The fast path reads each key and value row once
// for the whole group: eight keys at a time against every query, and the values
// repacked once into 16-element column blocks that stay in L1 across the queries
// (AVX-512). *scratch is grown as needed (reuse it across calls).
struct AttentionQuery {
  const float* q;  // [head_dim]
  int pos;         // attends to positions [0, pos]
  float* out;      // [head_dim]
};
void AttendHeadGroup(kernels::GgmlOrder order, const AttentionQuery* queries, int count,
                     const float* keys, const float* values, int64_t kv_stride, int head_dim,
                     float scale, std::vector<float>* scratch);
// The scalar reference of AttendOneHead (any head_dim).
void AttendOneHeadReference(kernels::GgmlOrder order, const float* q, const float* keys,
                            const float* values, int64_t kv_stride, int pos, int head_dim,
                            float scale, float* scratch, float* out);

// gate[n] <- silu(gate[n]) * up[n], silu(x) = x / (1 + ExpApprox<order>(0 - x)), each
// step rounded as llama.cpp's CPU backend built for `order` rounds it. AVX2 path when
// the CPU has it; the reference gives the same bits.
void SiluMul(kernels::GgmlOrder order, float* gate, const float* up, int64_t n);
void SiluMulReference(kernels::GgmlOrder order, float* gate, const float* up, int64_t n);

// gate[n] <- gelu(gate[n]) * up[n] (GeGLU), as llama.cpp's CPU backend computes it (ggml's
// GGML_GELU_FP16 path): for -10 < x < 10, gelu(x) is half(gelu_tanh(half(x))) with
// gelu_tanh(x) = 0.5f * x * (1 + tanhf(sqrt(2/pi) * x * (1 + 0.044715f * x * x))) in
// float; x <= -10 gives 0 and x >= 10 gives x * up. GeluMul reads a table of the 65536
// half inputs built once; the reference computes each value; the same bits.
void GeluMul(float* gate, const float* up, int64_t n);
void GeluMulReference(float* gate, const float* up, int64_t n);

}  // namespace splitspec::model::internal

#endif  // SPLITSPEC_RUNTIME_MODEL_TRANSFORMER_OPS_H_

// AttendOneHead (transformer_ops.h): one query against the cached keys and values,
// in llama.cpp's order of float operations for a prompt batch on x86 (ggml's CPU
// backend with AVX-512, no flash attention: F16 K*Q and V*P products through its
// 16-lane tiled GEMM, ggml's softmax). Matching that order bit for bit matters: the
// 8-bit quantization of every matmul input turns last-bit differences into whole
// quantization steps, and those grow through the layers into logit differences
// that look like a different model (matmul.h, "Q4_1 order", says the same of matmuls).
//
// A "16-lane sum" of a sequence a_0, a_1, ... is: lane L accumulates a_i for
// i % 16 == L in increasing i (a fused multiply-add chain for products), then the
// 16 lanes are added in a fixed tree: t_i = l_{i+8} + l_i (i < 8), u_i = t_{i+4} +
// t_i (i < 4), result = (u_0 + u_2) + (u_1 + u_3).
//
//   s_j = 16-lane sum over d of q_d * k_{j,d}, times scale       (q, k: half-precision values)
//   e_j = ExpApprox(s_j - max_j s_j)
//   S   = sum over chunks c of 16 positions of (double) 16-lane sum of e in c
//   p_j = half(e_j * (float)(1 / S))
//   out_d = 16-lane sum over j of p_j * v_{j,d}                 (v: half-precision values)
//
// The scalar and the AVX2 paths perform exactly these operations and agree bitwise.
#include <algorithm>
#include <cmath>
#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_approx.h"
#include "kernels/cpu/quant_blocks.h"
#include "runtime/model/transformer_ops.h"

namespace splitspec::model::internal {
namespace {

constexpr int kLanes = 16;

float LaneTreeSum(const float (&l)[kLanes]) {
  float t[8], u[4];
  for (int i = 0; i < 8; ++i) t[i] = l[i + 8] + l[i];
  for (int i = 0; i < 4; ++i) u[i] = t[i + 4] + t[i];
  return (u[0] + u[2]) + (u[1] + u[3]);
}

}  // namespace

void AttendOneHeadReference(const float* q, const float* keys, const float* values,
                            int64_t kv_stride, int pos, int head_dim, float scale, float* scratch,
                            float* out) {
  const int n = pos + 1;
  for (int j = 0; j < n; ++j) {
    const float* k = keys + j * kv_stride;
    float lanes[kLanes] = {};
    for (int d = 0; d < head_dim; ++d) lanes[d % kLanes] = std::fma(k[d], q[d], lanes[d % kLanes]);
    scratch[j] = LaneTreeSum(lanes) * scale;
  }
  float max_score = scratch[0];
  for (int j = 1; j < n; ++j) max_score = std::max(max_score, scratch[j]);
  double sum = 0.0;
  for (int c = 0; c < n; c += kLanes) {
    float lanes[kLanes] = {};
    for (int j = c; j < std::min(n, c + kLanes); ++j) {
      scratch[j] = kernels::ExpApprox(scratch[j] - max_score);
      lanes[j - c] = scratch[j];
    }
    sum += static_cast<double>(LaneTreeSum(lanes));
  }
  const float inv_sum = static_cast<float>(1.0 / sum);
  for (int j = 0; j < n; ++j) scratch[j] = kernels::RoundToHalf(scratch[j] * inv_sum);
  for (int d = 0; d < head_dim; ++d) {
    float lanes[kLanes] = {};
    for (int j = 0; j < n; ++j) {
      lanes[j % kLanes] = std::fma(values[j * kv_stride + d], scratch[j], lanes[j % kLanes]);
    }
    out[d] = LaneTreeSum(lanes);
  }
}

#if defined(__x86_64__)
namespace {

// The lane tree of (lo = lanes 0-7, hi = lanes 8-15).
__attribute__((target("avx2,fma"))) inline float LaneTreeSum8(__m256 lo, __m256 hi) {
  const __m256 t = _mm256_add_ps(hi, lo);
  __m128 u = _mm_add_ps(_mm256_extractf128_ps(t, 1), _mm256_castps256_ps128(t));
  u = _mm_add_ps(u, _mm_movehl_ps(u, u));  // u0 + u2, u1 + u3
  u = _mm_add_ss(u, _mm_movehdup_ps(u));   // (u0 + u2) + (u1 + u3)
  return _mm_cvtss_f32(u);
}

// Lanes [0, n) of 8 (n clamped to [0, 8]) as a maskload mask.
__attribute__((target("avx2"))) inline __m256i FirstLanes(int n) {
  const __m256i index = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), index);
}

constexpr int kMaxHeadDim = 256;

// REQUIRES: head_dim % 16 == 0, head_dim <= kMaxHeadDim.
__attribute__((target("avx2,fma,f16c"))) void AttendOneHeadAvx2(const float* q, const float* keys,
                                                                const float* values,
                                                                int64_t kv_stride, int pos,
                                                                int head_dim, float scale,
                                                                float* scratch, float* out) {
  const int n = pos + 1;
  for (int j = 0; j < n; ++j) {
    const float* k = keys + j * kv_stride;
    __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
    for (int d = 0; d < head_dim; d += kLanes) {
      lo = _mm256_fmadd_ps(_mm256_loadu_ps(k + d), _mm256_loadu_ps(q + d), lo);
      hi = _mm256_fmadd_ps(_mm256_loadu_ps(k + d + 8), _mm256_loadu_ps(q + d + 8), hi);
    }
    scratch[j] = LaneTreeSum8(lo, hi) * scale;
  }
  float max_score = scratch[0];
  for (int j = 1; j < n; ++j) max_score = std::max(max_score, scratch[j]);
  const __m256 vmax = _mm256_set1_ps(max_score);
  double sum = 0.0;
  for (int c = 0; c < n; c += kLanes) {
    // Lanes past n are zero, as llama.cpp's masked positions are.
    const __m256i mask_lo = FirstLanes(n - c), mask_hi = FirstLanes(n - c - 8);
    const __m256 e_lo = _mm256_and_ps(
        kernels::ExpApprox8(_mm256_sub_ps(_mm256_maskload_ps(scratch + c, mask_lo), vmax)),
        _mm256_castsi256_ps(mask_lo));
    const __m256 e_hi = _mm256_and_ps(
        kernels::ExpApprox8(_mm256_sub_ps(_mm256_maskload_ps(scratch + c + 8, mask_hi), vmax)),
        _mm256_castsi256_ps(mask_hi));
    _mm256_maskstore_ps(scratch + c, mask_lo, e_lo);
    _mm256_maskstore_ps(scratch + c + 8, mask_hi, e_hi);
    sum += static_cast<double>(LaneTreeSum8(e_lo, e_hi));
  }
  const __m256 inv_sum = _mm256_set1_ps(static_cast<float>(1.0 / sum));
  for (int c = 0; c < n; c += 8) {
    const __m256i mask = FirstLanes(n - c);
    const __m256 p = _mm256_mul_ps(_mm256_maskload_ps(scratch + c, mask), inv_sum);
    _mm256_maskstore_ps(scratch + c, mask,
                        _mm256_cvtph_ps(_mm256_cvtps_ph(p, _MM_FROUND_TO_NEAREST_INT)));
  }
  // lanes[L][d]: the chain of positions j % 16 == L for output element d.
  alignas(32) float lanes[kLanes][kMaxHeadDim];
  const int used = std::min(n, kLanes);
  for (int l = 0; l < used; ++l) std::memset(lanes[l], 0, head_dim * sizeof(float));
  for (int j = 0; j < n; ++j) {
    const __m256 p = _mm256_set1_ps(scratch[j]);
    const float* v = values + j * kv_stride;
    float* lane = lanes[j % kLanes];
    for (int d = 0; d < head_dim; d += 8) {
      _mm256_store_ps(lane + d,
                      _mm256_fmadd_ps(_mm256_loadu_ps(v + d), p, _mm256_load_ps(lane + d)));
    }
  }
  const __m256 zero = _mm256_setzero_ps();
  for (int d = 0; d < head_dim; d += 8) {
    __m256 l[kLanes];
    for (int i = 0; i < kLanes; ++i) l[i] = i < used ? _mm256_load_ps(lanes[i] + d) : zero;
    __m256 t[8], u[4];
    for (int i = 0; i < 8; ++i) t[i] = _mm256_add_ps(l[i + 8], l[i]);
    for (int i = 0; i < 4; ++i) u[i] = _mm256_add_ps(t[i + 4], t[i]);
    _mm256_storeu_ps(out + d, _mm256_add_ps(_mm256_add_ps(u[0], u[2]), _mm256_add_ps(u[1], u[3])));
  }
}

}  // namespace
#endif

void AttendOneHead(const float* q, const float* keys, const float* values, int64_t kv_stride,
                   int pos, int head_dim, float scale, float* scratch, float* out) {
#if defined(__x86_64__)
  static const bool avx2 = kernels::CpuFeatures().avx2;
  if (avx2 && head_dim % kLanes == 0 && head_dim <= kMaxHeadDim) {
    AttendOneHeadAvx2(q, keys, values, kv_stride, pos, head_dim, scale, scratch, out);
    return;
  }
#endif
  AttendOneHeadReference(q, keys, values, kv_stride, pos, head_dim, scale, scratch, out);
}

}  // namespace splitspec::model::internal

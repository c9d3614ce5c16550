#include "runtime/model/transformer_ops.h"

#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/softmax.h"

namespace splitspec::model::internal {

float Dot(const float* a, const float* b, int n) {
  float acc[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  int i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int j = 0; j < 8; ++j) acc[j] += a[i + j] * b[i + j];
  }
  float tail = 0.f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return (((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]))) +
         tail;
}

void RmsNormRow(const float* x, const float* weight, float eps, int n, float* y) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i]) * x[i];
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
  for (int i = 0; i < n; ++i) y[i] = x[i] * scale * weight[i];
}

void RopeAngles(const ModelConfig& config, const std::vector<float>& freq_factors, int pos,
                float* cos_out, float* sin_out) {
  const int pairs = config.rope_dim / 2;
  for (int i = 0; i < pairs; ++i) {
    double angle = static_cast<double>(pos) * config.rope_freq_scale *
                   std::pow(static_cast<double>(config.rope_freq_base),
                            -2.0 * i / static_cast<double>(config.rope_dim));
    if (!freq_factors.empty()) angle /= freq_factors[i];
    cos_out[i] = static_cast<float>(std::cos(angle));
    sin_out[i] = static_cast<float>(std::sin(angle));
  }
}

void ApplyRope(const ModelConfig& config, const float* cos_angles, const float* sin_angles,
               int heads, float* x) {
  const int pairs = config.rope_dim / 2;
  const bool adjacent = config.rope_layout == RopeLayout::kAdjacentPairs;
  for (int h = 0; h < heads; ++h) {
    float* v = x + static_cast<int64_t>(h) * config.head_dim;
    for (int i = 0; i < pairs; ++i) {
      const int a = adjacent ? 2 * i : i;
      const int b = adjacent ? 2 * i + 1 : i + pairs;
      const float x0 = v[a];
      const float x1 = v[b];
      v[a] = x0 * cos_angles[i] - x1 * sin_angles[i];
      v[b] = x0 * sin_angles[i] + x1 * cos_angles[i];
    }
  }
}

namespace {

void AttendOneHeadScalar(const float* q, const float* keys, const float* values,
                         int64_t kv_stride, int pos, int head_dim, float scale, float* scratch,
                         float* out) {
  const int n = pos + 1;
  for (int j = 0; j < n; ++j) scratch[j] = Dot(q, keys + j * kv_stride, head_dim) * scale;
  kernels::SoftmaxRows(scratch, scratch, 1, n);
  for (int d = 0; d < head_dim; ++d) out[d] = 0.f;
  for (int j = 0; j < n; ++j) {
    const float p = scratch[j];
    const float* v = values + j * kv_stride;
    for (int d = 0; d < head_dim; ++d) out[d] += p * v[d];
  }
}

#if defined(__x86_64__)
// The same algorithm with 8-wide FMA: each score is one 8-lane FMA chain over the
// head dimension reduced in a fixed tree; REQUIRES head_dim % 8 == 0.
__attribute__((target("avx2,fma"))) void AttendOneHeadAvx2(
    const float* q, const float* keys, const float* values, int64_t kv_stride, int pos,
    int head_dim, float scale, float* scratch, float* out) {
  const int n = pos + 1;
  for (int j = 0; j < n; ++j) {
    const float* k = keys + j * kv_stride;
    __m256 acc = _mm256_setzero_ps();
    for (int d = 0; d < head_dim; d += 8) {
      acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), acc);
    }
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    scratch[j] = _mm_cvtss_f32(s) * scale;
  }
  kernels::SoftmaxRows(scratch, scratch, 1, n);
  for (int d = 0; d < head_dim; d += 8) _mm256_storeu_ps(out + d, _mm256_setzero_ps());
  for (int j = 0; j < n; ++j) {
    const __m256 p = _mm256_set1_ps(scratch[j]);
    const float* v = values + j * kv_stride;
    for (int d = 0; d < head_dim; d += 8) {
      _mm256_storeu_ps(out + d, _mm256_fmadd_ps(p, _mm256_loadu_ps(v + d),
                                                _mm256_loadu_ps(out + d)));
    }
  }
}
#endif

}  // namespace

void AttendOneHead(const float* q, const float* keys, const float* values, int64_t kv_stride,
                   int pos, int head_dim, float scale, float* scratch, float* out) {
#if defined(__x86_64__)
  static const bool avx2 = kernels::CpuFeatures().avx2;
  if (avx2 && head_dim % 8 == 0) {
    AttendOneHeadAvx2(q, keys, values, kv_stride, pos, head_dim, scale, scratch, out);
    return;
  }
#endif
  AttendOneHeadScalar(q, keys, values, kv_stride, pos, head_dim, scale, scratch, out);
}

void SiluMul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace splitspec::model::internal

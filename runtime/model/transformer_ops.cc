#include "runtime/model/transformer_ops.h"

#include <cmath>

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

void AttendOneHead(const float* q, const float* keys, const float* values, int64_t kv_stride,
                   int pos, int head_dim, float scale, float* scratch, float* out) {
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

void SiluMul(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float g = gate[i];
    gate[i] = g / (1.0f + std::exp(-g)) * up[i];
  }
}

}  // namespace splitspec::model::internal

#include "runtime/model/transformer_ops.h"

#include <cmath>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/exp_approx.h"
#include "kernels/cpu/quant_blocks.h"

namespace splitspec::model::internal {

void RmsNormRow(const float* x, const float* weight, float eps, int n, float* y) {
  double sum = 0.0;
  for (int i = 0; i < n; ++i) sum += static_cast<double>(x[i] * x[i]);
  const float scale = 1.0f / std::sqrt(static_cast<float>(sum / n) + eps);
  for (int i = 0; i < n; ++i) y[i] = x[i] * scale * weight[i];
}

void RopeAngles(const ModelConfig& config, const std::vector<float>& freq_factors, int pos,
                float* cos_out, float* sin_out) {
  RopeAngles(config, config.rope_freq_base, config.rope_freq_scale, freq_factors, pos, cos_out,
             sin_out);
}

void RopeAngles(const ModelConfig& config, float freq_base, float freq_scale,
                const std::vector<float>& freq_factors, int pos, float* cos_out, float* sin_out) {
  const int pairs = config.rope_dim / 2;
  // llama.cpp's order of float operations (ggml's rope cache), so that both engines
  // rotate by the same angles to the last bit: the base angle is advanced by repeated
  // multiplication, divided by the pair's factor, scaled, and cosf/sinf taken in float.
  const float theta_scale =
      std::pow(freq_base, -2.0f / static_cast<float>(config.rope_dim));
  float theta = static_cast<float>(pos);
  for (int i = 0; i < pairs; ++i) {
    const float factor = freq_factors.empty() ? 1.0f : freq_factors[i];
    const float angle = freq_scale * (theta / factor);
    cos_out[i] = std::cos(angle);
    sin_out[i] = std::sin(angle);
    theta *= theta_scale;
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
      v[a] = std::fma(x0, cos_angles[i], -(x1 * sin_angles[i]));
      v[b] = std::fma(x0, sin_angles[i], x1 * cos_angles[i]);
    }
  }
}

namespace {

void RoundToHalfScalar(float* x, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] = kernels::RoundToHalf(x[i]);
}

#if defined(__x86_64__)
__attribute__((target("avx2,f16c"))) void RoundToHalfF16c(float* x, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(x + i), _MM_FROUND_TO_NEAREST_INT);
    _mm256_storeu_ps(x + i, _mm256_cvtph_ps(h));
  }
  RoundToHalfScalar(x + i, n - i);
}
#endif

}  // namespace

void RoundToHalf(float* x, int64_t n) {
#if defined(__x86_64__)
  static const bool f16c = kernels::CpuFeatures().avx2;
  if (f16c) {
    RoundToHalfF16c(x, n);
    return;
  }
#endif
  RoundToHalfScalar(x, n);
}

void PrepareAttentionInputs(const ModelConfig& config, const float* cos_angles,
                            const float* sin_angles, int q_heads, int kv_heads, float* q, float* k,
                            float* v) {
  ApplyRope(config, cos_angles, sin_angles, q_heads, q);
  ApplyRope(config, cos_angles, sin_angles, kv_heads, k);
  RoundToHalf(q, static_cast<int64_t>(q_heads) * config.head_dim);
  RoundToHalf(k, static_cast<int64_t>(kv_heads) * config.head_dim);
  RoundToHalf(v, static_cast<int64_t>(kv_heads) * config.head_dim);
}

namespace {

// ggml's SiLU step by step: x / (1 + exp(0 - x)), times up.
template <kernels::GgmlOrder kOrder>
inline float SiluTimes(float x, float up) {
  return x / (1.0f + kernels::ExpApprox<kOrder>(0.0f - x)) * up;
}

template <kernels::GgmlOrder kOrder>
void SiluMulReferenceT(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) gate[i] = SiluTimes<kOrder>(gate[i], up[i]);
}

#if defined(__x86_64__)
template <kernels::GgmlOrder kOrder>
__attribute__((target("avx2,fma"))) void SiluMulAvx2(float* gate, const float* up, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(gate + i);
    const __m256 e = kernels::ExpApprox8<kOrder>(_mm256_sub_ps(_mm256_setzero_ps(), x));
    const __m256 silu = _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    _mm256_storeu_ps(gate + i, _mm256_mul_ps(silu, _mm256_loadu_ps(up + i)));
  }
  SiluMulReferenceT<kOrder>(gate + i, up + i, n - i);
}
#endif

}  // namespace

void SiluMulReference(kernels::GgmlOrder order, float* gate, const float* up, int64_t n) {
  if (order == kernels::GgmlOrder::kAvx512) {
    SiluMulReferenceT<kernels::GgmlOrder::kAvx512>(gate, up, n);
  } else {
    SiluMulReferenceT<kernels::GgmlOrder::kAvx2>(gate, up, n);
  }
}

void SiluMul(kernels::GgmlOrder order, float* gate, const float* up, int64_t n) {
#if defined(__x86_64__)
  static const bool avx2 = kernels::CpuFeatures().avx2;
  if (avx2) {
    if (order == kernels::GgmlOrder::kAvx512) {
      SiluMulAvx2<kernels::GgmlOrder::kAvx512>(gate, up, n);
    } else {
      SiluMulAvx2<kernels::GgmlOrder::kAvx2>(gate, up, n);
    }
    return;
  }
#endif
  SiluMulReference(order, gate, up, n);
}

namespace {

// ggml's gelu_f32 (the tanh approximation), in float.
float GeluTanh(float x) {
  constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  constexpr float kCoefA = 0.044715f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kCoefA * x * x)));
}

// gelu of the half-precision input with these bits, rounded to half (ggml's table entry).
float GeluOfHalf(uint16_t bits) {
  return kernels::RoundToHalf(GeluTanh(kernels::Fp16ToFloat(bits)));
}

}  // namespace

void GeluMulReference(float* gate, const float* up, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    if (x <= -10.0f) {
      gate[i] = 0.0f;
    } else if (x >= 10.0f) {
      gate[i] = x * up[i];
    } else {
      gate[i] = GeluOfHalf(kernels::FloatToFp16(x)) * up[i];
    }
  }
}

void GeluMul(float* gate, const float* up, int64_t n) {
  static const std::vector<float>* const table = [] {
    auto* t = new std::vector<float>(65536);
    for (uint32_t bits = 0; bits < 65536; ++bits) (*t)[bits] = GeluOfHalf(static_cast<uint16_t>(bits));
    return t;
  }();
  for (int64_t i = 0; i < n; ++i) {
    const float x = gate[i];
    if (x <= -10.0f) {
      gate[i] = 0.0f;
    } else if (x >= 10.0f) {
      gate[i] = x * up[i];
    } else {
      gate[i] = (*table)[kernels::FloatToFp16(x)] * up[i];
    }
  }
}

}  // namespace splitspec::model::internal

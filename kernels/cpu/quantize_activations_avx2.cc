// AVX2 activation quantizer: the same operations as the scalar one in
// quantize_activations.cc (exact max, one division, one reciprocal, multiply,
// round-half-even, clamp), so both write identical bytes.
#include <immintrin.h>

#include "kernels/cpu/quant_blocks.h"
#include "kernels/cpu/quantize_activations.h"

namespace splitspec::kernels::internal {
namespace {

float AbsMax(const float* x, int n) {  // n % 8 == 0
  const __m256 sign = _mm256_set1_ps(-0.0f);
  __m256 m = _mm256_setzero_ps();
  for (int i = 0; i < n; i += 8)
    m = _mm256_max_ps(m, _mm256_andnot_ps(sign, _mm256_loadu_ps(x + i)));
  __m128 h = _mm_max_ps(_mm256_castps256_ps128(m), _mm256_extractf128_ps(m, 1));
  h = _mm_max_ps(h, _mm_movehl_ps(h, h));
  h = _mm_max_ss(h, _mm_shuffle_ps(h, h, 1));
  return _mm_cvtss_f32(h);
}

inline __m256i RoundToInt(const float* x, __m256 id) {
  __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x), id),
                             _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  v = _mm256_min_ps(_mm256_set1_ps(127.0f), _mm256_max_ps(_mm256_set1_ps(-127.0f), v));
  return _mm256_cvtps_epi32(v);
}

inline int32_t HorizontalSum(__m256i v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(1, 0, 3, 2)));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, _MM_SHUFFLE(2, 3, 0, 1)));
  return _mm_cvtsi128_si32(s);
}

// Quantizes 32 values with reciprocal scale `id` into q[32]; returns the sums of the
// first and the second 16.
inline void Quantize32(const float* x, __m256 id, int8_t* q, int32_t* sum_lo, int32_t* sum_hi) {
  const __m256i a = RoundToInt(x, id);
  const __m256i b = RoundToInt(x + 8, id);
  const __m256i c = RoundToInt(x + 16, id);
  const __m256i d = RoundToInt(x + 24, id);
  *sum_lo = HorizontalSum(_mm256_add_epi32(a, b));
  *sum_hi = HorizontalSum(_mm256_add_epi32(c, d));
  // packs works within 128-bit lanes: restore element order with one permute.
  const __m256i packed = _mm256_packs_epi16(_mm256_packs_epi32(a, b), _mm256_packs_epi32(c, d));
  const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  _mm256_storeu_si256(reinterpret_cast<__m256i*>(q), _mm256_permutevar8x32_epi32(packed, order));
}

// RoundToHalf of one float by F16C: the same rounding (to nearest, ties to even,
// subnormals and overflow included) as the software conversion, in two instructions.
inline float RoundToHalfF16c(float f) {
  return _cvtsh_ss(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
}

}  // namespace

void QuantizeBlocks32Avx2(const float* x, int64_t cols, Blocks32View out) {
  const int64_t nb = cols / 32;
  for (int64_t b = 0; b < nb; ++b) {
    const float* src = x + 32 * b;
    const float amax = AbsMax(src, 32);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    int32_t lo, hi;
    Quantize32(src, _mm256_set1_ps(id), out.qs + 32 * b, &lo, &hi);
    out.d[b] = RoundToHalfF16c(d);
    out.sum[b] = static_cast<float>(lo + hi);
    out.d_sum[b] = RoundToHalfF16c(d * static_cast<float>(lo + hi));
  }
  for (int64_t b = nb; b < Blocks32Padded(nb); ++b) out.d[b] = out.sum[b] = out.d_sum[b] = 0.0f;
}

void QuantizeBlocks256Avx2(const float* x, int64_t cols, ActivationBlock256* out) {
  for (int64_t b = 0; b < cols / 256; ++b) {
    ActivationBlock256& block = out[b];
    const float* src = x + 256 * b;
    const float amax = AbsMax(src, 256);
    const float d = amax / 127.0f;
    const float id = amax != 0.0f ? 127.0f / amax : 0.0f;
    const __m256 vid = _mm256_set1_ps(id);
    for (int s = 0; s < 8; ++s) {
      int32_t lo, hi;
      Quantize32(src + 32 * s, vid, block.qs + 32 * s, &lo, &hi);
      block.sums16[2 * s] = static_cast<int16_t>(lo);
      block.sums16[2 * s + 1] = static_cast<int16_t>(hi);
    }
    block.d = d;
    for (int32_t& p : block.pad) p = 0;
  }
}

}  // namespace splitspec::kernels::internal

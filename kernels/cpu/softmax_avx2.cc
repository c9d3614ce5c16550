// AVX2 softmax. exp is a degree-6 polynomial on the reduced range
// (x = n*ln2 + r, |r| <= ln2/2), accurate to ~2 ulp over the range softmax uses
// (inputs <= 0 after subtracting the row max).
#include <immintrin.h>

#include <cmath>

#include "kernels/cpu/softmax.h"

namespace splitspec::kernels::internal {
namespace {

inline __m256 Exp256(__m256 x) {
  const __m256 kLog2e = _mm256_set1_ps(1.44269504088896341f);
  const __m256 kLn2Hi = _mm256_set1_ps(0.693359375f);
  const __m256 kLn2Lo = _mm256_set1_ps(-2.12194440e-4f);
  // Below about -87.3 the result underflows: clamp so the exponent stays valid, and
  // return exactly 0 there (so -inf logits get probability 0, as the reference does).
  const __m256 underflow = _mm256_cmp_ps(x, _mm256_set1_ps(-87.3f), _CMP_LT_OQ);
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.3f));
  __m256 n =
      _mm256_round_ps(_mm256_mul_ps(x, kLog2e), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, kLn2Hi, x);
  r = _mm256_fnmadd_ps(n, kLn2Lo, r);
  __m256 p = _mm256_set1_ps(1.9875691500E-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073E-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894E-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459E-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201E-1f));
  const __m256 r2 = _mm256_mul_ps(r, r);
  p = _mm256_fmadd_ps(p, r2, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i exponent =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(underflow, _mm256_mul_ps(p, _mm256_castsi256_ps(exponent)));
}

inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

}  // namespace

void SoftmaxRowsAvx2(const float* logits, float* probs, int rows, int cols) {
  const int vec_end = cols & ~7;
  for (int r = 0; r < rows; ++r) {
    const float* in = logits + static_cast<long>(r) * cols;
    float* out = probs + static_cast<long>(r) * cols;
    __m256 vmax = _mm256_set1_ps(-INFINITY);
    for (int c = 0; c < vec_end; c += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(in + c));
    float max_value = HorizontalMax(vmax);
    for (int c = vec_end; c < cols; ++c) max_value = in[c] > max_value ? in[c] : max_value;

    const __m256 vmax_b = _mm256_set1_ps(max_value);
    __m256 vsum = _mm256_setzero_ps();
    for (int c = 0; c < vec_end; c += 8) {
      const __m256 e = Exp256(_mm256_sub_ps(_mm256_loadu_ps(in + c), vmax_b));
      _mm256_storeu_ps(out + c, e);
      vsum = _mm256_add_ps(vsum, e);
    }
    float sum = HorizontalSum(vsum);
    for (int c = vec_end; c < cols; ++c) {
      out[c] = std::exp(in[c] - max_value);
      sum += out[c];
    }
    const __m256 inv = _mm256_set1_ps(1.0f / sum);
    for (int c = 0; c < vec_end; c += 8)
      _mm256_storeu_ps(out + c, _mm256_mul_ps(_mm256_loadu_ps(out + c), inv));
    for (int c = vec_end; c < cols; ++c) out[c] *= 1.0f / sum;
  }
}

}  // namespace splitspec::kernels::internal

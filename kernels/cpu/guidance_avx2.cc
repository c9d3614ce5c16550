// AVX2 guided logits: eight entries per fused multiply-add, the tail in scalar
// fmaf, which rounds exactly like the vector lanes (see guidance.h).
#include <immintrin.h>

#include <cmath>
#include <cstring>

#include "kernels/cpu/guidance.h"

namespace splitspec::kernels::internal {

void GuidedLogitsRowsAvx2(const float* cond, const float* uncond, const float* scales, float* out,
                          int rows, int cols) {
  const int vec_end = cols & ~7;
  const __m256 minus_inf = _mm256_set1_ps(-INFINITY);
  for (int r = 0; r < rows; ++r) {
    const long offset = static_cast<long>(r) * cols;
    const float* c = cond + offset;
    const float* u = uncond + offset;
    float* g = out + offset;
    const float s = scales[r];
    if (s == 1.0f) {
      if (g != c) std::memmove(g, c, sizeof(float) * cols);
      continue;
    }
    const __m256 scale = _mm256_set1_ps(s);
    for (int v = 0; v < vec_end; v += 8) {
      const __m256 cv = _mm256_loadu_ps(c + v);
      const __m256 uv = _mm256_loadu_ps(u + v);
      const __m256 masked = _mm256_or_ps(_mm256_cmp_ps(cv, minus_inf, _CMP_EQ_OQ),
                                         _mm256_cmp_ps(uv, minus_inf, _CMP_EQ_OQ));
      const __m256 guided = _mm256_fmadd_ps(scale, _mm256_sub_ps(cv, uv), uv);
      _mm256_storeu_ps(g + v, _mm256_blendv_ps(guided, minus_inf, masked));
    }
    for (int v = vec_end; v < cols; ++v) {
      const float cv = c[v];
      const float uv = u[v];
      g[v] = (cv == -INFINITY || uv == -INFINITY) ? -INFINITY : std::fmaf(s, cv - uv, uv);
    }
  }
}

}  // namespace splitspec::kernels::internal

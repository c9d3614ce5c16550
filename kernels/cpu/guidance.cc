#include "kernels/cpu/guidance.h"

#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_features.h"

namespace splitspec::kernels {

void GuidedLogitsRowsReference(const float* cond, const float* uncond, const float* scales,
                               float* out, int rows, int cols) {
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
    for (int v = 0; v < cols; ++v) {
      const float cv = c[v];
      const float uv = u[v];
      g[v] = (cv == -INFINITY || uv == -INFINITY) ? -INFINITY : std::fmaf(s, cv - uv, uv);
    }
  }
}

void GuidedLogitsRows(const float* cond, const float* uncond, const float* scales, float* out,
                      int rows, int cols) {
  if (CpuFeatures().avx2) {
    internal::GuidedLogitsRowsAvx2(cond, uncond, scales, out, rows, cols);
  } else {
    GuidedLogitsRowsReference(cond, uncond, scales, out, rows, cols);
  }
}

}  // namespace splitspec::kernels

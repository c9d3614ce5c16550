#include "kernels/cpu/softmax.h"

#include <cmath>

#include "kernels/cpu/cpu_features.h"

namespace splitspec::kernels {

void SoftmaxRowsReference(const float* logits, float* probs, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    const float* in = logits + static_cast<long>(r) * cols;
    float* out = probs + static_cast<long>(r) * cols;
    float max_value = in[0];
    for (int c = 1; c < cols; ++c) max_value = in[c] > max_value ? in[c] : max_value;
    double sum = 0.0;
    for (int c = 0; c < cols; ++c) {
      out[c] = std::exp(in[c] - max_value);
      sum += out[c];
    }
    const float inv_sum = static_cast<float>(1.0 / sum);
    for (int c = 0; c < cols; ++c) out[c] *= inv_sum;
  }
}

void SoftmaxRows(const float* logits, float* probs, int rows, int cols) {
  if (CpuFeatures().avx2) {
    internal::SoftmaxRowsAvx2(logits, probs, rows, cols);
  } else {
    SoftmaxRowsReference(logits, probs, rows, cols);
  }
}

}  // namespace splitspec::kernels

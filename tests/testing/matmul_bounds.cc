#include "tests/testing/matmul_bounds.h"

#include <algorithm>
#include <cmath>

namespace splitspec::kernels {
namespace {

// The activations' quantization block of `type`'s matmul (0: float activations).
int ActivationBlock(GgmlType type) {
  const int block = GetGgmlTypeTraits(type).block_size;
  return block == 1 ? 0 : std::max(32, block);
}

}  // namespace

double SummationBound(int64_t n, double mass) { return 2.0 * n * std::ldexp(1.0, -24) * mass; }

double PartialSumMass(GgmlType type, const float* w, const float* x, int64_t cols) {
  double mass = 0;
  const int block = std::max(32, GetGgmlTypeTraits(type).block_size);
  for (int64_t b = 0; b < cols; b += block) {
    double block_x = 0, block_w_max = 0;
    for (int64_t i = b; i < std::min<int64_t>(b + block, cols); ++i) {
      const double wi = std::fabs(w[i]);
      mass += wi * std::fabs(x[i]);
      block_x += std::fabs(x[i]);
      block_w_max = std::max(block_w_max, wi);
    }
    if (GetGgmlTypeTraits(type).block_size > 1) mass += 4.0 * block_w_max * block_x;
  }
  return mass;
}

double QuantizedDotBound(GgmlType type, const float* w, const float* x, int64_t cols) {
  const int act_block = ActivationBlock(type);
  double rounding = 0;
  // The 32-element blocks keep their scale at half precision (llama.cpp's Q8_1 / Q8_0):
  // d_half * q is off by up to 127 * |d_half - d| <= 127 * 2^-11 * d more.
  const double step_error = act_block == 32 ? 0.5 + 127.0 * std::ldexp(1.0, -11) : 0.5;
  for (int64_t b = 0; act_block > 0 && b < cols; b += act_block) {
    const int64_t end = std::min<int64_t>(b + act_block, cols);
    float amax = 0;
    for (int64_t i = b; i < end; ++i) amax = std::max(amax, std::fabs(x[i]));
    for (int64_t i = b; i < end; ++i) rounding += std::fabs(w[i]) * (amax / 127.0) * step_error;
  }
  return rounding * 1.0001 + SummationBound(cols, PartialSumMass(type, w, x, cols));
}

}  // namespace splitspec::kernels

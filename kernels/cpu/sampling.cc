#include "kernels/cpu/sampling.h"

namespace splitspec::kernels {

int ArgmaxProbs(const float* weights, int n) {
  int best = -1;
  float best_weight = 0.0f;
  for (int v = 0; v < n; ++v) {
    const float w = weights[v];
    if (!IsValidWeight(w)) return -1;
    if (w > best_weight) {
      best_weight = w;
      best = v;
    }
  }
  return best;
}

int SampleFromWeights(const float* weights, int n, double u) {
  double total = 0.0;
  for (int v = 0; v < n; ++v) {
    if (!IsValidWeight(weights[v])) return -1;
    total += weights[v];
  }
  if (!(total > 0.0)) return -1;
  const double target = u * total;
  double running = 0.0;
  int last_positive = -1;
  for (int v = 0; v < n; ++v) {
    if (weights[v] > 0.0f) {
      running += weights[v];
      last_positive = v;
      if (running > target) return v;
    }
  }
  return last_positive;
}

int GumbelArgmax(const float* probs, int n, uint64_t seed, int64_t position) {
  int best = -1;
  double best_key = 0.0;
  for (int v = 0; v < n; ++v) {
    const float p = probs[v];
    if (!IsValidWeight(p)) return -1;
    if (p == 0.0f) continue;
    const double key = std::log(static_cast<double>(p)) + GumbelNoise(seed, position, v);
    if (best < 0 || key > best_key) {
      best_key = key;
      best = v;
    }
  }
  return best;
}

}  // namespace splitspec::kernels

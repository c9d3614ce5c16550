#include "runtime/spec/adaptive_window.h"

#include <algorithm>
#include <cmath>

namespace splitspec::spec {
namespace {

// E[N]: the accepted prefix plus one correction or bonus token.
double TokensWithBonus(double alpha, int k) {
  double sum = 0.0, power = 1.0;
  for (int i = 0; i <= k; ++i) {
    sum += power;
    power *= alpha;
  }
  return sum;
}

// E[M]: as E[N], but a fully accepted block earns no bonus.
double TokensWithoutBonus(double alpha, int k) {
  double sum = 0.0, power = 1.0;
  for (int j = 0; j < k; ++j) {
    sum += power * (1.0 - alpha) * (j + 1);
    power *= alpha;
  }
  return sum + power * k;
}

}  // namespace

const char* DraftScheduleName(DraftSchedule schedule) {
  switch (schedule) {
    case DraftSchedule::kSequential:
      return "sequential";
    case DraftSchedule::kCached:
      return "cached";
    case DraftSchedule::kOverlapped:
      return "overlapped";
  }
  return "unknown";
}

double WindowSpeedup(const WindowInputs& in, DraftSchedule schedule, int k) {
  k = std::max(1, k);
  const double alpha = std::clamp(in.alpha, 0.0, 1.0);
  const double c = in.cost_ratio > 0.0 && std::isfinite(in.cost_ratio) ? in.cost_ratio : 1e-9;
  const double verify = 1.0 + std::max(0.0, in.verify_slope) * k;
  const double draft = k / c;
  switch (schedule) {
    case DraftSchedule::kSequential:
      return TokensWithBonus(alpha, k) / (draft + verify);
    case DraftSchedule::kCached: {
      const double h = std::clamp(in.cache_hit_rate, 0.0, 1.0);
      const double saved = h * std::min<double>(k, c * verify) / c;
      return TokensWithBonus(alpha, k) / (draft + verify - saved);
    }
    case DraftSchedule::kOverlapped: {
      const double refill = (1.0 - std::pow(alpha, k)) * draft;
      return TokensWithoutBonus(alpha, k) / (std::max(verify, draft) + refill);
    }
  }
  return 0.0;
}

WindowChoice ChooseWindow(const WindowInputs& in, int min_k, int max_k) {
  min_k = std::max(1, min_k);
  max_k = std::max(min_k, max_k);
  WindowChoice best;
  best.speedup = -1.0;
  for (DraftSchedule schedule :
       {DraftSchedule::kSequential, DraftSchedule::kCached, DraftSchedule::kOverlapped}) {
    if (schedule == DraftSchedule::kCached && !in.cache_available) continue;
    for (int k = min_k; k <= max_k; ++k) {
      const double s = WindowSpeedup(in, schedule, k);
      if (s > best.speedup + 1e-12) best = {schedule, k, s};
    }
  }
  return best;
}

}  // namespace splitspec::spec

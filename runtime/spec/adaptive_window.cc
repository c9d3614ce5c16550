#include "runtime/spec/adaptive_window.h"

#include <algorithm>
#include <cmath>

#include "runtime/spec/analytic_model.h"

namespace splitspec::spec {

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
  PipelineModelInputs model;
  model.alpha = std::clamp(in.alpha, 0.0, 1.0);
  model.cost_ratio = in.cost_ratio > 0.0 && std::isfinite(in.cost_ratio) ? in.cost_ratio : 1e-9;
  model.k = std::max(1, k);
  model.verify_slope = std::isfinite(in.verify_slope) ? std::max(0.0, in.verify_slope) : 0.0;
  model.cache_hit_rate = std::clamp(in.cache_hit_rate, 0.0, 1.0);
  switch (schedule) {
    case DraftSchedule::kSequential:
      return PipelineSpeedup(model, PipelineMode::kSequential);
    case DraftSchedule::kCached:
      return PipelineSpeedup(model, PipelineMode::kOverlappedCache);
    case DraftSchedule::kOverlapped:
      return PipelineSpeedup(model, PipelineMode::kOverlapped);
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
    WindowChoice candidate{schedule, min_k, -1.0};
    for (int k = min_k; k <= max_k; ++k) {
      const double s = WindowSpeedup(in, schedule, k);
      if (s > candidate.speedup + 1e-12) candidate = {schedule, k, s};
    }
    const double margin = best.speedup < 0 ? 0.0 : kScheduleMargin;
    if (candidate.speedup > best.speedup * (1.0 + margin) + 1e-12) best = candidate;
  }
  return best;
}

}  // namespace splitspec::spec

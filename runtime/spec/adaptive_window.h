// Per-request choice of the draft schedule and block size (issue #18 item 4,
// PEARL-style: the draft keeps working while a block is verified, and how far it
// runs ahead follows measured acceptance and cost).
//
//   WindowInputs in{.alpha = 0.8, .cost_ratio = 1.2, .verify_slope = 0.25,
//                   .cache_hit_rate = 0.6, .cache_available = true};
//   WindowChoice best = ChooseWindow(in, /*min_k=*/1, /*max_k=*/8);
//   // best.schedule: kSequential (window 1), kOverlapped (window 2) or kCached
//   // (window 1 + the speculation cache); best.k; best.speedup over target-only.
//
// The model is the pipeline model of runtime/spec/analytic_model.h (the one `plan`
// prints and `bench spec --sim-grid` checks), with s = verify_slope and, for a block
// of k drafts, d = k / C:
//   sequential (kSequential): E[N] = sum_{i=0..k} alpha^i per d + 1 + s k.
//   overlapped (kOverlapped, two blocks in flight): a fully accepted block earns no
//     bonus and a rejection makes the queued block stale (a refill of d), or, when
//     the draft cannot keep up (d > 1 + s (k - 1)), E[N] per 2 d.
//   cached (kOverlappedCache, one block in flight + the speculation cache): E[N]
//     per 1 + s k + (1 - h) d + h max(0, d - (1 + s k)), h the measured hit rate
//     (the draft pre-drafts during the verification what fits in it).
// Speedup = tokens / time. Per schedule the best k wins (the smaller among ties);
// a less simple schedule (sequential, then cached, then overlapped) replaces a
// simpler one only if it predicts kScheduleMargin more: the inputs are estimates,
// and the model counts the draft's pre-drafting and running ahead as free, which
// they are not where draft and target share cores and memory (a cache whose hit
// rate decays toward 0 would otherwise stay chosen for a vanishing gain).
// Pure functions; thread-safe.
#ifndef SPLITSPEC_RUNTIME_SPEC_ADAPTIVE_WINDOW_H_
#define SPLITSPEC_RUNTIME_SPEC_ADAPTIVE_WINDOW_H_

namespace splitspec::spec {

enum class DraftSchedule { kSequential, kCached, kOverlapped };

const char* DraftScheduleName(DraftSchedule schedule);

inline constexpr double kScheduleMargin = 0.02;  // 2% over the simpler schedule

struct WindowInputs {
  double alpha = 0.6;          // per-token acceptance, [0, 1]
  double cost_ratio = 10.0;    // C = T_target / T_draft per token, > 0
  double verify_slope = 0.25;  // s, >= 0
  double cache_hit_rate = 0;   // h, [0, 1]: measured hits (full or partial) per lookup
  bool cache_available = false;
};

struct WindowChoice {
  DraftSchedule schedule = DraftSchedule::kSequential;
  int k = 1;
  double speedup = 0.0;
};

// Tokens per unit T of `schedule` at block size k >= 1 (inputs clamped to range).
double WindowSpeedup(const WindowInputs& in, DraftSchedule schedule, int k);

// The best schedule and k in [min_k, max_k] (1 <= min_k <= max_k); kCached only
// when in.cache_available.
WindowChoice ChooseWindow(const WindowInputs& in, int min_k, int max_k);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_ADAPTIVE_WINDOW_H_

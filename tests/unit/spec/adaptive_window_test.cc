// ChooseWindow / WindowSpeedup (runtime/spec/adaptive_window.h): the schedule and
// block size each regime of acceptance and cost ratio gets, and the model's terms.
#include "runtime/spec/adaptive_window.h"

#include <cmath>

#include "gtest/gtest.h"
#include "runtime/spec/analytic_model.h"

namespace splitspec::spec {
namespace {

WindowInputs Inputs(double alpha, double c, double slope, double h, bool cache) {
  WindowInputs in;
  in.alpha = alpha;
  in.cost_ratio = c;
  in.verify_slope = slope;
  in.cache_hit_rate = h;
  in.cache_available = cache;
  return in;
}

TEST(AdaptiveWindowTest, ModelTermsMatchTheHeader) {
  // Sequential: E[N] / (k / C + 1 + s k).
  EXPECT_NEAR(WindowSpeedup(Inputs(0.5, 4, 0.25, 0, false), DraftSchedule::kSequential, 2),
              (1 + 0.5 + 0.25) / (0.5 + 1.5), 1e-12);
  // The pipeline model's terms (analytic_model.h). Overlapped forfeits the bonus: at
  // alpha 1 a block commits k, not k + 1, and the queued block feeds its k drafts only.
  EXPECT_NEAR(WindowSpeedup(Inputs(1.0, 100, 0.25, 0, false), DraftSchedule::kOverlapped, 4),
              4.0 / 1.75, 1e-12);
  // ... and refills after a rejection: at alpha 0, one token per verify (1 + s k) + refill.
  EXPECT_NEAR(WindowSpeedup(Inputs(0.0, 8, 0.0, 0, false), DraftSchedule::kOverlapped, 4),
              1.0 / (1.0 + 0.5), 1e-12);
  // A draft that cannot keep up (d = 2 > 1): E[N] per two drafting times.
  EXPECT_NEAR(WindowSpeedup(Inputs(0.0, 2, 0.0, 0, false), DraftSchedule::kOverlapped, 4),
              1.0 / (2.0 + 2.0), 1e-12);
  EXPECT_DOUBLE_EQ(WindowSpeedup(Inputs(0.7, 5, 0.2, 0, false), DraftSchedule::kOverlapped, 3),
                   PipelineSpeedup({.alpha = 0.7, .cost_ratio = 5, .k = 3, .verify_slope = 0.2},
                                   PipelineMode::kOverlapped));
  // Cached with h = 0 is sequential; with h = 1 the drafting that fits in the
  // verification is saved.
  const WindowInputs miss = Inputs(0.8, 2, 0.25, 0.0, true);
  EXPECT_DOUBLE_EQ(WindowSpeedup(miss, DraftSchedule::kCached, 4),
                   WindowSpeedup(miss, DraftSchedule::kSequential, 4));
  const double n = (1 - std::pow(0.8, 5)) / 0.2;
  EXPECT_NEAR(WindowSpeedup(Inputs(0.8, 2, 0.25, 1.0, true), DraftSchedule::kCached, 4),
              n / (2.0 + 2.0 - 2.0 * 2.0 / 2.0), 1e-12);
}

TEST(AdaptiveWindowTest, ACheapDraftStaysSequentialForTheBonus) {
  // C = 20: drafting costs little, so the bonus token beats hiding the draft.
  const WindowChoice choice = ChooseWindow(Inputs(0.9, 20, 0.25, 0, false), 1, 8);
  EXPECT_EQ(choice.schedule, DraftSchedule::kSequential);
  EXPECT_EQ(choice.k, 5);
  EXPECT_NEAR(choice.speedup, 1.87424, 1e-4);
}

TEST(AdaptiveWindowTest, ACostlyAccurateDraftOverlaps) {
  // C = 2, alpha 0.95: hiding the draft behind the verification pays more than
  // the bonus; with no cache the draft runs ahead.
  const WindowChoice choice = ChooseWindow(Inputs(0.95, 2, 0.1, 0, false), 1, 8);
  EXPECT_EQ(choice.schedule, DraftSchedule::kOverlapped);
  EXPECT_EQ(choice.k, 2);
  // Self-draft (alpha 1, C 1): overlapped at k 1, where the draft of one token takes
  // exactly one verification (any larger k is draft-bound).
  const WindowChoice self = ChooseWindow(Inputs(1.0, 1.0, 0.25, 0, false), 1, 8);
  EXPECT_EQ(self.schedule, DraftSchedule::kOverlapped);
  EXPECT_EQ(self.k, 1);
  EXPECT_NEAR(self.speedup, 1.0, 1e-12);
}

TEST(AdaptiveWindowTest, AHittingCacheKeepsTheBonusAndHidesTheDraft) {
  const WindowChoice choice = ChooseWindow(Inputs(0.95, 2, 0.1, 0.9, true), 1, 8);
  EXPECT_EQ(choice.schedule, DraftSchedule::kCached);
  EXPECT_EQ(choice.k, 3);
  EXPECT_GT(choice.speedup, ChooseWindow(Inputs(0.95, 2, 0.1, 0.9, false), 1, 8).speedup);
  // A cache that never hits is never preferred (ties go to sequential).
  const WindowChoice cold = ChooseWindow(Inputs(0.9, 20, 0.25, 0.0, true), 1, 8);
  EXPECT_EQ(cold.schedule, DraftSchedule::kSequential);
  // Nor one that seldom hits: a layer-skip-like draft (alpha 0.3, C 1.25, k 4) whose
  // hit rate decayed to 0.02 predicts under 1% over sequential, within the margin;
  // at 0.2 it predicts about 8% more and is chosen.
  const WindowInputs seldom = Inputs(0.3, 1.25, 0.2, 0.02, true);
  ASSERT_GT(WindowSpeedup(seldom, DraftSchedule::kCached, 4),
            WindowSpeedup(seldom, DraftSchedule::kSequential, 4));
  EXPECT_EQ(ChooseWindow(seldom, 4, 4).schedule, DraftSchedule::kSequential);
  EXPECT_EQ(ChooseWindow(Inputs(0.3, 1.25, 0.2, 0.2, true), 4, 4).schedule, DraftSchedule::kCached);
}

TEST(AdaptiveWindowTest, AFixedKOnlyChoosesTheSchedule) {
  for (int k : {1, 4, 7}) {
    const WindowChoice choice = ChooseWindow(Inputs(1.0, 1.0, 0.25, 0, false), k, k);
    EXPECT_EQ(choice.k, k);
  }
  // Alpha 1, C 1: at k 1 overlapped 1 / 1 beats sequential 2 / 2.25; at k 4 the draft
  // cannot keep up and sequential 5 / 6 beats overlapped 5 / 8.
  EXPECT_EQ(ChooseWindow(Inputs(1.0, 1.0, 0.25, 0, false), 1, 1).schedule,
            DraftSchedule::kOverlapped);
  EXPECT_EQ(ChooseWindow(Inputs(1.0, 1.0, 0.25, 0, false), 4, 4).schedule,
            DraftSchedule::kSequential);
  EXPECT_STREQ(DraftScheduleName(DraftSchedule::kCached), "cached");
}

}  // namespace
}  // namespace splitspec::spec

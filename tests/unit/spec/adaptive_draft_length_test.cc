#include "runtime/spec/adaptive_draft_length.h"

#include <string>

#include "gtest/gtest.h"

namespace splitspec::spec {
namespace {

AdaptiveDraftLengthConfig Config() {
  AdaptiveDraftLengthConfig config;
  config.min_k = 1;
  config.max_k = 12;
  config.probe_interval = 5;
  return config;
}

// Fed blocks at a steady acceptance and cost, the controller settles on the
// analytic model's optimal k for those values (alpha 0.8, C 20 -> 8).
TEST(AdaptiveDraftLengthTest, ConvergesToTheAnalyticOptimum) {
  AdaptiveDraftLength controller(Config());
  for (int block = 0; block < 400; ++block) {
    // 4 accepted of 5 verified: the acceptance rate of alpha = 0.8.
    controller.RecordBlock(8, 4, true);
    controller.RecordCosts(0.020, 0.001);
  }
  EXPECT_NEAR(controller.EstimatedAlpha(), 0.8, 0.01);
  EXPECT_NEAR(controller.EstimatedCostRatio(), 20.0, 1e-9);
  EXPECT_EQ(controller.NextK(), OptimalK(controller.EstimatedAlpha(), 20.0, Schedule::kSequential, 1, 12).k);
  EXPECT_EQ(controller.NextK(), 8);
}

TEST(AdaptiveDraftLengthTest, HighAcceptanceAndCheapDraftUseMaxK) {
  AdaptiveDraftLength controller(Config());
  for (int block = 0; block < 100; ++block) {
    controller.RecordBlock(12, 12, false);
    controller.RecordCosts(0.050, 0.0005);
  }
  EXPECT_EQ(controller.NextK(), 12);
}

// When every draft is rejected speculation is predicted to lose: k = 0, then one
// probe block of min_k after probe_interval target-only steps, then off again.
TEST(AdaptiveDraftLengthTest, TurnsOffWhenLosingAndProbesPeriodically) {
  AdaptiveDraftLength controller(Config());
  for (int block = 0; block < 50; ++block) {
    controller.RecordBlock(2, 0, true);
    controller.RecordCosts(0.010, 0.005);  // C = 2
  }
  EXPECT_EQ(controller.NextK(), 0);
  for (int step = 0; step < 4; ++step) {
    controller.RecordTargetOnlyStep();
    EXPECT_EQ(controller.NextK(), 0) << "step " << step;
  }
  controller.RecordTargetOnlyStep();
  EXPECT_EQ(controller.NextK(), 1);  // the probe
  controller.RecordBlock(1, 0, true);
  EXPECT_EQ(controller.NextK(), 0);
  // Probes that succeed bring speculation back.
  for (int probe = 0; probe < 40 && controller.NextK() == 0; ++probe) {
    for (int step = 0; step < 5; ++step) controller.RecordTargetOnlyStep();
    controller.RecordBlock(1, 1, false);
  }
  EXPECT_GT(controller.NextK(), 0);
}

// Overlapped draft/verify hides drafting behind verification, so at the same
// measurements it drafts longer blocks: alpha 0.8, C 20 -> 12 (max_k) instead of 8.
TEST(AdaptiveDraftLengthTest, OverlappedScheduleDraftsLongerBlocks) {
  AdaptiveDraftLengthConfig config = Config();
  config.schedule = Schedule::kOverlapped;
  AdaptiveDraftLength controller(config);
  for (int block = 0; block < 400; ++block) {
    controller.RecordBlock(8, 4, true);
    controller.RecordCosts(0.020, 0.001);
  }
  EXPECT_EQ(controller.NextK(), 12);
}

TEST(AdaptiveDraftLengthTest, IgnoresUnusableCostSamples) {
  AdaptiveDraftLength controller(Config());
  controller.RecordCosts(0.0, 0.001);
  controller.RecordCosts(0.01, NAN);
  EXPECT_DOUBLE_EQ(controller.EstimatedCostRatio(), Config().initial_cost_ratio);
}

TEST(AdaptiveDraftLengthTest, ConfigValidationNamesTheField) {
  AdaptiveDraftLengthConfig config;
  config.max_k = 0;
  EXPECT_NE(config.Validate().message().find("max_k"), std::string::npos);
  config = AdaptiveDraftLengthConfig{};
  config.decay = 1.0;
  EXPECT_NE(config.Validate().message().find("decay"), std::string::npos);
  EXPECT_TRUE(AdaptiveDraftLengthConfig{}.Validate().ok());
}

}  // namespace
}  // namespace splitspec::spec

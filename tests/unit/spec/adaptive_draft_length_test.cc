#include "runtime/spec/adaptive_draft_length.h"

#include <string>

#include "gtest/gtest.h"
#include "runtime/spec/verify_cost_curve.h"

namespace splitspec::spec {
namespace {

AdaptiveDraftLengthConfig Config() {
  AdaptiveDraftLengthConfig config;
  config.min_k = 1;
  config.max_k = 12;
  config.probe_interval = 5;
  config.min_speedup = 1.0;
  config.verify_cost_slope = 0.0;  // a flat verify cost: the plain analytic model
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
  EXPECT_EQ(controller.NextK(),
            OptimalK(controller.EstimatedAlpha(), 20.0, Schedule::kSequential, 1, 12).k);
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

// Overlapped (lookahead 2) the controller follows the pipeline model, which
// forfeits a fully accepted block's bonus: at alpha 0.8, C 20 and a flat verify
// cost it picks PipelineOptimalK's k (8), not the iid model's max_k (12).
TEST(AdaptiveDraftLengthTest, OverlappedScheduleFollowsThePipelineModel) {
  AdaptiveDraftLengthConfig config = Config();
  config.schedule = Schedule::kOverlapped;
  AdaptiveDraftLength controller(config);
  for (int block = 0; block < 400; ++block) {
    controller.RecordBlock(8, 4, true);
    controller.RecordCosts(0.020, 0.001);
  }
  const PlanChoice pipeline = PipelineOptimalK(
      {.alpha = controller.EstimatedAlpha(), .cost_ratio = 20.0, .k = 1, .verify_slope = 0.0,
       .cache_hit_rate = 0.0},
      PipelineMode::kOverlapped, 1, 12);
  EXPECT_EQ(controller.NextK(), pipeline.k);
  EXPECT_EQ(controller.NextK(), 8);
  EXPECT_EQ(OptimalKWithVerifyCost(controller.EstimatedAlpha(), 20.0, Schedule::kOverlapped, 0.0,
                                   1, 12)
                .k,
            12);
}

// Overlapped, k = 1 commits one token per block (the accepted draft, or the
// correction) at the cost of a step or more: at alpha 5/7 and a verify slope of
// 0.25 the sequential model takes k = 2 (1.48x), the pipeline model k = 3
// (1.34x), and k = 1 (0.93x) never.
TEST(AdaptiveDraftLengthTest, OverlappedNeverPicksOneDraftToken) {
  AdaptiveDraftLengthConfig config = Config();
  config.schedule = Schedule::kOverlapped;
  config.max_k = 8;
  config.min_speedup = 1.05;
  AdaptiveDraftLength controller(config);
  for (int block = 0; block < 400; ++block) {
    controller.RecordBlock(4, 2 + block % 2, true);  // 5 of 7 verified per two blocks
    controller.RecordCosts(0.010, 0.00001);
    for (int k : {0, 2, 4}) controller.RecordVerify(k, 0.010 * (1.0 + 0.25 * k));
  }
  ASSERT_NEAR(controller.EstimatedAlpha(), 5.0 / 7.0, 0.02);
  EXPECT_EQ(controller.NextK(), 3);
  EXPECT_EQ(OptimalKWithVerifyCost(controller.EstimatedAlpha(), 1000.0, Schedule::kSequential,
                                   0.25, 1, 8)
                .k,
            2);
}

// The verify-cost curve decides: at the same acceptance (0.5) and a free draft
// (C = 1000), a measured curve T(k) = T0 (1 + 0.05 k) makes speculation pay (best
// k = 3: 1.875 / 1.15 = 1.63x), while T(k) = T0 (1 + 0.6 k) makes every k lose
// (k = 1: 1.5 / 1.6 = 0.94x), so k = 0 is predicted to win and it turns off.
TEST(AdaptiveDraftLengthTest, MeasuredVerifyCostCurveDecidesWhetherToSpeculate) {
  for (const double slope : {0.05, 0.6}) {
    AdaptiveDraftLengthConfig config = Config();
    config.min_speedup = 1.05;
    AdaptiveDraftLength controller(config);
    for (int block = 0; block < 200; ++block) {
      controller.RecordBlock(4, 1, true);  // 1 of 2 verified: alpha 0.5
      controller.RecordCosts(0.010, 0.00001);
      for (int k : {0, 2, 4}) controller.RecordVerify(k, 0.010 * (1.0 + slope * k));
    }
    ASSERT_NEAR(controller.EstimatedAlpha(), 0.5, 0.01);
    EXPECT_NEAR(controller.EstimatedVerifySlope(), slope, 1e-9);
    EXPECT_EQ(controller.NextK(), slope < 0.1 ? 3 : 0) << "slope " << slope;
  }
}

// Before any verify sample the prior slope stands in: a steep prior predicts a
// loss for a low-acceptance drafter, so the request's first block is a probe of
// min_k and, once it is rejected, speculation is off.
TEST(AdaptiveDraftLengthTest, PriorVerifySlopeAppliesUntilMeasured) {
  AdaptiveDraftLengthConfig config = Config();
  config.min_k = 2;
  config.prior_alpha = 0.3;
  config.initial_cost_ratio = 1000;
  config.verify_cost_slope = 0.0;
  EXPECT_GT(AdaptiveDraftLength(config).NextK(), 2);  // a flat cost: longer blocks win
  config.verify_cost_slope = 0.5;
  AdaptiveDraftLength steep(config);
  EXPECT_EQ(steep.NextK(), 2);  // 1.39 / 2 at k = 2: a loss, so the first block is a probe
  steep.RecordBlock(2, 0, true);
  EXPECT_EQ(steep.NextK(), 0);
}

// An acceptance sequence that turns bad then good again, on a curve of slope
// 0.25: speculation on while drafts are accepted, off once k = 0 is predicted
// to win, probes of min_k every probe_interval plain steps, and on again once
// the probes are accepted.
TEST(AdaptiveDraftLengthTest, SwitchesOffWhenLosingAndBackOnAfterProbes) {
  AdaptiveDraftLengthConfig config = Config();
  config.min_speedup = 1.05;
  AdaptiveDraftLength controller(config);
  auto feed_curve = [&] {
    for (int k : {0, 1, 4, 8}) controller.RecordVerify(k, 0.010 * (1.0 + 0.25 * k));
    controller.RecordCosts(0.010, 0.00001);
  };
  for (int block = 0; block < 30; ++block) {
    controller.RecordBlock(6, 6, false);
    feed_curve();
  }
  EXPECT_GT(controller.NextK(), 1);
  int blocks_until_off = 0;
  while (controller.NextK() > 0 && blocks_until_off < 100) {
    controller.RecordBlock(controller.NextK(), 0, true);
    feed_curve();
    ++blocks_until_off;
  }
  EXPECT_EQ(controller.NextK(), 0);
  EXPECT_LT(blocks_until_off, 40);
  // Off: plain steps until the probe.
  for (int step = 0; step < config.probe_interval; ++step) {
    EXPECT_EQ(controller.NextK(), 0) << "step " << step;
    controller.RecordTargetOnlyStep();
  }
  EXPECT_EQ(controller.NextK(), config.min_k);
  int probes = 0;
  while (controller.NextK() <= config.min_k && probes < 50) {
    controller.RecordBlock(config.min_k, config.min_k, false);  // accepted probes
    for (int step = 0; step < config.probe_interval && controller.NextK() == 0; ++step) {
      controller.RecordTargetOnlyStep();
    }
    ++probes;
  }
  EXPECT_GT(controller.NextK(), config.min_k);
  EXPECT_LT(probes, 50);
}

// Probes that fail (speculation still predicted to lose after them) come ever
// more rarely: the gap doubles from probe_interval up to max_probe_interval,
// and TargetOnlyStepsBeforeProbe counts down the current gap (the off window a
// draft worker hands the target). Once a probe brings acceptance back to where
// speculation is predicted to win, the gap returns to probe_interval.
TEST(AdaptiveDraftLengthTest, FailedProbesBackOffGeometricallyAndAWinResetsTheGap) {
  AdaptiveDraftLengthConfig config = Config();
  config.min_speedup = 1.05;
  config.probe_interval = 4;
  config.max_probe_interval = 16;
  AdaptiveDraftLength controller(config);
  for (int k : {0, 1, 4, 8}) controller.RecordVerify(k, 0.010 * (1.0 + 0.25 * k));
  controller.RecordCosts(0.010, 0.00001);
  for (int block = 0; block < 40; ++block) controller.RecordBlock(4, 0, true);
  ASSERT_EQ(controller.NextK(), 0);
  EXPECT_EQ(controller.probe_interval(), 4) << "no probe yet: blocks while on are not probes";
  for (const int gap : {4, 8, 16, 16}) {
    EXPECT_EQ(controller.probe_interval(), gap);
    for (int step = 0; step < gap; ++step) {
      EXPECT_EQ(controller.NextK(), 0) << "gap " << gap << " step " << step;
      EXPECT_EQ(controller.TargetOnlyStepsBeforeProbe(), gap - step);
      controller.RecordTargetOnlyStep();
    }
    EXPECT_EQ(controller.NextK(), config.min_k) << "the probe after " << gap << " steps";
    controller.RecordBlock(config.min_k, 0, true);  // rejected
  }
  EXPECT_EQ(controller.probe_interval(), 16) << "capped at max_probe_interval";
  // Accepted probes until speculation is predicted to win again.
  int probes = 0;
  while (controller.NextK() == 0 && probes < 100) {
    for (int step = controller.TargetOnlyStepsBeforeProbe(); step > 0; --step) {
      controller.RecordTargetOnlyStep();
    }
    ASSERT_EQ(controller.NextK(), config.min_k);
    controller.RecordBlock(config.min_k, config.min_k, false);
    ++probes;
  }
  EXPECT_GT(controller.NextK(), 0);
  EXPECT_EQ(controller.probe_interval(), 4);
}

// Shadow blocks teach acceptance while speculation is off, without probes: ones
// that miss leave it off and the back-off where it was (they cost the target
// nothing, so they are no failed probe); ones that match turn it back on before
// the next probe is due, and reset the gap between probes.
// A draft as slow as the target (the target drafting for itself) cannot win
// even if every token is accepted: no probe is made (each would cost a few plain
// steps for nothing), and the off window is the longest. A draft 10x cheaper is
// still probed at the interval, and with acceptance that wins it turns on.
TEST(AdaptiveDraftLengthTest, NoProbesWhenEvenFullAcceptanceCannotWin) {
  AdaptiveDraftLengthConfig config = Config();
  config.probe_interval = 4;
  config.max_probe_interval = 64;
  for (const double cost_ratio : {1.0, 10.0}) {
    AdaptiveDraftLength controller(config);
    for (int k : {0, 1, 4, 8}) controller.RecordVerify(k, 0.010 * (1.0 + 0.25 * k));
    EXPECT_FALSE(controller.Hopeless()) << "no measured draft cost yet: the first block tests it";
    controller.RecordCosts(0.010, 0.010 / cost_ratio);
    for (int block = 0; block < 40; ++block) controller.RecordBlock(4, 4, false);  // alpha ~1
    if (cost_ratio == 1.0) {
      EXPECT_TRUE(controller.Hopeless());
      EXPECT_EQ(controller.NextK(), 0) << "C = 1 loses even at alpha = 1";
      for (int step = 0; step < 200; ++step) {
        EXPECT_EQ(controller.TargetOnlyStepsBeforeProbe(), 64);
        controller.RecordTargetOnlyStep();
        ASSERT_EQ(controller.NextK(), 0) << "no probe after " << step + 1 << " steps";
      }
    } else {
      EXPECT_FALSE(controller.Hopeless());
      EXPECT_GT(controller.NextK(), 0) << "C = 10 at alpha ~1 wins";
    }
  }
}

TEST(AdaptiveDraftLengthTest, ShadowBlocksTurnSpeculationBackOnWithoutAProbe) {
  AdaptiveDraftLengthConfig config = Config();
  config.min_speedup = 1.05;
  config.probe_interval = 4;
  config.max_probe_interval = 64;
  AdaptiveDraftLength controller(config);
  for (int k : {0, 1, 4, 8}) controller.RecordVerify(k, 0.010 * (1.0 + 0.25 * k));
  controller.RecordCosts(0.010, 0.00001);
  for (int block = 0; block < 40; ++block) controller.RecordBlock(4, 0, true);
  ASSERT_EQ(controller.NextK(), 0);
  for (int step = 0; step < 4; ++step) controller.RecordTargetOnlyStep();
  ASSERT_EQ(controller.NextK(), config.min_k);
  controller.RecordBlock(config.min_k, 0, true);  // a failed probe
  ASSERT_EQ(controller.probe_interval(), 8);
  controller.RecordTargetOnlyStep();
  for (int block = 0; block < 10; ++block) controller.RecordShadowBlock(0, true);
  EXPECT_EQ(controller.NextK(), 0);
  EXPECT_EQ(controller.probe_interval(), 8) << "a missed shadow block is no failed probe";
  EXPECT_EQ(controller.TargetOnlyStepsBeforeProbe(), 7);
  int shadows = 0;
  while (controller.NextK() == 0 && shadows < 100) {
    controller.RecordShadowBlock(controller.ShadowK(), false);
    ++shadows;
  }
  EXPECT_GT(controller.NextK(), 0);
  EXPECT_LE(shadows, 4) << "blocks matched in full are strong evidence";
  EXPECT_EQ(controller.probe_interval(), 4) << "a predicted win resets the gap";
}

// The measured guard: at the same model inputs (alpha 0.6, a free draft, a flat
// curve: the model predicts a win at every k), blocks that commit 2 tokens in
// 2.5 plain steps measure 0.8x and turn speculation off, while blocks that
// commit 2 tokens in 1.5 plain steps (1.33x) keep it on. Until
// min_guard_blocks blocks are timed the model alone decides.
TEST(AdaptiveDraftLengthTest, MeasuredLossTurnsSpeculationOffWhateverTheModelPredicts) {
  for (const double steps_per_block : {2.5, 1.5}) {
    AdaptiveDraftLengthConfig config = Config();
    config.min_speedup = 1.05;
    config.min_guard_blocks = 4;
    AdaptiveDraftLength controller(config);
    controller.RecordCosts(0.010, 0.00001);
    for (int step = 0; step < 8; ++step) controller.RecordVerify(0, 0.010);
    for (int block = 0; block < 20; ++block) controller.RecordBlock(4, 3, true);  // alpha 0.75
    ASSERT_GT(controller.NextK(), 0) << "the model predicts a win";
    for (int block = 0; block < 3; ++block) controller.RecordBlockTime(2, 0.010 * steps_per_block);
    EXPECT_GT(controller.NextK(), 0) << "3 timed blocks: the guard waits for 4";
    controller.RecordBlockTime(2, 0.010 * steps_per_block);
    EXPECT_NEAR(controller.MeasuredSpeedup(), 2.0 / steps_per_block, 1e-9);
    if (steps_per_block > 2.0) {
      EXPECT_EQ(controller.NextK(), 0) << "measured 0.8x";
    } else {
      EXPECT_GT(controller.NextK(), 0) << "measured 1.33x";
    }
  }
}

// A measured loss at high acceptance (alpha ~0.95) means drafting beside the
// target costs more than the model knows: no probe can change that, so the
// request stops probing. At alpha 0.75 the same loss leaves the probes on (more
// acceptance could still win), and 0.8x is not hopeless by the model's costs.
TEST(AdaptiveDraftLengthTest, AMeasuredLossAtHighAcceptanceStopsTheProbes) {
  for (const int accepted_of_4 : {4, 3}) {
    AdaptiveDraftLengthConfig config = Config();
    config.min_speedup = 1.05;
    config.min_guard_blocks = 4;
    config.probe_interval = 4;
    config.max_probe_interval = 64;
    AdaptiveDraftLength controller(config);
    controller.RecordCosts(0.010, 0.00001);
    for (int step = 0; step < 8; ++step) controller.RecordVerify(0, 0.010);
    for (int block = 0; block < 20; ++block)
      controller.RecordBlock(4, accepted_of_4, accepted_of_4 < 4);
    ASSERT_GT(controller.NextK(), 0) << "the model predicts a win";
    for (int block = 0; block < 4; ++block) controller.RecordBlockTime(2, 0.025);  // 0.8x
    ASSERT_EQ(controller.NextK(), 0) << "the guard turned it off";
    EXPECT_EQ(controller.Hopeless(), accepted_of_4 == 4) << accepted_of_4 << " of 4 accepted";
    int probes = 0;
    for (int step = 0; step < 100; ++step) {
      if (controller.NextK() > 0) {
        ++probes;
        controller.RecordBlock(config.min_k, config.min_k, false);
      }
      controller.RecordTargetOnlyStep();
    }
    if (accepted_of_4 == 4) {
      EXPECT_EQ(probes, 0);
    } else {
      EXPECT_GT(probes, 0);
    }
  }
}

TEST(VerifyCostCurveTest, FitsSlopeAndBaseFromSamples) {
  VerifyCostCurve curve(/*prior_slope=*/0.25, /*decay=*/0.9, /*max_k=*/16);
  EXPECT_FALSE(curve.measured());
  EXPECT_DOUBLE_EQ(curve.Relative(4), 2.0);  // the prior
  curve.Record(4, 0.024);                    // one k: the prior's shape through it
  EXPECT_DOUBLE_EQ(curve.Slope(), 0.25);
  EXPECT_NEAR(curve.BaseSeconds(), 0.012, 1e-12);
  curve = VerifyCostCurve(0.25, 0.9, 16);
  for (int i = 0; i < 50; ++i) {
    for (int k : {0, 2, 5, 8}) curve.Record(k, 0.010 * (1.0 + 0.1 * k));
  }
  EXPECT_NEAR(curve.Slope(), 0.1, 1e-3);
  EXPECT_NEAR(curve.BaseSeconds(), 0.010, 1e-5);
  EXPECT_NEAR(curve.Relative(5), 1.5, 1e-3);
  // Unusable samples change nothing.
  curve.Record(17, 1.0);
  curve.Record(-1, 1.0);
  curve.Record(3, -1.0);
  curve.Record(3, NAN);
  EXPECT_NEAR(curve.Slope(), 0.1, 1e-3);
}

TEST(VerifyCostCurveTest, SlopeIsNeverNegative) {
  VerifyCostCurve curve(0.25, 0.5, 8);
  for (int i = 0; i < 20; ++i) {
    curve.Record(0, 0.020);
    curve.Record(4, 0.010);  // noise: a longer block measured faster
  }
  EXPECT_DOUBLE_EQ(curve.Slope(), 0.0);
}

// One verification beside a few slow first decode steps is no line: the prior
// slope holds (through the plain steps' mean) until a second k has 3 samples.
TEST(VerifyCostCurveTest, ASecondKNeedsThreeSamplesBeforeTheFit) {
  VerifyCostCurve curve(0.25, 0.9, 8);
  for (int i = 0; i < 5; ++i) curve.Record(0, 0.008);
  curve.Record(3, 0.007);  // one early verify, faster than the early plain steps
  EXPECT_DOUBLE_EQ(curve.Slope(), 0.25) << "one sample at k = 3: the prior";
  EXPECT_DOUBLE_EQ(curve.BaseSeconds(), 0.008) << "through the most sampled k";
  curve.Record(3, 0.0128);
  curve.Record(3, 0.0128);
  EXPECT_GT(curve.Slope(), 0.0) << "three samples at k = 3: fitted";
  EXPECT_LT(curve.Slope(), 0.25);
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
  config = AdaptiveDraftLengthConfig{};
  config.verify_cost_slope = -0.1;
  EXPECT_NE(config.Validate().message().find("verify_cost_slope"), std::string::npos);
  config = AdaptiveDraftLengthConfig{};
  config.max_probe_interval = config.probe_interval - 1;
  EXPECT_NE(config.Validate().message().find("max_probe_interval"), std::string::npos);
  EXPECT_TRUE(AdaptiveDraftLengthConfig{}.Validate().ok());
}

}  // namespace
}  // namespace splitspec::spec

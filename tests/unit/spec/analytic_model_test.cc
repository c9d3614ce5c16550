#include "runtime/spec/analytic_model.h"

#include <string>

#include "gtest/gtest.h"

namespace splitspec::spec {
namespace {

// The seeds' table: alpha = 0.8, C = 20 -> k = 8, speedup 3.09x.
TEST(AnalyticModelTest, ReproducesTheSeedTable) {
  const PlanChoice best = OptimalK(0.8, 20.0, Schedule::kSequential);
  EXPECT_EQ(best.k, 8);
  EXPECT_NEAR(best.speedup, 3.0921, 5e-4);
  // E[N] = (1 - 0.8^9) / 0.2 = 4.32891136, step cost 1 + 8/20 = 1.4.
  EXPECT_NEAR(best.expected_tokens, 4.32891136, 1e-8);
  // Neighbours, by hand: k = 7 -> 4.1611392 / 1.35; k = 9 -> 4.463129088 / 1.45.
  EXPECT_NEAR(Speedup(0.8, 20.0, 7), 4.1611392 / 1.35, 1e-9);
  EXPECT_NEAR(Speedup(0.8, 20.0, 9), 4.463129088 / 1.45, 1e-9);
}

// More rows derived by hand.
TEST(AnalyticModelTest, HandDerivedRows) {
  // alpha = 0.6, C = 4: S(1) = 1.6 / 1.25, S(2) = 1.96 / 1.5 (best), S(3) = 2.176 / 1.75.
  EXPECT_NEAR(Speedup(0.6, 4.0, 1), 1.28, 1e-12);
  EXPECT_NEAR(Speedup(0.6, 4.0, 3), 2.176 / 1.75, 1e-12);
  const PlanChoice best = OptimalK(0.6, 4.0, Schedule::kSequential);
  EXPECT_EQ(best.k, 2);
  EXPECT_NEAR(best.speedup, 1.96 / 1.5, 1e-12);
  // Overlapped, same inputs: cost is 1 up to k = C = 4, so k = 4 with E[N] = 2.3056;
  // k = 5 costs 1.25 for E[N] = 2.38336.
  const PlanChoice overlapped = OptimalK(0.6, 4.0, Schedule::kOverlapped);
  EXPECT_EQ(overlapped.k, 4);
  EXPECT_NEAR(overlapped.speedup, 2.3056, 1e-12);
  EXPECT_NEAR(Speedup(0.6, 4.0, 5, Schedule::kOverlapped), 2.38336 / 1.25, 1e-12);
  // alpha = 0.8, C = 20 overlapped: every k <= 20 hides behind verification.
  const PlanChoice seed_overlapped = OptimalK(0.8, 20.0, Schedule::kOverlapped);
  EXPECT_EQ(seed_overlapped.k, 20);
  EXPECT_NEAR(seed_overlapped.speedup, (1.0 - std::pow(0.8, 21)) / 0.2, 1e-12);
}

TEST(AnalyticModelTest, EdgeValuesOfAlpha) {
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(1.0, 3), 4.0);
  EXPECT_NEAR(Speedup(1.0, 6.0, 3), 4.0 / 1.5, 1e-12);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.0, 5), 1.0);
  EXPECT_DOUBLE_EQ(ExpectedTokensPerStep(0.5, 0), 1.0);
  EXPECT_NEAR(Speedup(0.5, 1.0, 1), 0.75, 1e-12);  // a slow draft loses
  EXPECT_DOUBLE_EQ(Speedup(0.3, 2.0, 0), 1.0);
}

TEST(AnalyticModelTest, ValidatesInputsNamingThem) {
  EXPECT_TRUE(ValidateModelInputs(0.0, 1e-3).ok());
  EXPECT_TRUE(ValidateModelInputs(1.0, 100.0).ok());
  EXPECT_NE(ValidateModelInputs(1.5, 2.0).message().find("alpha"), std::string::npos);
  EXPECT_NE(ValidateModelInputs(-0.1, 2.0).message().find("alpha"), std::string::npos);
  EXPECT_NE(ValidateModelInputs(0.5, 0.0).message().find("cost ratio"), std::string::npos);
  EXPECT_FALSE(ValidateModelInputs(NAN, 2.0).ok());
}

// A verify cost growing with k: alpha 0.6, C 4, slope 0.25. By hand:
// k = 1: 1.6 / (1.25 + 0.25) = 1.0667; k = 2: 1.96 / (1.5 + 0.5) = 0.98, so k = 1.
// Overlapped, k = 4: 2.3056 / max(2.0, 1.0) = 1.1528.
TEST(AnalyticModelTest, VerifyCostSlopeChargesLongBlocks) {
  EXPECT_NEAR(SpeedupWithVerifyCost(0.6, 4.0, 1, Schedule::kSequential, 0.25), 1.6 / 1.5, 1e-12);
  EXPECT_NEAR(SpeedupWithVerifyCost(0.6, 4.0, 2, Schedule::kSequential, 0.25), 0.98, 1e-12);
  EXPECT_NEAR(SpeedupWithVerifyCost(0.6, 4.0, 4, Schedule::kOverlapped, 0.25), 2.3056 / 2.0, 1e-12);
  EXPECT_EQ(OptimalKWithVerifyCost(0.6, 4.0, Schedule::kSequential, 0.25, 1, 20).k, 1);
  // Slope 0 is the plain model.
  EXPECT_DOUBLE_EQ(SpeedupWithVerifyCost(0.8, 20.0, 8, Schedule::kSequential, 0.0),
                   Speedup(0.8, 20.0, 8));
  EXPECT_EQ(OptimalKWithVerifyCost(0.8, 20.0, Schedule::kSequential, 0.0, 1, 20).k, 8);
}

// The pipeline model by hand, alpha 0.8, C 10, k 4 (d = 0.4): E[N] = (1 - 0.8^5) / 0.2 =
// 3.3616; alpha^4 = 0.4096. Sequential: 3.3616 / 1.4. Overlapped: the bonus is forfeited,
// 3.3616 - 0.4096 = 2.952 tokens, over 0.4096 * 1 + 0.5904 * (1 + 0.4) = 1.23616 (the refill
// after each rejection).
TEST(AnalyticModelTest, PipelineModelChargesTheForfeitedBonusAndTheRefill) {
  const PipelineModelInputs in{.alpha = 0.8, .cost_ratio = 10.0, .k = 4};
  EXPECT_NEAR(PipelineTokensPerBlock(in, PipelineMode::kSequential), 3.3616, 1e-12);
  EXPECT_NEAR(PipelineSpeedup(in, PipelineMode::kSequential), 3.3616 / 1.4, 1e-12);
  EXPECT_NEAR(PipelineTokensPerBlock(in, PipelineMode::kOverlapped), 2.952, 1e-12);
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlapped), 1.23616, 1e-12);
  EXPECT_NEAR(PipelineSpeedup(in, PipelineMode::kOverlapped), 2.952 / 1.23616, 1e-12);
}

// The speculation cache keeps the bonus (one block in flight) and skips the draft on a hit:
// E[N] = 3.3616 over 1 + (1 - h) 0.4. h = 0 is the sequential loop; h = 1 hides the draft;
// h = 0.5: 3.3616 / 1.2. The hit rate does not change the other modes.
TEST(AnalyticModelTest, PipelineModelCacheHitsSkipTheRefill) {
  PipelineModelInputs in{.alpha = 0.8, .cost_ratio = 10.0, .k = 4};
  EXPECT_DOUBLE_EQ(PipelineSpeedup(in, PipelineMode::kOverlappedCache),
                   PipelineSpeedup(in, PipelineMode::kSequential));
  in.cache_hit_rate = 1.0;
  EXPECT_NEAR(PipelineTokensPerBlock(in, PipelineMode::kOverlappedCache), 3.3616, 1e-12);
  EXPECT_NEAR(PipelineSpeedup(in, PipelineMode::kOverlappedCache), 3.3616, 1e-12);
  in.cache_hit_rate = 0.5;
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlappedCache), 1.2, 1e-12);
  EXPECT_NEAR(PipelineSpeedup(in, PipelineMode::kOverlappedCache), 3.3616 / 1.2, 1e-12);
  EXPECT_NEAR(PipelineSpeedup(in, PipelineMode::kSequential), 3.3616 / 1.4, 1e-12);
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlapped), 1.23616, 1e-12);
}

// A block longer than one verification cannot be pre-drafted whole: alpha 0.8, C 10, k 20
// (d = 2, V = 1), h = 1: cost 1 + max(0, 2 - 1) = 2; h = 0.5: 1 + 0.5 * 2 + 0.5 * 1 = 2.5.
TEST(AnalyticModelTest, PipelineModelCacheHidesOnlyWhatFitsInAVerification) {
  PipelineModelInputs in{.alpha = 0.8, .cost_ratio = 10.0, .k = 20, .cache_hit_rate = 1.0};
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlappedCache), 2.0, 1e-12);
  in.cache_hit_rate = 0.5;
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlappedCache), 2.5, 1e-12);
}

// With a verify slope of 0.25: sequential feeds k + 1 = 5 tokens, 1 + 0.25 * 4 = 2, cost
// 2.4; overlapped, a block after a full acceptance feeds 4 (1.75), after a rejection 5 (2)
// plus the refill: 0.4096 * 1.75 + 0.5904 * 2.4 = 2.13376; the cache at h = 0.5: 2 + 0.2.
TEST(AnalyticModelTest, PipelineModelWithAVerifySlope) {
  const PipelineModelInputs in{
      .alpha = 0.8, .cost_ratio = 10.0, .k = 4, .verify_slope = 0.25, .cache_hit_rate = 0.5};
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kSequential), 2.4, 1e-12);
  EXPECT_NEAR(PipelineSpeedup(in, PipelineMode::kSequential), 3.3616 / 2.4, 1e-12);
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlapped), 2.13376, 1e-12);
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlappedCache), 2.2, 1e-12);
  // Slope 0, sequential: the plain model.
  EXPECT_DOUBLE_EQ(
      PipelineSpeedup({.alpha = 0.8, .cost_ratio = 20.0, .k = 8}, PipelineMode::kSequential),
      Speedup(0.8, 20.0, 8));
}

// Draft-bound (alpha 0.5, C 2, k 4: d = 2 > 1): the target keeps the bonus, E[N] = 1.9375,
// and a block takes 2d = 4 (the stale block, then the redraft).
TEST(AnalyticModelTest, PipelineModelDraftBound) {
  const PipelineModelInputs in{.alpha = 0.5, .cost_ratio = 2.0, .k = 4};
  EXPECT_NEAR(PipelineTokensPerBlock(in, PipelineMode::kOverlapped), 1.9375, 1e-12);
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlapped), 4.0, 1e-12);
  EXPECT_NEAR(PipelineSpeedup(in, PipelineMode::kOverlapped), 1.9375 / 4.0, 1e-12);
}

// A perfect draft forfeits only the bonus: alpha 1, k 4, C 10 -> 4 tokens per target step
// overlapped, 5 / 1.4 sequential; the optimum over k grows to the draft-bound edge.
TEST(AnalyticModelTest, PipelineModelPerfectDraftAndOptimum) {
  const PipelineModelInputs in{.alpha = 1.0, .cost_ratio = 10.0, .k = 4};
  EXPECT_NEAR(PipelineSpeedup(in, PipelineMode::kOverlapped), 4.0, 1e-12);
  EXPECT_NEAR(PipelineSpeedup(in, PipelineMode::kSequential), 5.0 / 1.4, 1e-12);
  // k = 10: d = 1, still hidden, 10 tokens a step; k = 11 is draft-bound, 12 / 2.2.
  const PlanChoice best = PipelineOptimalK(in, PipelineMode::kOverlapped, 1, 20);
  EXPECT_EQ(best.k, 10);
  EXPECT_NEAR(best.speedup, 10.0, 1e-12);
}

TEST(AnalyticModelTest, PipelineInputsAreValidatedByName) {
  EXPECT_TRUE(ValidatePipelineInputs({.alpha = 0.8, .cost_ratio = 10.0, .k = 4}).ok());
  EXPECT_NE(ValidatePipelineInputs({.alpha = 0.8, .cost_ratio = 10.0, .k = 0})
                .message()
                .find("k must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(ValidatePipelineInputs({.alpha = 0.8, .cost_ratio = 10, .k = 4, .verify_slope = -1})
                .message()
                .find("verify slope"),
            std::string::npos);
  EXPECT_NE(ValidatePipelineInputs({.alpha = 0.8, .cost_ratio = 10, .k = 4, .cache_hit_rate = 1.5})
                .message()
                .find("cache hit rate must be in [0, 1], got 1.5"),
            std::string::npos);
  EXPECT_NE(ValidatePipelineInputs({.alpha = 2, .cost_ratio = 10, .k = 4}).message().find("alpha"),
            std::string::npos);
  EXPECT_NE(ValidatePipelineInputs({.alpha = 0.8, .cost_ratio = 10, .k = 4, .result_wait = -0.1})
                .message()
                .find("result wait must be finite and >= 0, got -0.1"),
            std::string::npos);
  EXPECT_NE(ValidatePipelineInputs({.alpha = 0.8, .cost_ratio = 10, .k = 4, .block_overhead = -0.5})
                .message()
                .find("block overhead must be finite and >= 0, got -0.5"),
            std::string::npos);
}

// The block overhead o (trips and turnaround) lands on every sequential and cached
// block, and on an overlapped block only when it refills (1 - alpha^k of them):
// alpha 0.8, C 10, k 4, slope 0.25, o 0.1, h 0.5.
//   sequential 0.4 + 2 + 0.1 = 2.5; cached 2 + 0.1 + 0.5 * 0.4 = 2.3;
//   overlapped 0.4096 * 1.75 + 0.5904 * (2 + 0.4 + 0.1) = 2.1928.
TEST(AnalyticModelTest, PipelineModelChargesTheBlockOverheadWhereItIsOnTheCriticalPath) {
  PipelineModelInputs in{.alpha = 0.8,
                         .cost_ratio = 10.0,
                         .k = 4,
                         .verify_slope = 0.25,
                         .cache_hit_rate = 0.5,
                         .block_overhead = 0.1};
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kSequential), 2.5, 1e-12);
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlappedCache), 2.3, 1e-12);
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlapped), 2.1928, 1e-12);
  // Draft-bound overlapped (C 2: d = 2 > 1.75): 2d + o.
  in.cost_ratio = 2.0;
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlapped), 4.1, 1e-12);
  // Tokens per block do not depend on it.
  in.block_overhead = 0.0;
  const double tokens = PipelineTokensPerBlock(in, PipelineMode::kSequential);
  in.block_overhead = 0.3;
  EXPECT_DOUBLE_EQ(PipelineTokensPerBlock(in, PipelineMode::kSequential), tokens);
}

// A result that waits for the cache's pre-draft forward in progress (half a draft
// token at C 10: 0.05) adds to every cached block, hit or miss, and to no other mode:
// slope 0.25, h 0.5: 2 + 0.05 + 0.5 * 0.4 = 2.25.
TEST(AnalyticModelTest, PipelineModelCacheChargesTheResultsWaitForThePreDraft) {
  PipelineModelInputs in{.alpha = 0.8,
                         .cost_ratio = 10.0,
                         .k = 4,
                         .verify_slope = 0.25,
                         .cache_hit_rate = 0.5,
                         .result_wait = 0.05};
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlappedCache), 2.25, 1e-12);
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kSequential), 2.4, 1e-12);
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlapped), 2.13376, 1e-12);
  in.cache_hit_rate = 1.0;
  EXPECT_NEAR(PipelineBlockCost(in, PipelineMode::kOverlappedCache), 2.05, 1e-12);
}

// A 64-token run after a prefill worth 4 target steps, at a steady 2x: 68 / (4 + 32).
TEST(AnalyticModelTest, PrefillDilutesARunsSpeedup) {
  EXPECT_NEAR(RunSpeedupWithPrefill(2.0, 64, 4.0), 68.0 / 36.0, 1e-12);
  EXPECT_DOUBLE_EQ(RunSpeedupWithPrefill(2.0, 64, 0.0), 2.0);
}

}  // namespace
}  // namespace splitspec::spec

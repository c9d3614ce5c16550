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

}  // namespace
}  // namespace splitspec::spec

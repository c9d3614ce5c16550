#include "tests/testing/chi_square.h"

#include <cmath>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/sampling_philox.h"
#include "tests/testing/sequence_law.h"
#include "tests/unit/spec/spec_test_util.h"

namespace splitspec::spec::testing {
namespace {

// Tabulated quantiles of the chi-square distribution.
TEST(ChiSquareTest, UpperTailMatchesTables) {
  EXPECT_NEAR(ChiSquareUpperTail(3.841459, 1), 0.05, 1e-6);
  EXPECT_NEAR(ChiSquareUpperTail(13.81551, 2), 0.001, 1e-7);
  EXPECT_NEAR(ChiSquareUpperTail(18.30704, 10), 0.05, 1e-6);
  EXPECT_NEAR(ChiSquareUpperTail(9.341818, 10), 0.5, 1e-6);
  EXPECT_NEAR(ChiSquareUpperTail(124.3421, 100), 0.05, 1e-5);
  EXPECT_DOUBLE_EQ(ChiSquareUpperTail(0.0, 3), 1.0);
}

TEST(ChiSquareTest, ObservationInZeroProbabilityCellFails) {
  const ChiSquareResult r = ChiSquareTest({10, 10, 1}, {0.5, 0.5, 0.0});
  EXPECT_EQ(r.p_value, 0.0);
}

// Against a law over sequences: the cells are the law's, missing sequences count 0,
// and the result is ChiSquareTest's on those cells.
TEST(ChiSquareTest, AgainstLawCountsTheLawsCellsInOrder) {
  const std::map<std::vector<int32_t>, double> law = {{{1, 2}, 0.5}, {{1, 3}, 0.3}, {{4}, 0.2}};
  const ChiSquareResult r = ChiSquareTestAgainstLaw(law, {{{1, 2}, 60}, {{4}, 40}});
  const ChiSquareResult want = ChiSquareTest({60, 0, 40}, {0.5, 0.3, 0.2});
  EXPECT_EQ(r.statistic, want.statistic);
  EXPECT_EQ(r.dof, want.dof);
  EXPECT_EQ(r.p_value, want.p_value);
  EXPECT_LT(r.p_value, 1e-3);  // 0 of an expected 30 in {1, 3}
}

TEST(ChiSquareTest, AgainstLawASequenceOutsideTheSupportFails) {
  const std::map<std::vector<int32_t>, double> law = {{{1}, 0.5}, {{2}, 0.5}};
  EXPECT_GT(ChiSquareTestAgainstLaw(law, {{{1}, 50}, {{2}, 50}}).p_value, 0.5);
  EXPECT_EQ(ChiSquareTestAgainstLaw(law, {{{1}, 50}, {{2}, 50}, {{3}, 1}}).p_value, 0.0);
}

// The law of two tokens: zeros skipped, products of the rows the prefix picks.
TEST(SequenceLawTest, ExactSequenceLawMultipliesTheRowsOfEachPrefix) {
  const auto law = ExactSequenceLaw(2, [](const std::vector<int32_t>& generated) {
    if (generated.empty()) return std::vector<double>{0.25, 0.0, 0.75};
    return generated[0] == 0 ? std::vector<double>{1.0} : std::vector<double>{0.5, 0.5};
  });
  const std::map<std::vector<int32_t>, double> want = {
      {{0, 0}, 0.25}, {{2, 0}, 0.375}, {{2, 1}, 0.375}};
  EXPECT_EQ(law, want);
}

// Each token the argmax of the row after the tokens so far, the lowest id on ties.
TEST(SequenceLawTest, GreedySequenceTakesEachRowsArgmax) {
  const std::vector<int32_t> tokens = GreedySequence(3, [](const std::vector<int32_t>& generated) {
    if (generated.empty()) return std::vector<float>{0.1f, 0.6f, 0.3f};
    return generated.back() == 1 ? std::vector<float>{0.4f, 0.2f, 0.4f}
                                 : std::vector<float>{0.0f, 0.0f, 1.0f};
  });
  EXPECT_EQ(tokens, (std::vector<int32_t>{1, 0, 2}));
}

TEST(SequenceLawTest, TopKSoftmaxKeepsTheSupportsTopKWithTheWeightsSoftmax) {
  SamplingParams params;
  params.top_k = 2;
  params.temperature = 0.5f;
  const std::vector<double> p = TopKSoftmax({1.0, 3.0, 2.0}, {0.0, 1.0, 0.0}, params);
  const double e = std::exp(2.0);  // exp((1 - 0) / 0.5) against exp(0)
  EXPECT_EQ(p[0], 0.0);
  EXPECT_NEAR(p[1], e / (e + 1.0), 1e-15);
  EXPECT_NEAR(p[2], 1.0 / (e + 1.0), 1e-15);
}

// Draws `trials` tokens from `weights` with the Philox stream of the test's seeds;
// `bias` moves that much probability from the first token to the last.
std::vector<int64_t> Draw(std::vector<float> weights, int trials, float bias) {
  weights.front() -= bias;
  weights.back() += bias;
  const uint64_t seed = DistributionTestSeed();
  std::vector<int64_t> counts(weights.size());
  for (int t = 0; t < trials; ++t) {
    const double u = kernels::UniformDouble(seed, t, kernels::RandomPurpose::kSample);
    ++counts[kernels::SampleFromWeights(weights.data(), static_cast<int>(weights.size()), u)];
  }
  return counts;
}

// A correct sampler passes at significance 1e-3 (fails with probability 1e-3);
// the same sampler with 0.02 of the mass moved from the first token to the last
// is rejected: with 100000 trials the expected statistic is ~530 against a 1e-3
// critical value of 20.5 (dof 5), so the biased sampler passes with negligible
// probability. This shows the distribution tests can see a wrong sampler.
TEST(ChiSquareTest, AcceptsCorrectSamplerAndRejectsBiasedOne) {
  std::mt19937_64 rng(DistributionTestSeed());
  const std::vector<float> p = RandomDistribution(6, rng);
  const ChiSquareResult good = ChiSquareTest(Draw(p, 100000, 0.0f), ToDouble(p));
  PrintChiSquare("correct sampler", good);
  EXPECT_GT(good.p_value, 1e-3);

  const std::vector<float> fixed = {0.3f, 0.2f, 0.2f, 0.1f, 0.1f, 0.1f};
  const ChiSquareResult bad = ChiSquareTest(Draw(fixed, 100000, 0.02f), ToDouble(fixed));
  PrintChiSquare("biased sampler", bad);
  EXPECT_LT(bad.p_value, 1e-3);
}

}  // namespace
}  // namespace splitspec::spec::testing

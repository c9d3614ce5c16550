#include "kernels/cpu/sampling_philox.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/sampling.h"

namespace splitspec::kernels {
namespace {

void ExpectWords(const Philox4x32& got, const std::vector<uint32_t>& want) {
  for (int i = 0; i < 4; ++i) EXPECT_EQ(got.v[i], want[i]) << "word " << i;
}

// Known-answer vectors of Philox-4x32-10 published with Random123.
TEST(PhiloxTest, MatchesPublishedKnownAnswers) {
  ExpectWords(Philox4x32x10(Philox4x32{{0, 0, 0, 0}}, 0, 0),
              {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
  ExpectWords(Philox4x32x10(Philox4x32{{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}},
                            0xffffffffu, 0xffffffffu),
              {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
  ExpectWords(Philox4x32x10(Philox4x32{{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}},
                            0xa4093822u, 0x299f31d0u),
              {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

TEST(PhiloxTest, UniformsAreInsideTheOpenIntervalAndLookUniform) {
  double sum = 0.0, min = 1.0, max = 0.0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const double u = UniformDouble(12345, i, RandomPurpose::kSample);
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    min = std::min(min, u);
    max = std::max(max, u);
  }
  // Mean of n uniforms: sd = 1 / sqrt(12 n) ~ 0.0009; 6 sd bound.
  EXPECT_NEAR(sum / n, 0.5, 0.0055);
  EXPECT_LT(min, 1e-3);
  EXPECT_GT(max, 1.0 - 1e-3);
}

TEST(PhiloxTest, PurposesAndPositionsGiveDifferentStreams) {
  const double a = UniformDouble(7, 3, RandomPurpose::kAcceptTest);
  EXPECT_EQ(a, UniformDouble(7, 3, RandomPurpose::kAcceptTest));
  EXPECT_NE(a, UniformDouble(7, 3, RandomPurpose::kResidual));
  EXPECT_NE(a, UniformDouble(7, 4, RandomPurpose::kAcceptTest));
  EXPECT_NE(a, UniformDouble(8, 3, RandomPurpose::kAcceptTest));
  EXPECT_NE(a, UniformDouble(7, 3 + (int64_t{1} << 32), RandomPurpose::kAcceptTest));
}

TEST(SamplingRowTest, ArgmaxTiesAndInvalidRows) {
  const float tie[] = {0.1f, 0.4f, 0.4f, 0.1f};
  EXPECT_EQ(ArgmaxProbs(tie, 4), 1);
  const float zero[] = {0.0f, 0.0f};
  EXPECT_EQ(ArgmaxProbs(zero, 2), -1);
  const float negative[] = {0.5f, -0.1f};
  EXPECT_EQ(ArgmaxProbs(negative, 2), -1);
  const float nan[] = {0.5f, NAN};
  EXPECT_EQ(SampleFromWeights(nan, 2, 0.5), -1);
  EXPECT_EQ(GumbelArgmax(nan, 2, 1, 1), -1);
  const float inf[] = {0.5f, INFINITY};
  EXPECT_EQ(SampleFromWeights(inf, 2, 0.5), -1);
}

TEST(SamplingRowTest, InverseCdfSkipsZeroWeightsAtEveryBoundary) {
  const float w[] = {0.0f, 0.25f, 0.0f, 0.75f, 0.0f};
  EXPECT_EQ(SampleFromWeights(w, 5, 1e-12), 1);
  EXPECT_EQ(SampleFromWeights(w, 5, 0.2499), 1);
  EXPECT_EQ(SampleFromWeights(w, 5, 0.2501), 3);
  EXPECT_EQ(SampleFromWeights(w, 5, 1.0 - 1e-16), 3);  // never the trailing zero
  const float unnormalized[] = {2.0f, 0.0f, 6.0f};
  EXPECT_EQ(SampleFromWeights(unnormalized, 3, 0.24), 0);
  EXPECT_EQ(SampleFromWeights(unnormalized, 3, 0.26), 2);
}

TEST(SamplingRowTest, GumbelArgmaxNeverPicksZeroProbability) {
  const float p[] = {0.0f, 1e-30f, 0.0f, 0.5f, 0.0f};
  for (int64_t position = 0; position < 2000; ++position) {
    const int token = GumbelArgmax(p, 5, 99, position);
    ASSERT_TRUE(token == 1 || token == 3) << token;
  }
}

}  // namespace
}  // namespace splitspec::kernels

#include "kernels/cpu/guidance.h"

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"

namespace splitspec::kernels {
namespace {

// Normal logits with some entries masked to -inf in either sequence (and some in both).
std::vector<float> RandomLogits(int n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 6.0f);
  std::uniform_int_distribution<int> mask(0, 15);
  std::vector<float> v(n);
  for (float& x : v) x = mask(rng) == 0 ? -INFINITY : dist(rng);
  return v;
}

bool SameBits(float a, float b) { return std::memcmp(&a, &b, sizeof(float)) == 0; }

TEST(GuidanceTest, ReferenceFollowsTheFormulaAndMasks) {
  const float cond[] = {2.0f, -1.0f, -INFINITY, 0.5f, 3.0f};
  const float uncond[] = {1.0f, 1.0f, 0.0f, -INFINITY, 3.0f};
  const float scale = 1.5f;
  float out[5];
  GuidedLogitsRowsReference(cond, uncond, &scale, out, 1, 5);
  EXPECT_EQ(out[0], 2.5f);   // 1 + 1.5 * (2 - 1)
  EXPECT_EQ(out[1], -2.0f);  // 1 + 1.5 * (-1 - 1)
  EXPECT_EQ(out[2], -INFINITY);
  EXPECT_EQ(out[3], -INFINITY);
  EXPECT_EQ(out[4], 3.0f);
}

TEST(GuidanceTest, ScaleOneCopiesCondBitwiseAndScaleZeroGivesUncond) {
  std::mt19937 rng(std::random_device{}());
  const int cols = 333;
  const std::vector<float> cond = RandomLogits(cols, rng), uncond = RandomLogits(cols, rng);
  const float scales[] = {1.0f, 0.0f};
  std::vector<float> both_cond(cond), both_uncond(uncond);
  both_cond.insert(both_cond.end(), cond.begin(), cond.end());
  both_uncond.insert(both_uncond.end(), uncond.begin(), uncond.end());
  std::vector<float> out(2 * cols);
  GuidedLogitsRows(both_cond.data(), both_uncond.data(), scales, out.data(), 2, cols);
  for (int v = 0; v < cols; ++v) {
    ASSERT_TRUE(SameBits(out[v], cond[v])) << "s=1, v=" << v;
    const float want = cond[v] == -INFINITY ? -INFINITY : uncond[v];
    ASSERT_EQ(out[cols + v], want) << "s=0, v=" << v;
  }
}

// Fresh random data every run (the seed is printed on failure), at vocabulary
// sizes that exercise the vector body, the scalar tail and both together.
TEST(GuidanceTest, Avx2MatchesReferenceBitwiseAtRaggedSizes) {
  if (!CpuFeatures().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> scale_dist(-0.5f, 4.0f);
  for (int cols : {1, 7, 8, 9, 63, 257, 1000, 49153}) {
    const int rows = 4;
    const std::vector<float> cond = RandomLogits(rows * cols, rng);
    const std::vector<float> uncond = RandomLogits(rows * cols, rng);
    const std::vector<float> scales = {scale_dist(rng), 1.0f, scale_dist(rng), 0.0f};
    std::vector<float> want(cond.size()), got(cond.size());
    GuidedLogitsRowsReference(cond.data(), uncond.data(), scales.data(), want.data(), rows, cols);
    internal::GuidedLogitsRowsAvx2(cond.data(), uncond.data(), scales.data(), got.data(), rows,
                                   cols);
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_TRUE(SameBits(got[i], want[i]))
          << "cols=" << cols << " i=" << i << ": " << got[i] << " vs " << want[i];
    }
  }
}

TEST(GuidanceTest, InPlaceOverCondMatchesOutOfPlace) {
  std::mt19937 rng(std::random_device{}());
  const int rows = 3, cols = 101;
  const std::vector<float> cond = RandomLogits(rows * cols, rng);
  const std::vector<float> uncond = RandomLogits(rows * cols, rng);
  const float scales[] = {1.5f, 1.0f, 3.0f};
  std::vector<float> want(cond.size()), in_place(cond);
  GuidedLogitsRows(cond.data(), uncond.data(), scales, want.data(), rows, cols);
  GuidedLogitsRows(in_place.data(), uncond.data(), scales, in_place.data(), rows, cols);
  for (size_t i = 0; i < want.size(); ++i) ASSERT_TRUE(SameBits(in_place[i], want[i])) << i;
}

}  // namespace
}  // namespace splitspec::kernels

#include "kernels/cpu/softmax.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/cpu_features.h"

namespace splitspec::kernels {
namespace {

std::vector<float> RandomLogits(int n, std::mt19937& rng) {
  std::normal_distribution<float> dist(0.0f, 4.0f);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// The AVX2 path uses a polynomial exp and sums each row in float over 8 lanes; it must agree
// with the scalar reference to a relative 2e-5 (the exp polynomial), widened for long rows to
// the worst-case rounding bound of the float row sum: each lane adds cols/8 terms, so the sum's
// relative error is at most about (cols/8 + 3) * FLT_EPSILON. (A fixed 2e-5 failed about one
// run in 200 at 49152 columns: 2.1e-5 observed.)
TEST(SoftmaxTest, Avx2MatchesReferenceAtRaggedSizes) {
  if (!CpuFeatures().avx2) GTEST_SKIP() << "no AVX2 on this CPU";
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE(testing::Message() << "seed " << seed);
  std::mt19937 rng(seed);
  for (int cols : {1, 7, 8, 9, 63, 256, 1000, 49152}) {
    const float rel_tol = std::max(2e-5f, (cols / 8.0f + 3.0f) * FLT_EPSILON);
    for (int rows : {1, 3}) {
      const std::vector<float> logits = RandomLogits(rows * cols, rng);
      std::vector<float> want(logits.size()), got(logits.size());
      SoftmaxRowsReference(logits.data(), want.data(), rows, cols);
      internal::SoftmaxRowsAvx2(logits.data(), got.data(), rows, cols);
      for (size_t i = 0; i < want.size(); ++i) {
        ASSERT_NEAR(got[i], want[i], rel_tol * want[i] + 1e-30f) << "cols=" << cols << " i=" << i;
      }
    }
  }
}

TEST(SoftmaxTest, RowsSumToOne) {
  std::mt19937 rng(std::random_device{}());
  const int rows = 5, cols = 777;
  const std::vector<float> logits = RandomLogits(rows * cols, rng);
  std::vector<float> probs(logits.size());
  SoftmaxRows(logits.data(), probs.data(), rows, cols);
  for (int r = 0; r < rows; ++r) {
    double sum = 0;
    for (int c = 0; c < cols; ++c) sum += probs[r * cols + c];
    EXPECT_NEAR(sum, 1.0, 1e-5) << "row " << r;
  }
}

TEST(SoftmaxTest, RowResultDoesNotDependOnBatch) {
  std::mt19937 rng(std::random_device{}());
  const int rows = 4, cols = 1001;
  const std::vector<float> logits = RandomLogits(rows * cols, rng);
  std::vector<float> batched(logits.size());
  SoftmaxRows(logits.data(), batched.data(), rows, cols);
  for (int r = 0; r < rows; ++r) {
    std::vector<float> alone(cols);
    SoftmaxRows(logits.data() + r * cols, alone.data(), 1, cols);
    for (int c = 0; c < cols; ++c) ASSERT_EQ(alone[c], batched[r * cols + c]);
  }
}

TEST(SoftmaxTest, NegativeInfinityGetsZeroProbability) {
  std::vector<float> logits = {1.0f, -INFINITY, 2.0f, -INFINITY, 0.5f, 0.1f, 0.2f, 0.3f, -INFINITY};
  std::vector<float> got(logits.size()), want(logits.size());
  SoftmaxRows(logits.data(), got.data(), 1, static_cast<int>(logits.size()));
  SoftmaxRowsReference(logits.data(), want.data(), 1, static_cast<int>(logits.size()));
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_EQ(got[3], 0.0f);
  EXPECT_EQ(got[8], 0.0f);
  EXPECT_EQ(want[1], 0.0f);
}

}  // namespace
}  // namespace splitspec::kernels

#include "runtime/spec/sampling.h"

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "tests/testing/chi_square.h"
#include "tests/unit/spec/spec_test_util.h"

namespace splitspec::spec {
namespace {

using testing::ChiSquareResult;
using testing::ChiSquareTest;
using testing::DistributionTestSeed;
using testing::FreshSeed;
using testing::PrintChiSquare;
using testing::RandomDistribution;
using testing::ToDouble;

std::vector<float> RandomLogits(int n, std::mt19937_64& rng) {
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<float> logits(n);
  for (float& x : logits) x = normal(rng);
  return logits;
}

std::vector<float> Probs(const SamplingParams& params, const std::vector<float>& logits) {
  std::vector<float> probs(logits.size());
  const absl::Status status = LogitsToProbs(params, logits, absl::MakeSpan(probs));
  EXPECT_TRUE(status.ok()) << status;
  return probs;
}

// softmax(logits / T) against a double-precision reference, at ragged sizes.
TEST(SamplingTest, TemperatureMatchesScaledSoftmax) {
  std::mt19937_64 rng(FreshSeed());
  for (int vocab : {1, 7, 64, 1001}) {
    for (float temperature : {0.3f, 1.0f, 2.5f}) {
      const std::vector<float> logits = RandomLogits(vocab, rng);
      SamplingParams params;
      params.temperature = temperature;
      const std::vector<float> probs = Probs(params, logits);
      double max_logit = logits[0], total = 0.0;
      for (float x : logits) max_logit = std::max<double>(max_logit, x);
      for (float x : logits) total += std::exp((x - max_logit) / temperature);
      for (int v = 0; v < vocab; ++v) {
        const double want = std::exp((logits[v] - max_logit) / temperature) / total;
        ASSERT_NEAR(probs[v], want, 2e-5 * want + 1e-9)
            << "vocab=" << vocab << " T=" << temperature;
      }
    }
  }
}

TEST(SamplingTest, TemperatureZeroIsOneHotAtTheArgmax) {
  SamplingParams params;
  params.temperature = 0.0f;
  const std::vector<float> probs = Probs(params, {1.0f, 3.0f, -2.0f, 3.0f});
  EXPECT_EQ(probs, std::vector<float>({0.0f, 1.0f, 0.0f, 0.0f}));
}

// Greedy rows pick the lowest id among equal largest logits wherever the ties
// fall (within one lane of the scan, across lanes, in the tail past the last
// multiple of 8), on random data at ragged sizes; a NaN or +inf anywhere,
// the tail included, is refused with its token named.
TEST(SamplingTest, GreedyArgmaxIsTheLowestIdAmongTiesAtRaggedSizes) {
  std::mt19937_64 rng(FreshSeed());
  SamplingParams params;
  params.temperature = 0.0f;
  for (const int n : {1, 7, 8, 9, 17, 63, 64, 65, 1001, 49152}) {
    for (int trial = 0; trial < 20; ++trial) {
      std::vector<float> logits = RandomLogits(n, rng);
      std::uniform_int_distribution<int> pick(0, n - 1);
      const float top = 100.0f + static_cast<float>(trial % 3);  // above every random logit
      const int ties = 1 + trial % 4;
      for (int t = 0; t < ties; ++t) logits[pick(rng)] = top;
      if (trial % 5 == 0) logits[n - 1] = top;  // a tie in the tail
      int expected = 0;
      for (int v = 1; v < n; ++v) {
        if (logits[v] > logits[expected]) expected = v;
      }
      std::vector<float> want(n, 0.0f);
      want[expected] = 1.0f;
      ASSERT_EQ(Probs(params, logits), want) << "n " << n << " trial " << trial;
    }
    std::vector<float> bad = RandomLogits(n, rng);
    bad[n - 1] = (n % 2 == 0) ? NAN : INFINITY;
    std::vector<float> probs(n);
    EXPECT_NE(LogitsToProbs(params, bad, absl::MakeSpan(probs))
                  .message()
                  .find(absl::StrCat("token ", n - 1)),
              std::string::npos)
        << "n " << n;
  }
}

TEST(SamplingTest, TopKKeepsTheKMostProbable) {
  std::mt19937_64 rng(FreshSeed());
  const std::vector<float> logits = RandomLogits(50, rng);
  SamplingParams params;
  params.top_k = 5;
  const std::vector<float> probs = Probs(params, logits);
  const std::vector<float> full = Probs(SamplingParams{}, logits);
  std::vector<float> sorted = full;
  std::sort(sorted.rbegin(), sorted.rend());
  double kept_mass = 0.0;
  int kept = 0;
  for (int v = 0; v < 50; ++v) {
    if (probs[v] > 0.0f) {
      ++kept;
      kept_mass += full[v];
      EXPECT_GE(full[v], sorted[4]);
    }
  }
  EXPECT_EQ(kept, 5);
  for (int v = 0; v < 50; ++v) {
    if (probs[v] > 0.0f) {
      EXPECT_NEAR(probs[v], full[v] / kept_mass, 1e-6);
    }
  }
}

TEST(SamplingTest, TopPKeepsTheShortestPrefixReachingP) {
  // Softmax of log(0.5, 0.3, 0.15, 0.05) = (0.5, 0.3, 0.15, 0.05).
  const std::vector<float> logits = {std::log(0.15f), std::log(0.5f), std::log(0.05f),
                                     std::log(0.3f)};
  SamplingParams params;
  params.top_p = 0.79f;  // 0.5 + 0.3 reaches 0.79 (0.5 alone does not)
  std::vector<float> probs = Probs(params, logits);
  EXPECT_NEAR(probs[1], 0.5 / 0.8, 1e-6);
  EXPECT_NEAR(probs[3], 0.3 / 0.8, 1e-6);
  EXPECT_EQ(probs[0], 0.0f);
  EXPECT_EQ(probs[2], 0.0f);
  params.top_p = 0.81f;  // needs the third token
  probs = Probs(params, logits);
  EXPECT_GT(probs[0], 0.0f);
  EXPECT_EQ(probs[2], 0.0f);
  params.top_p = 0.01f;  // at least one token survives
  probs = Probs(params, logits);
  EXPECT_EQ(probs[1], 1.0f);
}

TEST(SamplingTest, MinPDropsTokensBelowTheFractionOfTheMax) {
  const std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.15f),
                                     std::log(0.05f)};
  SamplingParams params;
  params.min_p = 0.25f;  // threshold 0.125: drops 0.05 only
  const std::vector<float> probs = Probs(params, logits);
  EXPECT_NEAR(probs[0], 0.5 / 0.95, 1e-6);
  EXPECT_NEAR(probs[2], 0.15 / 0.95, 1e-6);
  EXPECT_EQ(probs[3], 0.0f);
}

TEST(SamplingTest, MaskedLogitsGetZeroProbability) {
  const std::vector<float> probs = Probs(SamplingParams{}, {-INFINITY, 0.0f, -INFINITY, 0.0f});
  EXPECT_EQ(probs, std::vector<float>({0.0f, 0.5f, 0.0f, 0.5f}));
}

TEST(SamplingTest, RefusesBadInputsNamingTheValue) {
  std::vector<float> probs(3);
  SamplingParams params;
  params.top_p = 1.5f;
  EXPECT_NE(LogitsToProbs(params, {0, 0, 0}, absl::MakeSpan(probs)).message().find("top_p"),
            std::string::npos);
  params = SamplingParams{};
  params.temperature = -1.0f;
  EXPECT_NE(LogitsToProbs(params, {0, 0, 0}, absl::MakeSpan(probs)).message().find("temperature"),
            std::string::npos);
  params = SamplingParams{};
  EXPECT_NE(LogitsToProbs(params, {0, NAN, 0}, absl::MakeSpan(probs)).message().find("token 1"),
            std::string::npos);
  EXPECT_NE(LogitsToProbs(params, {-INFINITY, -INFINITY, -INFINITY}, absl::MakeSpan(probs))
                .message()
                .find("-inf"),
            std::string::npos);
  EXPECT_FALSE(LogitsToProbs(params, {0, 0}, absl::MakeSpan(probs)).ok());
}

TEST(SamplingTest, TopQDistributionIsTheRenormalizedHead) {
  const std::vector<float> probs = {0.1f, 0.4f, 0.0f, 0.3f, 0.2f};
  const SparseDistribution q = *TopQDistribution(probs, 2);
  EXPECT_EQ(q.token_ids, std::vector<int32_t>({1, 3}));
  EXPECT_NEAR(q.probs[0], 0.4 / 0.7, 1e-6);
  EXPECT_NEAR(q.probs[1], 0.3 / 0.7, 1e-6);
  EXPECT_EQ(TopQDistribution(probs, 10)->token_ids.size(), 4u);  // zeros are not support
  EXPECT_FALSE(TopQDistribution(probs, 0).ok());
}

// Samplers against their laws, significance 1e-3 per test (3 checks at 3.3e-4):
// the target sampler draws p, the rejection-mode draft draws its truncated q,
// and coupled (Gumbel-max) draws p. Seeds fixed per test (DistributionTestSeed).
TEST(SamplingTest, SeededChoicesFollowTheirDistributions) {
  std::mt19937_64 rng(DistributionTestSeed());
  const std::vector<float> p = RandomDistribution(8, rng, 0.2);
  const int trials = 40000;
  const uint64_t seed = DistributionTestSeed();
  std::vector<int64_t> target(8), draft(8), coupled(8);
  for (int t = 0; t < trials; ++t) {
    ++target[*ChooseTargetToken(VerifyMode::kRejection, p, seed, t)];
    ++draft[ChooseDraftToken(VerifyMode::kRejection, p, 3, seed, t)->token];
    ++coupled[*ChooseTargetToken(VerifyMode::kCoupled, p, seed, t)];
  }
  const SparseDistribution q = *TopQDistribution(p, 3);
  std::vector<double> q_dense(8, 0.0);
  for (size_t j = 0; j < q.token_ids.size(); ++j) q_dense[q.token_ids[j]] = q.probs[j];
  const ChiSquareResult r_target = ChiSquareTest(target, ToDouble(p));
  const ChiSquareResult r_draft = ChiSquareTest(draft, q_dense);
  const ChiSquareResult r_coupled = ChiSquareTest(coupled, ToDouble(p));
  PrintChiSquare("target sample ~ p", r_target);
  PrintChiSquare("draft sample ~ top-3 q", r_draft);
  PrintChiSquare("Gumbel-max ~ p", r_coupled);
  EXPECT_GT(r_target.p_value, 1e-3 / 3);
  EXPECT_GT(r_draft.p_value, 1e-3 / 3);
  EXPECT_GT(r_coupled.p_value, 1e-3 / 3);
}

TEST(SamplingTest, ChoicesArePureFunctionsOfSeedAndPosition) {
  std::mt19937_64 rng(FreshSeed());
  const std::vector<float> p = RandomDistribution(100, rng);
  const uint64_t seed = FreshSeed();
  for (VerifyMode mode : {VerifyMode::kRejection, VerifyMode::kCoupled}) {
    EXPECT_EQ(*ChooseTargetToken(mode, p, seed, 17), *ChooseTargetToken(mode, p, seed, 17));
    int differ = 0;
    for (int pos = 0; pos < 50; ++pos) {
      differ +=
          *ChooseTargetToken(mode, p, seed, pos) != *ChooseTargetToken(mode, p, seed + 1, pos);
    }
    EXPECT_GT(differ, 0);  // a seed that did nothing would give 0
  }
}

}  // namespace
}  // namespace splitspec::spec

// Exactness of verification, by chi-square tests: whatever the draft, the
// committed tokens are distributed as sampling the target p.
//
// Significance: every test has a total false-failure probability <= 1e-3; a test
// making m chi-square checks asserts p-value > 1e-3 / m for each (Bonferroni).
// Seeds are fixed per test (DistributionTestSeed: each test is one draw, so CI runs do
// not each redraw it); the harness test below shows a wrong rule fails on them.
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/sampling_philox.h"
#include "runtime/spec/sampling.h"
#include "runtime/spec/verify.h"
#include "tests/testing/chi_square.h"
#include "tests/unit/spec/markov_model.h"
#include "tests/unit/spec/spec_test_util.h"

namespace splitspec::spec {
namespace {

using testing::ChiSquareResult;
using testing::ChiSquareTest;
using testing::DistributionTestSeed;
using testing::MarkovModel;
using testing::PrintChiSquare;
using testing::RandomDistribution;
using testing::ToDouble;

struct DistributionPair {
  std::string name;
  std::vector<float> p, q;
};

// Random pairs plus the adversarial ones of the issue.
std::vector<DistributionPair> FirstPositionCases(std::mt19937_64& rng) {
  std::vector<DistributionPair> cases;
  cases.push_back({"random V=5", RandomDistribution(5, rng), RandomDistribution(5, rng)});
  cases.push_back(
      {"random V=8 sparse", RandomDistribution(8, rng, 0.3), RandomDistribution(8, rng, 0.3)});
  cases.push_back({"disjoint supports", {0.7f, 0.3f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.4f, 0.6f}});
  const std::vector<float> same = RandomDistribution(6, rng);
  cases.push_back({"p == q", same, same});
  cases.push_back({"one-hot p", {0.0f, 0.0f, 1.0f, 0.0f, 0.0f}, RandomDistribution(5, rng)});
  cases.push_back({"one-hot q", RandomDistribution(5, rng), {0.0f, 0.0f, 0.0f, 1.0f, 0.0f}});
  return cases;
}

// The first committed token of a one-token block drafted from q at `position`.
int32_t FirstCommitted(VerifyMode mode, const DistributionPair& c, bool dense_q, uint64_t seed) {
  const int64_t position = 11;
  const int vocab = static_cast<int>(c.p.size());
  absl::StatusOr<DraftChoice> draft = ChooseDraftToken(mode, c.q, vocab, seed, position);
  EXPECT_TRUE(draft.ok()) << draft.status();
  std::vector<float> rows = c.p;
  rows.insert(rows.end(), c.p.begin(), c.p.end());
  const std::vector<int32_t> tokens = {draft->token};
  const std::vector<SparseDistribution> q_sparse = {draft->q};
  std::vector<float> q_dense(vocab, 0.0f);
  for (size_t j = 0; j < draft->q.token_ids.size(); ++j)
    q_dense[draft->q.token_ids[j]] = draft->q.probs[j];
  VerifyRequest request;
  request.mode = mode;
  request.target_probs = rows;
  request.draft_tokens = tokens;
  if (mode == VerifyMode::kRejection) {
    if (dense_q)
      request.draft_q_dense = q_dense;
    else
      request.draft_q_sparse = q_sparse;
  }
  request.seed = seed;
  request.start_position = position;
  request.want_bonus = false;
  absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, vocab);
  EXPECT_TRUE(outcome.ok()) << outcome.status();
  return outcome->committed.at(0);
}

void ExpectFirstTokenDistributedAsP(VerifyMode mode, bool dense_q) {
  std::mt19937_64 rng(DistributionTestSeed());
  const std::vector<DistributionPair> cases = FirstPositionCases(rng);
  const double threshold = 1e-3 / cases.size();
  const int trials = 40000;
  for (const DistributionPair& c : cases) {
    const uint64_t base_seed = DistributionTestSeed();
    std::vector<int64_t> counts(c.p.size());
    for (int t = 0; t < trials; ++t) ++counts[FirstCommitted(mode, c, dense_q, base_seed + t)];
    const ChiSquareResult r = ChiSquareTest(counts, ToDouble(c.p));
    PrintChiSquare(
        std::string(VerifyModeName(mode)) + (dense_q ? " dense q, " : " sparse q, ") + c.name, r);
    EXPECT_GT(r.p_value, threshold) << c.name;
  }
}

TEST(VerifyDistributionTest, RejectionFirstTokenIsDistributedAsPSparseQ) {
  ExpectFirstTokenDistributedAsP(VerifyMode::kRejection, /*dense_q=*/false);
}

TEST(VerifyDistributionTest, RejectionFirstTokenIsDistributedAsPDenseQ) {
  ExpectFirstTokenDistributedAsP(VerifyMode::kRejection, /*dense_q=*/true);
}

TEST(VerifyDistributionTest, CoupledFirstTokenIsDistributedAsP) {
  ExpectFirstTokenDistributedAsP(VerifyMode::kCoupled, /*dense_q=*/false);
}

// A deliberately wrong rule (on rejection, resample p instead of the residual)
// run through the same harness must be rejected: here its first-token law is
// (0.46, 0.38, 0.16, 0) instead of p = (0.6, 0.3, 0.1, 0); with 40000 trials the
// expected statistic is ~3600 against the 1e-3 critical value 13.8 (dof 2).
TEST(VerifyDistributionTest, HarnessRejectsResidualFreeRule) {
  const std::vector<float> p = {0.6f, 0.3f, 0.1f, 0.0f}, q = {0.1f, 0.2f, 0.3f, 0.4f};
  const uint64_t base_seed = DistributionTestSeed();
  std::vector<int64_t> counts(p.size());
  for (int t = 0; t < 40000; ++t) {
    const uint64_t seed = base_seed + t;
    const double u_draft = kernels::UniformDouble(seed, 0, kernels::RandomPurpose::kDraftSample);
    const int x = kernels::SampleFromWeights(q.data(), 4, u_draft);
    const double u = kernels::UniformDouble(seed, 0, kernels::RandomPurpose::kAcceptTest);
    const bool accept = u < static_cast<double>(p[x]) / q[x];
    const double u_wrong = kernels::UniformDouble(seed, 0, kernels::RandomPurpose::kResidual);
    ++counts[accept ? x : kernels::SampleFromWeights(p.data(), 4, u_wrong)];
  }
  const ChiSquareResult r = ChiSquareTest(counts, ToDouble(p));
  PrintChiSquare("wrong rule (no residual)", r);
  EXPECT_LT(r.p_value, 1e-3);
}

// Runs the real speculative loop on Markov models: the draft proposes k tokens
// from `draft` (its top-q_top_k), the target verifies with rows from `target`
// (bonus on), until `length` tokens follow `first`.
std::vector<int32_t> SpeculativeDecode(VerifyMode mode, const MarkovModel& target,
                                       const MarkovModel& draft, int k, int q_top_k, uint64_t seed,
                                       int32_t first, int length) {
  std::vector<int32_t> sequence = {first};
  while (static_cast<int>(sequence.size()) < length + 1) {
    const int64_t position = static_cast<int64_t>(sequence.size());
    std::vector<int32_t> tokens;
    std::vector<SparseDistribution> q;
    std::vector<float> rows = target.Next(sequence.back());
    int32_t context = sequence.back();
    for (int i = 0; i < k; ++i) {
      absl::StatusOr<DraftChoice> choice =
          ChooseDraftToken(mode, draft.Next(context), q_top_k, seed, position + i);
      EXPECT_TRUE(choice.ok()) << choice.status();
      tokens.push_back(choice->token);
      q.push_back(choice->q);
      context = choice->token;
      rows.insert(rows.end(), target.Next(context).begin(), target.Next(context).end());
    }
    VerifyRequest request;
    request.mode = mode;
    request.target_probs = rows;
    request.draft_tokens = tokens;
    if (mode == VerifyMode::kRejection) request.draft_q_sparse = q;
    request.seed = seed;
    request.start_position = position;
    absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, target.vocab);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    sequence.insert(sequence.end(), outcome->committed.begin(), outcome->committed.end());
  }
  return std::vector<int32_t>(sequence.begin() + 1, sequence.begin() + 1 + length);
}

// Joint law of the first three committed tokens against the target chain, for a
// draft chain that differs from it (and a truncated q when q_top_k < vocab).
void ExpectJointLawOfChain(VerifyMode mode, const std::vector<std::pair<int, int>>& k_and_q_top_k) {
  const int vocab = 4, length = 3, trials = 30000;
  const double threshold = 1e-3 / k_and_q_top_k.size();
  for (const auto& [k, q_top_k] : k_and_q_top_k) {
    std::mt19937_64 rng(DistributionTestSeed());
    const MarkovModel target = MarkovModel::Random(vocab, rng, 0.15);
    const MarkovModel draft = MarkovModel::Random(vocab, rng, 0.15);
    const uint64_t base_seed = DistributionTestSeed();
    std::vector<int64_t> counts(64);
    for (int t = 0; t < trials; ++t) {
      const std::vector<int32_t> s =
          SpeculativeDecode(mode, target, draft, k, q_top_k, base_seed + t, 0, length);
      ++counts[s[0] * 16 + s[1] * 4 + s[2]];
    }
    std::vector<double> expected(64);
    for (int cell = 0; cell < 64; ++cell) {
      expected[cell] = target.SequenceProbability(0, {cell / 16, (cell / 4) % 4, cell % 4});
    }
    const ChiSquareResult r = ChiSquareTest(counts, expected);
    PrintChiSquare(std::string(VerifyModeName(mode)) + " chain joint k=" + std::to_string(k) +
                       " q_top_k=" + std::to_string(q_top_k),
                   r);
    EXPECT_GT(r.p_value, threshold) << "k=" << k;
  }
}

TEST(VerifyDistributionTest, RejectionCommittedSequenceHasTargetJointLaw) {
  ExpectJointLawOfChain(VerifyMode::kRejection, {{2, 3}, {3, 4}});
}

TEST(VerifyDistributionTest, CoupledCommittedSequenceHasTargetJointLaw) {
  ExpectJointLawOfChain(VerifyMode::kCoupled, {{2, 4}, {3, 4}});
}

// Under iid acceptance (the same p and q at every position) the tokens per
// block N = accepted + 1 follow the truncated geometric law P(N = n) =
// alpha^(n-1) (1 - alpha) for n <= k and alpha^k for n = k + 1, whose mean is
// (1 - alpha^(k+1)) / (1 - alpha); alpha = sum_x q(x) min(1, p(x) / q(x)).
TEST(VerifyDistributionTest, TokensPerBlockMatchAnalyticModel) {
  std::mt19937_64 rng(DistributionTestSeed());
  const int vocab = 5, trials = 20000;
  const std::vector<int> ks = {3, 6};
  for (int k : ks) {
    const std::vector<float> p = RandomDistribution(vocab, rng),
                             q_full = RandomDistribution(vocab, rng);
    const SparseDistribution q = *TopQDistribution(q_full, vocab);
    double alpha = 0.0;
    for (size_t j = 0; j < q.token_ids.size(); ++j)
      alpha += std::min<double>(q.probs[j], p[q.token_ids[j]]);
    std::vector<float> rows;
    for (int i = 0; i <= k; ++i) rows.insert(rows.end(), p.begin(), p.end());
    const uint64_t base_seed = DistributionTestSeed();
    std::vector<int64_t> counts(k + 2);
    double sum = 0.0;
    for (int t = 0; t < trials; ++t) {
      std::vector<int32_t> tokens;
      for (int i = 0; i < k; ++i)
        tokens.push_back(
            ChooseDraftToken(VerifyMode::kRejection, q_full, vocab, base_seed + t, i)->token);
      const std::vector<SparseDistribution> qs(k, q);
      VerifyRequest request;
      request.target_probs = rows;
      request.draft_tokens = tokens;
      request.draft_q_sparse = qs;
      request.seed = base_seed + t;
      const absl::StatusOr<VerifyOutcome> outcome = VerifyBlock(request, vocab);
      ASSERT_TRUE(outcome.ok()) << outcome.status();
      ++counts[outcome->committed.size()];
      sum += outcome->committed.size();
    }
    std::vector<double> expected(k + 2, 0.0);
    for (int n = 1; n <= k; ++n) expected[n] = std::pow(alpha, n - 1) * (1.0 - alpha);
    expected[k + 1] = std::pow(alpha, k);
    const ChiSquareResult r = ChiSquareTest(counts, expected);
    const double mean = sum / trials;
    const double want = (1.0 - std::pow(alpha, k + 1)) / (1.0 - alpha);
    std::printf("E[N]: alpha=%.4f k=%d measured=%.4f analytic=%.4f\n", alpha, k, mean, want);
    PrintChiSquare("tokens per block k=" + std::to_string(k), r);
    EXPECT_GT(r.p_value, 1e-3 / ks.size());
    // |mean - E[N]| < 5 standard errors (N lies in [1, k + 1], so sd(N) <= k / 2):
    // false failure < 1e-6.
    EXPECT_NEAR(mean, want, 5.0 * (k / 2.0) / std::sqrt(trials));
  }
}

}  // namespace
}  // namespace splitspec::spec

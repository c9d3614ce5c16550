// Exactness of tree verification, by chi-square tests: whatever the tree, the
// committed tokens are distributed as sampling the target p.
//
// Significance: every test has a total false-failure probability <= 1e-3; a test
// making m chi-square checks asserts p-value > 1e-3 / m for each (Bonferroni).
// Seeds are fixed per test (DistributionTestSeed, see spec_test_util.h); the harness
// tests below show that wrong rules fail on the same harness with p-values < 1e-6.
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/sampling_philox.h"
#include "runtime/spec/sampling.h"
#include "runtime/spec/tree_verify.h"
#include "tests/testing/chi_square.h"
#include "tests/unit/spec/markov_model.h"
#include "tests/unit/spec/spec_test_util.h"
#include "tests/unit/spec/tree_test_util.h"

namespace splitspec::spec {
namespace {

using testing::ChiSquareResult;
using testing::ChiSquareTest;
using testing::DistributionTestSeed;
using testing::MarkovModel;
using testing::PrintChiSquare;
using testing::RandomDistribution;
using testing::RandomTrie;
using testing::SampledTree;
using testing::ToDouble;
using testing::TreeRows;

constexpr int64_t kPosition = 11;

struct DistributionPair {
  std::string name;
  std::vector<float> p, q;
  int q_top_k = 0;  // 0: the whole vocabulary
};

std::vector<DistributionPair> FirstPositionCases(std::mt19937_64& rng) {
  std::vector<DistributionPair> cases;
  cases.push_back({"random V=5", RandomDistribution(5, rng), RandomDistribution(5, rng)});
  cases.push_back(
      {"random V=8 sparse", RandomDistribution(8, rng, 0.3), RandomDistribution(8, rng, 0.3)});
  cases.push_back(
      {"random V=8 q_top_k=3", RandomDistribution(8, rng), RandomDistribution(8, rng), 3});
  cases.push_back({"reversed", {0.1f, 0.2f, 0.3f, 0.4f}, {0.4f, 0.3f, 0.2f, 0.1f}});
  cases.push_back({"disjoint supports", {0.7f, 0.3f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.4f, 0.6f}});
  const std::vector<float> same = RandomDistribution(6, rng);
  cases.push_back({"p == q", same, same});
  cases.push_back({"one-hot p", {0.0f, 0.0f, 1.0f, 0.0f, 0.0f}, RandomDistribution(5, rng)});
  return cases;
}

// The root's children: `siblings` tokens drawn without replacement from the case's q.
DraftTree SiblingTree(const DistributionPair& c, int siblings, uint64_t seed) {
  const int vocab = static_cast<int>(c.p.size());
  absl::StatusOr<SparseDistribution> q = TopQDistribution(c.q, c.q_top_k > 0 ? c.q_top_k : vocab);
  EXPECT_TRUE(q.ok()) << q.status();
  DraftTree tree;
  for (int32_t x : SampleSiblings(*q, siblings, seed, kPosition)) {
    tree.tokens.push_back(x);
    tree.parents.push_back(kTreeRoot);
    tree.q.push_back(*q);
  }
  return tree;
}

// The first committed token of a one-level sampled tree.
int32_t FirstCommitted(const DistributionPair& c, int siblings, uint64_t seed) {
  const int vocab = static_cast<int>(c.p.size());
  const DraftTree tree = SiblingTree(c, siblings, seed);
  std::vector<float> rows;
  for (int r = 0; r <= tree.size(); ++r) rows.insert(rows.end(), c.p.begin(), c.p.end());
  TreeVerifyRequest request;
  request.mode = VerifyMode::kRejection;
  request.target_probs = rows;
  request.SetTree(tree);
  request.seed = seed;
  request.start_position = kPosition;
  request.want_bonus = false;
  absl::StatusOr<TreeVerifyOutcome> outcome = VerifyTree(request, vocab);
  EXPECT_TRUE(outcome.ok()) << outcome.status();
  return outcome->committed.at(0);
}

TEST(TreeVerifyDistributionTest, SampledSiblingsFirstTokenIsDistributedAsP) {
  std::mt19937_64 rng(DistributionTestSeed());
  const std::vector<DistributionPair> cases = FirstPositionCases(rng);
  const std::vector<int> sibling_counts = {2, 3};
  const double threshold = 1e-3 / (cases.size() * sibling_counts.size());
  const int trials = 40000;
  for (const DistributionPair& c : cases) {
    for (int siblings : sibling_counts) {
      const uint64_t base_seed = DistributionTestSeed();
      std::vector<int64_t> counts(c.p.size());
      for (int t = 0; t < trials; ++t) ++counts[FirstCommitted(c, siblings, base_seed + t)];
      const ChiSquareResult r = ChiSquareTest(counts, ToDouble(c.p));
      PrintChiSquare(c.name + ", " + std::to_string(siblings) + " siblings", r);
      EXPECT_GT(r.p_value, threshold) << c.name << ", " << siblings << " siblings";
    }
  }
}

// Runs tree speculation on Markov models until `length` tokens follow `first`:
// each step drafts make_tree(last token, position of the next), verifies it with
// the target's rows (bonus on) and commits the outcome.
std::vector<int32_t> TreeDecode(VerifyMode mode, const MarkovModel& target,
                                const std::function<DraftTree(int32_t, int64_t)>& make_tree,
                                uint64_t seed, int32_t first, int length) {
  std::vector<int32_t> sequence = {first};
  while (static_cast<int>(sequence.size()) < length + 1) {
    const int64_t position = static_cast<int64_t>(sequence.size());
    const DraftTree tree = make_tree(sequence.back(), position);
    const std::vector<float> rows = TreeRows(target, sequence.back(), tree);
    TreeVerifyRequest request;
    request.mode = mode;
    request.target_probs = rows;
    request.SetTree(tree);
    request.seed = seed;
    request.start_position = position;
    absl::StatusOr<TreeVerifyOutcome> outcome = VerifyTree(request, target.vocab);
    EXPECT_TRUE(outcome.ok()) << outcome.status();
    sequence.insert(sequence.end(), outcome->committed.begin(), outcome->committed.end());
  }
  return std::vector<int32_t>(sequence.begin() + 1, sequence.begin() + 1 + length);
}

// The joint law of the first three committed tokens (64 cells of a 4-token
// vocabulary) against the target chain from token 0.
ChiSquareResult JointLawOfThree(VerifyMode mode, const MarkovModel& target, int trials,
                                const std::function<DraftTree(int32_t, int64_t, uint64_t)>& tree) {
  const uint64_t base_seed = DistributionTestSeed();
  std::vector<int64_t> counts(64);
  for (int t = 0; t < trials; ++t) {
    const uint64_t seed = base_seed + t;
    const std::vector<int32_t> s = TreeDecode(
        mode, target, [&](int32_t last, int64_t position) { return tree(last, position, seed); },
        seed, 0, 3);
    ++counts[s[0] * 16 + s[1] * 4 + s[2]];
  }
  std::vector<double> expected(64);
  for (int cell = 0; cell < 64; ++cell)
    expected[cell] = target.SequenceProbability(0, {cell / 16, (cell / 4) % 4, cell % 4});
  return ChiSquareTest(counts, expected);
}

TEST(TreeVerifyDistributionTest, SampledTreeCommittedSequenceHasTargetJointLaw) {
  struct Shape {
    std::vector<int> branching;
    int q_top_k;
  };
  const std::vector<Shape> shapes = {{{2, 2}, 4}, {{3, 1}, 3}, {{2, 1, 2}, 4}};
  const double threshold = 1e-3 / shapes.size();
  for (const Shape& shape : shapes) {
    std::mt19937_64 rng(DistributionTestSeed());
    const MarkovModel target = MarkovModel::Random(4, rng, 0.15);
    const MarkovModel draft = MarkovModel::Random(4, rng, 0.15);
    const ChiSquareResult r = JointLawOfThree(
        VerifyMode::kRejection, target, 30000, [&](int32_t last, int64_t position, uint64_t seed) {
          return SampledTree(draft, last, shape.branching, shape.q_top_k, seed, position);
        });
    std::string name = "sampled tree joint, branching";
    for (int b : shape.branching) name += " " + std::to_string(b);
    PrintChiSquare(name + ", q_top_k " + std::to_string(shape.q_top_k), r);
    EXPECT_GT(r.p_value, threshold) << name;
  }
}

// Point-mass trees (lookup-like tries of random continuations, no q): the law is
// the target's.
TEST(TreeVerifyDistributionTest, PointMassTreeCommittedSequenceHasTargetJointLaw) {
  std::mt19937_64 rng(DistributionTestSeed());
  const MarkovModel target = MarkovModel::Random(4, rng, 0.15);
  const ChiSquareResult r = JointLawOfThree(
      VerifyMode::kRejection, target, 30000, [](int32_t, int64_t position, uint64_t seed) {
        std::mt19937_64 tree_rng(seed ^ static_cast<uint64_t>(position));
        return RandomTrie(4, 3, 3, 8, tree_rng);
      });
  PrintChiSquare("point-mass tree joint", r);
  EXPECT_GT(r.p_value, 1e-3);
}

// The harness's own implementation of one node's sampled step, with switches
// for two deliberate mistakes: keeping q after a rejected sibling (SpecInfer's
// rule, exact only for siblings drawn with replacement) and not renormalizing
// the residual. With both switches right it must equal VerifyTree token for token.
int32_t HarnessStep(const std::vector<float>& p, const SparseDistribution& q,
                    const std::vector<int32_t>& siblings, uint64_t seed, bool remove_drawn,
                    bool renormalize_residual) {
  const int vocab = static_cast<int>(p.size());
  std::vector<double> p_now(p.begin(), p.end()), q_now(vocab, 0.0);
  for (size_t e = 0; e < q.token_ids.size(); ++e) q_now[q.token_ids[e]] = q.probs[e];
  std::vector<float> residual(vocab);
  for (size_t j = 0; j < siblings.size(); ++j) {
    const int32_t x = siblings[j];
    const double u = kernels::UniformDouble(seed, kPosition, kernels::RandomPurpose::kAcceptTest,
                                            static_cast<uint32_t>(j));
    if (u < p_now[x] / q_now[x]) return x;
    double mass = 0.0;
    for (int v = 0; v < vocab; ++v) {
      residual[v] = static_cast<float>(std::max(0.0, p_now[v] - q_now[v]));
      mass += residual[v];
    }
    if (j + 1 == siblings.size()) {
      const double u_residual =
          kernels::UniformDouble(seed, kPosition, kernels::RandomPurpose::kResidual);
      return kernels::SampleFromWeights(residual.data(), vocab, u_residual);
    }
    for (int v = 0; v < vocab; ++v)
      p_now[v] = renormalize_residual ? residual[v] / mass : residual[v];
    if (remove_drawn) {
      const double left = 1.0 - q_now[x];
      q_now[x] = 0.0;
      for (double& w : q_now) w /= left;
    }
  }
  return -1;
}

// p = (0.1, 0.2, 0.3, 0.4), q its reverse, two siblings. The right rule gives p; with
// replacement the law is (0.1, 0.2, 0.343, 0.357), without renormalizing (0.1, 0.2,
// 0.24, 0.46) (exact sums over the draws). With 40000 trials the expected statistics
// are ~440 and ~840 against the 1e-3 critical value 16.3 (dof 3).
TEST(TreeVerifyDistributionTest, HarnessRejectsWrongSiblingRules) {
  const DistributionPair c{"reversed", {0.1f, 0.2f, 0.3f, 0.4f}, {0.4f, 0.3f, 0.2f, 0.1f}};
  absl::StatusOr<SparseDistribution> q = TopQDistribution(c.q, 4);
  ASSERT_TRUE(q.ok());
  const uint64_t base_seed = DistributionTestSeed();
  std::vector<int64_t> right(4), with_replacement(4), unnormalized(4);
  int agree = 0;
  const int trials = 40000;
  for (int t = 0; t < trials; ++t) {
    const uint64_t seed = base_seed + t;
    const std::vector<int32_t> siblings = SampleSiblings(*q, 2, seed, kPosition);
    const int32_t harness = HarnessStep(c.p, *q, siblings, seed, true, true);
    agree += harness == FirstCommitted(c, 2, seed) ? 1 : 0;
    ++right[harness];
    ++with_replacement[HarnessStep(c.p, *q, siblings, seed, false, true)];
    ++unnormalized[HarnessStep(c.p, *q, siblings, seed, true, false)];
  }
  // Float vs double round-off may flip a rare draw at a boundary, no more.
  EXPECT_GE(agree, trials - 10);
  const ChiSquareResult r_right = ChiSquareTest(right, ToDouble(c.p));
  const ChiSquareResult r_with = ChiSquareTest(with_replacement, ToDouble(c.p));
  const ChiSquareResult r_unnormalized = ChiSquareTest(unnormalized, ToDouble(c.p));
  PrintChiSquare("harness, right rule", r_right);
  PrintChiSquare("harness, wrong rule: q kept after a rejection (with replacement)", r_with);
  PrintChiSquare("harness, wrong rule: residual not renormalized", r_unnormalized);
  EXPECT_GT(r_right.p_value, 1e-3);
  EXPECT_LT(r_with.p_value, 1e-6);
  EXPECT_LT(r_unnormalized.p_value, 1e-6);
}

}  // namespace
}  // namespace splitspec::spec

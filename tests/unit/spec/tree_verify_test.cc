// Tree verification: rules, identities with the chain and with target-only
// decoding, edge cases and errors (the distribution tests are in
// tree_verify_distribution_test.cc).
#include "runtime/spec/tree_verify.h"

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cpu/sampling.h"
#include "runtime/spec/sampling.h"
#include "runtime/spec/verify.h"
#include "tests/unit/spec/markov_model.h"
#include "tests/unit/spec/spec_test_util.h"
#include "tests/unit/spec/tree_test_util.h"

namespace splitspec::spec {
namespace {

using testing::FreshSeed;
using testing::MarkovModel;
using testing::RandomTrie;
using testing::SampledTree;
using testing::TreeRows;

absl::StatusOr<TreeVerifyOutcome> Verify(VerifyMode mode, const DraftTree& tree,
                                         const std::vector<float>& rows, int32_t vocab,
                                         uint64_t seed, int64_t start, bool want_bonus = true) {
  TreeVerifyRequest request;
  request.mode = mode;
  request.target_probs = rows;
  request.SetTree(tree);
  request.seed = seed;
  request.start_position = start;
  request.want_bonus = want_bonus;
  return VerifyTree(request, vocab);
}

// The tokens target-only decoding commits after `last` from `start` on (the mode's
// ChooseTargetToken at each position).
std::vector<int32_t> TargetOnly(VerifyMode mode, const MarkovModel& target, int32_t last,
                                uint64_t seed, int64_t start, int count) {
  std::vector<int32_t> tokens;
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<int32_t> token = ChooseTargetToken(mode, target.Next(last), seed, start + i);
    EXPECT_TRUE(token.ok()) << token.status();
    tokens.push_back(*token);
    last = *token;
  }
  return tokens;
}

// Checks an outcome's path: each accepted node a child of the one before, and
// committed = the path's tokens and at most one more.
void ExpectConsistentPath(const DraftTree& tree, const TreeVerifyOutcome& outcome) {
  int32_t parent = kTreeRoot;
  for (size_t d = 0; d < outcome.accepted_nodes.size(); ++d) {
    const int32_t node = outcome.accepted_nodes[d];
    ASSERT_EQ(tree.parents[node], parent);
    ASSERT_EQ(outcome.committed[d], tree.tokens[node]);
    parent = node;
  }
  ASSERT_LE(outcome.committed.size(), outcome.accepted_nodes.size() + 1);
}

// Greedy: the committed tokens are the argmax sequence, the accepted path is the
// deepest tree path along it, and the chain of that path verifies the same.
TEST(TreeVerifyTest, GreedyTreeEqualsTheGreedyChainAlongTheArgmaxPath) {
  std::mt19937_64 rng(FreshSeed());
  const int vocab = 6;
  for (int trial = 0; trial < 2000; ++trial) {
    const MarkovModel target = MarkovModel::Random(vocab, rng, 0.2);
    const int32_t last = static_cast<int32_t>(rng() % vocab);
    const std::vector<int32_t> greedy = TargetOnly(VerifyMode::kGreedy, target, last, 0, 0, 6);
    // A trie of random continuations, half the time with a prefix of the argmax path first.
    std::vector<std::vector<int32_t>> continuations;
    if (rng() % 2) continuations.emplace_back(greedy.begin(), greedy.begin() + 1 + rng() % 4);
    const DraftTree random = RandomTrie(vocab, 3, 4, 12, rng);
    for (int32_t node = 0; node < random.size(); ++node)
      continuations.push_back(random.PathTokens(node));
    const DraftTree tree = TrieFromContinuations(continuations, 1 + rng() % 12);
    const std::vector<float> rows = TreeRows(target, last, tree);
    absl::StatusOr<TreeVerifyOutcome> outcome =
        Verify(VerifyMode::kGreedy, tree, rows, vocab, rng(), 5);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ExpectConsistentPath(tree, *outcome);

    int32_t deepest = kTreeRoot;  // the deepest node whose path is a prefix of `greedy`
    for (size_t d = 0;; ++d) {
      int32_t next = kTreeRoot;
      for (int32_t c : tree.Children(deepest))
        if (tree.tokens[c] == greedy[d]) next = c;
      if (next == kTreeRoot) break;
      deepest = next;
    }
    const std::vector<int32_t> path =
        deepest == kTreeRoot ? std::vector<int32_t>() : tree.PathTo(deepest);
    ASSERT_EQ(outcome->accepted_nodes, path);
    const size_t accepted = path.size();
    ASSERT_EQ(outcome->committed,
              std::vector<int32_t>(greedy.begin(), greedy.begin() + accepted + 1));
    ASSERT_EQ(outcome->rejected, !tree.Children(deepest).empty());

    // The chain along the argmax path commits the same tokens.
    const DraftTree chain =
        DraftTree::Chain(deepest == kTreeRoot ? std::vector<int32_t>() : tree.PathTokens(deepest));
    const std::vector<float> chain_rows = TreeRows(target, last, chain);
    VerifyRequest chain_request;
    chain_request.mode = VerifyMode::kGreedy;
    chain_request.target_probs = chain_rows;
    chain_request.draft_tokens = chain.tokens;
    chain_request.start_position = 5;
    absl::StatusOr<VerifyOutcome> chain_outcome = VerifyBlock(chain_request, vocab);
    ASSERT_TRUE(chain_outcome.ok()) << chain_outcome.status();
    ASSERT_EQ(chain_outcome->committed, outcome->committed);
  }
}

// Greedy, coupled and point-mass rejection commit, token for token, what
// target-only decoding commits with the same seed, whatever the tree.
void ExpectTargetOnlyTokens(VerifyMode mode, bool one_hot_q) {
  std::mt19937_64 rng(FreshSeed());
  const int vocab = 5;
  int accepted_total = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const MarkovModel target = MarkovModel::Random(vocab, rng, 0.3);
    const int32_t last = static_cast<int32_t>(rng() % vocab);
    DraftTree tree = RandomTrie(vocab, 1 + rng() % 6, 4, 16, rng);
    if (one_hot_q) {
      for (int32_t token : tree.tokens) tree.q.push_back(SparseDistribution::OneHot(token));
    }
    const std::vector<float> rows = TreeRows(target, last, tree);
    const uint64_t seed = rng();
    const int64_t start = 1 + rng() % 100;
    absl::StatusOr<TreeVerifyOutcome> outcome = Verify(mode, tree, rows, vocab, seed, start);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ExpectConsistentPath(tree, *outcome);
    const std::vector<int32_t> expected =
        TargetOnly(mode, target, last, seed, start, static_cast<int>(outcome->committed.size()));
    ASSERT_EQ(outcome->committed, expected) << "trial " << trial;
    accepted_total += static_cast<int>(outcome->accepted_nodes.size());
  }
  EXPECT_GT(accepted_total, 500);  // the test saw real acceptance, not only corrections
}

TEST(TreeVerifyTest, CoupledTreeCommitsTheTargetOnlyTokens) {
  ExpectTargetOnlyTokens(VerifyMode::kCoupled, /*one_hot_q=*/false);
}

TEST(TreeVerifyTest, PointMassTreeWithoutQCommitsTheTargetOnlySample) {
  ExpectTargetOnlyTokens(VerifyMode::kRejection, /*one_hot_q=*/false);
}

TEST(TreeVerifyTest, PointMassTreeWithOneHotQCommitsTheTargetOnlySample) {
  ExpectTargetOnlyTokens(VerifyMode::kRejection, /*one_hot_q=*/true);
}

// A sampled chain (branching 1, a q per node) is verified bitwise as VerifyBlock
// verifies the same chain.
TEST(TreeVerifyTest, SampledChainCommitsWhatVerifyBlockCommits) {
  std::mt19937_64 rng(FreshSeed());
  const int vocab = 6;
  int rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    // q rows of >= 2 tokens: a one-hot q would make the group a point mass, whose
    // rule is exact too but draws differently from the chain's.
    const MarkovModel target = MarkovModel::Random(vocab, rng, 0.2);
    const MarkovModel draft = MarkovModel::Random(vocab, rng, 0.0);
    const int32_t last = static_cast<int32_t>(rng() % vocab);
    const uint64_t seed = rng();
    const int64_t start = rng() % 1000;
    const std::vector<int> branching(1 + rng() % 4, 1);
    const DraftTree tree =
        SampledTree(draft, last, branching, 2 + rng() % (vocab - 1), seed, start);
    ASSERT_TRUE(tree.IsChain());
    const std::vector<float> rows = TreeRows(target, last, tree);
    absl::StatusOr<TreeVerifyOutcome> outcome =
        Verify(VerifyMode::kRejection, tree, rows, vocab, seed, start);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    VerifyRequest chain;
    chain.mode = VerifyMode::kRejection;
    chain.target_probs = rows;
    chain.draft_tokens = tree.tokens;
    chain.draft_q_sparse = tree.q;
    chain.seed = seed;
    chain.start_position = start;
    absl::StatusOr<VerifyOutcome> expected = VerifyBlock(chain, vocab);
    ASSERT_TRUE(expected.ok()) << expected.status();
    ASSERT_EQ(outcome->committed, expected->committed) << "trial " << trial;
    ASSERT_EQ(static_cast<int32_t>(outcome->accepted_nodes.size()), expected->accepted);
    ASSERT_EQ(outcome->rejected, expected->rejected);
    rejected += outcome->rejected ? 1 : 0;
  }
  EXPECT_GT(rejected, 300);  // corrections (the residual path) were exercised
}

// A sampled tree's outcome is a path of the tree; a second sibling is accepted
// sometimes (the rule goes beyond the first child).
TEST(TreeVerifyTest, SampledTreeAcceptsLaterSiblings) {
  std::mt19937_64 rng(FreshSeed());
  const int vocab = 5;
  int later_sibling = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const MarkovModel target = MarkovModel::Random(vocab, rng, 0.2);
    const MarkovModel draft = MarkovModel::Random(vocab, rng, 0.2);
    const uint64_t seed = rng();
    const DraftTree tree = SampledTree(draft, 0, {3, 2}, vocab, seed, 9);
    ASSERT_TRUE(tree.Validate(vocab).ok());
    const std::vector<float> rows = TreeRows(target, 0, tree);
    absl::StatusOr<TreeVerifyOutcome> outcome =
        Verify(VerifyMode::kRejection, tree, rows, vocab, seed, 9);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    ExpectConsistentPath(tree, *outcome);
    if (!outcome->accepted_nodes.empty() && outcome->accepted_nodes[0] != 0) ++later_sibling;
  }
  EXPECT_GT(later_sibling, 100);
}

TEST(TreeVerifyTest, EmptyTreeCommitsTheBonusOnly) {
  const std::vector<float> rows = {0.1f, 0.7f, 0.2f};
  absl::StatusOr<TreeVerifyOutcome> outcome = Verify(VerifyMode::kGreedy, {}, rows, 3, 0, 4);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_TRUE(outcome->accepted_nodes.empty());
  EXPECT_EQ(outcome->committed, std::vector<int32_t>({1}));
  EXPECT_FALSE(outcome->rejected);
  outcome = Verify(VerifyMode::kGreedy, {}, rows, 3, 0, 4, /*want_bonus=*/false);
  ASSERT_TRUE(outcome.ok());
  EXPECT_TRUE(outcome->committed.empty());
}

// root -> 0 (token 1) -> 1 (token 2); root -> 2 (token 0). Greedy rows: root
// argmax 1, after node 0 argmax 2, after node 1 argmax 0; node 2's row is NaN and
// never read.
TEST(TreeVerifyTest, GreedyDescendsTheMatchingChildAndReadsOnlyItsRows) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const DraftTree tree{{1, 2, 0}, {-1, 0, -1}, {}};
  const std::vector<float> rows = {0.2f, 0.7f, 0.1f, 0.0f, 0.1f, 0.9f,
                                   0.8f, 0.1f, 0.1f, nan,  nan,  nan};
  absl::StatusOr<TreeVerifyOutcome> outcome = Verify(VerifyMode::kGreedy, tree, rows, 3, 0, 10);
  ASSERT_TRUE(outcome.ok()) << outcome.status();
  EXPECT_EQ(outcome->accepted_nodes, std::vector<int32_t>({0, 1}));
  EXPECT_EQ(outcome->committed, std::vector<int32_t>({1, 2, 0}));
  EXPECT_FALSE(outcome->rejected);
  outcome = Verify(VerifyMode::kGreedy, tree, rows, 3, 0, 10, /*want_bonus=*/false);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(outcome->committed, std::vector<int32_t>({1, 2}));
}

void ExpectError(const TreeVerifyRequest& request, int32_t vocab, const std::string& fragment) {
  absl::StatusOr<TreeVerifyOutcome> outcome = VerifyTree(request, vocab);
  ASSERT_FALSE(outcome.ok());
  EXPECT_EQ(outcome.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(outcome.status().message().find(fragment), std::string::npos) << outcome.status();
}

TEST(TreeVerifyTest, ErrorsNameTheValueAtFault) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const DraftTree tree{{1, 2}, {-1, 0}, {}};
  const std::vector<float> rows = {0.5f, 0.5f, 0.0f, 0.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.0f};
  TreeVerifyRequest request;
  request.mode = VerifyMode::kGreedy;
  request.target_probs = rows;
  request.SetTree(tree);
  request.start_position = 7;
  ExpectError(request, 0, "vocab must be >= 1, got 0");

  TreeVerifyRequest short_rows = request;
  short_rows.target_probs = absl::MakeConstSpan(rows).subspan(0, 6);
  ExpectError(short_rows, 3, "target_probs has 6 floats, need (nodes + 1) * vocab = 9");

  TreeVerifyRequest negative = request;
  negative.start_position = -1;
  ExpectError(negative, 3, "start_position must be >= 0, got -1");

  const DraftTree bad_parent{{1, 2}, {-1, 3}, {}};
  TreeVerifyRequest shape = request;
  shape.SetTree(bad_parent);
  ExpectError(shape, 3, "draft tree node 1: parent 3 outside [-1, 1)");

  // The root's row (argmax 0 on a tie) sends nothing further; a bad root row is named.
  std::vector<float> bad_root = rows;
  bad_root[1] = nan;
  TreeVerifyRequest root = request;
  root.target_probs = bad_root;
  ExpectError(root, 3, "target row 0 (after the root, position 7)");

  // Accept node 0 (argmax 1 of the root), then node 1's... row 1 is bad.
  std::vector<float> bad_row1 = {0.2f, 0.8f, 0.0f, -1.0f, 0.0f, 1.0f, 1.0f, 0.0f, 0.0f};
  TreeVerifyRequest row1 = request;
  row1.target_probs = bad_row1;
  ExpectError(row1, 3, "target row 1 (after node 0, position 8)");
}

TEST(TreeVerifyTest, RejectionModeRefusesSiblingsThatAreNeitherPointMassNorOneDraw) {
  const SparseDistribution shared{{0, 1, 2}, {0.5f, 0.3f, 0.2f}};
  const SparseDistribution other{{0, 1, 2}, {0.2f, 0.3f, 0.5f}};
  const std::vector<float> rows(4 * 3, 1.0f / 3);
  TreeVerifyRequest request;
  request.mode = VerifyMode::kRejection;
  request.target_probs = rows;
  const DraftTree mixed{{0, 1, 2}, {-1, -1, -1}, {shared, SparseDistribution::OneHot(1), shared}};
  request.SetTree(mixed);
  ExpectError(request, 3,
              "the children of the root carry q rows that are neither all point masses on their "
              "own tokens nor one shared row");
  const DraftTree differ{{1, 0, 2}, {-1, 0, 0}, {shared, shared, other}};
  request.SetTree(differ);
  ExpectError(request, 3, "the children of node 0 carry q rows");
  const DraftTree zero_q{{1, 2}, {-1, 0}, {shared, SparseDistribution::OneHot(0)}};
  request.SetTree(zero_q);
  ExpectError(request, 3, "draft tree node 1: token 2 has q = 0");
  const DraftTree too_few{{1, 2}, {-1, 0}, {shared}};
  request.SetTree(too_few);
  ExpectError(request, 3, "2 tokens but 1 q rows");
  // The same trees in greedy mode: q is not read.
  request.mode = VerifyMode::kGreedy;
  request.SetTree(too_few);
  request.target_probs = absl::MakeConstSpan(rows).subspan(0, 3 * 3);
  absl::StatusOr<TreeVerifyOutcome> greedy = VerifyTree(request, 3);
  EXPECT_TRUE(greedy.ok()) << greedy.status();
}

// A sampled group that drew the whole support of q: after all but the last are
// rejected the last has q = 1 on what is left, and the rule still ends in a token.
TEST(TreeVerifyTest, SampledGroupCoveringTheWholeSupport) {
  const SparseDistribution q{{0, 1}, {0.9f, 0.1f}};
  const DraftTree tree{{0, 1}, {-1, -1}, {q, q}};
  const std::vector<float> rows = {0.0f, 1.0f, 0.5f, 0.5f, 0.5f, 0.5f};
  for (uint64_t seed = 0; seed < 100; ++seed) {
    absl::StatusOr<TreeVerifyOutcome> outcome =
        Verify(VerifyMode::kRejection, tree, rows, 2, seed, 3, /*want_bonus=*/false);
    ASSERT_TRUE(outcome.ok()) << outcome.status();
    // p(0) = 0: token 0 is always rejected; p_2 = (0, 1), q_2 = (0, 1): token 1 accepted.
    EXPECT_EQ(outcome->accepted_nodes, std::vector<int32_t>({1}));
  }
}

}  // namespace
}  // namespace splitspec::spec

// Draft trees: shape, validation by message, tries of continuations, sibling sampling.
#include "runtime/spec/draft_tree.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/spec/sampling.h"
#include "tests/testing/chi_square.h"
#include "tests/unit/spec/spec_test_util.h"

namespace splitspec::spec {
namespace {

using testing::ChiSquareResult;
using testing::ChiSquareTest;
using testing::DistributionTestSeed;
using testing::PrintChiSquare;

void ExpectError(const DraftTree& tree, int32_t vocab, const std::string& fragment) {
  const absl::Status status = tree.Validate(vocab);
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << status;
  EXPECT_NE(status.message().find(fragment), std::string::npos) << status;
}

TEST(DraftTreeTest, ChainIsTheTreeWithBranchingOne) {
  const DraftTree chain = DraftTree::Chain({4, 5, 6});
  EXPECT_EQ(chain.parents, std::vector<int32_t>({-1, 0, 1}));
  EXPECT_TRUE(chain.IsChain());
  EXPECT_TRUE(chain.Validate(8).ok());
  EXPECT_EQ(chain.MaxDepth(), 3);
  EXPECT_EQ(chain.PathTokens(2), std::vector<int32_t>({4, 5, 6}));
  EXPECT_TRUE(DraftTree{}.IsChain());
  EXPECT_EQ(DraftTree{}.MaxDepth(), 0);
}

TEST(DraftTreeTest, ShapeQueries) {
  // root -> 0 (5) -> 1 (6) -> 2 (7); 0 -> 3 (9); root -> 4 (8)
  DraftTree tree;
  tree.tokens = {5, 6, 7, 9, 8};
  tree.parents = {-1, 0, 1, 0, -1};
  ASSERT_TRUE(tree.Validate(10).ok());
  EXPECT_FALSE(tree.IsChain());
  EXPECT_EQ(tree.Depths(), std::vector<int32_t>({1, 2, 3, 2, 1}));
  EXPECT_EQ(tree.MaxDepth(), 3);
  EXPECT_EQ(TreeDepth(tree.parents), 3);
  EXPECT_EQ(TreeDepth(std::vector<int32_t>({-1, -1, 1, -1})), 2);
  EXPECT_EQ(TreeDepth({}), 0);
  EXPECT_EQ(tree.Children(kTreeRoot), std::vector<int32_t>({0, 4}));
  EXPECT_EQ(tree.Children(0), std::vector<int32_t>({1, 3}));
  EXPECT_TRUE(tree.Children(2).empty());
  EXPECT_EQ(tree.PathTo(2), std::vector<int32_t>({0, 1, 2}));
  EXPECT_EQ(tree.PathTo(3), std::vector<int32_t>({0, 3}));
  EXPECT_EQ(tree.PathTokens(3), std::vector<int32_t>({5, 9}));
  EXPECT_EQ(TreeForwardParents(tree.parents), std::vector<int32_t>({-1, 0, 1, 2, 1, 0}));
}

TEST(DraftTreeTest, ValidateNamesTheNodeAtFault) {
  ExpectError({{1, 2}, {-1}, {}}, 4, "2 tokens but 1 parents");
  ExpectError({{1, 2}, {-1, 1}, {}}, 4, "node 1: parent 1 outside [-1, 1)");
  ExpectError({{1, 2}, {-1, -2}, {}}, 4, "node 1: parent -2 outside");
  // Node 2's parent 0 is not on the path to node 1 (a root child): not depth-first.
  ExpectError({{1, 2, 3}, {-1, -1, 0}, {}}, 4, "node 2: parent 0 is not on the path to node 1");
  ExpectError({{1, 4}, {-1, 0}, {}}, 4, "node 1: token 4 outside [0, 4)");
  ExpectError({{1, 2, 1}, {-1, 0, -1}, {}}, 4, "node 2: token 1 repeats a sibling's (parent -1)");
  ExpectError({{1, 2}, {-1, 0}, {SparseDistribution::OneHot(1)}}, 4, "2 tokens but 1 q rows");
  ExpectError({{1, 2}, {-1, 0}, {SparseDistribution::OneHot(1), SparseDistribution::OneHot(3)}}, 4,
              "node 1: token 2 has q = 0");
  ExpectError({{1}, {-1}, {SparseDistribution{{1, 1}, {0.5f, 0.5f}}}}, 4,
              "node 0: q: sparse distribution entry 1: token id 1 repeated");
  // The same token under different parents is fine.
  EXPECT_TRUE((DraftTree{{1, 1, 1}, {-1, 0, 1}, {}}).Validate(4).ok());
  EXPECT_TRUE(ValidateTreeParents(std::vector<int32_t>{-1, 0, 1, 1, 0, -1, 5}).ok());
}

TEST(DraftTreeTest, TrieMergesContinuationsBestFirst) {
  const std::vector<std::vector<int32_t>> continuations = {{5, 6, 7}, {5, 9}, {8}, {5, 6, 3}};
  const DraftTree trie = TrieFromContinuations(continuations, 16);
  ASSERT_TRUE(trie.Validate(10).ok());
  // Depth-first, children by first insertion: 5 -> 6 -> {7, 3}, 5 -> 9, then 8.
  EXPECT_EQ(trie.tokens, std::vector<int32_t>({5, 6, 7, 3, 9, 8}));
  EXPECT_EQ(trie.parents, std::vector<int32_t>({-1, 0, 1, 1, 0, -1}));
  EXPECT_TRUE(trie.q.empty());
  EXPECT_EQ(trie.PathTokens(2), continuations[0]);  // the first continuation is the first path
}

TEST(DraftTreeTest, TrieKeepsTheBudgetInPriorityOrder) {
  const std::vector<std::vector<int32_t>> continuations = {{1, 2, 3}, {1, 4, 5}, {6}};
  // 4 nodes: the first continuation whole, then 1 -> 4 (a shared prefix costs nothing).
  const DraftTree four = TrieFromContinuations(continuations, 4);
  EXPECT_EQ(four.tokens, std::vector<int32_t>({1, 2, 3, 4}));
  EXPECT_EQ(four.parents, std::vector<int32_t>({-1, 0, 1, 0}));
  const DraftTree two = TrieFromContinuations(continuations, 2);
  EXPECT_EQ(two.tokens, std::vector<int32_t>({1, 2}));
  EXPECT_TRUE(TrieFromContinuations(continuations, 0).empty());
  EXPECT_TRUE(TrieFromContinuations({}, 8).empty());
  // Identical continuations add nothing.
  EXPECT_EQ(TrieFromContinuations({{1, 2}, {1, 2}, {1}}, 8).size(), 2);
  // A single continuation is a chain.
  EXPECT_TRUE(TrieFromContinuations({{3, 3, 3}}, 8).IsChain());
}

TEST(DraftTreeTest, SiblingsAreDistinctAndTheFirstIsTheChainDraftersDraw) {
  const std::vector<float> probs = {0.1f, 0.4f, 0.0f, 0.3f, 0.2f};
  absl::StatusOr<SparseDistribution> q = TopQDistribution(probs, 5);
  ASSERT_TRUE(q.ok());
  for (uint64_t seed = 0; seed < 200; ++seed) {
    const std::vector<int32_t> drawn = SampleSiblings(*q, 8, seed, 17);
    ASSERT_EQ(drawn.size(), 4u);  // the support has 4 tokens
    for (size_t a = 0; a < drawn.size(); ++a) {
      for (size_t b = a + 1; b < drawn.size(); ++b) ASSERT_NE(drawn[a], drawn[b]);
      ASSERT_GT(q->ProbabilityOf(drawn[a]), 0.0f);
    }
    absl::StatusOr<DraftChoice> chain =
        ChooseDraftToken(VerifyMode::kRejection, probs, 5, seed, 17);
    ASSERT_TRUE(chain.ok());
    EXPECT_EQ(drawn[0], chain->token) << "seed " << seed;
  }
  EXPECT_TRUE(SampleSiblings(*q, 0, 1, 2).empty());
}

// The law of the first two draws is sampling without replacement:
// P(a, b) = q(a) q(b) / (1 - q(a)). Significance 1e-3.
TEST(DraftTreeTest, SiblingPairsHaveTheWithoutReplacementLaw) {
  const SparseDistribution q{{0, 1, 2, 3}, {0.5f, 0.25f, 0.15f, 0.1f}};
  std::vector<int64_t> counts(16);
  const uint64_t base_seed = DistributionTestSeed();
  for (int t = 0; t < 40000; ++t) {
    const std::vector<int32_t> drawn = SampleSiblings(q, 2, base_seed + t, 3);
    ++counts[drawn[0] * 4 + drawn[1]];
  }
  std::vector<double> expected(16, 0.0);
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      if (a != b) expected[a * 4 + b] = q.probs[a] * q.probs[b] / (1.0 - q.probs[a]);
    }
  }
  const ChiSquareResult r = ChiSquareTest(counts, expected);
  PrintChiSquare("sibling pairs without replacement", r);
  EXPECT_GT(r.p_value, 1e-3);
}

}  // namespace
}  // namespace splitspec::spec

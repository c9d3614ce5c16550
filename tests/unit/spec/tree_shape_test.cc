// The tree shape rule of the speculation policy (spec_policy.h, "Trees"), on
// synthetic per-rank acceptance estimates and target lines.
#include <algorithm>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/spec_policy.h"

namespace splitspec::spec {
namespace {

// A target line T(fed) = 10 ms (1 + slope (fed - 1)) and a model-free drafter
// (10 us a token: C = 1000).
SpecEstimates Line(double slope) {
  SpecEstimates e;
  e.target_step_seconds = 0.01;
  e.target_slope = slope;
  e.draft_seconds_per_token = 1e-5;
  return e;
}

// The shape is a well-formed tree whose ranks count its siblings, and its
// expected length is what ExpectedAcceptedNodes computes.
void ExpectWellFormed(const TreeShape& shape, const std::vector<double>& a) {
  ASSERT_TRUE(ValidateTreeParents(shape.parents).ok());
  ASSERT_EQ(shape.ranks.size(), shape.parents.size());
  DraftTree tree;
  tree.parents = shape.parents;
  tree.tokens.assign(shape.parents.size(), 0);
  for (int32_t v = kTreeRoot; v < tree.size(); ++v) {
    const std::vector<int32_t> children = tree.Children(v);
    for (size_t j = 0; j < children.size(); ++j) ASSERT_EQ(shape.ranks[children[j]], j + 1);
  }
  EXPECT_EQ(shape.depth(), tree.MaxDepth());
  EXPECT_NEAR(shape.expected_accepted, ExpectedAcceptedNodes(a, shape.parents, shape.ranks), 1e-12);
}

TEST(TreeShapeTest, ExpectedAcceptedNodesIsTheSumOfPathProducts) {
  const std::vector<double> a = {0.5, 0.3};
  // root -> 0 (rank 1) -> 1 (rank 1); root -> 2 (rank 2); 0 -> 3 (rank 3, beyond a).
  const std::vector<int32_t> parents = {-1, 0, 0, -1}, ranks = {1, 1, 3, 2};
  EXPECT_NEAR(ExpectedAcceptedNodes(a, parents, ranks), 0.5 + 0.25 + 0.0 + 0.3, 1e-12);
}

TEST(TreeShapeTest, DominantFirstRankGivesAChain) {
  const std::vector<double> a = {0.9, 0.03, 0.01};
  const TreeShape shape = ChooseTreeShape(Line(0.05), a, {});
  ExpectWellFormed(shape, a);
  EXPECT_TRUE(shape.IsChain());
  EXPECT_GE(shape.nodes(), 4);
}

TEST(TreeShapeTest, LikelySecondRankBranches) {
  const std::vector<double> a = {0.5, 0.4, 0.05};
  const TreeShape tree = ChooseTreeShape(Line(0.02), a, {});
  ExpectWellFormed(tree, a);
  EXPECT_FALSE(tree.IsChain());
  EXPECT_GE(tree.branching[0], 2);
  // It beats the best chain of the same drafter (rank 1 only) by its own model.
  const TreeShape chain = ChooseTreeShape(Line(0.02), std::vector<double>{0.5}, {});
  EXPECT_TRUE(chain.IsChain());
  EXPECT_GT(tree.rate, chain.rate);
  EXPECT_GT(tree.expected_accepted, chain.expected_accepted);
}

TEST(TreeShapeTest, SteepTargetLineKeepsTheTreeSmall) {
  const std::vector<double> a = {0.6, 0.3, 0.1};
  const TreeShape flat = ChooseTreeShape(Line(0.01), a, {});
  const TreeShape steep = ChooseTreeShape(Line(0.5), a, {});
  ExpectWellFormed(flat, a);
  ExpectWellFormed(steep, a);
  EXPECT_GE(flat.nodes(), 8);
  EXPECT_LE(steep.nodes(), 2);
  EXPECT_LT(steep.nodes(), flat.nodes());
}

TEST(TreeShapeTest, FreeVerificationFillsTheNodeBudget) {
  const std::vector<double> a = {0.5, 0.3};
  TreeShapeChoices choices;
  choices.max_nodes = 12;
  choices.max_depth = 4;
  const TreeShape shape = ChooseTreeShape(Line(0.0), a, choices);
  ExpectWellFormed(shape, a);
  EXPECT_EQ(shape.nodes(), 12);
  EXPECT_LE(shape.depth(), 4);
}

// A costly draft (one draft forward per level, C = 4) makes trees shallower.
TEST(TreeShapeTest, CostlyDraftLevelsMakeTheTreeShallower) {
  const std::vector<double> a = {0.7, 0.2, 0.05};
  SpecEstimates costly = Line(0.01);
  costly.draft_seconds_per_token = 0.0025;
  const TreeShape cheap_shape = ChooseTreeShape(Line(0.01), a, {});
  const TreeShape costly_shape = ChooseTreeShape(costly, a, {});
  ExpectWellFormed(costly_shape, a);
  EXPECT_LT(costly_shape.depth(), cheap_shape.depth());
}

// With only the first rank the rule is the policy's chain rule: the best k of
// PredictedRate(kSequential) at that acceptance, and the same rate.
TEST(TreeShapeTest, ChainRuleAgreesWithPredictedRate) {
  for (double alpha : {0.3, 0.6, 0.9}) {
    for (double slope : {0.0, 0.05, 0.3}) {
      SpecEstimates e = Line(slope);
      e.draft_seconds_per_token = 0.001;
      e.block_overhead_seconds = 0.0005;
      e.target_batch = 2;
      TreeShapeChoices choices;
      choices.max_depth = 8;
      const TreeShape shape = ChooseTreeShape(e, std::vector<double>{alpha}, choices);
      ASSERT_TRUE(shape.IsChain());
      double best = 0.0;
      int best_k = 0;
      for (int k = 1; k <= 8; ++k) {
        const double rate = PredictedRate(e, SpecMode::kSequential, k, alpha);
        if (rate > best * (1.0 + 1e-12)) {
          best = rate;
          best_k = k;
        }
      }
      EXPECT_EQ(shape.nodes(), best_k) << "alpha " << alpha << " slope " << slope;
      EXPECT_NEAR(shape.rate, best, 1e-9) << "alpha " << alpha << " slope " << slope;
    }
  }
}

// The best overlapped chain of the chain rule at acceptance `alpha` (k in 1..8).
double BestOverlappedChain(const SpecEstimates& e, double alpha) {
  double best = 0.0;
  for (int k = 1; k <= 8; ++k) best = std::max(best, PredictedRate(e, SpecMode::kOverlapped, k, alpha));
  return best;
}

// Rule 2, pipelined, by hand: root -> {0, 1} (ranks 1, 2 at a = {0.5, 0.5}: each is
// the target's token with probability 0.5), E = 1, first path node 0 (P = 0.5);
// V = 1 + 0.1 * 2, d = 1 / 1000, o = 2 steps: R = (1 + 1 - 0.5) / (1.2 + 0.5 (0.001 +
// 2)), above the sequential 2 / (1.2 + 0.001 + 2) and every chain.
TEST(TreeShapeTest, PipelinedRateIsTheOverlappedModelOverTheFirstPath) {
  SpecEstimates e = Line(0.1);
  e.block_overhead_seconds = 0.02;
  const std::vector<double> a = {0.5, 0.5};
  const TreeShape shape = ChooseTreeShape(e, a, {.max_nodes = 2, .max_depth = 1, .pipelined = true});
  ExpectWellFormed(shape, a);
  ASSERT_EQ(shape.nodes(), 2);
  EXPECT_TRUE(shape.pipelined);
  EXPECT_NEAR(shape.rate, 1.5 / (1.2 + 0.5 * 2.001), 1e-9);
  const TreeShape sequential = ChooseTreeShape(e, a, {.max_nodes = 2, .max_depth = 1});
  EXPECT_FALSE(sequential.pipelined);
  EXPECT_NEAR(sequential.rate, 2.0 / (1.2 + 0.001 + 2.0), 1e-9);
  // With a free round trip the forfeited bonus is all pipelining changes: sequential.
  const TreeShape free_trip =
      ChooseTreeShape(Line(0.1), a, {.max_nodes = 2, .max_depth = 1, .pipelined = true});
  EXPECT_FALSE(free_trip.pipelined);
  EXPECT_NEAR(free_trip.rate, 2.0 / (1.2 + 0.001), 1e-9);
}

// What a tree loses without the pipeline: with a round trip of two steps, a tree
// verified sequentially predicts less than the overlapped chain (the draft worker's
// chain alternative), so the chain must win; pipelined, the tree pays the trip on a
// miss only, as the chain does.
TEST(TreeShapeTest, AnUnpipelinedTreeLosesToTheOverlappedChainWhenTheRoundTripDominates) {
  SpecEstimates e = Line(0.05);
  e.block_overhead_seconds = 0.02;
  const std::vector<double> a = {0.8, 0.1};
  const double chain = BestOverlappedChain(e, a[0]);
  const TreeShape sequential = ChooseTreeShape(e, a, {});
  EXPECT_FALSE(sequential.pipelined);
  EXPECT_LT(sequential.rate, chain);
  const TreeShape pipelined = ChooseTreeShape(e, a, {.pipelined = true});
  EXPECT_TRUE(pipelined.pipelined);
  EXPECT_GT(pipelined.rate, sequential.rate);
}

TEST(TreeShapeTest, APipelinedTreeBeatsTheOverlappedChainWhenSecondCandidatesAreLikely) {
  SpecEstimates e = Line(0.02);
  e.block_overhead_seconds = 0.01;
  const std::vector<double> a = {0.6, 0.5, 0.4};
  const TreeShape tree = ChooseTreeShape(e, a, {.pipelined = true});
  ExpectWellFormed(tree, a);
  EXPECT_FALSE(tree.IsChain());
  EXPECT_TRUE(tree.pipelined);
  EXPECT_GT(tree.rate, BestOverlappedChain(e, a[0]) * (1.0 + kMargin));
}

TEST(TreeShapeTest, WithoutRankEstimatesTheAcceptanceBoundDrivesAChain) {
  SpecEstimates e = Line(0.05);
  e.accepted = 80;
  e.verified = 100;
  const TreeShape shape = ChooseTreeShape(e, {}, {});
  EXPECT_TRUE(shape.IsChain());
  EXPECT_NEAR(
      shape.expected_accepted,
      ExpectedAcceptedNodes(std::vector<double>{e.AlphaUpper()}, shape.parents, shape.ranks),
      1e-12);
  // An out-of-order estimate is clamped: rank 2 counts no more than rank 1.
  const TreeShape clamped = ChooseTreeShape(Line(0.0), std::vector<double>{0.2, 0.9}, {});
  EXPECT_NEAR(clamped.expected_accepted,
              ExpectedAcceptedNodes(std::vector<double>{0.2, 0.2}, clamped.parents, clamped.ranks),
              1e-12);
}

TEST(RankAcceptanceTest, RecordsEveryReachedNodeDownTheAcceptedPath) {
  // root -> 0 -> {1, 2}; root -> 3.
  const std::vector<int32_t> parents = {-1, 0, 0, -1};
  RankAcceptance second;
  second.RecordTree(parents, std::vector<int32_t>{3});  // rank 2 at the root; node 3 is a leaf
  EXPECT_EQ(second.offered, std::vector<double>({1.0, 1.0}));
  EXPECT_EQ(second.accepted, std::vector<double>({0.0, 1.0}));

  RankAcceptance deep;
  deep.RecordTree(parents, std::vector<int32_t>{0, 2});  // rank 1, then rank 2
  EXPECT_NEAR(deep.offered[0], 1.0 + kForget, 1e-12);
  EXPECT_NEAR(deep.accepted[0], kForget, 1e-12);
  EXPECT_NEAR(deep.accepted[1], 1.0, 1e-12);

  RankAcceptance rejected;
  rejected.RecordTree(parents, std::vector<int32_t>{0});  // rank 1, then none of node 0's
  EXPECT_NEAR(rejected.offered[1], 1.0 + kForget, 1e-12);
  EXPECT_NEAR(rejected.accepted[0] + rejected.accepted[1], kForget, 1e-12);

  RankAcceptance none;
  none.Record(0, 0);  // nothing offered
  none.Record(2, 3);  // out of range
  EXPECT_TRUE(none.Upper().empty());
  // Asked for at least two ranks: untried ranks get the bound of no evidence, the
  // same as rank 1 before any evidence (optimistic), and above a refuted rank.
  const std::vector<double> untried = none.Upper(2);
  ASSERT_EQ(untried.size(), 2u);
  EXPECT_GT(untried[1], 0.8);
  EXPECT_EQ(untried[0], untried[1]);
  EXPECT_EQ(second.Upper(1).size(), 2u);  // more offered ranks than asked: all of them
  RankAcceptance refuted;
  for (int i = 0; i < 20; ++i) refuted.Record(2, 1);
  EXPECT_LT(refuted.Upper(2)[1], 0.2);
  EXPECT_GT(refuted.Upper(2)[0], 0.9);
}

// Evidence in, shape out: a drafter whose second candidate is often the target's
// gets trees, one whose first candidate dominates gets chains.
TEST(RankAcceptanceTest, MeasuredRanksDriveTheShape) {
  const std::vector<int32_t> parents = {-1, -1};  // two candidates at the root
  // The accepted path: {node} for rank node + 1, {} for a rejection at the root.
  auto path = [](int node) {
    return node < 0 ? std::vector<int32_t>() : std::vector<int32_t>{node};
  };
  RankAcceptance often_second, rarely_second;
  for (int i = 0; i < 400; ++i) {
    often_second.RecordTree(parents, path(i % 10 < 5 ? 0 : i % 10 < 9 ? 1 : -1));
    rarely_second.RecordTree(parents, path(i % 50 == 0 ? 1 : i % 10 < 9 ? 0 : -1));
  }
  const std::vector<double> a = often_second.Upper();
  ASSERT_EQ(a.size(), 2u);
  EXPECT_NEAR(a[0], 0.5, 0.1);
  EXPECT_NEAR(a[1], 0.4, 0.1);
  const TreeShape tree = ChooseTreeShape(Line(0.02), a, {});
  EXPECT_FALSE(tree.IsChain());
  EXPECT_GE(tree.branching[0], 2);
  const TreeShape chain = ChooseTreeShape(Line(0.05), rarely_second.Upper(), {});
  EXPECT_TRUE(chain.IsChain());
}

// Rule 4 (CutTreeProposal): a proposed tree priced by its nodes' confidence classes.
// Class evidence as the lookup drafter measures it: class 0 ~13%, 1 ~45%, 2 ~70%, 3 ~90%
// (1,000 verified positions each, so the upper bounds sit near the means).
SpecEstimates ClassedLine(double slope) {
  SpecEstimates e = Line(slope);
  const double rates[kConfidenceClasses] = {0.13, 0.45, 0.70, 0.90};
  for (int c = 0; c < kConfidenceClasses; ++c) {
    e.class_verified[c] = 1000.0;
    e.class_accepted[c] = 1000.0 * rates[c];
  }
  e.accepted = 500.0;  // a mixed chain acceptance: what rank 1 would say without classes
  e.verified = 1000.0;
  return e;
}

std::vector<int32_t> ChainParents(int n) {
  std::vector<int32_t> parents(n);
  for (int i = 0; i < n; ++i) parents[i] = i - 1;
  return parents;
}

TEST(TreeCutTest, ALongConfidentMatchRunsDeeperThanFour) {
  const SpecEstimates e = ClassedLine(0.05);
  const std::vector<int8_t> classes(12, 3);
  const TreeCut cut = CutTreeProposal(e, {0.5, 0.3}, ChainParents(12), classes, {.max_depth = 12});
  EXPECT_TRUE(cut.chain);
  EXPECT_GT(cut.kept.size(), 4u);
  // The same chain priced by the mixed acceptance (no classes) stops earlier.
  const TreeCut unclassed = CutTreeProposal(e, {0.5, 0.3}, ChainParents(12), {}, {.max_depth = 12});
  EXPECT_LT(unclassed.kept.size(), cut.kept.size());
  EXPECT_GT(cut.rate, unclassed.rate);
}

TEST(TreeCutTest, AContestedOneTokenMatchIsNotWorthDrafting) {
  // Two contested 1-token candidates at the root (class 0), rank 2 rarely accepted.
  const SpecEstimates e = ClassedLine(0.3);
  const TreeCut cut = CutTreeProposal(e, {0.5, 0.05}, {-1, 0, -1, 2}, {0, 1, 0, 1}, {});
  // Below a plain step (R(off) = 1): the caller sends no block.
  EXPECT_LT(cut.rate, 1.0);
  // Confident, the same shape pays.
  const TreeCut confident = CutTreeProposal(e, {0.5, 0.05}, {-1, 0, -1, 2}, {3, 3, 3, 3}, {});
  EXPECT_GT(confident.rate, 1.0);
}

TEST(TreeCutTest, SecondCandidatesFollowTheRankEvidence) {
  const SpecEstimates e = ClassedLine(0.02);
  // Root: node 0 (class 1, ~45%) -> node 1; node 2 the second candidate -> node 3.
  const std::vector<int32_t> parents = {-1, 0, -1, 2};
  const std::vector<int8_t> classes = {1, 2, 1, 2};
  const TreeCut branching = CutTreeProposal(e, {0.5, 0.4}, parents, classes, {});
  EXPECT_FALSE(branching.chain);
  EXPECT_NE(std::find(branching.kept.begin(), branching.kept.end(), 2), branching.kept.end());
  const TreeCut chain = CutTreeProposal(e, {0.5, 0.001}, parents, classes, {});
  EXPECT_EQ(std::find(chain.kept.begin(), chain.kept.end(), 2), chain.kept.end());
}

TEST(TreeCutTest, ASiblingGetsAtMostWhatTheOnesBeforeItLeave) {
  SpecEstimates e = Line(0.0);  // free verification: every node with value is kept
  for (int c = 0; c < kConfidenceClasses; ++c) {
    e.class_verified[c] = 1e6;
    e.class_accepted[c] = 0.9e6;  // ~90% + a hair of the bound
  }
  const double first = e.ClassUpper(3);
  const TreeCut cut = CutTreeProposal(e, {0.5, 0.5}, {-1, -1}, {3, 3}, {});
  ASSERT_EQ(cut.kept.size(), 2u);
  EXPECT_NEAR(cut.expected_accepted, first + (1.0 - first), 1e-9);
}

TEST(TreeCutTest, KeptNodesFormASubTreeWithinTheLimits) {
  const SpecEstimates e = ClassedLine(0.01);
  // 0 -> 1 -> 2 -> 3; 0 -> 4; root -> 5 -> 6; root -> 7.
  const std::vector<int32_t> parents = {-1, 0, 1, 2, 0, -1, 5, -1};
  const std::vector<int8_t> classes = {2, 3, 3, 3, 2, 1, 2, 1};
  for (const int max_nodes : {1, 3, 5, 8}) {
    for (const int max_depth : {1, 2, 4}) {
      const TreeCut cut = CutTreeProposal(e, {0.6, 0.4, 0.3}, parents, classes,
                                          {.max_nodes = max_nodes, .max_depth = max_depth});
      ASSERT_FALSE(cut.kept.empty());
      EXPECT_LE(static_cast<int>(cut.kept.size()), max_nodes);
      EXPECT_TRUE(std::is_sorted(cut.kept.begin(), cut.kept.end()));
      for (const int32_t i : cut.kept) {
        const int32_t parent = parents[i];
        if (parent >= 0) {
          EXPECT_NE(std::find(cut.kept.begin(), cut.kept.end(), parent), cut.kept.end());
        }
        int depth = 1;
        for (int32_t v = parent; v >= 0; v = parents[v]) ++depth;
        EXPECT_LE(depth, max_depth);
      }
    }
  }
}

// A chain is a tree: the cut is never priced below the best prefix of its first path,
// sequential or pipelined, whatever the estimates.
TEST(TreeCutTest, NeverPricedBelowTheFirstPathsChain) {
  const std::vector<int32_t> parents = {-1, 0, 1, 0, -1, 4, -1};
  const std::vector<int8_t> classes = {1, 2, 3, 1, 0, 2, 0};
  for (const double slope : {0.0, 0.02, 0.1, 0.5}) {
    for (const double overhead : {0.0, 0.01, 0.05}) {
      for (const bool pipelined : {false, true}) {
        SpecEstimates e = ClassedLine(slope);
        e.block_overhead_seconds = overhead;
        const TreeShapeChoices choices{.pipelined = pipelined};
        const TreeCut tree = CutTreeProposal(e, {0.5, 0.3, 0.1}, parents, classes, choices);
        const TreeCut chain =
            CutTreeProposal(e, {0.5, 0.3, 0.1}, ChainParents(3), {1, 2, 3}, choices);
        EXPECT_GE(tree.rate, chain.rate * (1.0 - 1e-12))
            << "slope " << slope << " overhead " << overhead << " pipelined " << pipelined;
      }
    }
  }
}

}  // namespace
}  // namespace splitspec::spec

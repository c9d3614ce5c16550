#include "runtime/spec/tree_expansion.h"

#include <numeric>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::spec {
namespace {

int Sum(const std::vector<int>& v) { return std::accumulate(v.begin(), v.end(), 0); }

// At the root, a confident first candidate keeps the budget for the first path
// (its nodes are worth more than any alternative); a flat ranking branches.
TEST(PlanLevelTest, ConfidentDraftsAChainFlatDraftBranches) {
  const std::vector<FrontierNode> confident = {{1.0, {0.97, 0.02, 0.01}, true}};
  EXPECT_EQ(PlanLevel(confident, 1, 4, 4), std::vector<int>({1}));
  const std::vector<FrontierNode> flat = {{1.0, {0.3, 0.3, 0.2, 0.2}, true}};
  // Chain values .3, .09, .027, .0081 (4 nodes); then .3 (rank 2), .2, .2 and the
  // projected .09s beat the first path's tail: the root gets all 4 ranks.
  EXPECT_EQ(PlanLevel(flat, 1, 4, 8), std::vector<int>({4}));
}

// The first path goes down to max_depth however poor, and its reservation is never
// spent on this level: with 3 nodes left and 3 levels to go, the level takes one.
TEST(PlanLevelTest, FirstPathIsReservedDownToMaxDepth) {
  const std::vector<FrontierNode> frontier = {{0.5, {0.1, 0.1}, true},
                                              {0.9, {0.9, 0.1}, false}};
  EXPECT_EQ(PlanLevel(frontier, 2, 4, 3), std::vector<int>({1, 0}));
  // With spare nodes the valuable non-first-path node is expanded (0.81 > 0.05).
  const std::vector<int> more = PlanLevel(frontier, 2, 4, 5);
  EXPECT_EQ(more[0], 1);
  EXPECT_GE(more[1], 1);
  EXPECT_LE(Sum(more), 5);
}

// Counts never exceed the ranked candidates or the budget; no budget, no children.
TEST(PlanLevelTest, RespectsBudgetAndCandidates) {
  const std::vector<FrontierNode> frontier = {{0.4, {0.5, 0.5}, false},
                                              {0.6, {0.34, 0.33, 0.33}, true},
                                              {0.3, {1.0}, false}};
  for (int left = 0; left <= 12; ++left) {
    const std::vector<int> children = PlanLevel(frontier, 3, 3, left);
    ASSERT_EQ(children.size(), 3u);
    EXPECT_LE(Sum(children), left) << left;
    EXPECT_LE(children[0], 2);
    EXPECT_LE(children[1], 3);
    EXPECT_LE(children[2], 1);
    if (left >= 1) {
      EXPECT_GE(children[1], 1) << left;
    }
    if (left >= 6) {
      EXPECT_EQ(Sum(children), 6) << left;  // every candidate (last level)
    }
  }
  EXPECT_EQ(PlanLevel(frontier, 3, 3, 0), std::vector<int>({0, 0, 0}));
}

}  // namespace
}  // namespace splitspec::spec

#include "runtime/spec/lookup_drafter.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::spec {
namespace {

using Tokens = std::vector<int32_t>;

TEST(LookupProposalTest, FindsTheLongestMatchNotTheLatest) {
  const LookupDrafterConfig config;
  // The suffix (1 2 3) occurred at 0..2 followed by 9 5; the later (2 3) at 5..6
  // is followed by 7, but its match is shorter.
  const Tokens context = {1, 2, 3, 9, 5, 2, 3, 7, 0, 1, 2, 3};
  EXPECT_EQ(LookupProposal(context, 2, config), Tokens({9, 5}));
  LookupIndex index;
  index.Extend(context);
  const LookupMatch match = index.Find(config);
  EXPECT_EQ(match.length, 3);
  EXPECT_EQ(match.continuation, 3);
}

TEST(LookupProposalTest, AmongEqualMatchesTheLatestWins) {
  const Tokens context = {4, 5, 1, 4, 6, 2, 4};
  EXPECT_EQ(LookupProposal(context, 1, LookupDrafterConfig{}), Tokens({6}));
}

TEST(LookupProposalTest, ProposesNothingWithoutAMatch) {
  const LookupDrafterConfig config;
  EXPECT_TRUE(LookupProposal(Tokens{1, 2, 3, 4}, 4, config).empty());
  EXPECT_TRUE(LookupProposal(Tokens{}, 4, config).empty());
  EXPECT_TRUE(LookupProposal(Tokens{7}, 4, config).empty());
  // A match of 1 token is below min_match 2.
  LookupDrafterConfig strict;
  strict.min_match = 2;
  EXPECT_TRUE(LookupProposal(Tokens{8, 1, 2, 9, 1}, 4, strict).empty());
  EXPECT_EQ(LookupProposal(Tokens{8, 1, 2, 9, 1}, 4, config), Tokens({2, 9}));
  // k = 0 proposes nothing even with a match.
  EXPECT_TRUE(LookupProposal(Tokens{8, 1, 2, 9, 1}, 0, config).empty());
}

TEST(LookupProposalTest, ProposalGrowsWithTheMatch) {
  const LookupDrafterConfig config;  // tokens_per_matched 2
  const Tokens passage = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23};
  auto repeat = [&](int matched) {
    Tokens context = passage;
    context.push_back(99);
    context.insert(context.end(), passage.begin(), passage.begin() + matched);
    return LookupProposal(context, 16, config);
  };
  // Matching the passage's first 1, 2, 3 tokens proposes 2, 4, 6 of what followed.
  EXPECT_EQ(repeat(1), Tokens({11, 12}));
  EXPECT_EQ(repeat(2), Tokens({12, 13, 14, 15}));
  EXPECT_EQ(repeat(3), Tokens({13, 14, 15, 16, 17, 18}));
  EXPECT_LT(repeat(1).size(), repeat(3).size());
  // The end of the sequence bounds it too: 15 tokens follow the match, k is 16.
  EXPECT_EQ(repeat(12), Tokens({22, 23, 99, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21}));
}

TEST(LookupIndexTest, TruncateForgetsLaterPositions) {
  LookupIndex index;
  const Tokens context = {5, 6, 7, 5, 6, 8, 5, 6};
  index.Extend(context);
  EXPECT_EQ(index.Find(LookupDrafterConfig{}).continuation, 5);  // (5 6) at 3..4, followed by 8
  index.Truncate(5);  // {5, 6, 7, 5, 6}: (5 6) at 0..1, followed by 7
  EXPECT_EQ(index.size(), 5);
  EXPECT_EQ(index.Find(LookupDrafterConfig{}).continuation, 2);
  index.Truncate(1);
  EXPECT_EQ(index.Find(LookupDrafterConfig{}).length, 0);
}

TEST(LookupDrafterTest, ProposesFromPromptAndOutputAndFollowsTruncation) {
  LookupDrafter drafter(LookupDrafterConfig{});
  const Tokens prompt = {1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(drafter.Start("r", prompt).ok());
  EXPECT_EQ(drafter.Start("r", prompt).code(), absl::StatusCode::kAlreadyExists);
  Tokens context = prompt;
  context.insert(context.end(), {9, 1, 2});  // the output repeats the prompt's start
  std::vector<DraftRequest> batch(1);
  batch[0].request_id = "r";
  batch[0].context = context;
  batch[0].k = 3;
  batch[0].mode = VerifyMode::kRejection;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
  EXPECT_EQ(batch[0].tokens, Tokens({3, 4, 5}));
  ASSERT_EQ(batch[0].q.size(), 3u);
  // Holds context + 3 proposed: 12 tokens.
  EXPECT_EQ(drafter.Truncate("r", 13).code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(drafter.Truncate("r", 7).ok());
  const Tokens corrected = {1, 2, 3, 4, 5, 6, 9, 4};  // after the truncation: (4) at 3 -> 5 6
  batch[0].context = corrected;
  batch[0].mode = VerifyMode::kGreedy;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_EQ(batch[0].tokens, Tokens({5, 6}));
  EXPECT_TRUE(batch[0].q.empty());
  drafter.Release("r");
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_EQ(batch[0].status.code(), absl::StatusCode::kFailedPrecondition);
}

TEST(LookupConfidenceClassTest, GrowsWithTheMatchAndDropsWhenContested) {
  EXPECT_EQ(LookupConfidenceClass(1, true), 0);
  EXPECT_EQ(LookupConfidenceClass(1, false), 1);
  EXPECT_EQ(LookupConfidenceClass(2, true), 1);
  EXPECT_EQ(LookupConfidenceClass(2, false), 2);
  EXPECT_EQ(LookupConfidenceClass(5, true), 2);
  EXPECT_EQ(LookupConfidenceClass(6, false), 3);
  EXPECT_EQ(LookupConfidenceClass(32, true), 3);
}

TEST(LookupDrafterTest, ReportsAConfidenceClassPerDraftedPosition) {
  LookupDrafter drafter(LookupDrafterConfig{});
  // 7 8 occurs twice, continuing 1 and 2: the last 8 matches one token and is contested.
  const Tokens prompt = {7, 8, 1, 5, 7, 8, 2, 6, 8};
  ASSERT_TRUE(drafter.Start("r", prompt).ok());
  std::vector<DraftRequest> batch(1);
  batch[0].request_id = "r";
  batch[0].context = prompt;
  batch[0].k = 2;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
  EXPECT_EQ(batch[0].tokens, Tokens({2, 6}));  // the latest among equal matches
  EXPECT_EQ(batch[0].confidence, std::vector<int8_t>({0, 2}));  // contested; then 2 tokens
  // A long uncontested match: every position in the top class.
  const Tokens repeated = {1, 2, 3, 4, 5, 6, 7, 8, 9, 1, 2, 3, 4, 5, 6};
  ASSERT_TRUE(drafter.Start("s", repeated).ok());
  batch[0].request_id = "s";
  batch[0].context = repeated;
  batch[0].k = 3;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_EQ(batch[0].tokens, Tokens({7, 8, 9}));
  EXPECT_EQ(batch[0].confidence, std::vector<int8_t>({3, 3, 3}));
  // Asked for a tree, one match gives the chain with the same classes.
  ASSERT_TRUE(drafter.Truncate("s", static_cast<int64_t>(repeated.size())).ok());
  batch[0].tree_nodes = 4;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_EQ(batch[0].tokens, Tokens({7, 8, 9}));
  EXPECT_TRUE(batch[0].parents.empty());
  EXPECT_EQ(batch[0].confidence, std::vector<int8_t>({3, 3, 3}));
  // A tree: per node, the class of its position in the chain of its match. Both
  // 1-token matches of "8" are contested at the root; their second tokens continue
  // 2-token matches.
  ASSERT_TRUE(drafter.Truncate("r", static_cast<int64_t>(prompt.size())).ok());
  batch[0].request_id = "r";
  batch[0].context = prompt;
  batch[0].k = 2;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
  EXPECT_EQ(batch[0].tokens, Tokens({2, 6, 1, 5}));
  EXPECT_EQ(batch[0].parents, std::vector<int32_t>({-1, 0, -1, 2}));
  EXPECT_EQ(batch[0].confidence, std::vector<int8_t>({0, 2, 0, 2}));
}

// Each node's class comes from the longest match through it: a node only a shorter
// match reaches gets that match's class.
TEST(LookupTreeProposalTest, ReportsEachNodesClassFromItsLongestMatch) {
  const LookupDrafterConfig config;
  // Suffix (11 12 13 14 15 3): it occurs at 1..6 continuing 4 6 6 (match 6); (3) at
  // 10 continues 4 5 (match 1: tokens_per_matched caps it at 2 tokens).
  const Tokens context = {0, 11, 12, 13, 14, 15, 3, 4, 6, 6, 3, 4, 5, 11, 12, 13, 14, 15, 3};
  std::vector<int8_t> classes;
  const DraftTree tree = LookupTreeProposal(context, 3, 8, config, &classes);
  EXPECT_EQ(tree.tokens, Tokens({4, 6, 6, 5}));
  EXPECT_EQ(tree.parents, std::vector<int32_t>({-1, 0, 1, 0}));
  // 4 6 6: the 6-token match (uncontested: both continue with 4), the top class; 5:
  // reached by the 1-token match only, its second position.
  EXPECT_EQ(classes, std::vector<int8_t>({3, 3, 3, LookupConfidenceClass(2, false)}));
  EXPECT_EQ(classes[3], 2);
}

// A B C X Y A B C Z W A B C: the suffix (A B C) occurred twice, followed by
// Z W A (latest) and X Y A; with the equal match lengths the latest is first.
TEST(LookupTreeProposalTest, MergesTheContinuationsOfEveryMatch) {
  const LookupDrafterConfig config;
  const Tokens context = {1, 2, 3, 4, 5, 1, 2, 3, 6, 7, 1, 2, 3};
  const DraftTree tree = LookupTreeProposal(context, 3, 8, config);
  ASSERT_TRUE(tree.Validate(10).ok());
  EXPECT_EQ(tree.tokens, Tokens({6, 7, 1, 4, 5, 1}));
  EXPECT_EQ(tree.parents, std::vector<int32_t>({-1, 0, 1, -1, 3, 4}));
  EXPECT_EQ(tree.PathTokens(tree.FirstPathLength() - 1), LookupProposal(context, 3, config));
  // The budget cuts the later continuation first.
  EXPECT_EQ(LookupTreeProposal(context, 3, 4, config).tokens, Tokens({6, 7, 1, 4}));
  // Depth is bounded by k.
  EXPECT_EQ(LookupTreeProposal(context, 1, 8, config).tokens, Tokens({6, 4}));
}

// Longer matches come first; continuations that share a prefix share nodes.
TEST(LookupTreeProposalTest, LongestMatchFirstAndSharedPrefixes) {
  const LookupDrafterConfig config;
  // (8 3) at 1..2 -> 4 6 (match 2); (3) at 5 -> 4 5 (match 1, later); suffix (8 3).
  const Tokens context = {0, 8, 3, 4, 6, 3, 4, 5, 8, 3};
  const DraftTree tree = LookupTreeProposal(context, 2, 8, config);
  EXPECT_EQ(tree.tokens, Tokens({4, 6, 5}));
  EXPECT_EQ(tree.parents, std::vector<int32_t>({-1, 0, 0}));
  // The match of length 1 proposes tokens_per_matched * 1 = 2 tokens, the other 4.
  EXPECT_EQ(LookupTreeProposal(context, 4, 8, config).tokens, Tokens({4, 6, 3, 4, 5}));
  // Nothing matches: the empty tree.
  EXPECT_TRUE(LookupTreeProposal(Tokens{1, 2, 3}, 4, 8, config).empty());
}

TEST(LookupDrafterTest, ProposesATreeWithinTheNodeBudget) {
  LookupDrafter drafter(LookupDrafterConfig{});
  const Tokens context = {1, 2, 3, 4, 5, 1, 2, 3, 6, 7, 1, 2, 3};
  ASSERT_TRUE(drafter.Start("r", Tokens(context.begin(), context.begin() + 5)).ok());
  std::vector<DraftRequest> batch(1);
  batch[0].request_id = "r";
  batch[0].context = context;
  batch[0].k = 3;
  batch[0].tree_nodes = 5;
  batch[0].mode = VerifyMode::kRejection;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
  EXPECT_EQ(batch[0].tokens, Tokens({6, 7, 1, 4, 5}));
  EXPECT_EQ(batch[0].parents, std::vector<int32_t>({-1, 0, 1, -1, 3}));
  ASSERT_EQ(batch[0].q.size(), 5u);
  EXPECT_EQ(batch[0].q[3].token_ids, Tokens({4}));  // point-mass candidates
  // It holds the context and the first path (the chain it would have proposed).
  const absl::Status too_long = drafter.Truncate("r", 17);
  EXPECT_NE(too_long.message().find("it holds 16"), std::string::npos) << too_long;

  // A tree without branches is proposed as a chain (no parents); tree_nodes 0 is the chain.
  ASSERT_TRUE(drafter.Truncate("r", 13).ok());
  batch[0].tree_nodes = 2;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_EQ(batch[0].tokens, Tokens({6, 7}));
  EXPECT_TRUE(batch[0].parents.empty());
  ASSERT_TRUE(drafter.Truncate("r", 13).ok());
  batch[0].tree_nodes = 0;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_EQ(batch[0].tokens, Tokens({6, 7, 1}));
  EXPECT_TRUE(batch[0].parents.empty());

  ASSERT_TRUE(drafter.Truncate("r", 13).ok());
  batch[0].tree_nodes = -1;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_NE(batch[0].status.message().find("tree_nodes = -1"), std::string::npos)
      << batch[0].status;
}

TEST(LookupDrafterConfigTest, ValidationNamesTheField) {
  LookupDrafterConfig config;
  config.max_match = 0;
  EXPECT_NE(config.Validate().message().find("max_match"), std::string::npos);
  config = LookupDrafterConfig{};
  config.tokens_per_matched = 0;
  EXPECT_NE(config.Validate().message().find("tokens_per_matched"), std::string::npos);
  EXPECT_TRUE(LookupDrafterConfig{}.Validate().ok());
}

}  // namespace
}  // namespace splitspec::spec

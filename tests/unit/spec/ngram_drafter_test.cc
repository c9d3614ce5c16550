#include "runtime/spec/ngram_drafter.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/spec/lookup_drafter.h"

namespace splitspec::spec {
namespace {

TEST(NgramLookupTest, ProposesTheContinuationOfTheLatestLongestMatch) {
  const NgramDrafterConfig config;  // n = 3..1
  // Suffix (7, 8, 9) occurred at index 1 followed by 4 5 6, and the shorter (8, 9)
  // later at index 8 followed by 1; the longest suffix wins.
  const std::vector<int32_t> context = {0, 7, 8, 9, 4, 5, 6, 2, 8, 9, 1, 3, 7, 8, 9};
  EXPECT_EQ(NgramLookup(context, 3, config), std::vector<int32_t>({4, 5, 6}));
  EXPECT_EQ(NgramLookup(context, 2, config), std::vector<int32_t>({4, 5}));
  // Among equal-length matches the latest one is used.
  const std::vector<int32_t> twice = {5, 1, 5, 2, 5};
  EXPECT_EQ(NgramLookup(twice, 1, NgramDrafterConfig{1, 1, 100}), std::vector<int32_t>({2}));
}

TEST(NgramLookupTest, ContinuationIsCutAtTheEndOfTheContext) {
  const std::vector<int32_t> context = {3, 4, 3, 4};
  // (3, 4) at index 0 is followed by 3, 4 (the suffix itself): at most 2 tokens.
  EXPECT_EQ(NgramLookup(context, 5, NgramDrafterConfig{}), std::vector<int32_t>({3, 4}));
}

TEST(NgramLookupTest, NothingWithoutAMatchOrOutsideTheWindow) {
  EXPECT_TRUE(NgramLookup(std::vector<int32_t>{1, 2, 3, 4}, 3, NgramDrafterConfig{}).empty());
  EXPECT_TRUE(NgramLookup(std::vector<int32_t>{}, 3, NgramDrafterConfig{}).empty());
  const std::vector<int32_t> far = {9, 1, 0, 0, 0, 0, 0, 0, 9};
  EXPECT_EQ(NgramLookup(far, 1, NgramDrafterConfig{1, 1, 100}), std::vector<int32_t>({1}));
  EXPECT_TRUE(NgramLookup(far, 1, NgramDrafterConfig{1, 1, 5}).empty());
  // min_n = 2: a single repeated token is not enough.
  EXPECT_TRUE(NgramLookup(std::vector<int32_t>{9, 1, 9}, 1, NgramDrafterConfig{2, 3, 100}).empty());
}

// Suffix (3 4): the 2-gram matched at 7 (-> 6 7 2) and at 3 (-> 5 8 3); the
// 1-gram (4) adds the match at 0 (-> 9 1 3) and the same two again (merged).
TEST(NgramTreeProposalTest, MergesDistinctContinuationsLongestNFirst) {
  const NgramDrafterConfig config;
  const std::vector<int32_t> context = {4, 9, 1, 3, 4, 5, 8, 3, 4, 6, 7, 2, 3, 4};
  const std::vector<std::vector<int32_t>> continuations =
      NgramContinuations(context, 3, 10, config);
  EXPECT_EQ(continuations, (std::vector<std::vector<int32_t>>{{6, 7, 2}, {5, 8, 3}, {9, 1, 3}}));
  EXPECT_EQ(continuations[0], NgramLookup(context, 3, config));
  const DraftTree tree = NgramTreeProposal(context, 3, 16, config);
  ASSERT_TRUE(tree.Validate(10).ok());
  EXPECT_EQ(tree.tokens, std::vector<int32_t>({6, 7, 2, 5, 8, 3, 9, 1, 3}));
  EXPECT_EQ(tree.parents, std::vector<int32_t>({-1, 0, 1, -1, 3, 4, -1, 6, 7}));
  EXPECT_EQ(NgramTreeProposal(context, 3, 7, config).tokens,
            std::vector<int32_t>({6, 7, 2, 5, 8, 3, 9}));
  // Depth 1: three distinct first tokens.
  EXPECT_EQ(NgramTreeProposal(context, 1, 16, config).tokens, std::vector<int32_t>({6, 5, 9}));
  EXPECT_TRUE(NgramTreeProposal(context, 0, 16, config).empty());
  EXPECT_EQ(NgramContinuations(context, 3, 1, config).size(), 1u);
}

// Classes (LookupConfidenceClass): the suffix length n continued, counting the
// drafts before; the first position is contested when another match of the last
// min_n tokens continues differently.
TEST(NgramLookupTest, ReportsTheLookupDrafterConfidenceClasses) {
  const NgramDrafterConfig unigrams{1, 1, 100};
  std::vector<int8_t> classes;
  // 5 was followed by 1 and later by 2: the latest (2) is proposed, contested.
  EXPECT_EQ(NgramLookup(std::vector<int32_t>{5, 1, 5, 2, 5}, 1, unigrams, &classes),
            std::vector<int32_t>({2}));
  EXPECT_EQ(classes, std::vector<int8_t>({LookupConfidenceClass(1, true)}));
  // Always followed by 1: uncontested; the second draft continues a 2-token match.
  EXPECT_EQ(NgramLookup(std::vector<int32_t>{5, 1, 5, 1, 5}, 2, unigrams, &classes),
            std::vector<int32_t>({1, 5}));
  EXPECT_EQ(classes,
            std::vector<int8_t>({LookupConfidenceClass(1, false), LookupConfidenceClass(2, false)}));
  // The 3-gram (7 8 9) continues as 4 5 6; (9) was also followed by 1 (contested).
  const std::vector<int32_t> context = {0, 7, 8, 9, 4, 5, 6, 2, 8, 9, 1, 3, 7, 8, 9};
  EXPECT_EQ(NgramLookup(context, 3, NgramDrafterConfig{}, &classes),
            std::vector<int32_t>({4, 5, 6}));
  EXPECT_EQ(classes, std::vector<int8_t>({LookupConfidenceClass(3, true),
                                          LookupConfidenceClass(4, false),
                                          LookupConfidenceClass(5, false)}));
  EXPECT_TRUE(NgramLookup(std::vector<int32_t>{1, 2, 3}, 3, unigrams, &classes).empty());
  EXPECT_TRUE(classes.empty());
}

// Each node of the tree: the class of its position in the chain of the first
// continuation through it (see MergesDistinctContinuationsLongestNFirst).
TEST(NgramTreeProposalTest, ReportsEachNodesClass) {
  const std::vector<int32_t> context = {4, 9, 1, 3, 4, 5, 8, 3, 4, 6, 7, 2, 3, 4};
  std::vector<int8_t> classes;
  const DraftTree tree = NgramTreeProposal(context, 3, 16, NgramDrafterConfig{}, &classes);
  ASSERT_EQ(tree.tokens, std::vector<int32_t>({6, 7, 2, 5, 8, 3, 9, 1, 3}));
  const int8_t first_of_bigram = LookupConfidenceClass(2, true);
  const int8_t first_of_unigram = LookupConfidenceClass(1, true);
  EXPECT_EQ(classes, std::vector<int8_t>({first_of_bigram, LookupConfidenceClass(3, false),
                                          LookupConfidenceClass(4, false), first_of_bigram,
                                          LookupConfidenceClass(3, false),
                                          LookupConfidenceClass(4, false), first_of_unigram,
                                          LookupConfidenceClass(2, false),
                                          LookupConfidenceClass(3, false)}));
}

TEST(NgramDrafterTest, ProposesATreeAndHoldsItsFirstPath) {
  NgramDrafter drafter(NgramDrafterConfig{});
  const std::vector<int32_t> context = {4, 9, 1, 3, 4, 5, 8, 3, 4, 6, 7, 2, 3, 4};
  ASSERT_TRUE(drafter.Start("r", context).ok());
  std::vector<DraftRequest> batch(1);
  batch[0].request_id = "r";
  batch[0].context = context;
  batch[0].k = 2;
  batch[0].tree_nodes = 4;
  batch[0].mode = VerifyMode::kRejection;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
  EXPECT_EQ(batch[0].tokens, std::vector<int32_t>({6, 7, 5, 8}));
  EXPECT_EQ(batch[0].parents, std::vector<int32_t>({-1, 0, -1, 2}));
  ASSERT_EQ(batch[0].q.size(), 4u);
  EXPECT_EQ(batch[0].confidence.size(), 4u);  // priced by the policy like lookup's
  EXPECT_EQ(drafter.Truncate("r", 17).code(), absl::StatusCode::kOutOfRange);  // holds 14 + 2
  EXPECT_TRUE(drafter.Truncate("r", 16).ok());
}

TEST(NgramDrafterTest, ProposesOneHotQInRejectionModeOnly) {
  NgramDrafter drafter(NgramDrafterConfig{});
  const std::vector<int32_t> prompt = {1, 2, 3, 1, 2};
  ASSERT_TRUE(drafter.Start("a", prompt).ok());
  ASSERT_TRUE(drafter.Start("b", prompt).ok());
  std::vector<DraftRequest> batch(2);
  batch[0].request_id = "a";
  batch[0].context = prompt;
  batch[0].k = 4;
  batch[1].request_id = "b";
  batch[1].context = prompt;
  batch[1].k = 4;
  batch[1].mode = VerifyMode::kCoupled;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  for (const DraftRequest& r : batch) {
    ASSERT_TRUE(r.status.ok()) << r.status;
    EXPECT_EQ(r.tokens, std::vector<int32_t>({3, 1, 2}));
  }
  ASSERT_EQ(batch[0].q.size(), 3u);
  EXPECT_EQ(batch[0].q[1].token_ids, std::vector<int32_t>({1}));
  EXPECT_EQ(batch[0].q[1].probs, std::vector<float>({1.0f}));
  EXPECT_TRUE(batch[1].q.empty());
  EXPECT_EQ(batch[1].confidence, batch[0].confidence);
  EXPECT_EQ(batch[0].confidence.size(), 3u);
}

// The per-request protocol: Start twice, Propose before Start, a context shorter
// than what the drafter holds, Truncate past the end — each refused, naming the request.
TEST(NgramDrafterTest, EnforcesThePerRequestProtocol) {
  NgramDrafter drafter(NgramDrafterConfig{});
  const std::vector<int32_t> prompt = {1, 2, 1};
  ASSERT_TRUE(drafter.Start("r", prompt).ok());
  EXPECT_EQ(drafter.Start("r", prompt).code(), absl::StatusCode::kAlreadyExists);

  std::vector<DraftRequest> batch(1);
  batch[0].request_id = "unknown";
  batch[0].context = prompt;
  batch[0].k = 2;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_EQ(batch[0].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(batch[0].status.message().find("'unknown'"), std::string::npos);

  batch[0].request_id = "r";
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok());
  EXPECT_EQ(batch[0].tokens, std::vector<int32_t>({2, 1}));  // now holds 3 + 2 tokens

  const std::vector<int32_t> shorter = {1, 2, 1, 2};
  batch[0].context = shorter;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_EQ(batch[0].status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(batch[0].status.message().find("holds 5"), std::string::npos) << batch[0].status;

  EXPECT_EQ(drafter.Truncate("r", 6).code(), absl::StatusCode::kOutOfRange);
  ASSERT_TRUE(drafter.Truncate("r", 4).ok());
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_TRUE(batch[0].status.ok()) << batch[0].status;

  drafter.Release("r");
  EXPECT_EQ(drafter.Truncate("r", 0).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(drafter.Start("r", prompt).ok());
}

TEST(NgramDrafterTest, ConfigValidationNamesTheField) {
  EXPECT_NE((NgramDrafterConfig{0, 3, 100}).Validate().message().find("min_n"), std::string::npos);
  EXPECT_NE((NgramDrafterConfig{3, 2, 100}).Validate().message().find("max_n"), std::string::npos);
  EXPECT_NE((NgramDrafterConfig{1, 3, 3}).Validate().message().find("window"), std::string::npos);
  EXPECT_TRUE(NgramDrafterConfig{}.Validate().ok());
}

}  // namespace
}  // namespace splitspec::spec

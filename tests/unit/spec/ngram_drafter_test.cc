#include "runtime/spec/ngram_drafter.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"

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

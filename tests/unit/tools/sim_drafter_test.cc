// The benchmark's simulated drafter (tools/sim_drafter.h): its name grammar, the
// --drafters list rule, the drafter contract, and that a block's first wrong draft
// falls where iid acceptance with probability alpha puts it (chi-square).
#include "tools/sim_drafter.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/chi_square.h"

namespace splitspec::tools {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatNear;
using ::testing::HasSubstr;

constexpr int kVocab = 50;

std::vector<int32_t> Reference(int n) {
  std::vector<int32_t> tokens(n);
  for (int i = 0; i < n; ++i) tokens[i] = (7 * i + 3) % kVocab;
  return tokens;
}

spec::DraftRequest Request(const std::vector<int32_t>& context, int k) {
  spec::DraftRequest request;
  request.request_id = "r";
  request.context = context;
  request.k = k;
  request.mode = spec::VerifyMode::kGreedy;
  return request;
}

TEST(SimDrafterNameTest, ParsesBothKeysInAnyOrder) {
  absl::StatusOr<SimDrafterParams> p = ParseSimDrafterName("sim:alpha=0.8,ratio=10");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->alpha, 0.8);
  EXPECT_DOUBLE_EQ(p->cost_ratio, 10.0);
  p = ParseSimDrafterName("sim:ratio=2.5,alpha=1");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_DOUBLE_EQ(p->alpha, 1.0);
  EXPECT_DOUBLE_EQ(p->cost_ratio, 2.5);
  EXPECT_EQ(SimDrafterName(*p), "sim:alpha=1,ratio=2.5");
  EXPECT_TRUE(IsSimDrafterName("sim:alpha=1,ratio=2"));
  EXPECT_FALSE(IsSimDrafterName("ngram"));
}

TEST(SimDrafterNameTest, ErrorsNameTheDrafterAndTheKey) {
  auto error = [](const std::string& name) {
    return std::string(ParseSimDrafterName(name).status().message());
  };
  EXPECT_THAT(error("sim:alpha=0.8"), HasSubstr("drafter 'sim:alpha=0.8': needs both"));
  EXPECT_THAT(error("sim:alpha=1.5,ratio=10"), HasSubstr("alpha must be in [0, 1]"));
  EXPECT_THAT(error("sim:alpha=0.5,ratio=0"), HasSubstr("ratio must be finite and > 0"));
  EXPECT_THAT(error("sim:alpha=0.5,ratio=-2"), HasSubstr("ratio must be finite and > 0"));
  EXPECT_THAT(error("sim:alpha=0.5,ratio=10,beta=1"), HasSubstr("unknown key 'beta'"));
  EXPECT_THAT(error("sim:alpha=0.5,alpha=0.6,ratio=1"), HasSubstr("'alpha' given twice"));
  EXPECT_THAT(error("sim:alpha=x,ratio=1"), HasSubstr("'alpha=x' is not KEY=NUMBER"));
  EXPECT_THAT(error("sim:alpha=0.5=1,ratio=1"), HasSubstr("is not KEY=NUMBER"));
}

TEST(SplitDrafterListTest, KeyValuePiecesContinueTheDrafterBefore) {
  EXPECT_THAT(SplitDrafterList("sim:alpha=0.8,ratio=10"), ElementsAre("sim:alpha=0.8,ratio=10"));
  EXPECT_THAT(SplitDrafterList("ngram,sim:alpha=0.8,ratio=10,layerskip"),
              ElementsAre("ngram", "sim:alpha=0.8,ratio=10", "layerskip"));
  EXPECT_THAT(SplitDrafterList("sim:alpha=0.6,ratio=5,sim:ratio=20,alpha=0.9"),
              ElementsAre("sim:alpha=0.6,ratio=5", "sim:ratio=20,alpha=0.9"));
  EXPECT_THAT(SplitDrafterList("ngram,,self,"), ElementsAre("ngram", "self"));
  EXPECT_THAT(SplitDrafterList("layerskip:12,self"), ElementsAre("layerskip:12", "self"));
}

TEST(SimDrafterTest, AlphaOneProposesTheReferenceAndZeroNever) {
  const std::vector<int32_t> reference = Reference(40);
  const std::vector<int32_t> prompt(reference.begin(), reference.begin() + 10);
  SimDrafter right({1.0, 1e9}, reference, kVocab, absl::ZeroDuration(), 1);
  ASSERT_TRUE(right.Start("r", prompt).ok());
  std::vector<spec::DraftRequest> batch = {Request(prompt, 5)};
  ASSERT_TRUE(right.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
  EXPECT_EQ(batch[0].tokens, std::vector<int32_t>(reference.begin() + 10, reference.begin() + 15));
  EXPECT_TRUE(batch[0].q.empty());

  SimDrafter wrong({0.0, 1e9}, reference, kVocab, absl::ZeroDuration(), 1);
  ASSERT_TRUE(wrong.Start("r", prompt).ok());
  batch = {Request(prompt, 5)};
  ASSERT_TRUE(wrong.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_EQ(batch[0].tokens.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    EXPECT_NE(batch[0].tokens[i], reference[10 + i]) << i;
    EXPECT_GE(batch[0].tokens[i], 0);
    EXPECT_LT(batch[0].tokens[i], kVocab);
  }
  EXPECT_EQ(wrong.proposed(), 5);
  EXPECT_EQ(wrong.proposed_correct(), 0);
}

TEST(SimDrafterTest, KeepsTheDrafterContract) {
  const std::vector<int32_t> reference = Reference(30);
  SimDrafter drafter({0.5, 10}, reference, kVocab, absl::ZeroDuration(), 3);
  const std::vector<int32_t> off_reference = {reference[0], reference[1] + 1};
  EXPECT_THAT(std::string(drafter.Start("r", off_reference).message()),
              HasSubstr("sim:alpha=0.5,ratio=10: request 'r' (2 tokens) is not a prefix"));
  const std::vector<int32_t> prompt(reference.begin(), reference.begin() + 8);
  ASSERT_TRUE(drafter.Start("r", prompt).ok());
  EXPECT_TRUE(absl::IsAlreadyExists(drafter.Start("r", prompt)));
  std::vector<spec::DraftRequest> batch = {Request(prompt, 4)};
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok());
  // Holds 12 now: a context of 8 is shorter than what it holds.
  batch = {Request(prompt, 4)};
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_THAT(std::string(batch[0].status.message()), HasSubstr("the drafter holds 12"));
  EXPECT_TRUE(absl::IsOutOfRange(drafter.Truncate("r", 13)));
  EXPECT_TRUE(drafter.Truncate("r", 8).ok());
  batch = {Request(prompt, 4)};
  batch[0].mode = spec::VerifyMode::kRejection;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(batch[0].status));
  EXPECT_THAT(std::string(batch[0].status.message()), HasSubstr("greedy-only"));
  drafter.Release("r");
  EXPECT_TRUE(absl::IsNotFound(drafter.Truncate("r", 0)));
}

// Greedy verification accepts a block's drafts up to the first that differs from the
// reference. With iid acceptance at alpha the first wrong draft of a k = 4 block is at
// j with probability alpha^j (1 - alpha), none wrong alpha^4. 20000 blocks at alpha 0.8;
// the test fails at significance 1e-4.
TEST(SimDrafterTest, FirstWrongDraftIsGeometric) {
  constexpr double kAlpha = 0.8;
  constexpr int kK = 4, kBlocks = 20000;
  const std::vector<int32_t> reference = Reference(kK + 1);
  const std::vector<int32_t> prompt = {reference[0]};
  SimDrafter drafter({kAlpha, 10}, reference, kVocab, absl::ZeroDuration(), 42);
  ASSERT_TRUE(drafter.Start("r", prompt).ok());
  std::vector<int64_t> counts(kK + 1, 0);
  for (int b = 0; b < kBlocks; ++b) {
    std::vector<spec::DraftRequest> batch = {Request(prompt, kK)};
    ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
    ASSERT_TRUE(drafter.Truncate("r", 1).ok());
    int j = 0;
    while (j < kK && batch[0].tokens[j] == reference[1 + j]) ++j;
    ++counts[j];
  }
  std::vector<double> expected(kK + 1);
  double power = 1;
  for (int j = 0; j < kK; ++j, power *= kAlpha) expected[j] = power * (1 - kAlpha);
  expected[kK] = power;
  const spec::testing::ChiSquareResult r = spec::testing::ChiSquareTest(counts, expected);
  spec::testing::PrintChiSquare("sim drafter first wrong draft, alpha 0.8, k 4", r);
  EXPECT_GT(r.p_value, 1e-4);
  // And a drafter that inverted alpha would be caught: 0.2-acceptance counts fail.
  std::vector<double> inverted(kK + 1);
  power = 1;
  for (int j = 0; j < kK; ++j, power *= 1 - kAlpha) inverted[j] = power * kAlpha;
  inverted[kK] = power;
  EXPECT_LT(spec::testing::ChiSquareTest(counts, inverted).p_value, 1e-4);
}

// The alternatives row the speculation cache asks for: the drafted token first, distinct
// tokens, and probabilities alpha (1 - alpha)^r renormalized over the row, which is how
// often rank r holds the right token. Alpha 1: the right token alone carries the mass.
TEST(SimDrafterTest, AlternativesRowIsTheDraftFirstWithCalibratedProbabilities) {
  const std::vector<int32_t> reference = Reference(20);
  const std::vector<int32_t> prompt(reference.begin(), reference.begin() + 5);
  SimDrafter drafter({0.5, 10}, reference, kVocab, absl::ZeroDuration(), 5);
  ASSERT_TRUE(drafter.Start("r", prompt).ok());
  std::vector<spec::DraftRequest> batch = {Request(prompt, 6)};
  batch[0].alternatives = 3;
  ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_TRUE(batch[0].status.ok()) << batch[0].status;
  ASSERT_EQ(batch[0].top.size(), 6u);
  for (int i = 0; i < 6; ++i) {
    const spec::SparseDistribution& row = batch[0].top[i];
    ASSERT_EQ(row.token_ids.size(), 3u) << i;
    EXPECT_EQ(row.token_ids[0], batch[0].tokens[i]) << i;
    EXPECT_NE(row.token_ids[0], row.token_ids[1]) << i;
    EXPECT_NE(row.token_ids[1], row.token_ids[2]) << i;
    EXPECT_NE(row.token_ids[0], row.token_ids[2]) << i;
    EXPECT_THAT(row.probs, ElementsAre(FloatNear(4.0f / 7, 1e-6f), FloatNear(2.0f / 7, 1e-6f),
                                       FloatNear(1.0f / 7, 1e-6f)))
        << i;
  }
  EXPECT_EQ(drafter.proposed(), 6);  // alternatives are not proposals

  SimDrafter sure({1.0, 10}, reference, kVocab, absl::ZeroDuration(), 5);
  ASSERT_TRUE(sure.Start("r", prompt).ok());
  batch = {Request(prompt, 2)};
  batch[0].alternatives = 2;
  ASSERT_TRUE(sure.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_EQ(batch[0].top.size(), 2u);
  EXPECT_EQ(batch[0].top[0].token_ids[0], reference[5]);
  EXPECT_THAT(batch[0].top[0].probs, ElementsAre(1.0f, 0.0f));
  batch = {Request(std::vector<int32_t>(reference.begin(), reference.begin() + 7), 1)};
  batch[0].alternatives = 1;
  ASSERT_TRUE(sure.Propose(absl::MakeSpan(batch)).ok());
  ASSERT_EQ(batch[0].top.size(), 1u);
  EXPECT_EQ(batch[0].top[0].token_ids, std::vector<int32_t>{reference[7]});
  EXPECT_THAT(batch[0].top[0].probs, ElementsAre(1.0f));
  batch = {Request(std::vector<int32_t>(reference.begin(), reference.begin() + 8), 1)};
  ASSERT_TRUE(sure.Propose(absl::MakeSpan(batch)).ok());
  EXPECT_TRUE(batch[0].top.empty());  // none asked for
}

// Where the right token sits in a row of 3 at alpha 0.6: rank 0 (the draft) 0.6, rank 1
// 0.4 * 0.6, rank 2 0.4^2 * 0.6, not in the row 0.4^3, as the row's probabilities say
// before renormalization. 20000 rows; fails at significance 1e-4, and a row that always
// held the right token (the cache would always hit a rejection) would be caught.
TEST(SimDrafterTest, RightTokenRankIsGeometric) {
  constexpr double kAlpha = 0.6;
  constexpr int kRows = 20000, kSize = 3;
  const std::vector<int32_t> reference = Reference(2);
  const std::vector<int32_t> prompt = {reference[0]};
  SimDrafter drafter({kAlpha, 10}, reference, kVocab, absl::ZeroDuration(), 11);
  ASSERT_TRUE(drafter.Start("r", prompt).ok());
  std::vector<int64_t> counts(kSize + 1, 0);
  for (int i = 0; i < kRows; ++i) {
    std::vector<spec::DraftRequest> batch = {Request(prompt, 1)};
    batch[0].alternatives = kSize;
    ASSERT_TRUE(drafter.Propose(absl::MakeSpan(batch)).ok());
    ASSERT_TRUE(drafter.Truncate("r", 1).ok());
    const std::vector<int32_t>& ids = batch[0].top[0].token_ids;
    ++counts[std::find(ids.begin(), ids.end(), reference[1]) - ids.begin()];
  }
  const std::vector<double> expected = {kAlpha, (1 - kAlpha) * kAlpha,
                                        (1 - kAlpha) * (1 - kAlpha) * kAlpha,
                                        (1 - kAlpha) * (1 - kAlpha) * (1 - kAlpha)};
  const spec::testing::ChiSquareResult r = spec::testing::ChiSquareTest(counts, expected);
  spec::testing::PrintChiSquare("sim drafter right token's rank, alpha 0.6, 3 alternatives", r);
  EXPECT_GT(r.p_value, 1e-4);
  const std::vector<double> always_in_row = {kAlpha, (1 - kAlpha) * kAlpha,
                                             (1 - kAlpha) * (1 - kAlpha), 0};
  EXPECT_LT(spec::testing::ChiSquareTest(counts, always_in_row).p_value, 1e-4);
}

}  // namespace
}  // namespace splitspec::tools

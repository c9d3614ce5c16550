// The device verifier's host contract (runtime/spec/device_verify_plan.h),
// checked on the CPU: the plan's executor equals LogitsToProbs + VerifyBatch
// outcome for outcome on random batches, what crosses the host boundary does not
// grow with the vocabulary, and malformed requests fail alone, by name.
#include "runtime/spec/device_verify_plan.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/spec/verify.h"
#include "tests/testing/random_verify_batch.h"

namespace splitspec::spec {
namespace {

using ::testing::HasSubstr;

void ExpectSameOutcomes(const std::vector<absl::StatusOr<VerifyOutcome>>& got,
                        const std::vector<absl::StatusOr<VerifyOutcome>>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t j = 0; j < got.size(); ++j) {
    ASSERT_EQ(got[j].ok(), want[j].ok())
        << "request " << j << ": " << got[j].status() << " vs " << want[j].status();
    if (!got[j].ok()) {
      EXPECT_EQ(got[j].status(), want[j].status()) << "request " << j;
      continue;
    }
    EXPECT_EQ(got[j]->accepted, want[j]->accepted) << "request " << j;
    EXPECT_EQ(got[j]->committed, want[j]->committed) << "request " << j;
    EXPECT_EQ(got[j]->rejected, want[j]->rejected) << "request " << j;
  }
}

TEST(DeviceVerifyPlanTest, HostExecutorEqualsLogitsToProbsThenVerifyBatch) {
  int accepted = 0, rejected = 0;
  for (int32_t vocab : {2, 37, 300, 1000}) {
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      const testing::RandomVerifyBatch batch = testing::MakeRandomVerifyBatch(vocab, 24, seed);
      auto got = VerifyOnHost(batch.requests, batch.logits, batch.row_stride, vocab);
      ASSERT_TRUE(got.ok()) << got.status();
      std::vector<std::vector<float>> probs;
      const std::vector<VerifyRequest> host = testing::HostVerifyRequests(batch, &probs);
      auto want = VerifyBatch(host, vocab);
      ASSERT_TRUE(want.ok()) << want.status();
      ExpectSameOutcomes(*got, *want);
      for (const auto& o : *got) {
        if (o.ok()) accepted += o->accepted, rejected += o->rejected;
      }
    }
  }
  // The batches exercise both branches (else the comparison proves little).
  EXPECT_GT(accepted, 100);
  EXPECT_GT(rejected, 50);
}

TEST(DeviceVerifyPlanTest, WhatCrossesDoesNotGrowWithTheVocabulary) {
  const std::vector<int64_t> rows_a = {4, 0, 2}, rows_b = {1};
  const std::vector<int32_t> tokens_a = {7, 9};
  const std::vector<SparseDistribution> q_a = {{{7, 8}, {0.5f, 0.5f}}, {{9}, {1.0f}}};
  std::vector<DeviceVerifyRequest> requests(2);
  requests[0].mode = VerifyMode::kRejection;
  requests[0].logit_rows = rows_a;
  requests[0].draft_tokens = tokens_a;
  requests[0].draft_q = q_a;
  requests[1].mode = VerifyMode::kGreedy;
  requests[1].logit_rows = rows_b;
  std::vector<size_t> up, down;
  for (int32_t vocab : {16, 50000, 152064}) {
    std::vector<absl::StatusOr<VerifyOutcome>> outcomes;
    absl::StatusOr<VerifyUpload> planned = PlanDeviceVerify(requests, vocab, 5, &outcomes);
    ASSERT_TRUE(planned.ok()) << planned.status();
    const VerifyUpload& u = *planned;
    EXPECT_EQ(u.num_sequences(), 2);
    EXPECT_EQ(u.num_rows(), 4);
    EXPECT_EQ(u.row_sources, (std::vector<int64_t>{4, 0, 2, 1}));
    EXPECT_EQ(u.q_format, kernels::kDraftQSparse);
    EXPECT_EQ(u.q_offsets, (std::vector<int32_t>{0, 2, 3}));
    up.push_back(u.Bytes());
    down.push_back(VerifyDownload::For(u).Bytes());
  }
  // Up: per sequence mode 4 + offset 4 + seed 8 + start 8 + bonus 1, plus offsets[0];
  // per draft token 4 + q offset 4 (+ offsets[0]) + 3 q entries of 8; per row 8 + 16.
  EXPECT_EQ(up[0], 2 * 25 + 4 + 2 * 8 + 4 + 3 * 8 + 4 * 24);
  // Down: per sequence 4 * 4 + 1, committed 2 + 2, per row 2 * 4.
  EXPECT_EQ(down[0], 2 * 17 + 4 * 4 + 4 * 8);
  EXPECT_EQ(up[1], up[0]);
  EXPECT_EQ(up[2], up[0]);
  EXPECT_EQ(down[1], down[0]);
  EXPECT_EQ(down[2], down[0]);
}

TEST(DeviceVerifyPlanTest, MalformedRequestsFailAloneByName) {
  const int32_t vocab = 8;
  std::vector<float> logits(4 * vocab, 0.5f);
  logits[0 * vocab + 3] = 2.0f;
  logits[1 * vocab + 5] = NAN;
  for (int v = 0; v < vocab; ++v) logits[2 * vocab + v] = -INFINITY;
  const std::vector<int64_t> row0 = {0}, row1 = {1}, row2 = {2}, row_far = {9}, two = {0, 3};
  const std::vector<int32_t> one_token = {3};
  std::vector<DeviceVerifyRequest> r(6);
  for (auto& x : r) x.mode = VerifyMode::kGreedy, x.logit_rows = row0;
  r[1].logit_rows = row1;              // a NaN logit
  r[2].logit_rows = row2;              // every logit -inf
  r[3].logit_rows = row_far;           // outside the matrix
  r[4].mode = VerifyMode::kRejection;  // k = 1 without q
  r[4].logit_rows = two;
  r[4].draft_tokens = one_token;
  r[5].params.top_p = 0.0f;  // invalid parameters
  absl::StatusOr<std::vector<absl::StatusOr<VerifyOutcome>>> all =
      VerifyOnHost(r, logits, vocab, vocab);
  ASSERT_TRUE(all.ok()) << all.status();
  const std::vector<absl::StatusOr<VerifyOutcome>>& got = *all;
  ASSERT_TRUE(got[0].ok()) << got[0].status();
  EXPECT_EQ(got[0]->committed, std::vector<int32_t>{3});
  EXPECT_THAT(got[1].status().message(),
              HasSubstr("target row 0 (position 0, logits row 1): logit of token 5 is NaN"));
  EXPECT_THAT(got[2].status().message(), HasSubstr("every logit is -inf"));
  EXPECT_THAT(got[3].status().message(),
              HasSubstr("logit_rows[0] = 9 is outside the 4 rows of logits"));
  EXPECT_THAT(got[4].status().message(), HasSubstr("draft_q has 0 rows, need k = 1"));
  EXPECT_THAT(got[5].status().message(), HasSubstr("top_p must be in (0, 1], got 0"));
  EXPECT_THAT(VerifyOnHost(r, logits, vocab - 1, vocab).status().message(),
              HasSubstr("row_stride 7"));
  std::vector<absl::StatusOr<VerifyOutcome>> outcomes;
  EXPECT_THAT(PlanDeviceVerify(r, 0, 4, &outcomes).status().message(), HasSubstr("vocab = 0"));
}

}  // namespace
}  // namespace splitspec::spec

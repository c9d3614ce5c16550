// The target leader's per-request protocol state (docs/protocol.md), without a
// model: block admission, epochs, KV truncation and stop conditions.
#include "target_worker/target_request.h"

#include "gtest/gtest.h"

namespace splitspec::target {
namespace {

constexpr int kPrompt = 3;

std::unique_ptr<TargetRequest> NewRequest(RequestLimits limits = {}) {
  proto::Assignment assignment;
  assignment.set_request_id("r");
  for (int t : {10, 11, 12}) assignment.add_committed_tokens(t);
  assignment.set_prompt_length(kPrompt);
  assignment.set_draft_worker_id(7);
  auto cache = std::make_unique<model::KvCache>(/*n_layers=*/1, /*kv_dim=*/2, /*max_tokens=*/64);
  spec::SamplingParams greedy;
  greedy.temperature = 0.0f;
  return std::make_unique<TargetRequest>(assignment, limits, std::move(cache), greedy,
                                         spec::VerifyMode::kGreedy);
}

// Pretends the forward fed `n` positions.
void Feed(TargetRequest& request, int n) {
  model::KvCache& cache = request.cache();
  ASSERT_TRUE(cache.Reserve(cache.length() + n).ok());
  cache.Commit(cache.length() + n);
}

proto::DraftBlock Block(uint64_t epoch, int start, std::vector<int32_t> tokens) {
  proto::DraftBlock block;
  block.set_request_id("r");
  block.set_epoch(epoch);
  block.set_start(start);
  block.set_block_sequence(start);
  for (int32_t t : tokens) block.add_tokens(t);
  return block;
}

spec::VerifyOutcome Outcome(int accepted, std::vector<int32_t> committed, bool rejected) {
  spec::VerifyOutcome outcome;
  outcome.accepted = accepted;
  outcome.committed = std::move(committed);
  outcome.rejected = rejected;
  return outcome;
}

TEST(TargetRequestTest, AdmitsOnlyBlocksAtOrAfterTheFrontierOfTheCurrentEpoch) {
  auto request = NewRequest();
  EXPECT_EQ(request->AdmitBlock(Block(1, 3, {1, 2})), BlockAdmission::kStaleEpoch);
  EXPECT_EQ(request->AdmitBlock(Block(0, 2, {1, 2})), BlockAdmission::kStaleStart);
  EXPECT_EQ(request->AdmitBlock(Block(0, 3, {1, 2})), BlockAdmission::kQueued);
  EXPECT_EQ(request->AdmitBlock(Block(0, 3, {5, 6})), BlockAdmission::kDuplicate);
  EXPECT_EQ(request->AdmitBlock(Block(0, 5, {3})), BlockAdmission::kQueued);
  ASSERT_NE(request->ReadyBlock(), nullptr);
  EXPECT_EQ(request->ReadyBlock()->tokens(0), 1);
  EXPECT_TRUE(request->HasBlockAt(5));
}

TEST(TargetRequestTest, CorrectionBumpsEpochTruncatesCacheAndDropsLaterBlocks) {
  auto request = NewRequest();
  Feed(*request, kPrompt);  // prompt fed, p for position 3 pending
  request->SetPending({{0.5f, 0.5f}});
  ASSERT_EQ(request->AdmitBlock(Block(0, 3, {20, 21, 22})), BlockAdmission::kQueued);
  ASSERT_EQ(request->AdmitBlock(Block(0, 6, {23})), BlockAdmission::kQueued);
  Feed(*request, 3);  // the block's three tokens
  const proto::VerifyResult result = request->ApplyOutcome(
      request->ReadyBlock(), Outcome(1, {20, 99}, true), std::nullopt, absl::Now());
  EXPECT_EQ(request->committed(), (std::vector<int32_t>{10, 11, 12, 20, 99}));
  EXPECT_EQ(request->epoch(), 1u);
  EXPECT_EQ(request->cache().length(), 4);  // every committed token but the correction
  EXPECT_FALSE(request->has_pending());
  EXPECT_FALSE(request->HasBlockAt(6));
  EXPECT_EQ(result.frontier(), 5u);
  EXPECT_EQ(result.accepted(), 1u);
  EXPECT_EQ(
      std::vector<int32_t>(result.committed_tokens().begin(), result.committed_tokens().end()),
      (std::vector<int32_t>{20, 99}));
  EXPECT_EQ(result.epoch(), 1u);
  EXPECT_EQ(result.stats().verified(), 2u);  // one accepted + the rejected one
}

TEST(TargetRequestTest, FullAcceptanceWithoutBonusKeepsEpochAndNextBlock) {
  auto request = NewRequest();
  Feed(*request, kPrompt);
  request->SetPending({{1.0f}});
  ASSERT_EQ(request->AdmitBlock(Block(0, 3, {20, 21})), BlockAdmission::kQueued);
  ASSERT_EQ(request->AdmitBlock(Block(0, 5, {22, 23})), BlockAdmission::kQueued);
  Feed(*request, 2);
  request->ApplyOutcome(request->ReadyBlock(), Outcome(2, {20, 21}, false),
                        TargetRow{{0.25f, 0.75f}}, absl::Now());
  EXPECT_EQ(request->epoch(), 0u);
  EXPECT_EQ(request->frontier(), 5);
  EXPECT_EQ(request->cache().length(), 5);
  ASSERT_TRUE(request->has_pending());
  EXPECT_EQ(request->pending().probs, (std::vector<float>{0.25f, 0.75f}));
  ASSERT_NE(request->ReadyBlock(), nullptr);
  EXPECT_EQ(request->ReadyBlock()->start(), 5u);
}

TEST(TargetRequestTest, StopTokenCutsTheCommittedTokensAndFinishes) {
  RequestLimits limits;
  limits.stop_token_ids = {0};
  auto request = NewRequest(limits);
  Feed(*request, kPrompt);
  request->SetPending({{1.0f}});
  ASSERT_EQ(request->AdmitBlock(Block(0, 3, {20, 0, 21})), BlockAdmission::kQueued);
  Feed(*request, 3);
  const proto::VerifyResult result = request->ApplyOutcome(
      request->ReadyBlock(), Outcome(3, {20, 0, 21, 22}, false), std::nullopt, absl::Now());
  EXPECT_EQ(request->committed(), (std::vector<int32_t>{10, 11, 12, 20, 0}));
  EXPECT_TRUE(result.finished());
  EXPECT_EQ(result.finish_reason(), proto::FINISH_REASON_STOP);
  EXPECT_EQ(request->AdmitBlock(Block(request->epoch(), 5, {1})), BlockAdmission::kFinished);
}

TEST(TargetRequestTest, MaxNewTokensFinishesWithLengthAtExactlyTheLimit) {
  RequestLimits limits;
  limits.max_new_tokens = 2;
  auto request = NewRequest(limits);
  Feed(*request, kPrompt);
  request->SetPending({{1.0f}});
  ASSERT_EQ(request->AdmitBlock(Block(0, 3, {20, 21, 22})), BlockAdmission::kQueued);
  Feed(*request, 3);
  const proto::VerifyResult result = request->ApplyOutcome(
      request->ReadyBlock(), Outcome(3, {20, 21, 22, 23}, false), std::nullopt, absl::Now());
  EXPECT_EQ(request->committed().size(), static_cast<size_t>(kPrompt + 2));
  EXPECT_EQ(result.finish_reason(), proto::FINISH_REASON_LENGTH);
  EXPECT_EQ(result.frontier(), static_cast<uint32_t>(kPrompt + 2));
}

TEST(TargetRequestTest, FullSequenceResultCarriesPromptAndGeneratedTokens) {
  auto request = NewRequest();
  const proto::VerifyResult sync = request->FullSequenceResult();
  EXPECT_TRUE(sync.full_sequence());
  EXPECT_EQ(sync.committed_tokens_size(), kPrompt);
  EXPECT_EQ(sync.prompt_length(), static_cast<uint32_t>(kPrompt));
}

spec::TokenLogprob Entry(int32_t token, float logprob) {
  spec::TokenLogprob entry;
  entry.token = token;
  entry.logprob = logprob;
  entry.top_ids = {token};
  entry.top_logprobs = {logprob};
  return entry;
}

TEST(TargetRequestTest, LogprobsTravelWithTheirTokensAndAreCutWithThem) {
  RequestLimits limits;
  limits.stop_token_ids = {21};
  auto request = NewRequest(limits);
  Feed(*request, kPrompt);
  request->SetPending({{1.0f}});
  ASSERT_EQ(request->AdmitBlock(Block(0, 3, {20})), BlockAdmission::kQueued);
  Feed(*request, 1);
  proto::VerifyResult first =
      request->ApplyOutcome(request->ReadyBlock(), Outcome(1, {20, 30}, false), std::nullopt,
                            absl::Now(), {Entry(20, -0.5f), Entry(30, -1.0f)});
  ASSERT_EQ(first.logprobs_size(), 2);
  EXPECT_EQ(first.logprobs_start(), 3u);
  EXPECT_EQ(first.logprobs(1).token(), 30);
  EXPECT_EQ(first.logprobs(1).logprob(), -1.0f);
  // The stop token ends the request: the entry after it goes with the token after it.
  Feed(*request, 1);
  proto::VerifyResult second = request->ApplyOutcome(
      nullptr, Outcome(0, {21, 22}, false), std::nullopt, absl::Now(),
      {Entry(21, -2.0f), Entry(22, -3.0f)});
  ASSERT_TRUE(request->finished());
  ASSERT_EQ(second.committed_tokens_size(), 1);
  ASSERT_EQ(second.logprobs_size(), 1);
  EXPECT_EQ(second.logprobs_start(), 5u);
  EXPECT_EQ(second.logprobs(0).token(), 21);
  // The final report carries every token this target committed, with its entry.
  const proto::VerifyResult full = request->FullSequenceResult();
  EXPECT_EQ(full.logprobs_start(), 3u);
  ASSERT_EQ(full.logprobs_size(), 3);
  EXPECT_EQ(full.logprobs(2).top_ids(0), 21);
}

TEST(TargetRequestTest, NoLogprobsAskedNoneSent) {
  auto request = NewRequest();
  Feed(*request, kPrompt);
  request->SetPending({{1.0f}});
  proto::VerifyResult result =
      request->ApplyOutcome(nullptr, Outcome(0, {40}, false), std::nullopt, absl::Now());
  EXPECT_EQ(result.logprobs_size(), 0);
  EXPECT_EQ(request->FullSequenceResult().logprobs_size(), 0);
}

}  // namespace
}  // namespace splitspec::target

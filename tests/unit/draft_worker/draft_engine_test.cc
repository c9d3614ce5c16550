// DraftEngine's specification (docs/architecture.md, docs/protocol.md) over a deterministic fake
// drafter: the lookahead window, resync on a new epoch (truncate to the
// frontier, append the correction, forget what was in flight), lost results
// (ask for a sync), finished requests, failed proposals and the length limit.
#include "draft_worker/draft_engine.h"

#include <algorithm>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/lookup_drafter.h"
#include "runtime/spec/spec_policy.h"
#include "tests/unit/draft_worker/fake_drafter.h"

namespace splitspec::draft {
namespace {

using testing::FakeDrafter;

const std::vector<int32_t> kPrompt = {4, 8, 15, 16};
constexpr int kP = 4;  // prompt length

proto::Assignment Assign(const std::string& id, int draft_k, int max_tokens = 64,
                         const std::vector<int32_t>& committed = kPrompt, uint64_t epoch = 0) {
  proto::Assignment a;
  a.set_request_id(id);
  a.set_target_endpoint("tcp://target");
  a.mutable_committed_tokens()->Assign(committed.begin(), committed.end());
  a.set_prompt_length(kP);
  a.set_draft_k(static_cast<uint32_t>(draft_k));
  a.set_verify_mode(proto::VERIFY_MODE_GREEDY);
  a.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  a.set_epoch(epoch);
  return a;
}

// A result committing `tokens` up to `frontier` in `epoch`.
proto::VerifyResult Result(const std::string& id, uint64_t epoch,
                           const std::vector<int32_t>& tokens, int frontier,
                           uint64_t block_sequence = 0) {
  proto::VerifyResult r;
  r.set_request_id(id);
  r.set_epoch(epoch);
  r.mutable_committed_tokens()->Assign(tokens.begin(), tokens.end());
  r.set_frontier(static_cast<uint32_t>(frontier));
  r.set_block_sequence(block_sequence);
  return r;
}

std::vector<int32_t> Tokens(const proto::DraftBlock& block) {
  return {block.tokens().begin(), block.tokens().end()};
}

std::vector<int32_t> Slice(const std::vector<int32_t>& v, int from, int to) {
  return {v.begin() + from, v.begin() + to};
}

class DraftEngineTest : public ::testing::Test {
 protected:
  void Make(int lookahead, int max_requests = 256) {
    DraftEngineOptions options;
    options.lookahead_blocks = lookahead;
    options.max_requests = max_requests;
    engine_ = std::make_unique<DraftEngine>(&drafter_, options);
  }

  // One step; returns the blocks it sent.
  std::vector<proto::DraftBlock> Step() {
    std::vector<OutgoingBlock> out;
    EXPECT_TRUE(engine_->Step(&out).ok());
    std::vector<proto::DraftBlock> blocks;
    for (OutgoingBlock& o : out) {
      EXPECT_EQ(o.target_endpoint, "tcp://target");
      blocks.push_back(std::move(o.block));
    }
    return blocks;
  }

  // Rejects every block of adaptive request "r" at its first token until the
  // policy turns speculation off (its evidence of failure outweighs the
  // optimism of an unmeasured acceptance); returns the empty block that opens
  // the off window. *committed and *epoch follow the target's results.
  proto::DraftBlock RejectUntilOff(std::vector<int32_t>* committed, uint64_t* epoch) {
    for (int blocks = 0; blocks < 60; ++blocks) {
      auto sent = Step();
      EXPECT_EQ(sent.size(), 1u) << "block " << blocks;
      if (sent.size() != 1u) return {};
      if (sent[0].tokens_size() == 0) {
        EXPECT_GT(blocks, 0) << "an unmeasured request speculates first";
        return sent[0];
      }
      committed->push_back((sent[0].tokens(0) + 1) % FakeDrafter::kVocab);  // rejected
      EXPECT_EQ(engine_->OnResult(Result("r", ++*epoch, {committed->back()},
                                         static_cast<int>(committed->size()),
                                         sent[0].block_sequence())),
                ResultAction::kApplied);
    }
    ADD_FAILURE() << "speculation never turned off";
    return {};
  }

  // A costly drafter (no shadow blocks), one block in flight, whose blocks are
  // rejected until the policy opens an off window: its block.
  proto::DraftBlock OpenOffWindow(DraftEngineOptions options, std::vector<int32_t>* committed,
                                  uint64_t* epoch) {
    options.lookahead_blocks = 1;
    options.shadow_drafts = false;  // as for a model drafter
    // The clock stands still: no cost is measured, acceptance alone decides.
    options.clock = [] { return absl::UnixEpoch(); };
    engine_ = std::make_unique<DraftEngine>(&drafter_, options);
    EXPECT_TRUE(engine_->AddRequest(Assign("r", /*draft_k=*/0, /*max_tokens=*/1000)).ok());
    *committed = kPrompt;
    *epoch = 0;
    const proto::DraftBlock off = RejectUntilOff(committed, epoch);
    EXPECT_GT(off.alone_tokens(), 1u);
    return off;
  }

  FakeDrafter drafter_;
  std::unique_ptr<DraftEngine> engine_;
};

TEST_F(DraftEngineTest, LookaheadWindowKeepsAtMostNBlocksInFlight) {
  Make(/*lookahead=*/2);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  const std::vector<int32_t> drafts = FakeDrafter::Extend(kPrompt, 9);
  auto first = Step();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].start(), static_cast<uint32_t>(kP));
  EXPECT_EQ(first[0].epoch(), 0u);
  EXPECT_EQ(Tokens(first[0]), Slice(drafts, kP, kP + 3));
  auto second = Step();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(second[0].start(), static_cast<uint32_t>(kP + 3)) << "drafted on top of its own block";
  EXPECT_EQ(Tokens(second[0]), Slice(drafts, kP + 3, kP + 6));
  EXPECT_GT(second[0].block_sequence(), first[0].block_sequence());
  EXPECT_FALSE(engine_->HasWork());
  EXPECT_TRUE(Step().empty()) << "two blocks unresolved: the window is full";
  // The first block fully accepted without a bonus (same epoch): room for one more.
  ASSERT_EQ(engine_->OnResult(Result("r", 0, Tokens(first[0]), kP + 3, first[0].block_sequence())),
            ResultAction::kApplied);
  EXPECT_EQ(engine_->KnownFrontier("r"), kP + 3);
  EXPECT_TRUE(engine_->HasWork());
  auto third = Step();
  ASSERT_EQ(third.size(), 1u);
  EXPECT_EQ(third[0].start(), static_cast<uint32_t>(kP + 6));
  EXPECT_EQ(Tokens(third[0]), Slice(drafts, kP + 6, kP + 9));
  EXPECT_TRUE(Step().empty());
  EXPECT_EQ(engine_->counters().blocks_sent, 3u);
  EXPECT_EQ(engine_->counters().tokens_drafted, 9u);
}

TEST_F(DraftEngineTest, LookaheadOneWaitsForEveryVerification) {
  Make(/*lookahead=*/1);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 2)).ok());
  auto block = Step();
  ASSERT_EQ(block.size(), 1u);
  EXPECT_FALSE(engine_->HasWork());
  EXPECT_TRUE(Step().empty());
  EXPECT_EQ(engine_->counters().propose_calls, 1u);
}

TEST_F(DraftEngineTest, NewEpochTruncatesToTheFrontierAppendsTheCorrectionAndDropsInFlight) {
  Make(/*lookahead=*/2);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  auto first = Step();
  auto second = Step();
  ASSERT_EQ(first.size() + second.size(), 2u);
  // The target accepted one token of the first block, then corrected the next.
  const int32_t accepted = first[0].tokens(0);
  const int32_t correction = (first[0].tokens(1) + 1) % FakeDrafter::kVocab;
  ASSERT_EQ(
      engine_->OnResult(Result("r", 1, {accepted, correction}, kP + 2, first[0].block_sequence())),
      ResultAction::kApplied);
  EXPECT_EQ(engine_->counters().epochs_seen, 1u);
  EXPECT_EQ(engine_->KnownFrontier("r"), kP + 2);
  std::vector<int32_t> committed = kPrompt;
  committed.push_back(accepted);
  committed.push_back(correction);
  // In-flight blocks are forgotten: the window is open again for two blocks,
  // drafted from the committed sequence in the new epoch.
  auto next = Step();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].epoch(), 1u);
  EXPECT_EQ(next[0].start(), static_cast<uint32_t>(kP + 2));
  EXPECT_EQ(Tokens(next[0]), Slice(FakeDrafter::Extend(committed, 3), kP + 2, kP + 5));
  EXPECT_EQ(drafter_.proposals().back().context, committed);
  EXPECT_EQ(Step().size(), 1u);
  EXPECT_FALSE(engine_->HasWork());
  // The second block's result can never come (the target dropped it); a late
  // result of the old epoch is ignored.
  EXPECT_EQ(
      engine_->OnResult(Result("r", 0, Tokens(second[0]), kP + 6, second[0].block_sequence())),
      ResultAction::kIgnored);
  EXPECT_EQ(engine_->KnownFrontier("r"), kP + 2);
}

TEST_F(DraftEngineTest, LostResultAsksForASyncAndTheSyncRestartsFromTheFullSequence) {
  Make(/*lookahead=*/2);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  auto first = Step();
  auto second = Step();
  // The first block's result went missing; the second's leaves a gap.
  ASSERT_EQ(
      engine_->OnResult(Result("r", 0, Tokens(second[0]), kP + 6, second[0].block_sequence())),
      ResultAction::kNeedSync);
  EXPECT_EQ(engine_->KnownFrontier("r"), kP);
  // The target's full sequence, with its bonus in a new epoch.
  std::vector<int32_t> full = FakeDrafter::Extend(kPrompt, 6);
  full.push_back(7);
  proto::VerifyResult sync = Result("r", 1, full, static_cast<int>(full.size()));
  sync.set_full_sequence(true);
  ASSERT_EQ(engine_->OnResult(sync), ResultAction::kApplied);
  EXPECT_EQ(engine_->counters().syncs, 1u);
  EXPECT_EQ(engine_->KnownFrontier("r"), static_cast<int>(full.size()));
  auto next = Step();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].epoch(), 1u);
  EXPECT_EQ(next[0].start(), full.size());
  EXPECT_EQ(drafter_.proposals().back().context, full);
  // An older sync is ignored.
  proto::VerifyResult old = Result("r", 0, kPrompt, kP);
  old.set_full_sequence(true);
  EXPECT_EQ(engine_->OnResult(old), ResultAction::kIgnored);
  EXPECT_EQ(engine_->KnownFrontier("r"), static_cast<int>(full.size()));
}

TEST_F(DraftEngineTest, FinishedResultReleasesTheRequestEverywhere) {
  Make(/*lookahead=*/2);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  Step();
  proto::VerifyResult done = Result("r", 1, FakeDrafter::Extend(kPrompt, 1), kP + 1);
  done.set_finished(true);
  done.set_full_sequence(true);
  EXPECT_EQ(engine_->OnResult(done), ResultAction::kFinished);
  EXPECT_EQ(engine_->KnownFrontier("r"), -1);
  EXPECT_EQ(engine_->active_requests(), 0);
  EXPECT_FALSE(drafter_.Held("r").has_value()) << "the drafter's state is freed too";
  EXPECT_EQ(engine_->OnResult(Result("r", 1, {1}, kP + 2)), ResultAction::kIgnored);
}

TEST_F(DraftEngineTest, FailedProposalSendsAnEmptyBlockAndRestartsTheDrafter) {
  Make(/*lookahead=*/2);
  ASSERT_TRUE(engine_->AddRequest(Assign("bad", 3)).ok());
  ASSERT_TRUE(engine_->AddRequest(Assign("good", 3)).ok());
  drafter_.FailRequest("bad");
  auto blocks = Step();
  ASSERT_EQ(blocks.size(), 2u);
  for (const proto::DraftBlock& b : blocks) {
    if (b.request_id() == "bad") {
      EXPECT_EQ(b.tokens_size(), 0) << "the target chooses this position itself";
      EXPECT_EQ(b.start(), static_cast<uint32_t>(kP));
    } else {
      EXPECT_EQ(b.tokens_size(), 3);
    }
  }
  EXPECT_EQ(engine_->counters().draft_failures, 1u);
  EXPECT_EQ(drafter_.Held("bad"), kPrompt);
}

TEST_F(DraftEngineTest, FailedProposeStepSendsNothing) {
  Make(/*lookahead=*/2);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  drafter_.FailNextPropose(absl::InternalError("fake draft forward failed"));
  std::vector<OutgoingBlock> out;
  const absl::Status status = engine_->Step(&out);
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("fake draft forward failed"), std::string::npos);
  EXPECT_TRUE(out.empty());
  auto retry = Step();
  ASSERT_EQ(retry.size(), 1u);
  EXPECT_EQ(retry[0].start(), static_cast<uint32_t>(kP)) << "nothing was counted as in flight";
}

TEST_F(DraftEngineTest, NeverDraftsPastTheRequestsMaxTokens) {
  Make(/*lookahead=*/3);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3, /*max_tokens=*/4)).ok());
  auto first = Step();
  auto second = Step();
  ASSERT_EQ(first.size(), 1u);
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(first[0].tokens_size(), 3);
  EXPECT_EQ(second[0].tokens_size(), 1);
  EXPECT_FALSE(engine_->HasWork());
  EXPECT_TRUE(Step().empty());
}

TEST_F(DraftEngineTest, ReassignmentRestartsFromTheAssignmentsCommittedTokens) {
  Make(/*lookahead=*/2);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  Step();
  Step();
  const std::vector<int32_t> committed = {4, 8, 15, 16, 23, 42 % FakeDrafter::kVocab};
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3, 64, committed, /*epoch=*/3)).ok());
  EXPECT_EQ(engine_->KnownFrontier("r"), 6);
  auto next = Step();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].epoch(), 3u);
  EXPECT_EQ(next[0].start(), 6u);
  EXPECT_EQ(drafter_.proposals().back().context, committed);
}

TEST_F(DraftEngineTest, RejectionModeShipsOneQRowPerDraftedToken) {
  Make(/*lookahead=*/2);
  proto::Assignment assignment = Assign("r", 3);
  assignment.set_verify_mode(proto::VERIFY_MODE_REJECTION);
  assignment.mutable_params()->set_temperature(1.0f);
  ASSERT_TRUE(engine_->AddRequest(assignment).ok());
  auto blocks = Step();
  ASSERT_EQ(blocks.size(), 1u);
  ASSERT_EQ(blocks[0].q_size(), 3) << "the target refuses a rejection block without them";
  for (int i = 0; i < 3; ++i) {
    ASSERT_EQ(blocks[0].q(i).token_ids_size(), 1);
    EXPECT_EQ(blocks[0].q(i).token_ids(0), blocks[0].tokens(i));
    EXPECT_EQ(blocks[0].q(i).probs(0), 1.0f);
  }
}

TEST_F(DraftEngineTest, AddRequestRefusesBadAssignmentsAndAFullWorker) {
  Make(/*lookahead=*/2, /*max_requests=*/1);
  proto::Assignment no_id = Assign("", 3);
  EXPECT_EQ(engine_->AddRequest(no_id).message(), "Assignment.request_id is empty");
  proto::Assignment no_tokens = Assign("r", 3);
  no_tokens.clear_committed_tokens();
  EXPECT_EQ(engine_->AddRequest(no_tokens).message(), "request r: no committed tokens");
  proto::Assignment no_target = Assign("r", 3);
  no_target.clear_target_endpoint();
  EXPECT_EQ(engine_->AddRequest(no_target).message(),
            "request r: Assignment.target_endpoint is empty");
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  const absl::Status full = engine_->AddRequest(Assign("s", 3));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(), "draft worker is full (1 requests)");
  EXPECT_EQ(engine_->OnResult(Result("unknown", 0, {1}, 5)), ResultAction::kIgnored);
}

// --- the speculation policy's measurements ---

class DraftEngineGuardTest : public DraftEngineTest {
 protected:
  // Adaptive k (assignment draft_k 0), one block in flight, on a fake clock.
  void MakeTimed() {
    DraftEngineOptions options;
    options.lookahead_blocks = 1;
    options.clock = [this] { return now_; };
    engine_ = std::make_unique<DraftEngine>(&drafter_, options);
    ASSERT_TRUE(engine_->AddRequest(Assign("r", 0, /*max_tokens=*/1000)).ok());
    committed_ = kPrompt;
  }

  // Adaptive k, one block in flight, shadow blocks on (the default), on a fake
  // clock, rejected until speculation is off; returns the off window's block.
  proto::DraftBlock MakeAdaptiveWithShadowsOff() {
    DraftEngineOptions options;
    options.lookahead_blocks = 1;
    options.clock = [this] { return now_; };
    engine_ = std::make_unique<DraftEngine>(&drafter_, options);
    EXPECT_TRUE(engine_->AddRequest(Assign("r", 0, /*max_tokens=*/1000)).ok());
    committed_ = kPrompt;
    epoch_ = 0;
    for (int blocks = 0; blocks < 60; ++blocks) {
      std::vector<proto::DraftBlock> sent = Step();
      EXPECT_EQ(sent.size(), 1u);
      if (sent.size() != 1u) return {};
      if (sent[0].tokens_size() == 0) return sent[0];
      // A block of k drafts costs the target 10 ms x (1 + 0.5 k): speculation
      // needs acceptance to pay.
      Resolve(sent[0], absl::Milliseconds(10) * (1.0 + 0.5 * sent[0].tokens_size()),
              /*accepted=*/0);
    }
    ADD_FAILURE() << "speculation never turned off";
    return {};
  }

  // The target decides the off window `off`'s first position alone, with the
  // token the drafter would propose there (`match`) or another one.
  void ResolveWindowStart(const proto::DraftBlock& off, bool match) {
    now_ += absl::Milliseconds(10);
    int32_t next = FakeDrafter::NextToken(committed_);
    if (!match) next = (next + 1) % FakeDrafter::kVocab;
    committed_.push_back(next);
    ASSERT_EQ(engine_->OnResult(Result("r", ++epoch_, {next}, static_cast<int>(committed_.size()),
                                       off.block_sequence())),
              ResultAction::kApplied);
  }

  // The target's answer to `block` after `verify` (a new epoch): `accepted` draft
  // tokens and a correction, or (-1) all of them and a bonus token; for an empty
  // block the token it chose alone.
  void Resolve(const proto::DraftBlock& block, absl::Duration verify, int accepted = -1) {
    now_ += verify;
    std::vector<int32_t> tokens = Tokens(block);
    if (accepted < 0 || accepted >= block.tokens_size()) {
      accepted = block.tokens_size();
      std::vector<int32_t> sequence = committed_;
      sequence.insert(sequence.end(), tokens.begin(), tokens.end());
      tokens.push_back(FakeDrafter::NextToken(sequence));
    } else {
      tokens.resize(accepted + 1);
      tokens.back() = (tokens.back() + 1) % FakeDrafter::kVocab;  // the target's correction
    }
    proto::VerifyResult r =
        Result("r", ++epoch_, tokens, static_cast<int>(block.start()) + accepted + 1,
               block.block_sequence());
    r.set_accepted(static_cast<uint32_t>(accepted));
    EXPECT_EQ(engine_->OnResult(r), ResultAction::kApplied);
    committed_.insert(committed_.end(), tokens.begin(), tokens.end());
  }

  // Sends blocks whose every draft token is accepted. The target verifies k drafts
  // in 10 ms x (1 + 0.1 k) (a real verify-cost curve), and `unseen` passes between
  // a result and the next block: time the request loses outside the target's
  // step and the drafting (the clock stands still inside Propose: the draft is
  // free), which the block overhead measures. Returns the speculative blocks
  // sent before the first empty one (k = 0), at most `limit`.
  int SpeculativeBlocksBeforeOff(absl::Duration unseen, int limit) {
    for (int blocks = 0; blocks < limit; ++blocks) {
      std::vector<proto::DraftBlock> sent = Step();
      if (sent.size() != 1u) {
        ADD_FAILURE() << "step " << blocks << " sent " << sent.size() << " blocks";
        return -1;
      }
      last_block_ = sent[0];
      if (sent[0].tokens_size() == 0) return blocks;
      Resolve(sent[0], absl::Milliseconds(10) * (1.0 + 0.1 * sent[0].tokens_size()));
      now_ += unseen;
    }
    return limit;
  }

  absl::Time now_ = absl::UnixEpoch();
  proto::DraftBlock last_block_;  // the last block sent
  std::vector<int32_t> committed_;
  uint64_t epoch_ = 0;
};

TEST_F(DraftEngineGuardTest, AcceptedBlocksThatCostMoreThanPlainStepsTurnSpeculationOff) {
  MakeTimed();
  // 100 ms unseen per block: at most 9 tokens per ~118 ms against ~10 ms per plain
  // step. The request's first result (it paid for the prefill) is not timed; the
  // second measures the overhead.
  const int blocks = SpeculativeBlocksBeforeOff(absl::Milliseconds(100), 40);
  EXPECT_GE(blocks, 2);
  EXPECT_LE(blocks, 3);
  // Off, not a blip: the empty block asks the target to decode alone (an off
  // window), and nothing is sent while it does. Its blocks were all accepted, so
  // acceptance is not what lost: no block can win, and the window is the longest.
  EXPECT_EQ(last_block_.alone_tokens(), static_cast<uint32_t>(spec::kMaxOffTokens));
  EXPECT_FALSE(engine_->HasWork());  // waits for the empty block's result
  Resolve(last_block_, absl::Milliseconds(10));
  EXPECT_FALSE(engine_->HasWork()) << "inside the off window";
  EXPECT_TRUE(Step().empty());
}

// The costs are the worker's, not a request's: after a drafter whose blocks
// lose whatever their acceptance, the next requests start off, with the
// longest window, and no block at all.
TEST_F(DraftEngineGuardTest, ADrafterThatLosesAtAnyAcceptanceStartsTheNextRequestsOff) {
  MakeTimed();
  ASSERT_GT(SpeculativeBlocksBeforeOff(absl::Milliseconds(100), 40), 0);
  engine_->Release("r");
  for (int start = 1; start <= 3; ++start) {
    const std::string id = "n" + std::to_string(start);
    ASSERT_TRUE(engine_->AddRequest(Assign(id, 0, /*max_tokens=*/1000)).ok());
    std::vector<OutgoingBlock> out;
    ASSERT_TRUE(engine_->Step(&out).ok());
    ASSERT_EQ(out.size(), 1u) << "start " << start;
    EXPECT_EQ(out[0].block.tokens_size(), 0) << "start " << start << ": off from the start";
    EXPECT_EQ(out[0].block.alone_tokens(), static_cast<uint32_t>(spec::kMaxOffTokens));
    engine_->Release(id);
  }
}

TEST_F(DraftEngineGuardTest, AcceptedBlocksThatBeatPlainStepsKeepSpeculating) {
  MakeTimed();
  EXPECT_EQ(SpeculativeBlocksBeforeOff(absl::ZeroDuration(), 40), 40);
}

// A model drafter takes in a request's prompt before its first block (here 5 ms
// a token against a 10 ms plain step). The worker measured that on its first
// request; a 300-token prompt then costs 150 plain steps: worth it for a long
// request, not for one of 8 tokens, which starts off without prefilling the draft.
TEST_F(DraftEngineGuardTest, APromptTheRequestCannotRepayIsNotPrefilledForADraft) {
  MakeTimed();
  drafter_.OnTakeIn([this](size_t tokens) { now_ += absl::Milliseconds(5) * tokens; });
  ASSERT_EQ(SpeculativeBlocksBeforeOff(absl::ZeroDuration(), 6), 6);
  engine_->Release("r");
  const std::vector<int32_t> long_prompt(300, 3);
  auto assign = [&](const std::string& id, int max_tokens) {
    proto::Assignment a = Assign(id, /*draft_k=*/0, max_tokens, long_prompt);
    a.set_prompt_length(static_cast<uint32_t>(long_prompt.size()));
    return a;
  };
  ASSERT_TRUE(engine_->AddRequest(assign("short", 8)).ok());
  const size_t proposals = drafter_.proposals().size();
  std::vector<proto::DraftBlock> sent = Step();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(sent[0].tokens_size(), 0) << "off from the start";
  EXPECT_EQ(drafter_.proposals().size(), proposals) << "the prompt was prefilled for nothing";
  engine_->Release("short");
  ASSERT_TRUE(engine_->AddRequest(assign("long", 100000)).ok());
  sent = Step();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_GT(sent[0].tokens_size(), 0) << "a long request repays the prefill";
}

// --- the speculation cache ---

class DraftEngineCacheTest : public DraftEngineTest {
 protected:
  void MakeCached(int budget_factor = 100) {
    DraftEngineOptions options;
    options.lookahead_blocks = 2;  // the cache keeps one block in flight regardless
    options.spec_cache = true;
    options.cache.max_branches = 16;
    options.cache.correction_candidates = 1;
    options.cache.bonus_candidates = 2;
    options.cache.min_probability = 0.0;
    options.cache_alternatives = 2;
    options.cache_budget_factor = budget_factor;
    engine_ = std::make_unique<DraftEngine>(&drafter_, options);
  }
  // Runs cache steps until there is no work; returns how many ran.
  int FillCache() {
    int steps = 0;
    while (engine_->HasWork() && steps < 200) {
      EXPECT_TRUE(Step().empty());  // pre-drafting sends nothing
      ++steps;
    }
    return steps;
  }
  // The verification of `block`: `accepted` drafts, then `next`; the target
  // reports its plain step `target_step_seconds` (0: none) and a flat line.
  ResultAction Verify(const proto::DraftBlock& block, int accepted, int32_t next,
                      uint64_t new_epoch, double target_step_seconds = 0.0) {
    std::vector<int32_t> tokens = Slice(Tokens(block), 0, accepted);
    tokens.push_back(next);
    proto::VerifyResult r =
        Result(block.request_id(), new_epoch, tokens,
               static_cast<int>(block.start()) + accepted + 1, block.block_sequence());
    r.set_accepted(static_cast<uint32_t>(accepted));
    r.set_target_step_seconds(target_step_seconds);
    return engine_->OnResult(r);
  }
};

TEST_F(DraftEngineCacheTest, AHitSendsThePreDraftedBlockWithoutDrafting) {
  constexpr int kK = 3;
  // Every outcome shape: all accepted with the draft's bonus pick and with its
  // runner-up, and the first rejection at each j with the draft's runner-up.
  for (int accepted = 0; accepted <= kK + 1; ++accepted) {
    MakeCached();
    ASSERT_TRUE(engine_->AddRequest(Assign("r", kK)).ok());
    auto first = Step();
    ASSERT_EQ(first.size(), 1u);
    EXPECT_GT(FillCache(), 0);
    const size_t proposals = drafter_.proposals().size();
    const int a = std::min(accepted, kK);
    std::vector<int32_t> committed = kPrompt;
    for (int i = 0; i < a; ++i) committed.push_back(first[0].tokens(i));
    // The draft's pick at this position, then its runner-up (pick + 1).
    const int32_t pick = FakeDrafter::NextToken(committed);
    const int32_t next = (accepted == kK) ? pick : (pick + 1) % FakeDrafter::kVocab;
    ASSERT_EQ(Verify(first[0], a, next, 1), ResultAction::kApplied);
    committed.push_back(next);
    auto second = Step();
    ASSERT_EQ(second.size(), 1u) << accepted;
    EXPECT_EQ(drafter_.proposals().size(), proposals) << "a hit must not draft: " << accepted;
    EXPECT_EQ(second[0].epoch(), 1u);
    EXPECT_EQ(second[0].start(), committed.size());
    EXPECT_EQ(Tokens(second[0]),
              Slice(FakeDrafter::Extend(committed, kK), committed.size(), committed.size() + kK))
        << accepted;
    EXPECT_EQ(engine_->counters().cache_blocks_sent, 1u);
    EXPECT_EQ(engine_->cache_counters().hits, 1u);
    engine_->Release("r");
  }
}

TEST_F(DraftEngineCacheTest, AMissDraftsFromTheCommittedSequenceAsWithoutTheCache) {
  MakeCached();
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  auto first = Step();
  FillCache();
  std::vector<int32_t> committed = kPrompt;
  committed.push_back(first[0].tokens(0));
  const int32_t unguessed = (FakeDrafter::NextToken(committed) + 5) % FakeDrafter::kVocab;
  committed.push_back(unguessed);
  ASSERT_EQ(Verify(first[0], 1, unguessed, 1), ResultAction::kApplied);
  const size_t proposals = drafter_.proposals().size();
  auto second = Step();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(drafter_.proposals().size(), proposals + 1);
  EXPECT_EQ(drafter_.proposals().back().context, committed);
  EXPECT_EQ(Tokens(second[0]), Slice(FakeDrafter::Extend(committed, 3), kP + 2, kP + 5));
  EXPECT_EQ(engine_->cache_counters().misses, 1u);
  EXPECT_EQ(engine_->counters().cache_blocks_sent, 0u);
}

TEST_F(DraftEngineCacheTest, APartialHitDraftsOnlyTheRest) {
  MakeCached();
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  auto first = Step();
  // Under the prior acceptance (0.6) the likeliest outcome of a 3-token block is a
  // rejection at 0 (0.4 > 0.6^3): its branch comes first; draft one token of it.
  Step();
  std::vector<int32_t> committed = kPrompt;
  const int32_t runner_up = (first[0].tokens(0) + 1) % FakeDrafter::kVocab;
  committed.push_back(runner_up);
  ASSERT_EQ(Verify(first[0], 0, runner_up, 1), ResultAction::kApplied);
  auto second = Step();
  ASSERT_EQ(second.size(), 1u);
  EXPECT_EQ(drafter_.proposals().back().k, 2);  // 1 pre-drafted + 2 now
  EXPECT_EQ(Tokens(second[0]), Slice(FakeDrafter::Extend(committed, 3), kP + 1, kP + 4));
  EXPECT_EQ(engine_->cache_counters().partial_hits, 1u);
}

TEST_F(DraftEngineCacheTest, BudgetFollowsTheCostRatioAndStaleBranchesAreDropped) {
  // Budget factor 0.1 x the initial cost ratio (10) x T_verify(3)/T: 2 tokens.
  MakeCached(/*budget_factor=*/0);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  auto first = Step();
  EXPECT_EQ(FillCache(), 1);  // the budget's floor: one token
  EXPECT_EQ(engine_->cache_counters().drafted_tokens, 1u);
  // A resync (full sequence) makes every branch stale.
  proto::VerifyResult sync = Result("r", 3, {4, 8, 15, 16, 23, 42}, 6);
  sync.set_full_sequence(true);
  ASSERT_EQ(engine_->OnResult(sync), ResultAction::kApplied);
  EXPECT_EQ(engine_->cache_counters().dropped, 1u);
  auto next = Step();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(engine_->counters().cache_blocks_sent, 0u);
  EXPECT_EQ(next[0].start(), 6u);
}

TEST_F(DraftEngineCacheTest, ATargetOnlyStepDropsThePlanWithoutALookup) {
  MakeCached();
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  auto first = Step();
  FillCache();
  // The target waited block_wait and decided the position alone (block_sequence 0).
  proto::VerifyResult alone = Result("r", 1, {7}, kP + 1, /*block_sequence=*/0);
  ASSERT_EQ(engine_->OnResult(alone), ResultAction::kApplied);
  EXPECT_EQ(engine_->cache_counters().lookups, 0u);
  EXPECT_EQ(engine_->cache_counters().dropped, 1u);
  auto next = Step();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(engine_->counters().cache_blocks_sent, 0u);
}

// The cache guard in the engine (a fixed-k request with the cache: the policy
// chooses between the cache and the sequential loop): a block verified while
// the draft pre-drafted takes 15 ms against the 10 ms the target reports for its
// step (interference is measured against the target's own line), and no
// pre-drafted branch ever hits. The draft is free (the clock
// stands still inside Propose), so pre-drafting gains nothing and its measured
// interference makes the sequential loop win: pre-drafting stops, and the next
// request (the costs are the worker's) never starts it.
TEST_F(DraftEngineCacheTest, TheGuardStopsPreDraftingThatSlowsTheTargetAndNeverHits) {
  absl::Time now = absl::UnixEpoch();
  DraftEngineOptions options;
  options.spec_cache = true;
  options.cache.min_probability = 0.0;
  options.cache_budget_factor = 100;
  options.clock = [&now] { return now; };
  engine_ = std::make_unique<DraftEngine>(&drafter_, options);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3, /*max_tokens=*/1000)).ok());
  std::vector<int32_t> committed = kPrompt;
  int busy_blocks = 0, busy_blocks_late = 0;
  for (int block = 0; block < 64; ++block) {
    std::vector<proto::DraftBlock> sent = Step();
    ASSERT_EQ(sent.size(), 1u) << "block " << block;
    ASSERT_EQ(sent[0].tokens_size(), 3);
    ASSERT_EQ(static_cast<int>(sent[0].start()), static_cast<int>(committed.size()));
    const bool busy = FillCache() > 0;
    busy_blocks += busy;
    if (block >= 8 && busy) ++busy_blocks_late;
    now += absl::Milliseconds(busy ? 15 : 10);
    const int32_t unguessed = (FakeDrafter::NextToken(committed) + 5) % FakeDrafter::kVocab;
    ASSERT_EQ(Verify(sent[0], 0, unguessed, block + 1, /*target_step_seconds=*/0.010),
              ResultAction::kApplied);
    committed.push_back(unguessed);
  }
  EXPECT_GT(busy_blocks, 0) << "the cache is tried";
  EXPECT_EQ(busy_blocks_late, 0) << "and stopped once measured";
  EXPECT_EQ(engine_->cache_counters().hits + engine_->cache_counters().partial_hits, 0u);
  engine_->Release("r");
  ASSERT_TRUE(engine_->AddRequest(Assign("s", 3, /*max_tokens=*/1000)).ok());
  std::vector<proto::DraftBlock> sent = Step();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_EQ(FillCache(), 0);
}

// With adaptive_window the request runs the mode the policy chooses from the
// worker's estimates: two blocks in flight exactly when it predicts overlapped.
TEST_F(DraftEngineTest, AdaptiveWindowRunsThePolicysMode) {
  DraftEngineOptions options;
  options.lookahead_blocks = 2;
  options.adaptive_window = true;
  engine_ = std::make_unique<DraftEngine>(&drafter_, options);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", 3)).ok());
  spec::SpecEstimates unmeasured;
  unmeasured.target_slope = options.prior_verify_slope;
  spec::SpecChoices choices;
  choices.min_k = choices.max_k = 3;
  choices.allow_off = false;
  choices.overlapped = true;
  const spec::SpecAction expected =
      spec::ChooseSpecAction(unmeasured, choices, spec::SpecMode::kOverlapped);
  EXPECT_EQ(Step().size(), 1u);
  EXPECT_EQ(engine_->HasWork(), expected.mode == spec::SpecMode::kOverlapped)
      << spec::SpecModeName(expected.mode);
  // With the cache, an untried cache's optimistic hit rate makes it the choice:
  // the draft pre-drafts while the block is verified.
  options.spec_cache = true;
  options.cache.min_probability = 0.0;
  engine_ = std::make_unique<DraftEngine>(&drafter_, options);
  ASSERT_TRUE(engine_->AddRequest(Assign("c", 3)).ok());
  choices.cached = true;
  ASSERT_EQ(spec::ChooseSpecAction(unmeasured, choices, spec::SpecMode::kCached).mode,
            spec::SpecMode::kCached);
  EXPECT_EQ(Step().size(), 1u);
  ASSERT_TRUE(engine_->HasWork());
  EXPECT_TRUE(Step().empty());
  EXPECT_EQ(engine_->cache_counters().drafted_tokens, 1u);
}

// --- off windows ---

// Blocks rejected until the policy turns speculation off: one empty block asks
// the target to decode the window's tokens alone, and nothing more is sent until
// they are committed (each by the target, a new epoch each); then a block (the
// aged evidence lets the policy try again); once blocks fail again, another
// window as long (the cost of trying is bounded by the evidence's aging).
TEST_F(DraftEngineTest, AdaptiveOffWindowLetsTheTargetDecodeAloneUntilTheProbe) {
  DraftEngineOptions options;
  options.catch_up_tokens = 0;  // the draft does nothing inside the windows
  std::vector<int32_t> committed;
  uint64_t epoch = 0;
  proto::DraftBlock off = OpenOffWindow(options, &committed, &epoch);
  ASSERT_FALSE(HasFailure());
  // The target's own tokens over `n` positions, one result each (the window
  // block's block_sequence on the first, none after).
  auto decode_alone = [&](int n, uint64_t first_sequence) {
    for (int i = 0; i < n; ++i) {
      committed.push_back(static_cast<int32_t>((committed.size() * 7) % FakeDrafter::kVocab));
      ASSERT_EQ(engine_->OnResult(Result("r", ++epoch, {committed.back()},
                                         static_cast<int>(committed.size()),
                                         i == 0 ? first_sequence : 0)),
                ResultAction::kApplied);
      if (i + 1 < n) {
        EXPECT_FALSE(engine_->HasWork()) << "inside the window, token " << i;
      }
    }
  };
  std::vector<uint32_t> windows;
  for (int round = 0; round < 2; ++round) {
    EXPECT_EQ(off.tokens_size(), 0);
    EXPECT_EQ(off.start(), committed.size());
    windows.push_back(off.alone_tokens());
    EXPECT_FALSE(engine_->HasWork()) << "no block while the target decodes alone";
    const uint64_t blocks_before = engine_->counters().blocks_sent;
    decode_alone(static_cast<int>(off.alone_tokens()), off.block_sequence());
    EXPECT_EQ(engine_->counters().blocks_sent, blocks_before) << "no block per token";
    ASSERT_TRUE(engine_->HasWork()) << "window " << round;
    off = RejectUntilOff(&committed, &epoch);
    ASSERT_FALSE(HasFailure());
  }
  // The window lasts as long as the evidence of failure takes to age below the
  // margin: tens of tokens per block tried, not one.
  for (const uint32_t window : windows) EXPECT_GT(window, 16u);
  EXPECT_GT(off.alone_tokens(), 16u);
}

// The empty block that opens an off window drafts nothing, so it costs no
// Propose: one of k = 0 would feed a model drafter the whole context (for a new
// request, a prefill of its prompt) on the cores the target decodes on.
TEST_F(DraftEngineTest, AnOffWindowBlockRunsNoPropose) {
  DraftEngineOptions options;
  std::vector<int32_t> committed;
  uint64_t epoch;
  const proto::DraftBlock off = OpenOffWindow(options, &committed, &epoch);
  ASSERT_FALSE(HasFailure());
  ASSERT_EQ(off.tokens_size(), 0);
  const uint64_t drafted_blocks = engine_->counters().blocks_sent - 1;  // all but the off block
  EXPECT_EQ(engine_->counters().propose_calls, drafted_blocks);
  for (const FakeDrafter::Proposal& proposal : drafter_.proposals()) EXPECT_GT(proposal.k, 0);
  EXPECT_LT(drafter_.Held("r")->size(), committed.size()) << "the drafter was not fed";
}

// A drafter whose weights say it costs a target step per token (the target as
// its own draft: decode_bytes_ratio 1) cannot win even at full acceptance: a
// fresh worker's first request starts off, without drafting a block to learn
// it, and sends no probe within the window. A model 50x lighter drafts at once.
TEST_F(DraftEngineTest, TheDrafterPriorDecidesTheFirstBlock) {
  drafter_.set_decode_bytes_ratio(1.0);
  DraftEngineOptions options;
  options.clock = [] { return absl::UnixEpoch(); };  // nothing is ever timed
  engine_ = std::make_unique<DraftEngine>(&drafter_, options);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", /*draft_k=*/0, /*max_tokens=*/1000)).ok());
  auto first = Step();
  ASSERT_EQ(first.size(), 1u);
  EXPECT_EQ(first[0].tokens_size(), 0);
  EXPECT_EQ(first[0].alone_tokens(), static_cast<uint32_t>(spec::kMaxOffTokens));
  EXPECT_TRUE(drafter_.proposals().empty()) << "nothing drafted, nothing prefilled";

  drafter_.set_decode_bytes_ratio(0.02);
  engine_ = std::make_unique<DraftEngine>(&drafter_, options);
  ASSERT_TRUE(engine_->AddRequest(Assign("s", /*draft_k=*/0, /*max_tokens=*/1000)).ok());
  auto light = Step();
  ASSERT_EQ(light.size(), 1u);
  EXPECT_GT(light[0].tokens_size(), 1) << "k chosen at the prior's cost, not min_k";
}

// A drafter with no shadow blocks to score (a model) needs the target's tokens in
// an off window only in bunches: its empty block asks for them every
// window_result_tokens steps, and a result carrying several plain tokens moves it
// along as their single results would.
TEST_F(DraftEngineTest, AnOffWindowWithoutShadowBlocksTakesTheTargetsTokensInBunches) {
  DraftEngineOptions options;
  options.window_result_tokens = 4;
  options.catch_up_tokens = 2;
  std::vector<int32_t> committed;
  uint64_t epoch;
  const proto::DraftBlock off = OpenOffWindow(options, &committed, &epoch);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(off.window_result_tokens(), 4u);
  ASSERT_GT(off.alone_tokens(), 12u);
  // The empty block's own result, then two bunches of 4 plain tokens.
  committed.push_back(11);
  ASSERT_EQ(engine_->OnResult(Result("r", ++epoch, {committed.back()},
                                     static_cast<int>(committed.size()), off.block_sequence())),
            ResultAction::kApplied);
  for (int bunch = 0; bunch < 2; ++bunch) {
    std::vector<int32_t> tokens;
    for (int i = 0; i < 4; ++i) {
      tokens.push_back(static_cast<int32_t>((committed.size() * 7) % FakeDrafter::kVocab));
      committed.push_back(tokens.back());
    }
    ASSERT_EQ(engine_->OnResult(Result("r", ++epoch, tokens, static_cast<int>(committed.size()))),
              ResultAction::kApplied)
        << "bunch " << bunch;
    EXPECT_FALSE(engine_->HasWork()) << "bunch " << bunch << ": inside the window, nothing to do";
  }
  // A bunch that skips a token is a gap, as a lost single result would be.
  EXPECT_EQ(engine_->OnResult(Result("r", ++epoch, {1, 2}, static_cast<int>(committed.size()) + 3)),
            ResultAction::kNeedSync);
}

// Catch-up needs each of the window's last catch_up_tokens tokens: the block's
// window_result_tokens (the single results at the window's end) is at least that.
TEST_F(DraftEngineTest, AnOffWindowAsksForSingleResultsOverItsCatchUpChunk) {
  DraftEngineOptions options;
  options.window_result_tokens = 2;
  options.catch_up_tokens = 6;
  std::vector<int32_t> committed;
  uint64_t epoch;
  const proto::DraftBlock off = OpenOffWindow(options, &committed, &epoch);
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(off.window_result_tokens(), 6u);
  engine_->Release("r");
  options.window_result_tokens = 0;
  EXPECT_EQ(OpenOffWindow(options, &committed, &epoch).window_result_tokens(), 0u)
      << "0: a result per step";
}

// A drafter too costly for shadow blocks (a model) is fed the target's tokens
// while the target decodes alone, but only near the window's end (a draft
// model's forwards beside the target cost it memory bandwidth): none while more
// than catch_up_tokens remain, then the pending tokens at once; the probe that
// ends the window then prefills at most catch_up_tokens. Catch-up sends no block.
TEST_F(DraftEngineTest, OffWindowFeedsACostlyDrafterTheTargetsTokensNearItsEnd) {
  DraftEngineOptions options;
  options.catch_up_tokens = 4;
  std::vector<int32_t> committed;
  uint64_t epoch;
  const proto::DraftBlock off = OpenOffWindow(options, &committed, &epoch);
  ASSERT_FALSE(HasFailure());
  const int window = static_cast<int>(off.alone_tokens());
  ASSERT_GT(window, 8);
  std::vector<int> caught_up_at;
  for (int i = 0; i < window; ++i) {
    committed.push_back(static_cast<int32_t>((committed.size() * 7) % FakeDrafter::kVocab));
    ASSERT_EQ(engine_->OnResult(Result("r", ++epoch, {committed.back()},
                                       static_cast<int>(committed.size()),
                                       i == 0 ? off.block_sequence() : 0)),
              ResultAction::kApplied);
    if (i + 1 == window) break;  // the window's end: the probe is due
    if (!engine_->HasWork()) continue;
    const size_t proposals = drafter_.proposals().size();
    EXPECT_TRUE(Step().empty()) << "catch-up sends nothing";
    ASSERT_EQ(drafter_.proposals().size(), proposals + 1);
    EXPECT_EQ(drafter_.proposals().back().k, 0);
    EXPECT_EQ(drafter_.proposals().back().context, committed);
    EXPECT_EQ(*drafter_.Held("r"), committed);
    caught_up_at.push_back(i + 1);  // target-only steps so far
  }
  ASSERT_FALSE(caught_up_at.empty());
  EXPECT_GE(caught_up_at.front(), window - 4) << "no catch-up before the last 4 steps";
  EXPECT_EQ(engine_->counters().catch_up_calls, caught_up_at.size());
  EXPECT_GE(engine_->counters().catch_up_tokens, static_cast<uint64_t>(window - 4));
  EXPECT_LE(committed.size() - drafter_.Held("r")->size(), 4u) << "the probe's prefill";
  auto next = Step();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_GT(next[0].tokens_size(), 0) << "the probe";
  EXPECT_EQ(next[0].start(), committed.size());
}

// An off window opens only when the target resolves its block: if the target
// moved to a new epoch without it (here it decided the position alone after
// block_wait, so the window block is stale and dropped), the draft must not sit
// waiting for window tokens that will never come.
TEST_F(DraftEngineTest, StaleOffWindowBlockOpensNoWindow) {
  std::vector<int32_t> committed;
  uint64_t epoch;
  const proto::DraftBlock off = OpenOffWindow(DraftEngineOptions(), &committed, &epoch);
  ASSERT_FALSE(HasFailure());
  // A result of a new epoch that does not answer the window block.
  committed.push_back(6);
  ASSERT_EQ(engine_->OnResult(Result("r", ++epoch, {6}, static_cast<int>(committed.size()),
                                     /*block_sequence=*/0)),
            ResultAction::kApplied);
  EXPECT_TRUE(engine_->HasWork()) << "no window is open: the draft sends again";
  auto next = Step();
  ASSERT_EQ(next.size(), 1u);
  EXPECT_EQ(next[0].start(), static_cast<uint32_t>(committed.size()));
  EXPECT_EQ(next[0].epoch(), epoch);
  EXPECT_NE(next[0].block_sequence(), off.block_sequence());
}

// A shadow Propose that finds nothing (no n-gram match) is not retried at the
// same position: the engine has no work until the target's next token arrives
// (before, HasWork stayed true and the draft worker's loop spun on the drafter
// for the whole target step: ~3 ms of CPU per token beside the target).
TEST_F(DraftEngineGuardTest, AShadowThatProposesNothingIsNotRetriedAtTheSamePosition) {
  const proto::DraftBlock off = MakeAdaptiveWithShadowsOff();  // with its shadow Propose
  ASSERT_FALSE(HasFailure());
  EXPECT_EQ(off.window_result_tokens(), 0u) << "shadow blocks are scored against each token";
  drafter_.ProposeNothingFor("r");
  ResolveWindowStart(off, /*match=*/false);
  for (int token = 0; token < 5; ++token) {
    const size_t proposals = drafter_.proposals().size();
    ASSERT_TRUE(engine_->HasWork()) << "token " << token << ": a shadow is due at the new position";
    EXPECT_TRUE(Step().empty());
    EXPECT_EQ(drafter_.proposals().size(), proposals + 1);
    EXPECT_FALSE(engine_->HasWork()) << "token " << token << ": nothing found, nothing to retry";
    const int32_t next = static_cast<int32_t>((committed_.size() * 5) % FakeDrafter::kVocab);
    committed_.push_back(next);
    now_ += absl::Milliseconds(10);
    ASSERT_EQ(engine_->OnResult(Result("r", ++epoch_, {next}, static_cast<int>(committed_.size()))),
              ResultAction::kApplied);
  }
}

// Shadow blocks: while speculation is off, a drafter that costs nothing (the
// fake clock stands still inside Propose) proposes at each position without
// sending; when the target's own tokens keep matching those proposals, the
// policy predicts a win and the draft speculates again before the window
// ends. Tokens that do not match keep it off for the whole window.
TEST_F(DraftEngineGuardTest, ShadowBlocksThatMatchEndTheOffWindowEarly) {
  for (const bool copyable : {false, true}) {
    const proto::DraftBlock off = MakeAdaptiveWithShadowsOff();
    ASSERT_FALSE(HasFailure());
    const uint64_t blocks_before = engine_->counters().blocks_sent;
    const int window_end = static_cast<int>(off.start() + off.alone_tokens());
    ASSERT_GT(off.alone_tokens(), 16u);
    ResolveWindowStart(off, copyable);
    // The target decides alone: the drafter's own next token, or another one.
    int speculative_at = -1;
    while (static_cast<int>(committed_.size()) < window_end) {
      for (const proto::DraftBlock& block : Step()) {
        ASSERT_GT(block.tokens_size(), 0) << "only shadow blocks are drafted in the window";
        speculative_at = static_cast<int>(block.start());
      }
      if (speculative_at >= 0) break;
      int32_t next = FakeDrafter::NextToken(committed_);
      if (!copyable) next = (next + 1) % FakeDrafter::kVocab;
      committed_.push_back(next);
      now_ += absl::Milliseconds(10);
      ASSERT_EQ(
          engine_->OnResult(Result("r", ++epoch_, {next}, static_cast<int>(committed_.size()))),
          ResultAction::kApplied);
    }
    if (copyable) {
      EXPECT_GE(speculative_at, 0) << "matching shadow blocks turn speculation on";
      EXPECT_LT(speculative_at, window_end - 8) << "well before the window's end";
    } else {
      EXPECT_LT(speculative_at, 0) << "shadow blocks that miss keep speculation off";
      EXPECT_EQ(engine_->counters().blocks_sent, blocks_before) << "no block in the window";
    }
    engine_->Release("r");
  }
}

// An empty block sent because the drafter failed asks the target for that one
// position only: the controller did not turn speculation off.
TEST_F(DraftEngineTest, AFailedAdaptiveProposalOpensNoOffWindow) {
  Make(/*lookahead=*/1);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", /*draft_k=*/0)).ok());
  drafter_.FailRequest("r");
  auto failed = Step();
  ASSERT_EQ(failed.size(), 1u);
  ASSERT_EQ(failed[0].tokens_size(), 0);
  EXPECT_EQ(failed[0].alone_tokens(), 0u);
  ASSERT_EQ(engine_->OnResult(Result("r", 1, {5}, kP + 1, failed[0].block_sequence())),
            ResultAction::kApplied);
  EXPECT_TRUE(engine_->HasWork()) << "the draft proposes at the next position";
}

// Trees (issue 30) with the real lookup drafter over a prompt of 300 pseudo-random
// tokens in {1, 2, 3}: every short suffix recurs with different continuations, so
// the drafter's tries branch wherever the text goes.
std::vector<int32_t> BranchyPrompt() {
  std::vector<int32_t> tokens;
  uint32_t x = 12345;
  for (int i = 0; i < 300; ++i) {
    x = x * 1103515245u + 12345u;
    tokens.push_back(1 + static_cast<int32_t>((x >> 16) % 3));
  }
  return tokens;
}

// A drafter that reports confidence classes: the policy prices each proposal by
// its classes. Proposals at even positions are confident (class 3) and the
// target accepts them whole; at odd ones the first draft is class 0 and rejected.
// Once that is measured, weak proposals are withheld (an empty block: the target
// decides that token) while confident ones keep going out whole.
// An ask the drafter answers with nothing (a model-free drafter where the text
// has no match) rejects no drafted position: it lowers the chance of a proposal
// (spec_policy.h, p+), which costs nothing while an empty block costs a plain
// step, so the asks go on, ready for when the text turns copyable.
TEST_F(DraftEngineTest, AsksAnsweredWithNothingAreNoRejections) {
  DraftEngineOptions options;
  options.lookahead_blocks = 1;
  options.shadow_drafts = false;
  options.clock = [] { return absl::UnixEpoch(); };  // no cost measured: acceptance decides
  engine_ = std::make_unique<DraftEngine>(&drafter_, options);
  ASSERT_TRUE(engine_->AddRequest(Assign("r", /*draft_k=*/0, /*max_tokens=*/1000)).ok());
  drafter_.ProposeNothingFor("r");
  std::vector<int32_t> committed = kPrompt;
  uint64_t epoch = 0;
  for (int round = 0; round < 40; ++round) {
    const std::vector<proto::DraftBlock> sent = Step();
    ASSERT_EQ(sent.size(), 1u) << "round " << round;
    ASSERT_EQ(sent[0].tokens_size(), 0) << "round " << round;
    // Still an ask, not an off window (which RejectUntilOff reaches within 60
    // rejected blocks): the target decides one token and the next block is asked.
    EXPECT_LE(sent[0].alone_tokens(), 1u) << "round " << round;
    committed.push_back(static_cast<int32_t>((committed.size() * 7) % FakeDrafter::kVocab));
    ASSERT_EQ(
        engine_->OnResult(Result("r", ++epoch, {committed.back()},
                                 static_cast<int>(committed.size()), sent[0].block_sequence())),
        ResultAction::kApplied)
        << "round " << round;
  }
  drafter_.ProposeAgainFor("r");
  const std::vector<proto::DraftBlock> sent = Step();
  ASSERT_EQ(sent.size(), 1u);
  EXPECT_GE(sent[0].tokens_size(), 1) << "asked, not off";
}

TEST_F(DraftEngineTest, ConfidenceClassesWithholdWeakProposalsAndSendStrongOnes) {
  DraftEngineOptions options;
  options.lookahead_blocks = 1;
  options.shadow_drafts = false;
  options.clock = [] { return absl::UnixEpoch(); };  // no cost measured: acceptance decides
  engine_ = std::make_unique<DraftEngine>(&drafter_, options);
  drafter_.ReportConfidence(
      [](size_t start, int position) -> int8_t { return start % 2 == 0 || position > 0 ? 3 : 0; });
  ASSERT_TRUE(engine_->AddRequest(Assign("r", /*draft_k=*/0, /*max_tokens=*/1000)).ok());
  std::vector<int32_t> committed = kPrompt;
  uint64_t epoch = 0;
  int strong_sent = 0, weak_sent = 0, weak_withheld = 0;
  float last_strong_first = 0.0f, last_weak_first = 0.0f;
  for (int round = 0; round < 80; ++round) {
    const std::vector<proto::DraftBlock> sent = Step();
    ASSERT_EQ(sent.size(), 1u) << "round " << round;
    const proto::DraftBlock& block = sent[0];
    ASSERT_EQ(block.start(), committed.size());
    const bool strong = committed.size() % 2 == 0;
    // Each sent draft carries the acceptance the policy priced it at (its
    // class's bound), for the target's step budget.
    if (block.tokens_size() > 0) {
      ASSERT_EQ(block.acceptance_size(), block.tokens_size()) << "round " << round;
      (strong ? last_strong_first : last_weak_first) = block.acceptance(0);
      for (float a : block.acceptance()) EXPECT_TRUE(a > 0.0f && a <= 1.0f) << a;
    }
    proto::VerifyResult result;
    if (block.tokens_size() == 0) {
      EXPECT_FALSE(strong) << "round " << round << ": a confident proposal was withheld";
      ++weak_withheld;
      committed.push_back(static_cast<int32_t>((committed.size() * 7) % FakeDrafter::kVocab));
      result = Result("r", ++epoch, {committed.back()}, static_cast<int>(committed.size()),
                      block.block_sequence());
    } else if (strong) {
      ++strong_sent;
      const std::vector<int32_t> drafts = Tokens(block);
      committed.insert(committed.end(), drafts.begin(), drafts.end());
      // Plus the target's own token, so the next block starts where the target chose.
      committed.push_back((drafts.back() + 5) % FakeDrafter::kVocab);
      if (committed.size() % 2 == 0) {  // keep alternating: the next proposal is weak
        committed.push_back((committed.back() + 5) % FakeDrafter::kVocab);
      }
      result = Result("r", ++epoch, Slice(committed, block.start(), committed.size()),
                      static_cast<int>(committed.size()), block.block_sequence());
      result.set_accepted(static_cast<uint32_t>(drafts.size()));
    } else {
      ++weak_sent;
      committed.push_back((block.tokens(0) + 1) % FakeDrafter::kVocab);  // rejected
      result = Result("r", ++epoch, {committed.back()}, static_cast<int>(committed.size()),
                      block.block_sequence());
    }
    ASSERT_EQ(engine_->OnResult(result), ResultAction::kApplied) << "round " << round;
  }
  EXPECT_GT(strong_sent, 20);
  EXPECT_GT(weak_withheld, 20);
  EXPECT_GE(weak_sent, 1) << "an unmeasured class is tried";
  // Once measured, mostly withheld: re-tried only as its evidence ages (the probes).
  EXPECT_GE(weak_withheld, 3 * weak_sent);
  EXPECT_EQ(engine_->counters().proposals_withheld, static_cast<uint64_t>(weak_withheld));
  EXPECT_GT(last_strong_first, 0.9f);
  EXPECT_LT(last_weak_first, last_strong_first);
}

class DraftEngineTreeTest : public ::testing::Test {
 protected:
  // draft_k 0: the policy chooses k (and may turn speculation off); else fixed k,
  // still with the tree rule's choice between that chain and a tree of depth <= k.
  void Make(bool trees, bool target_runs_trees, int draft_k = 4, float presence_penalty = 0.0f,
            const std::vector<int32_t>& prompt = BranchyPrompt()) {
    DraftEngineOptions options;
    options.trees = trees;
    options.shadow_drafts = false;
    options.clock = [this] { return now_; };
    engine_ = std::make_unique<DraftEngine>(&drafter_, options);
    drafter_.Release("t");  // a previous engine's
    proto::Assignment a = Assign("t", draft_k, 256, prompt);
    a.set_prompt_length(static_cast<uint32_t>(prompt.size()));
    a.set_target_runs_trees(target_runs_trees);
    a.mutable_params()->mutable_processors()->set_presence_penalty(presence_penalty);
    ASSERT_TRUE(engine_->AddRequest(a).ok());
  }
  std::vector<proto::DraftBlock> StepBlocks() {
    std::vector<OutgoingBlock> out;
    EXPECT_TRUE(engine_->Step(&out).ok());
    std::vector<proto::DraftBlock> blocks;
    for (OutgoingBlock& o : out) blocks.push_back(std::move(o.block));
    return blocks;
  }
  // The target's result for `block`: it accepts the path to the first node that
  // is its parent's `rank`-th child (rank 1: the first path's first node; none
  // such: nothing), then corrects with a token none of that node's children carries.
  static proto::VerifyResult Verify(const proto::DraftBlock& block, int rank) {
    spec::DraftTree tree;
    tree.tokens.assign(block.tokens().begin(), block.tokens().end());
    tree.parents.assign(block.parents().begin(), block.parents().end());
    if (tree.parents.empty()) {
      for (int i = 0; i < tree.size(); ++i) tree.parents.push_back(i - 1);
    }
    std::vector<int32_t> path;
    for (int32_t i = 0; i < tree.size() && path.empty(); ++i) {
      const std::vector<int32_t> siblings = tree.Children(tree.parents[i]);
      if (static_cast<int>(siblings.size()) >= rank && siblings[rank - 1] == i)
        path = tree.PathTo(i);
    }
    proto::VerifyResult r;
    r.set_request_id("t");
    r.set_epoch(block.epoch() + 1);
    r.set_block_sequence(block.block_sequence());
    // The target's line: each fed node costs a quarter of a plain step (a CPU's).
    r.set_target_step_seconds(0.01);
    r.set_target_verify_slope(0.25);
    r.set_accepted(static_cast<uint32_t>(path.size()));
    for (int32_t node : path) r.add_committed_tokens(tree.tokens[node]);
    if (block.parents_size() > 0) r.mutable_accepted_nodes()->Assign(path.begin(), path.end());
    const int32_t last = path.empty() ? spec::kTreeRoot : path.back();
    int32_t correction = 1;
    for (int32_t child : tree.Children(last)) {
      if (tree.tokens[child] == correction) ++correction;  // children carry distinct tokens
    }
    r.add_committed_tokens(correction);
    r.set_frontier(block.start() + static_cast<uint32_t>(r.committed_tokens_size()));
    return r;
  }
  static bool IsTree(const proto::DraftBlock& block) {
    if (block.parents_size() == 0) return false;
    const std::vector<int32_t> parents(block.parents().begin(), block.parents().end());
    EXPECT_TRUE(spec::ValidateTreeParents(parents).ok());
    EXPECT_EQ(block.parents_size(), block.tokens_size());
    spec::DraftTree tree;
    tree.tokens.assign(block.tokens().begin(), block.tokens().end());
    tree.parents = parents;
    return !tree.IsChain();
  }
  // Sequential trees whose second candidates are accepted, each result `round_trip`
  // after its block, until the engine drafts a block past a tree (the rule pipelines
  // trees once the measured round trip costs more than the forfeited bonus). Returns
  // that tree and the block behind it; fails if none comes.
  std::pair<proto::DraftBlock, proto::DraftBlock> PipelinedTree(absl::Duration round_trip) {
    for (int round = 0; round < 30; ++round) {
      std::vector<proto::DraftBlock> blocks = StepBlocks();
      EXPECT_EQ(blocks.size(), 1u);
      if (blocks.empty()) break;
      const proto::DraftBlock block = blocks[0];
      if (IsTree(block)) {
        std::vector<proto::DraftBlock> behind = StepBlocks();
        if (!behind.empty()) return {block, behind[0]};
      }
      now_ += round_trip;
      EXPECT_EQ(engine_->OnResult(Verify(block, IsTree(block) ? 2 : 1)), ResultAction::kApplied);
    }
    ADD_FAILURE() << "no block was drafted past a tree";
    return {};
  }
  spec::LookupDrafter drafter_{spec::LookupDrafterConfig{}};
  std::unique_ptr<DraftEngine> engine_;
  absl::Time now_ = absl::FromUnixSeconds(1000);
};

TEST_F(DraftEngineTreeTest, SendsTreesToATargetThatRunsThemWhileRankTwoIsAccepted) {
  Make(/*trees=*/true, /*target_runs_trees=*/true);
  int trees = 0;
  for (int round = 0; round < 12; ++round) {
    const std::vector<proto::DraftBlock> blocks = StepBlocks();
    ASSERT_EQ(blocks.size(), 1u) << "round " << round;  // nothing is drafted past a tree
    const proto::DraftBlock& block = blocks[0];
    EXPECT_EQ(block.start(), static_cast<uint32_t>(engine_->KnownFrontier("t")));
    const bool tree = IsTree(block);
    trees += tree;
    if (tree) {
      EXPECT_FALSE(block.policy_sized());  // the tree rule sized it: verified whole
    }
    // The target accepts a second candidate where there is one: branching pays.
    const proto::VerifyResult result = Verify(block, tree ? 2 : 1);
    ASSERT_EQ(engine_->OnResult(result), ResultAction::kApplied);
    // Rolled back to the accepted path: the draft's frontier is the target's.
    EXPECT_EQ(engine_->KnownFrontier("t"), static_cast<int>(result.frontier()));
  }
  EXPECT_GE(trees, 10);
  EXPECT_EQ(engine_->counters().tree_blocks_sent, static_cast<uint64_t>(trees));
}

TEST_F(DraftEngineTreeTest, TurnsToChainsWhenOnlyFirstCandidatesAreAccepted) {
  Make(/*trees=*/true, /*target_runs_trees=*/true);
  bool chain_sent = false;
  std::vector<proto::DraftBlock> pending;
  for (int round = 0; round < 60 && !chain_sent; ++round) {
    pending = StepBlocks();
    ASSERT_FALSE(pending.empty());
    if (round == 0) {
      EXPECT_TRUE(IsTree(pending[0]));  // rank 2 untried: optimistic
    }
    chain_sent = pending[0].tokens_size() > 0 && pending[0].parents_size() == 0;
    ASSERT_EQ(engine_->OnResult(Verify(pending[0], /*rank=*/1)), ResultAction::kApplied);
  }
  EXPECT_TRUE(chain_sent);
}

// Adaptive requests with a drafter that reports classes (lookup): trees are asked at
// full budget and cut by their nodes' classes (DraftEngine::CutTreeByClasses). A long
// passage repeated verbatim: one uncontested match of 12+ tokens, its positions in the
// top class and all accepted, so the blocks (chains: one match) run deeper than 4.
TEST_F(DraftEngineTreeTest, ClassPricedBlocksRunAsDeepAsALongMatchPays) {
  std::vector<int32_t> passage;
  for (int32_t t = 10; t < 70; ++t) passage.push_back(t);
  std::vector<int32_t> prompt = passage;
  prompt.insert(prompt.end(), {5, 6, 7});
  prompt.insert(prompt.end(), passage.begin(), passage.begin() + 12);
  drafter_.set_decode_bytes_ratio(1e-4);  // a known, negligible draft cost: any k may pay
  Make(/*trees=*/true, /*target_runs_trees=*/true, /*draft_k=*/0, 0.0f, prompt);
  int at = 12;  // the passage's next token
  int deepest = 0;
  for (int round = 0; round < 6 && at + 10 < static_cast<int>(passage.size()); ++round) {
    const std::vector<proto::DraftBlock> blocks = StepBlocks();
    ASSERT_FALSE(blocks.empty()) << "round " << round;
    const proto::DraftBlock& block = blocks[0];
    ASSERT_EQ(block.parents_size(), 0) << "one match proposes a chain";
    ASSERT_GT(block.tokens_size(), 0) << "round " << round << ": a confident block withheld";
    for (int j = 0; j < block.tokens_size(); ++j) ASSERT_EQ(block.tokens(j), passage[at + j]);
    deepest = std::max(deepest, block.tokens_size());
    // The target accepts it all and adds the passage's next token.
    proto::VerifyResult r;
    r.set_request_id("t");
    r.set_epoch(block.epoch() + 1);
    r.set_block_sequence(block.block_sequence());
    r.set_target_step_seconds(0.01);
    r.set_target_verify_slope(0.25);
    r.set_accepted(static_cast<uint32_t>(block.tokens_size()));
    for (int j = 0; j <= block.tokens_size(); ++j) r.add_committed_tokens(passage[at + j]);
    at += block.tokens_size() + 1;
    r.set_frontier(block.start() + static_cast<uint32_t>(r.committed_tokens_size()));
    ASSERT_EQ(engine_->OnResult(r), ResultAction::kApplied) << "round " << round;
    // Only the block in flight is resolved: drop anything drafted past it.
    engine_->OnResult(r);
  }
  EXPECT_GT(deepest, 4);
}

// With classes, trees still go where second candidates are accepted as often as first
// ones: cut within the node budget, verified whole.
TEST_F(DraftEngineTreeTest, ClassPricedTreesAreSentWhereRankTwoIsAccepted) {
  drafter_.set_decode_bytes_ratio(1e-4);
  Make(/*trees=*/true, /*target_runs_trees=*/true, /*draft_k=*/0);
  std::mt19937 random(7);
  int trees = 0;
  for (int round = 0; round < 40; ++round) {
    const std::vector<proto::DraftBlock> blocks = StepBlocks();
    ASSERT_FALSE(blocks.empty()) << "round " << round;
    const proto::DraftBlock& block = blocks[0];
    const bool tree = IsTree(block);
    trees += tree;
    if (tree) {
      EXPECT_LE(block.tokens_size(), DraftEngineOptions{}.max_tree_nodes);
      EXPECT_FALSE(block.policy_sized());
    }
    // The target's token is the drafter's first candidate or its second, at random
    // (a chain's first draft is then rejected): half the blocks gain by a branch.
    const int rank = std::bernoulli_distribution(0.5)(random) ? 1 : 2;
    ASSERT_EQ(engine_->OnResult(Verify(block, rank)), ResultAction::kApplied);
  }
  EXPECT_GE(trees, 10);
}

// Pipelined trees (lookahead 2, the default): the next block is drafted past a tree
// along its first path, used when the target accepts that whole path, stale otherwise.
int FirstPathLength(const proto::DraftBlock& block) {
  int n = 0;
  while (n < block.parents_size() && block.parents(n) == n - 1) ++n;
  return n;
}

TEST_F(DraftEngineTreeTest, DraftsPastATreeAndGoesOnWhenItsWholeFirstPathIsAccepted) {
  Make(/*trees=*/true, /*target_runs_trees=*/true);
  // A fresh request's first tree is sequential: nothing prices a round trip yet.
  const proto::DraftBlock fresh = StepBlocks().at(0);
  ASSERT_TRUE(IsTree(fresh));
  EXPECT_TRUE(StepBlocks().empty());
  now_ += absl::Milliseconds(200);
  ASSERT_EQ(engine_->OnResult(Verify(fresh, /*rank=*/2)), ResultAction::kApplied);
  const auto [tree, behind] = PipelinedTree(absl::Milliseconds(200));
  ASSERT_TRUE(IsTree(tree));
  const int path = FirstPathLength(tree);
  ASSERT_GE(path, 1);
  EXPECT_EQ(behind.start(), tree.start() + static_cast<uint32_t>(path));
  EXPECT_EQ(behind.epoch(), tree.epoch());
  EXPECT_GT(behind.tokens_size(), 0);
  EXPECT_TRUE(StepBlocks().empty()) << "the window is two blocks";
  EXPECT_EQ(engine_->counters().blocks_past_trees, 1u);
  const uint64_t epochs = engine_->counters().epochs_seen;
  // The target accepts the whole first path, without the bonus: the epoch stays.
  proto::VerifyResult r;
  r.set_request_id("t");
  r.set_epoch(tree.epoch());
  r.set_block_sequence(tree.block_sequence());
  r.set_target_step_seconds(0.01);
  r.set_target_verify_slope(0.25);
  r.set_accepted(static_cast<uint32_t>(path));
  for (int j = 0; j < path; ++j) {
    r.add_committed_tokens(tree.tokens(j));
    r.add_accepted_nodes(j);
  }
  r.set_frontier(tree.start() + static_cast<uint32_t>(path));
  ASSERT_EQ(engine_->OnResult(r), ResultAction::kApplied);
  EXPECT_EQ(engine_->KnownFrontier("t"), static_cast<int>(tree.start()) + path);
  // The block behind it is the continuation: its result applies.
  const proto::VerifyResult next = Verify(behind, /*rank=*/1);
  ASSERT_EQ(engine_->OnResult(next), ResultAction::kApplied);
  EXPECT_EQ(engine_->KnownFrontier("t"), static_cast<int>(next.frontier()));
  EXPECT_EQ(engine_->counters().epochs_seen, epochs + 1);  // the second result's only
}

TEST_F(DraftEngineTreeTest, DropsTheBlockPastATreeWhenAnotherPathIsAccepted) {
  Make(/*trees=*/true, /*target_runs_trees=*/true);
  const auto [tree, behind] = PipelinedTree(absl::Milliseconds(200));
  ASSERT_TRUE(IsTree(tree));
  ASSERT_GT(behind.tokens_size(), 0);
  // A second candidate is accepted: a new epoch, the block behind is stale.
  const proto::VerifyResult r = Verify(tree, /*rank=*/2);
  bool off_first_path = false;  // a rank-2 node ends the path
  for (int j = 0; j < r.accepted_nodes_size(); ++j) off_first_path |= r.accepted_nodes(j) != j;
  ASSERT_TRUE(off_first_path);
  ASSERT_EQ(engine_->OnResult(r), ResultAction::kApplied);
  EXPECT_EQ(engine_->KnownFrontier("t"), static_cast<int>(r.frontier()));
  // The target dropped the block behind (no result comes): the next one is drafted
  // from the accepted path at once, in the new epoch.
  const std::vector<proto::DraftBlock> redrafted = StepBlocks();
  ASSERT_EQ(redrafted.size(), 1u);
  EXPECT_EQ(redrafted[0].start(), r.frontier());
  EXPECT_EQ(redrafted[0].epoch(), r.epoch());
}

// Nor to a request whose rows read the tokens before them (a penalty): its target
// would verify a tree's first path only.
TEST_F(DraftEngineTreeTest, NeverSendsTreesWhenOffOrTheTargetDoesNotRunThem) {
  for (const int c : {0, 1, 2}) {
    const bool trees = c > 0;
    SCOPED_TRACE(c == 0 ? "--tree off" : c == 1 ? "target without trees" : "a penalty");
    Make(trees, /*target_runs_trees=*/c != 1, /*draft_k=*/4,
         /*presence_penalty=*/c == 2 ? 0.5f : 0.0f);
    int drafted = 0;
    for (int round = 0; round < 10; ++round) {
      const std::vector<proto::DraftBlock> blocks = StepBlocks();
      ASSERT_FALSE(blocks.empty());
      for (const proto::DraftBlock& block : blocks) {
        EXPECT_EQ(block.parents_size(), 0);
        drafted += block.tokens_size();
      }
      ASSERT_EQ(engine_->OnResult(Verify(blocks[0], /*rank=*/1)), ResultAction::kApplied);
    }
    EXPECT_GT(drafted, 0);  // it did draft: chains
    EXPECT_EQ(engine_->counters().tree_blocks_sent, 0u);
  }
}

}  // namespace
}  // namespace splitspec::draft

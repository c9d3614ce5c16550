// TargetEngine's specification (docs/protocol.md) over a deterministic fake model:
// chunked prefill, the token budget of a step, waiting for a block, empty and
// stale blocks, full acceptance with and without the bonus, rejection and the
// epoch, a failed forward, and greedy speculation committing exactly what plain
// greedy decoding commits.
#include "target_worker/target_engine.h"

#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/net/worker_identity.h"
#include "runtime/spec/sampling.h"
#include "tests/unit/target_worker/fake_language_model.h"

namespace splitspec::target {
namespace {

using testing::FakeLanguageModel;

constexpr uint64_t kDraftWorker = 7;

proto::Assignment Assign(const std::string& id, const std::vector<int32_t>& prompt, int max_tokens,
                         uint64_t draft_worker = 0,
                         proto::VerifyMode mode = proto::VERIFY_MODE_GREEDY) {
  proto::Assignment a;
  a.set_request_id(id);
  a.mutable_committed_tokens()->Assign(prompt.begin(), prompt.end());
  a.set_prompt_length(static_cast<uint32_t>(prompt.size()));
  a.set_draft_worker_id(draft_worker);
  a.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  if (mode == proto::VERIFY_MODE_REJECTION) {
    a.mutable_params()->set_temperature(1.0f);
    a.mutable_params()->set_seed(42);
  }
  a.set_verify_mode(mode);
  return a;
}

proto::DraftBlock Block(const std::string& id, uint64_t epoch, int start,
                        const std::vector<int32_t>& tokens, uint64_t sequence = 1) {
  proto::DraftBlock b;
  b.set_request_id(id);
  b.set_epoch(epoch);
  b.set_start(static_cast<uint32_t>(start));
  b.set_block_sequence(sequence);
  b.mutable_tokens()->Assign(tokens.begin(), tokens.end());
  return b;
}

std::vector<int32_t> Slice(const std::vector<int32_t>& v, int from, int to) {
  return {v.begin() + from, v.begin() + to};
}

class TargetEngineTest : public ::testing::Test {
 protected:
  void Make(TargetEngineOptions options = {}) {
    options.block_wait = absl::Hours(1);  // a test decides when waiting is over
    options.feed_wait = feed_wait_;       // zero unless a test waits for the next block
    options.clock = [this] { return now_ += clock_tick_; };  // each reading advances time
    engine_ = std::make_unique<TargetEngine>(&model_, options);
  }

  // Adds a request; the coordinator's view of it starts with its prompt.
  absl::Status Add(const proto::Assignment& assignment) {
    seen_[assignment.request_id()].assign(assignment.committed_tokens().begin(),
                                          assignment.committed_tokens().end());
    return engine_->AddRequest(assignment);
  }

  // Runs one step at now_; the events are in events_ and applied to seen_.
  absl::Status Step(const std::function<void()>& after_forward = nullptr) {
    events_.clear();
    absl::Status status = engine_->Step(now_, &events_, after_forward);
    for (const TargetEvent& event : events_) {
      if (!event.to_coordinator) continue;
      const proto::VerifyResult& r = event.result;
      std::vector<int32_t>& seen = seen_[r.request_id()];
      const std::vector<int32_t> tokens(r.committed_tokens().begin(), r.committed_tokens().end());
      if (r.full_sequence()) {
        seen = tokens;
      } else {
        EXPECT_EQ(r.frontier() - tokens.size(), seen.size())
            << "a result left a gap in " << r.request_id();
        seen.insert(seen.end(), tokens.begin(), tokens.end());
      }
    }
    return status;
  }

  // Steps while the engine has work (at most `max_steps`).
  void RunWhileWork(int max_steps = 200) {
    for (int i = 0; i < max_steps && engine_->HasWork(now_); ++i) ASSERT_TRUE(Step().ok());
  }

  // The coordinator-bound results of the last step for `id`.
  std::vector<proto::VerifyResult> ResultsFor(const std::string& id) const {
    std::vector<proto::VerifyResult> found;
    for (const TargetEvent& e : events_) {
      if (e.to_coordinator && e.result.request_id() == id) found.push_back(e.result);
    }
    return found;
  }

  // The forwards' records of request sequences fed with `first_token` at `start`.
  std::vector<FakeLanguageModel::FedSequence> FedAt(int start) const {
    std::vector<FakeLanguageModel::FedSequence> fed;
    for (const auto& forward : model_.forwards()) {
      for (const auto& s : forward) {
        if (s.start == start) fed.push_back(s);
      }
    }
    return fed;
  }

  absl::Duration feed_wait_ = absl::ZeroDuration();
  absl::Duration clock_tick_ = absl::ZeroDuration();  // how far each clock reading moves now_
  FakeLanguageModel model_;
  std::unique_ptr<TargetEngine> engine_;
  absl::Time now_ = absl::Now();
  std::vector<TargetEvent> events_;
  std::map<std::string, std::vector<int32_t>> seen_;  // what the coordinator was told
};

const std::vector<int32_t> kPrompt = {3, 1, 4, 1, 5};

TEST_F(TargetEngineTest, WithoutDraftWorkerDecodesAloneExactlyAsPlainGreedy) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 12)).ok());
  RunWhileWork();
  EXPECT_EQ(seen_["r"], FakeLanguageModel::GreedyExtend(kPrompt, 12));
  EXPECT_EQ(engine_->Find("r"), nullptr) << "a finished request is released";
  EXPECT_EQ(engine_->active_requests(), 0);
  EXPECT_EQ(engine_->counters().own_tokens, 12u);
}

TEST_F(TargetEngineTest, FinishedRequestReportsLengthWithTheWholeSequence) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 3)).ok());
  proto::VerifyResult last;
  for (int i = 0; i < 20 && engine_->HasWork(now_); ++i) {
    ASSERT_TRUE(Step().ok());
    for (const auto& r : ResultsFor("r")) last = r;
  }
  EXPECT_TRUE(last.finished());
  EXPECT_TRUE(last.full_sequence());
  EXPECT_EQ(last.finish_reason(), proto::FINISH_REASON_LENGTH);
  EXPECT_EQ(std::vector<int32_t>(last.committed_tokens().begin(), last.committed_tokens().end()),
            FakeLanguageModel::GreedyExtend(kPrompt, 3));
}

TEST_F(TargetEngineTest, ChunkedPrefillFeedsThePromptInChunksBeforeAnyToken) {
  TargetEngineOptions options;
  options.prefill_chunk = 4;
  Make(options);
  const std::vector<int32_t> prompt = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
  ASSERT_TRUE(Add(Assign("r", prompt, 4)).ok());
  ASSERT_TRUE(Step().ok());
  EXPECT_TRUE(events_.empty());
  ASSERT_TRUE(Step().ok());
  EXPECT_TRUE(events_.empty()) << "no token before the whole prompt is fed";
  RunWhileWork();
  ASSERT_GE(model_.forwards().size(), 3u);
  const auto& f = model_.forwards();
  ASSERT_EQ(f[0].size(), 1u);
  EXPECT_EQ(f[0][0].start, 0);
  EXPECT_EQ(f[0][0].tokens, Slice(prompt, 0, 4));
  EXPECT_EQ(f[0][0].logits, model::LogitsMode::kNone);
  EXPECT_EQ(f[1][0].start, 4);
  EXPECT_EQ(f[1][0].tokens, Slice(prompt, 4, 8));
  EXPECT_EQ(f[1][0].logits, model::LogitsMode::kNone);
  EXPECT_EQ(f[2][0].start, 8);
  EXPECT_EQ(f[2][0].tokens, Slice(prompt, 8, 10));
  EXPECT_EQ(f[2][0].logits, model::LogitsMode::kLast);
  EXPECT_EQ(seen_["r"], FakeLanguageModel::GreedyExtend(prompt, 4));
}

TEST_F(TargetEngineTest, StepTokenBudgetCapsEveryForward) {
  TargetEngineOptions options;
  options.step_token_budget = 10;
  options.prefill_chunk = 8;
  Make(options);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7, 8};
  for (const char* id : {"a", "b", "c"}) ASSERT_TRUE(Add(Assign(id, prompt, 6)).ok());
  RunWhileWork();
  ASSERT_FALSE(model_.forwards().empty());
  // The first step: a's whole chunk, then b's chunk cut to what is left of the budget.
  const auto& first = model_.forwards()[0];
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].tokens.size(), 8u);
  EXPECT_EQ(first[1].tokens, Slice(prompt, 0, 2));
  for (const auto& forward : model_.forwards()) {
    size_t total = 0;
    for (const auto& s : forward) total += s.tokens.size();
    EXPECT_LE(total, 10u);
  }
  for (const char* id : {"a", "b", "c"})
    EXPECT_EQ(seen_[id], FakeLanguageModel::GreedyExtend(prompt, 6)) << id;
}

TEST_F(TargetEngineTest, BlockLargerThanTheBudgetStillRunsAloneAndTakesTheBonus) {
  TargetEngineOptions options;
  options.step_token_budget = 2;
  Make(options);
  ASSERT_TRUE(Add(Assign("r", kPrompt, 20, kDraftWorker)).ok());
  RunWhileWork();  // prefill in chunks of the budget, then waits for a block
  const int f = static_cast<int>(kPrompt.size());
  const std::vector<int32_t> truth = FakeLanguageModel::GreedyExtend(kPrompt, 5);
  ASSERT_EQ(engine_->AddBlock(Block("r", 0, f, Slice(truth, f, f + 4)), "draft"),
            BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());
  const auto results = ResultsFor("r");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].accepted(), 4u);
  EXPECT_EQ(seen_["r"], truth) << "4 accepted tokens and the bonus";
}

TEST_F(TargetEngineTest, WaitsForABlockThenDecidesAloneAfterBlockWait) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 8, kDraftWorker)).ok());
  ASSERT_TRUE(Step().ok());  // prefill
  RunWhileWork();
  EXPECT_EQ(seen_["r"], kPrompt) << "no token while the draft may still send a block";
  EXPECT_FALSE(engine_->HasWork(now_));
  const absl::Time deadline = engine_->NextDeadline();
  ASSERT_NE(deadline, absl::InfiniteFuture());
  EXPECT_GT(deadline, now_);
  now_ = deadline;
  EXPECT_TRUE(engine_->HasWork(now_));
  ASSERT_TRUE(Step().ok());
  EXPECT_EQ(seen_["r"], FakeLanguageModel::GreedyExtend(kPrompt, 1));
  EXPECT_EQ(engine_->counters().own_tokens, 1u);
  // The draft worker learns of the target's own token, and the epoch moved on.
  bool told_draft = false;
  for (const TargetEvent& e : events_) {
    if (e.draft_peer == net::DraftPeerName(kDraftWorker)) {
      told_draft = true;
      EXPECT_EQ(e.result.epoch(), 1u);
    }
  }
  EXPECT_TRUE(told_draft);
}

TEST_F(TargetEngineTest, EmptyBlockLetsTheTargetChooseWithoutWaiting) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 8, kDraftWorker)).ok());
  RunWhileWork();
  const int f = static_cast<int>(kPrompt.size());
  ASSERT_EQ(engine_->AddBlock(Block("r", 0, f, {}, /*sequence=*/5), "draft"),
            BlockAdmission::kQueued);
  ASSERT_TRUE(engine_->HasWork(now_));
  ASSERT_TRUE(Step().ok());
  const auto results = ResultsFor("r");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].block_sequence(), 5u) << "the result answers the empty block";
  EXPECT_EQ(results[0].accepted(), 0u);
  EXPECT_EQ(results[0].epoch(), 1u);
  EXPECT_EQ(seen_["r"], FakeLanguageModel::GreedyExtend(kPrompt, 1));
  EXPECT_EQ(engine_->counters().own_tokens, 0u) << "an empty block is verified, not a timeout";
}

// An empty block with alone_tokens N (the draft's controller turned speculation
// off): the target decides N positions without waiting for blocks, one forward
// of one token per position (a plain decode step), commits plain greedy, and
// then waits for the draft again.
TEST_F(TargetEngineTest, OffWindowDecodesAloneOneForwardPerTokenThenWaitsAgain) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 12, kDraftWorker)).ok());
  RunWhileWork();
  const int f = static_cast<int>(kPrompt.size());
  proto::DraftBlock off = Block("r", 0, f, {}, /*sequence=*/5);
  off.set_alone_tokens(4);
  ASSERT_EQ(engine_->AddBlock(off, "draft"), BlockAdmission::kQueued);
  const size_t forwards_before = model_.forwards().size();
  RunWhileWork();
  EXPECT_EQ(seen_["r"], FakeLanguageModel::GreedyExtend(kPrompt, 4));
  EXPECT_FALSE(engine_->HasWork(now_)) << "after the window it waits for a block";
  // The window's first token came from p of the prefill; the next three each
  // took one forward, and the fourth was fed for p at the next position.
  EXPECT_EQ(model_.forwards().size() - forwards_before, 4u);
  for (int position = f; position < f + 4; ++position) {
    const auto fed = FedAt(position);
    ASSERT_EQ(fed.size(), 1u) << "position " << position;
    EXPECT_EQ(fed[0].tokens.size(), 1u) << "position " << position;
  }
  EXPECT_EQ(engine_->counters().own_tokens, 3u) << "the first was the empty block's";
}

// An off window whose block asked for the target's tokens every 4 steps
// (window_result_tokens, a draft with no shadow blocks to score): the draft gets
// them in bunches of 4, contiguous, and one per step in the window's last 4
// positions; the coordinator still gets every token as it is decided.
TEST_F(TargetEngineTest, AnOffWindowSendsTheDraftItsTokensEveryWindowResultTokensSteps) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 20, kDraftWorker)).ok());
  RunWhileWork();
  const int f = static_cast<int>(kPrompt.size());
  proto::DraftBlock off = Block("r", 0, f, {}, /*sequence=*/5);
  off.set_alone_tokens(16);
  off.set_window_result_tokens(4);
  ASSERT_EQ(engine_->AddBlock(off, "draft"), BlockAdmission::kQueued);
  std::vector<proto::VerifyResult> to_draft;
  int coordinator_results = 0;
  for (int i = 0; i < 40 && engine_->HasWork(now_); ++i) {
    ASSERT_TRUE(Step().ok());
    for (const TargetEvent& e : events_) {
      if (e.result.request_id() != "r") continue;
      if (e.to_coordinator) ++coordinator_results;
      if (e.draft_peer == net::DraftPeerName(kDraftWorker)) to_draft.push_back(e.result);
    }
  }
  const std::vector<int32_t> greedy = FakeLanguageModel::GreedyExtend(kPrompt, 16);
  EXPECT_EQ(seen_["r"], greedy);
  EXPECT_EQ(coordinator_results, 16) << "every token reaches the coordinator at once";
  // The draft: the empty block's own result, four bunches' worth of the window's
  // middle, then one per step in its last 4 positions; together every token, in order.
  std::vector<int> sizes;
  std::vector<int32_t> told(kPrompt.begin(), kPrompt.end());
  for (const proto::VerifyResult& r : to_draft) {
    EXPECT_EQ(r.frontier() - r.committed_tokens_size(), told.size()) << "a gap for the draft";
    told.insert(told.end(), r.committed_tokens().begin(), r.committed_tokens().end());
    sizes.push_back(r.committed_tokens_size());
  }
  EXPECT_EQ(told, greedy);
  // Positions f + 1 .. f + 10 are held (more than 4 of the window's 16 remain after
  // each), in bunches of 4, 4 and the 2 sent before position f + 11's own result;
  // f + 11 .. f + 15 go one per step.
  EXPECT_EQ(sizes, (std::vector<int>{1, 4, 4, 2, 1, 1, 1, 1, 1}));
  EXPECT_FALSE(engine_->HasWork(now_)) << "after the window it waits for a block";
}

// Without window_result_tokens (a draft that scores shadow blocks) every token of
// the window goes to the draft as it is decided.
TEST_F(TargetEngineTest, AnOffWindowWithoutWindowResultTokensTellsTheDraftEveryToken) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 20, kDraftWorker)).ok());
  RunWhileWork();
  const int f = static_cast<int>(kPrompt.size());
  proto::DraftBlock off = Block("r", 0, f, {}, /*sequence=*/5);
  off.set_alone_tokens(8);
  ASSERT_EQ(engine_->AddBlock(off, "draft"), BlockAdmission::kQueued);
  int to_draft = 0;
  for (int i = 0; i < 40 && engine_->HasWork(now_); ++i) {
    ASSERT_TRUE(Step().ok());
    for (const TargetEvent& e : events_) {
      if (e.result.request_id() != "r" || e.draft_peer != net::DraftPeerName(kDraftWorker))
        continue;
      ++to_draft;
      EXPECT_EQ(e.result.committed_tokens_size(), 1);
    }
  }
  EXPECT_EQ(to_draft, 8);
}

// A new draft worker decides for itself whether to speculate: a reassignment
// closes the window the old one opened.
TEST_F(TargetEngineTest, ReassignmentClosesTheOffWindow) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 12, kDraftWorker)).ok());
  RunWhileWork();
  const int f = static_cast<int>(kPrompt.size());
  proto::DraftBlock off = Block("r", 0, f, {}, /*sequence=*/5);
  off.set_alone_tokens(8);
  ASSERT_EQ(engine_->AddBlock(off, "draft"), BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());  // the empty block's token: the window opens
  ASSERT_TRUE(Step().ok());  // the next token decided alone
  ASSERT_EQ(seen_["r"].size(), kPrompt.size() + 2);
  const std::vector<int32_t> committed = seen_["r"];
  ASSERT_TRUE(Add(Assign("r", committed, 12, kDraftWorker + 1)).ok());
  RunWhileWork();
  EXPECT_EQ(seen_["r"].size(), kPrompt.size() + 2) << "waits for the new draft's block";
}

// A draft block verified inside an off window ends it (the draft speculates
// again): after the block's result the target waits for the draft's next block.
TEST_F(TargetEngineTest, ADraftBlockInsideTheOffWindowEndsIt) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 16, kDraftWorker)).ok());
  RunWhileWork();
  const int f = static_cast<int>(kPrompt.size());
  proto::DraftBlock off = Block("r", 0, f, {}, /*sequence=*/5);
  off.set_alone_tokens(12);
  ASSERT_EQ(engine_->AddBlock(off, "draft"), BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());  // the empty block's token: the window opens
  ASSERT_TRUE(Step().ok());  // one token decided alone
  ASSERT_EQ(seen_["r"].size(), kPrompt.size() + 2);
  const TargetRequest* request = engine_->Find("r");
  ASSERT_NE(request, nullptr);
  const std::vector<int32_t> greedy = FakeLanguageModel::GreedyExtend(kPrompt, 5);
  const proto::DraftBlock block =
      Block("r", request->epoch(), f + 2, {greedy[f + 2], greedy[f + 3]}, /*sequence=*/6);
  ASSERT_EQ(engine_->AddBlock(block, "draft"), BlockAdmission::kQueued);
  RunWhileWork();
  EXPECT_EQ(seen_["r"], greedy) << "two accepted and the bonus, then a wait for the draft";
  EXPECT_FALSE(engine_->HasWork(now_));
}

// After a rejected block the correction is not fed alone at once: the target
// waits up to feed_wait for the draft's next block and feeds both in one
// forward. With no block by then, it feeds the correction alone; after two such
// waits in a row it does not wait for that request's next few blocks.
TEST_F(TargetEngineTest, AfterARejectionTheCorrectionWaitsBrieflyToBeFedWithTheNextBlock) {
  feed_wait_ = absl::Milliseconds(1);
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 30, kDraftWorker)).ok());
  RunWhileWork();
  const int f = static_cast<int>(kPrompt.size());
  const std::vector<int32_t> truth = FakeLanguageModel::GreedyExtend(kPrompt, 16);
  auto reject_at = [&](int start, uint64_t sequence) {
    std::vector<int32_t> wrong = Slice(truth, start, start + 2);
    wrong[1] = (wrong[1] + 1) % FakeLanguageModel::kVocab;
    ASSERT_EQ(
        engine_->AddBlock(Block("r", engine_->Find("r")->epoch(), start, wrong, sequence), "d"),
        BlockAdmission::kQueued);
    ASSERT_TRUE(Step().ok());
    ASSERT_EQ(engine_->Find("r")->frontier(), start + 2) << "one accepted, then the correction";
  };
  reject_at(f, 1);
  EXPECT_FALSE(engine_->HasWork(now_)) << "the correction waits for the next block";
  EXPECT_EQ(engine_->NextDeadline(), now_ + absl::Milliseconds(1));
  // The next block comes quickly: correction and block in one forward.
  now_ += absl::Microseconds(200);
  ASSERT_EQ(engine_->AddBlock(
                Block("r", engine_->Find("r")->epoch(), f + 2, Slice(truth, f + 2, f + 4), 2), "d"),
            BlockAdmission::kQueued);
  ASSERT_TRUE(engine_->HasWork(now_));
  ASSERT_TRUE(Step().ok());
  const auto fed = FedAt(f + 1);
  ASSERT_EQ(fed.size(), 1u);
  EXPECT_EQ(fed[0].tokens, Slice(truth, f + 1, f + 4)) << "the correction fed with the block";
  EXPECT_EQ(engine_->Find("r")->frontier(), f + 5) << "2 accepted and the bonus";
  // A rejection with no block in time: the correction is fed alone at the deadline.
  reject_at(f + 5, 3);
  EXPECT_FALSE(engine_->HasWork(now_));
  now_ += absl::Milliseconds(1);
  ASSERT_TRUE(engine_->HasWork(now_));
  ASSERT_TRUE(Step().ok());
  ASSERT_EQ(FedAt(f + 6).size(), 1u);
  EXPECT_EQ(FedAt(f + 6)[0].tokens.size(), 1u) << "fed alone";
  // One wait that ran out is not enough to stop waiting (a late wake-up): the
  // next block's bonus waits again, and runs out again.
  ASSERT_EQ(engine_->AddBlock(
                Block("r", engine_->Find("r")->epoch(), f + 7, Slice(truth, f + 7, f + 9), 4), "d"),
            BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());  // verifies it: 2 accepted and the bonus
  ASSERT_EQ(engine_->Find("r")->frontier(), f + 10);
  EXPECT_FALSE(engine_->HasWork(now_)) << "one miss: still waits";
  now_ += absl::Milliseconds(1);
  ASSERT_TRUE(engine_->HasWork(now_));
  ASSERT_TRUE(Step().ok());
  ASSERT_EQ(FedAt(f + 9).size(), 1u);
  EXPECT_EQ(FedAt(f + 9)[0].tokens.size(), 1u) << "fed alone again";
  // After two waits in a row ran out the request stops waiting for a while:
  // the next block's bonus is fed at once.
  ASSERT_EQ(
      engine_->AddBlock(
          Block("r", engine_->Find("r")->epoch(), f + 10, Slice(truth, f + 10, f + 12), 5), "d"),
      BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());  // verifies it: 2 accepted and the bonus
  ASSERT_EQ(engine_->Find("r")->frontier(), f + 13);
  EXPECT_TRUE(engine_->HasWork(now_)) << "no wait right after two missed ones";
  EXPECT_EQ(seen_["r"], Slice(truth, 0, f + 13));
}

// Once forwards are timed, the correction waits as long as waiting pays:
// T(1) (1 - slope) of the measured forward-cost line, not the 1 ms floor.
TEST_F(TargetEngineTest, TheFeedWaitComesFromTheTimedForwards) {
  feed_wait_ = absl::Milliseconds(1);
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 30, kDraftWorker)).ok());
  clock_tick_ = absl::Milliseconds(10);  // every forward takes 10 ms (one tick)
  RunWhileWork();                        // the prompt: not a decode step, not timed
  EXPECT_EQ(engine_->FeedWait(), absl::Milliseconds(1)) << "nothing timed yet";
  const int f = static_cast<int>(kPrompt.size());
  const std::vector<int32_t> truth = FakeLanguageModel::GreedyExtend(kPrompt, 4);
  std::vector<int32_t> wrong = Slice(truth, f, f + 2);
  wrong[1] = (wrong[1] + 1) % FakeLanguageModel::kVocab;
  ASSERT_EQ(engine_->AddBlock(Block("r", 0, f, wrong, 1), "d"), BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());  // feeds 2 tokens in 10 ms; one accepted, then the correction
  ASSERT_EQ(engine_->Find("r")->frontier(), f + 2);
  // One size timed: T(1 drafted) = 10 ms, prior slope 0.25, so T(0) = 8 ms and
  // waiting pays for up to 8 * (1 - 0.25) = 6 ms.
  EXPECT_NEAR(absl::ToDoubleMilliseconds(engine_->FeedWait()), 6.0, 1e-6);
  EXPECT_NEAR(absl::ToDoubleMilliseconds(engine_->NextDeadline() - now_), 6.0, 1e-6);
  EXPECT_FALSE(engine_->HasWork(now_ + absl::Milliseconds(5))) << "still worth waiting";
  EXPECT_TRUE(engine_->HasWork(now_ + absl::Milliseconds(6))) << "the wait ran out";
  // The result reports the same line to the draft's controller (its plain step
  // T(0) and slope).
  const std::vector<proto::VerifyResult> results = ResultsFor("r");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_NEAR(results.back().target_step_seconds(), 0.008, 1e-9);
  EXPECT_NEAR(results.back().target_verify_slope(), 0.25, 1e-9);
}

// A block that arrives during the forward (the service drains its channel in
// after_forward) is queued when the block before it is decided: a fully
// accepted block takes no bonus, the epoch stays, and the queued block is
// verified next; the output is the same.
TEST_F(TargetEngineTest, ABlockArrivingDuringTheForwardIsQueuedBeforeTheDecision) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 20, kDraftWorker)).ok());
  RunWhileWork();
  const int f = static_cast<int>(kPrompt.size());
  const std::vector<int32_t> truth = FakeLanguageModel::GreedyExtend(kPrompt, 7);
  ASSERT_EQ(engine_->AddBlock(Block("r", 0, f, Slice(truth, f, f + 3), 1), "d"),
            BlockAdmission::kQueued);
  BlockAdmission late = BlockAdmission::kMalformed;
  ASSERT_TRUE(Step([&] {
                late = engine_->AddBlock(Block("r", 0, f + 3, Slice(truth, f + 3, f + 6), 2), "d");
              }).ok());
  EXPECT_EQ(late, BlockAdmission::kQueued);
  auto results = ResultsFor("r");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].accepted(), 3u);
  EXPECT_EQ(results[0].epoch(), 0u) << "the block that came during the forward stays valid";
  EXPECT_EQ(results[0].committed_tokens_size(), 3) << "no bonus: that block verifies it";
  RunWhileWork();
  EXPECT_EQ(seen_["r"], truth) << "6 accepted, then the bonus";
}

TEST_F(TargetEngineTest, StaleBlocksAreDroppedAndCountedAndChangeNothing) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 8, kDraftWorker)).ok());
  RunWhileWork();
  const int f = static_cast<int>(kPrompt.size());
  const std::vector<int32_t> wrong = {0, 0, 0};
  EXPECT_EQ(engine_->AddBlock(Block("r", 1, f, wrong), "draft"), BlockAdmission::kStaleEpoch);
  EXPECT_EQ(engine_->AddBlock(Block("r", 0, f - 1, wrong), "draft"), BlockAdmission::kStaleStart);
  EXPECT_EQ(engine_->AddBlock(Block("gone", 0, f, wrong), "draft"), BlockAdmission::kFinished);
  EXPECT_EQ(engine_->counters().stale_blocks, 3u);
  EXPECT_FALSE(engine_->HasWork(now_)) << "stale blocks give no work";
  const std::vector<int32_t> truth = FakeLanguageModel::GreedyExtend(kPrompt, 3);
  ASSERT_EQ(engine_->AddBlock(Block("r", 0, f, Slice(truth, f, f + 2)), "draft"),
            BlockAdmission::kQueued);
  EXPECT_EQ(engine_->AddBlock(Block("r", 0, f, wrong), "draft"), BlockAdmission::kDuplicate);
  EXPECT_EQ(engine_->counters().stale_blocks, 4u);
  ASSERT_TRUE(Step().ok());
  EXPECT_EQ(seen_["r"], truth);
  EXPECT_EQ(engine_->counters().malformed_blocks, 0u);
}

TEST_F(TargetEngineTest, FullAcceptanceWithTheNextBlockQueuedKeepsTheEpochAndSkipsTheBonus) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 20, kDraftWorker)).ok());
  RunWhileWork();
  const int f = static_cast<int>(kPrompt.size());
  const std::vector<int32_t> truth = FakeLanguageModel::GreedyExtend(kPrompt, 7);
  ASSERT_EQ(engine_->AddBlock(Block("r", 0, f, Slice(truth, f, f + 3), 1), "d"),
            BlockAdmission::kQueued);
  ASSERT_EQ(engine_->AddBlock(Block("r", 0, f + 3, Slice(truth, f + 3, f + 6), 2), "d"),
            BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());
  auto results = ResultsFor("r");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].accepted(), 3u);
  EXPECT_EQ(results[0].epoch(), 0u) << "the draft's later block stays valid";
  EXPECT_EQ(results[0].committed_tokens_size(), 3)
      << "no bonus: the next block verifies that position";
  RunWhileWork();
  EXPECT_EQ(seen_["r"], truth) << "6 accepted, then the bonus";
  EXPECT_EQ(engine_->Find("r")->epoch(), 1u);
}

TEST_F(TargetEngineTest, RejectionCommitsTheCorrectionAndBumpsTheEpoch) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 20, kDraftWorker)).ok());
  RunWhileWork();
  const int f = static_cast<int>(kPrompt.size());
  const std::vector<int32_t> truth = FakeLanguageModel::GreedyExtend(kPrompt, 5);
  std::vector<int32_t> drafted = Slice(truth, f, f + 3);
  drafted[1] = (drafted[1] + 1) % FakeLanguageModel::kVocab;
  ASSERT_EQ(engine_->AddBlock(Block("r", 0, f, drafted, 1), "d"), BlockAdmission::kQueued);
  ASSERT_EQ(engine_->AddBlock(Block("r", 0, f + 3, {1, 2}, 2), "d"), BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());
  auto results = ResultsFor("r");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].accepted(), 1u);
  EXPECT_EQ(results[0].epoch(), 1u);
  EXPECT_EQ(results[0].frontier(), static_cast<uint32_t>(f + 2));
  EXPECT_EQ(seen_["r"], Slice(truth, 0, f + 2))
      << "one accepted token, then the target's correction";
  // Blocks of the old epoch are stale now, queued or late.
  EXPECT_EQ(engine_->AddBlock(Block("r", 0, f + 2, Slice(truth, f + 2, f + 4), 3), "d"),
            BlockAdmission::kStaleEpoch);
  RunWhileWork();
  ASSERT_EQ(engine_->AddBlock(Block("r", 1, f + 2, Slice(truth, f + 2, f + 4), 4), "d"),
            BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());
  EXPECT_EQ(seen_["r"], truth) << "the cache was cut back to the committed tokens";
}

// Plays the draft worker: answers each result for a request with a new block
// from the result's frontier and epoch, cycling through blocks that are fully
// right, wrong at some index, or empty.
TEST_F(TargetEngineTest, GreedySpeculationCommitsExactlyPlainGreedy) {
  TargetEngineOptions options;
  options.step_token_budget = 16;
  options.prefill_chunk = 4;
  Make(options);
  const std::map<std::string, std::vector<int32_t>> prompts = {
      {"a", {1, 2, 3}}, {"b", {30, 1, 17, 4, 4, 9, 2}}, {"c", {8}}};
  const int kNew = 24;
  std::map<std::string, std::vector<int32_t>> truth;
  for (const auto& [id, prompt] : prompts) {
    truth[id] = FakeLanguageModel::GreedyExtend(prompt, kNew + 8);
    ASSERT_TRUE(Add(Assign(id, prompt, kNew, id == "c" ? 0 : kDraftWorker)).ok());
  }
  int pattern = 0;
  uint64_t sequence = 0;
  auto propose = [&](const std::string& id, uint64_t epoch, int frontier) {
    const int kind = pattern++ % 5;
    const int k = kind == 3 ? 0 : 3 + kind % 2;
    std::vector<int32_t> tokens = Slice(truth[id], frontier, frontier + k);
    if (kind == 1 || kind == 2) tokens[kind == 1 ? 0 : 2] = (tokens[kind == 1 ? 0 : 2] + 5) % 32;
    EXPECT_EQ(engine_->AddBlock(Block(id, epoch, frontier, tokens, ++sequence), "d"),
              BlockAdmission::kQueued);
  };
  propose("a", 0, 3);
  propose("b", 0, 7);
  for (int i = 0; i < 300 && engine_->HasWork(now_); ++i) {
    ASSERT_TRUE(Step().ok());
    for (const TargetEvent& e : events_) {
      if (e.draft_peer.empty() || e.result.finished()) continue;
      propose(e.result.request_id(), e.result.epoch(), static_cast<int>(e.result.frontier()));
    }
  }
  EXPECT_EQ(engine_->active_requests(), 0);
  for (const auto& [id, prompt] : prompts) {
    EXPECT_EQ(seen_[id], Slice(truth[id], 0, static_cast<int>(prompt.size()) + kNew)) << id;
  }
  EXPECT_EQ(engine_->counters().stale_blocks, 0u);
  EXPECT_EQ(engine_->counters().malformed_blocks, 0u);
}

// The step's verification budget (spec::ChooseVerifiedDrafts): with forwards
// whose time grows with the tokens fed (T(fed) = 1 ms + 0.5 ms per extra token)
// and many requests whose drafts are always wrong, the target stops verifying
// their drafts (cut_drafts in the results, counted), the draft side is told, and
// every request still commits exactly plain greedy; with the budget off, or
// with blocks of a fixed k (not policy_sized), nothing is cut.
TEST_F(TargetEngineTest, TheStepBudgetCutsBlocksThatDoNotPayAndCommitsTheSame) {
  for (const std::pair<bool, bool>& setting :
       std::initializer_list<std::pair<bool, bool>>{{true, true}, {false, true}, {true, false}}) {
    const bool cut = setting.first, policy_sized = setting.second;
    SCOPED_TRACE(absl::StrCat("budget ", cut ? "on" : "off", ", policy_sized ", policy_sized));
    seen_.clear();
    TargetEngineOptions options;
    options.cut_blocks_to_budget = cut;
    // Each clock reading after a new forward moves time by that forward's cost.
    size_t timed = model_.forwards().size();
    options.block_wait = absl::Hours(1);
    options.feed_wait = absl::ZeroDuration();
    options.clock = [this, &timed] {
      if (model_.forwards().size() != timed) {
        timed = model_.forwards().size();
        int fed = 0;
        for (const auto& s : model_.forwards().back()) fed += static_cast<int>(s.tokens.size());
        now_ += absl::Microseconds(1000 + 500 * (fed - 1));
      }
      return now_;
    };
    engine_ = std::make_unique<TargetEngine>(&model_, options);
    const int kRequests = 8, kNew = 20;
    std::map<std::string, std::vector<int32_t>> truth;
    for (int r = 0; r < kRequests; ++r) {
      const std::string id = absl::StrCat("r", r);
      const std::vector<int32_t> prompt = {r + 1, 2, 3};
      truth[id] = FakeLanguageModel::GreedyExtend(prompt, kNew + 8);
      ASSERT_TRUE(Add(Assign(id, prompt, kNew, kDraftWorker)).ok());
    }
    uint64_t sequence = 0;
    uint32_t reported_cut = 0;
    auto propose = [&](const std::string& id, uint64_t epoch, int frontier) {
      std::vector<int32_t> tokens = Slice(truth[id], frontier, frontier + 4);
      tokens[0] = (tokens[0] + 1) % FakeLanguageModel::kVocab;  // always rejected at once
      proto::DraftBlock block = Block(id, epoch, frontier, tokens, ++sequence);
      block.set_policy_sized(policy_sized);
      ASSERT_EQ(engine_->AddBlock(block, "d"),
                BlockAdmission::kQueued);
    };
    for (int r = 0; r < kRequests; ++r) propose(absl::StrCat("r", r), 0, 3);
    for (int i = 0; i < 400 && engine_->HasWork(now_); ++i) {
      ASSERT_TRUE(Step().ok());
      for (const TargetEvent& e : events_) {
        if (e.draft_peer.empty()) continue;
        reported_cut += e.result.cut_drafts();
        if (e.result.finished()) continue;
        propose(e.result.request_id(), e.result.epoch(), static_cast<int>(e.result.frontier()));
      }
    }
    EXPECT_EQ(engine_->active_requests(), 0);
    for (const auto& [id, expected] : truth) EXPECT_EQ(seen_[id], Slice(expected, 0, 3 + kNew)) << id;
    EXPECT_EQ(engine_->counters().malformed_blocks, 0u);
    if (cut && policy_sized) {
      EXPECT_GT(engine_->counters().cut_draft_tokens, 0u);
      EXPECT_EQ(reported_cut, engine_->counters().cut_draft_tokens) << "every cut is reported";
    } else {
      EXPECT_EQ(engine_->counters().cut_draft_tokens, 0u);
      EXPECT_EQ(reported_cut, 0u);
    }
  }
}

// The step budget prices each position by its block's own estimates
// (DraftBlock.acceptance) when the drafter sends them: with the same forward
// cost line, eight requests whose drafts are all right, four sent as confident
// (0.99 per position) and four as unconfident (0.05), the confident blocks are
// verified whole and the unconfident ones cut; without estimates every request
// is priced at its own average, which (every draft accepted) keeps all blocks
// whole. Outputs stay plain greedy either way.
TEST_F(TargetEngineTest, TheStepBudgetKeepsConfidentBlocksAndCutsUnconfidentOnes) {
  for (const bool estimates : {true, false}) {
    SCOPED_TRACE(estimates ? "with estimates" : "without estimates");
    seen_.clear();
    TargetEngineOptions options;
    options.cut_blocks_to_budget = true;
    size_t timed = model_.forwards().size();
    options.block_wait = absl::Hours(1);
    options.feed_wait = absl::ZeroDuration();
    options.clock = [this, &timed] {
      if (model_.forwards().size() != timed) {
        timed = model_.forwards().size();
        int fed = 0;
        for (const auto& s : model_.forwards().back()) fed += static_cast<int>(s.tokens.size());
        now_ += absl::Microseconds(1000 + 500 * (fed - 1));
      }
      return now_;
    };
    engine_ = std::make_unique<TargetEngine>(&model_, options);
    const int kRequests = 8, kNew = 20;
    std::map<std::string, std::vector<int32_t>> truth;
    for (int r = 0; r < kRequests; ++r) {
      const std::string id = absl::StrCat("r", r);
      const std::vector<int32_t> prompt = {r + 1, 2, 3};
      truth[id] = FakeLanguageModel::GreedyExtend(prompt, kNew + 8);
      ASSERT_TRUE(Add(Assign(id, prompt, kNew, kDraftWorker)).ok());
    }
    auto confident = [](const std::string& id) { return id < "r4"; };
    uint64_t sequence = 0;
    std::map<std::string, uint32_t> reported_cut;
    auto propose = [&](const std::string& id, uint64_t epoch, int frontier) {
      proto::DraftBlock block =
          Block(id, epoch, frontier, Slice(truth[id], frontier, frontier + 4), ++sequence);
      block.set_policy_sized(true);
      if (estimates) {
        for (int j = 0; j < 4; ++j) block.add_acceptance(confident(id) ? 0.99f : 0.05f);
      }
      ASSERT_EQ(engine_->AddBlock(block, "d"), BlockAdmission::kQueued);
    };
    // The prompts first (a block ready before a prompt's last chunk is cut at
    // once: PromptsLastChunkCutsTheBlockAndDecidesTheFirstToken).
    ASSERT_TRUE(Step().ok());
    for (int r = 0; r < kRequests; ++r) propose(absl::StrCat("r", r), 0, 3);
    for (int i = 0; i < 400 && engine_->HasWork(now_); ++i) {
      ASSERT_TRUE(Step().ok());
      for (const TargetEvent& e : events_) {
        if (e.draft_peer.empty()) continue;
        reported_cut[e.result.request_id()] += e.result.cut_drafts();
        if (e.result.finished()) continue;
        propose(e.result.request_id(), e.result.epoch(), static_cast<int>(e.result.frontier()));
      }
    }
    EXPECT_EQ(engine_->active_requests(), 0);
    for (const auto& [id, expected] : truth) EXPECT_EQ(seen_[id], Slice(expected, 0, 3 + kNew)) << id;
    for (int r = 0; r < kRequests; ++r) {
      const std::string id = absl::StrCat("r", r);
      if (estimates && !confident(id)) {
        EXPECT_GT(reported_cut[id], 0u) << id;
      } else {
        EXPECT_EQ(reported_cut[id], 0u) << id;
      }
    }
  }
}

// A block ready before the prompt's last chunk could only be verified one step
// after it, so the first token would wait a whole step: a policy-sized block is
// cut to nothing (cut_drafts, counted) and the first token decided from the
// prefill's p in the same step; a block of a fixed k is verified whole, a step
// later. Either way the output is plain greedy.
TEST_F(TargetEngineTest, PromptsLastChunkCutsTheBlockAndDecidesTheFirstToken) {
  for (const bool policy_sized : {true, false}) {
    SCOPED_TRACE(policy_sized ? "policy_sized" : "fixed k");
    seen_.clear();
    Make();
    const std::vector<int32_t> truth = FakeLanguageModel::GreedyExtend(kPrompt, 12);
    ASSERT_TRUE(Add(Assign("r", kPrompt, 12, kDraftWorker)).ok());
    proto::DraftBlock block = Block("r", 0, static_cast<int>(kPrompt.size()),
                                    Slice(truth, kPrompt.size(), kPrompt.size() + 3), 1);
    block.set_policy_sized(policy_sized);
    ASSERT_EQ(engine_->AddBlock(block, "d"), BlockAdmission::kQueued);
    ASSERT_TRUE(Step().ok());  // the whole prompt
    const std::vector<proto::VerifyResult> first = ResultsFor("r");
    if (policy_sized) {
      ASSERT_EQ(first.size(), 1u) << "the first token comes with the prompt's step";
      EXPECT_EQ(first[0].committed_tokens_size(), 1);
      EXPECT_EQ(first[0].accepted(), 0u);
      EXPECT_EQ(first[0].cut_drafts(), 3u);
      EXPECT_EQ(engine_->counters().cut_draft_tokens, 3u);
    } else {
      EXPECT_TRUE(first.empty()) << "a fixed-k block is verified after the prompt";
      ASSERT_TRUE(Step().ok());
      const std::vector<proto::VerifyResult> second = ResultsFor("r");
      ASSERT_EQ(second.size(), 1u);
      EXPECT_EQ(second[0].accepted(), 3u);
      EXPECT_EQ(engine_->counters().cut_draft_tokens, 0u);
    }
    EXPECT_EQ(seen_["r"], Slice(truth, 0, static_cast<int>(seen_["r"].size())));
  }
}

TEST_F(TargetEngineTest, FailedForwardFinishesTheStepsRequestsWithErrorAndSparesTheOthers) {
  TargetEngineOptions options;
  options.step_token_budget = 4;
  Make(options);
  const std::vector<int32_t> prompt = {2, 7, 1, 8};
  ASSERT_TRUE(Add(Assign("b", prompt, 8, kDraftWorker)).ok());
  RunWhileWork();  // b's prompt is in its cache; b waits for a block
  ASSERT_TRUE(Add(Assign("a", prompt, 8, kDraftWorker)).ok());
  const std::vector<int32_t> truth = FakeLanguageModel::GreedyExtend(prompt, 8);
  const size_t forwards_before = model_.forwards().size();
  // Only a's prefill is in this forward (b waits for its block).
  model_.FailNextForward(absl::InternalError("fake device lost"));
  const absl::Status status = Step();
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("fake device lost"), std::string::npos) << status;
  EXPECT_EQ(model_.forwards().size(), forwards_before);
  // a is reported finished with an error, with its whole (unchanged) sequence,
  // to the coordinator and to its draft worker; then it is gone.
  ASSERT_EQ(events_.size(), 2u);
  for (const TargetEvent& e : events_) {
    EXPECT_EQ(e.result.request_id(), "a");
    EXPECT_TRUE(e.result.finished());
    EXPECT_TRUE(e.result.full_sequence());
    EXPECT_EQ(e.result.finish_reason(), proto::FINISH_REASON_ERROR);
    EXPECT_EQ(std::vector<int32_t>(e.result.committed_tokens().begin(),
                                   e.result.committed_tokens().end()),
              prompt);
  }
  EXPECT_TRUE(events_[0].to_coordinator);
  EXPECT_EQ(events_[1].draft_peer, net::DraftPeerName(kDraftWorker));
  EXPECT_EQ(engine_->Find("a"), nullptr);
  // b kept its cache: its block is fed from position 4, and verified as usual.
  ASSERT_EQ(engine_->AddBlock(Block("b", 0, 4, Slice(truth, 4, 7)), "d"), BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());
  ASSERT_EQ(model_.forwards().size(), forwards_before + 1);
  ASSERT_EQ(model_.forwards().back().size(), 1u);
  EXPECT_EQ(model_.forwards().back()[0].start, 4);
  EXPECT_EQ(model_.forwards().back()[0].tokens, Slice(truth, 4, 7));
  EXPECT_EQ(seen_["b"], Slice(truth, 0, 8));
}

TEST_F(TargetEngineTest, FailedVerificationForwardReportsTheCommittedSequence) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 8, kDraftWorker)).ok());
  RunWhileWork();
  const std::vector<int32_t> truth = FakeLanguageModel::GreedyExtend(kPrompt, 3);
  ASSERT_EQ(engine_->AddBlock(Block("r", 0, 5, Slice(truth, 5, 7)), "d"), BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());
  ASSERT_EQ(seen_["r"], truth);
  // The bonus is unfed: the next forward feeds it with the next block.
  const std::vector<int32_t> more = FakeLanguageModel::GreedyExtend(truth, 2);
  ASSERT_EQ(engine_->AddBlock(Block("r", 1, 8, Slice(more, 8, 10), 2), "d"),
            BlockAdmission::kQueued);
  model_.FailNextForward(absl::UnavailableError("fake forward failed"));
  EXPECT_EQ(Step().code(), absl::StatusCode::kUnavailable);
  ASSERT_FALSE(events_.empty());
  EXPECT_EQ(events_[0].result.finish_reason(), proto::FINISH_REASON_ERROR);
  EXPECT_EQ(std::vector<int32_t>(events_[0].result.committed_tokens().begin(),
                                 events_[0].result.committed_tokens().end()),
            truth)
      << "nothing of the failed step is committed";
  EXPECT_EQ(engine_->active_requests(), 0);
}

// A rejection-mode block of `n` tokens after `sequence` whose every q row is
// the target's p there (so each token is accepted: p / q = 1). Token i is the
// i-th most likely but one, so the block is not simply the greedy chain.
proto::DraftBlock BlockWithQEqualToP(std::vector<int32_t> sequence, int n,
                                     uint64_t block_sequence) {
  spec::SamplingParams params;  // what Assign sets for rejection mode
  params.temperature = 1.0f;
  params.seed = 42;
  proto::DraftBlock block = Block("r", 0, static_cast<int>(sequence.size()), {}, block_sequence);
  for (int i = 0; i < n; ++i) {
    std::vector<float> p(FakeLanguageModel::kVocab);
    EXPECT_TRUE(
        spec::LogitsToProbs(params, FakeLanguageModel::Logits(sequence), absl::MakeSpan(p)).ok());
    const int32_t token = (FakeLanguageModel::NextToken(sequence) + i) % FakeLanguageModel::kVocab;
    proto::SparseDistribution* q = block.add_q();
    for (int v = 0; v < FakeLanguageModel::kVocab; ++v) {
      q->add_token_ids(v);
      q->add_probs(p[v]);
    }
    block.add_tokens(token);
    sequence.push_back(token);
  }
  return block;
}

TEST_F(TargetEngineTest, RejectionModeAcceptsEveryTokenWhoseDraftQEqualsTheTargetP) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 8, kDraftWorker, proto::VERIFY_MODE_REJECTION)).ok());
  RunWhileWork();
  const proto::DraftBlock block = BlockWithQEqualToP(kPrompt, 3, 1);
  std::vector<int32_t> sequence = kPrompt;
  sequence.insert(sequence.end(), block.tokens().begin(), block.tokens().end());
  ASSERT_EQ(engine_->AddBlock(block, "d"), BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());
  const auto results = ResultsFor("r");
  ASSERT_EQ(results.size(), 1u);
  EXPECT_EQ(results[0].accepted(), 3u);
  ASSERT_EQ(seen_["r"].size(), 9u) << "3 accepted and a bonus sample";
  EXPECT_EQ(Slice(seen_["r"], 0, 8), sequence);
}

TEST_F(TargetEngineTest, UnverifiableBlockIsDroppedAndTheCacheCutBackToTheFrontier) {
  Make();
  ASSERT_TRUE(Add(Assign("r", kPrompt, 8, kDraftWorker, proto::VERIFY_MODE_REJECTION)).ok());
  RunWhileWork();
  // Rejection mode needs one q per drafted token: refused at admission.
  EXPECT_EQ(engine_->AddBlock(Block("r", 0, 5, {1, 2}), "d"), BlockAdmission::kMalformed);
  EXPECT_EQ(engine_->counters().malformed_blocks, 1u);
  // q(x) = 0 for a drafted token: the draft cannot have sampled it.
  proto::DraftBlock block = Block("r", 0, 5, {1, 2}, 2);
  for (int i = 0; i < 2; ++i) {
    block.add_q()->add_token_ids(9);
    block.mutable_q(i)->add_probs(1.0f);
  }
  ASSERT_EQ(engine_->AddBlock(block, "d"), BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());
  EXPECT_TRUE(ResultsFor("r").empty());
  EXPECT_EQ(engine_->counters().malformed_blocks, 2u);
  ASSERT_NE(engine_->Find("r"), nullptr);
  EXPECT_EQ(engine_->Find("r")->frontier(), 5);
  EXPECT_FALSE(engine_->HasWork(now_)) << "it waits for a usable block";
  // The next block is fed at position 5: the dropped block's tokens left the cache.
  const proto::DraftBlock usable = BlockWithQEqualToP(kPrompt, 2, 3);
  ASSERT_EQ(engine_->AddBlock(usable, "d"), BlockAdmission::kQueued);
  ASSERT_TRUE(Step().ok());
  const auto fed = FedAt(5);
  ASSERT_EQ(fed.size(), 2u) << "the dropped block, then the usable one";
  EXPECT_EQ(fed[1].tokens, std::vector<int32_t>(usable.tokens().begin(), usable.tokens().end()));
  ASSERT_EQ(seen_["r"].size(), 8u) << "2 accepted and a bonus sample";
  EXPECT_EQ(Slice(seen_["r"], 5, 7), fed[1].tokens);
}

TEST_F(TargetEngineTest, AddRequestRefusesBadAssignmentsAndAFullEngine) {
  TargetEngineOptions options;
  options.max_requests = 1;
  Make(options);
  absl::Status bad = Add(Assign("x", {1, 99}, 4));
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("token 99 at index 1"), std::string::npos) << bad;
  ASSERT_TRUE(Add(Assign("r", kPrompt, 4)).ok());
  absl::Status full = Add(Assign("s", kPrompt, 4));
  EXPECT_EQ(full.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("maximum of 1 requests"), std::string::npos) << full;
  // A known id is a reassignment: only its draft worker changes.
  ASSERT_TRUE(Add(Assign("r", kPrompt, 4, kDraftWorker)).ok());
  EXPECT_EQ(engine_->Find("r")->draft_worker_id(), kDraftWorker);
  EXPECT_EQ(engine_->SyncResult("nope").status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<proto::VerifyResult> sync = engine_->SyncResult("r");
  ASSERT_TRUE(sync.ok());
  EXPECT_TRUE(sync->full_sequence());
  EXPECT_EQ(sync->committed_tokens_size(), 5);
}

}  // namespace
}  // namespace splitspec::target

// LocalDrafts (target_worker/local_drafts.h): the lookup drafter run in the
// target leader's loop. Its blocks are verified by the TargetEngine like a
// draft worker's, so greedy output equals plain greedy (the same engine, the
// requests decoding alone) token for token on the tiny generated model, whose
// real transformer is batch invariant; requests that ask for drafter "none" or
// have a draft worker are left alone.
#include "target_worker/local_drafts.h"

#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/lookup_drafter.h"
#include "target_worker/target_engine.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::target {
namespace {

proto::Assignment Assign(const std::string& id, const std::vector<int32_t>& prompt, int max_tokens,
                         const std::string& drafter = "") {
  proto::Assignment a;
  a.set_request_id(id);
  a.set_target_endpoint("inproc://this-target");
  a.mutable_committed_tokens()->Assign(prompt.begin(), prompt.end());
  a.set_prompt_length(static_cast<uint32_t>(prompt.size()));
  a.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  a.set_verify_mode(proto::VERIFY_MODE_GREEDY);
  a.set_drafter(drafter);
  return a;
}

struct Outcome {
  std::map<std::string, std::vector<int32_t>> committed;  // as the coordinator saw them
  uint64_t blocks_verified = 0;                           // results of the local drafter's blocks
  uint64_t accepted = 0;                                  // draft tokens those results accepted
};

// Plays the coordinator around the target leader's loop (TargetService::Run's
// order: draft, step, hand results back), until every request has finished.
Outcome Serve(TargetEngine& engine, LocalDrafts* local,
              const std::vector<proto::Assignment>& assignments) {
  Outcome outcome;
  for (proto::Assignment a : assignments) {
    if (local != nullptr) {
      EXPECT_TRUE(local->Adopt(&a).ok()) << a.request_id();
    }
    EXPECT_TRUE(engine.AddRequest(a).ok()) << a.request_id();
    outcome.committed[a.request_id()].assign(a.committed_tokens().begin(),
                                             a.committed_tokens().end());
  }
  std::vector<TargetEvent> events;
  for (int step = 0; step < 5000 && engine.active_requests() > 0; ++step) {
    if (local != nullptr) {
      EXPECT_TRUE(local->Draft(engine).ok());
    }
    if (!engine.HasWork(absl::Now())) continue;  // (only while a block_wait runs out)
    events.clear();
    EXPECT_TRUE(engine.Step(absl::Now(), &events).ok());
    for (const TargetEvent& e : events) {
      if (e.draft_peer == LocalDrafts::PeerName() && e.result.block_sequence() > 0 &&
          !e.result.full_sequence()) {
        outcome.accepted += e.result.accepted();
        ++outcome.blocks_verified;
      }
    }
    if (local != nullptr) local->TakeResults(engine, &events);
    for (const TargetEvent& e : events) {
      EXPECT_NE(e.draft_peer, LocalDrafts::PeerName()) << "a local result left for a socket";
      if (!e.to_coordinator) continue;
      std::vector<int32_t>& seen = outcome.committed[e.result.request_id()];
      const std::vector<int32_t> tokens(e.result.committed_tokens().begin(),
                                        e.result.committed_tokens().end());
      if (e.result.full_sequence()) {
        seen = tokens;
      } else {
        seen.insert(seen.end(), tokens.begin(), tokens.end());
      }
    }
  }
  EXPECT_EQ(engine.active_requests(), 0) << "the requests did not finish";
  return outcome;
}

class LocalDraftsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-local-drafts.gguf";
    model::TinyModelOptions options;
    options.seed = 5;
    ASSERT_TRUE(model::WriteTinyModel(options, path_).ok());
    auto model = model::Transformer::Load(path_, {.threads = 1});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
  }

  // Prompts that repeat themselves (input-grounded: lookup finds the model's
  // continuation in them once greedy decoding falls into a loop) and one that
  // does not.
  std::vector<proto::Assignment> Requests(const std::string& drafter) const {
    const int vocab = model_->config().vocab_size;
    std::vector<proto::Assignment> requests;
    for (int r = 0; r < 4; ++r) {
      std::vector<int32_t> prompt;
      for (int i = 0; i < 24; ++i) prompt.push_back((r * 31 + (i % (3 + r)) * 17 + 5) % vocab);
      requests.push_back(Assign("r" + std::to_string(r), prompt, 48, drafter));
    }
    requests.push_back(Assign("plain", {7, 200, 13}, 32, drafter));
    return requests;
  }

  std::string path_;
  std::unique_ptr<model::Transformer> model_;
};

TEST_F(LocalDraftsTest, GreedyOutputIsThePlainGreedyOutputTokenForToken) {
  TargetEngine plain_engine(model_.get(), {});
  const Outcome plain = Serve(plain_engine, nullptr, Requests(""));

  spec::LookupDrafter lookup(spec::LookupDrafterConfig{});
  for (int k : {0, 3}) {  // 0: the draft engine's adaptive k; 3: a fixed block size
    SCOPED_TRACE(k == 0 ? "adaptive k" : "k 3");
    TargetEngine engine(model_.get(), {});
    draft::DraftEngineOptions options;
    options.lookahead_blocks = 2;  // LocalDrafts drafts sequentially whatever it is given
    LocalDrafts local(&lookup, options);
    std::vector<proto::Assignment> requests = Requests("");
    for (proto::Assignment& a : requests) a.set_draft_k(static_cast<uint32_t>(k));
    const Outcome drafted = Serve(engine, &local, requests);
    EXPECT_EQ(drafted.committed, plain.committed);
    EXPECT_GT(drafted.blocks_verified, 0u) << "no local block was verified";
    EXPECT_GT(drafted.accepted, 0u) << "no drafted token was accepted";
    EXPECT_GT(local.counters().blocks_sent, 0u);
    EXPECT_EQ(local.active_requests(), 0) << "finished requests are released";
    EXPECT_EQ(engine.counters().malformed_blocks, 0u);
  }
}

TEST_F(LocalDraftsTest, DrafterNoneAndDraftWorkerRequestsAreLeftAlone) {
  spec::LookupDrafter lookup(spec::LookupDrafterConfig{});
  LocalDrafts local(&lookup, {});
  proto::Assignment none = Assign("none", {1, 2, 1, 2, 1}, 8, "none");
  ASSERT_TRUE(local.Adopt(&none).ok());
  EXPECT_EQ(none.draft_worker_id(), 0u) << "plain decoding asked for";
  proto::Assignment remote = Assign("remote", {1, 2, 1, 2, 1}, 8);
  remote.set_draft_worker_id(3);
  ASSERT_TRUE(local.Adopt(&remote).ok());
  EXPECT_EQ(remote.draft_worker_id(), 3u);
  EXPECT_EQ(local.active_requests(), 0);
  proto::Assignment mine = Assign("mine", {1, 2, 1, 2, 1}, 8);
  ASSERT_TRUE(local.Adopt(&mine).ok());
  EXPECT_EQ(mine.draft_worker_id(), LocalDrafts::kDraftWorkerId);
  EXPECT_EQ(local.active_requests(), 1);
  // A draft worker takes it over (the coordinator reassigns): drafting here stops.
  mine.set_draft_worker_id(4);
  ASSERT_TRUE(local.Adopt(&mine).ok());
  EXPECT_EQ(local.active_requests(), 0);

  // Plain decoding through the engine: no block, the target's own tokens only.
  TargetEngine engine(model_.get(), {});
  const Outcome outcome = Serve(engine, &local, {Assign("none", {1, 2, 1, 2, 1}, 8, "none")});
  EXPECT_EQ(outcome.blocks_verified, 0u);
  EXPECT_EQ(local.counters().blocks_sent, 0u);
  EXPECT_EQ(outcome.committed.at("none").size(), 5u + 8u);
}

TEST_F(LocalDraftsTest, AnAdoptionTheDraftEngineRefusesLeavesTheRequestAsItCame) {
  spec::LookupDrafter lookup(spec::LookupDrafterConfig{});
  LocalDrafts local(&lookup, {});
  proto::Assignment empty = Assign("empty", {}, 8);
  const absl::Status status = local.Adopt(&empty);
  EXPECT_TRUE(absl::IsInvalidArgument(status)) << status;
  EXPECT_EQ(empty.draft_worker_id(), 0u);
}

}  // namespace
}  // namespace splitspec::target

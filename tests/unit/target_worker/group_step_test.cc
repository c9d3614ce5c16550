// The leader/follower step protocol of a tensor-parallel target group
// (GroupLeaderModel + RunGroupFollower), ranks as threads on loopback Gloo.
//
// The leader's forward results must equal TP=1's (F32 model: within float
// rounding of the summation order, tolerance 1e-4 of the logits' scale) after
// every pattern the target engine produces: prefill, decode, a k+1 block,
// rollback by KvCache::Truncate, batching, and caches released and replaced.
// A follower that cannot follow the plan fails with DataLoss naming the step. A
// rank that refuses a step (leader or follower) tells the group before any
// collective: every rank skips it at once, and the group goes on in step.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/transformer.h"
#include "target_worker/group_follower.h"
#include "target_worker/group_leader_model.h"
#include "target_worker/group_step_vote.h"
#include "tests/testing/gloo_group.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::target {
namespace {

std::string TinyPath() {
  static const std::string* path = [] {
    auto* p =
        new std::string(::testing::TempDir() + "/group-step-" + std::to_string(getpid()) + ".gguf");
    EXPECT_TRUE(model::WriteTinyModel({}, *p).ok());
    return p;
  }();
  return *path;
}

float MaxAbsDiff(const float* a, const float* b, int n, float* scale) {
  float diff = 0;
  for (int i = 0; i < n; ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    *scale = std::max(*scale, std::abs(b[i]));
  }
  return diff;
}

// The leader's script: each Forward is checked against the same operations
// on a TP=1 model with its own caches.
// `reserved` gets the positions the leader's caches hold reserved after the last forward.
absl::Status LeaderScript(GroupLeaderModel& leader, model::Transformer& reference,
                          uint64_t* reserved) {
  auto a = leader.NewCache(), b = leader.NewCache();
  auto ra = reference.NewCache(), rb = reference.NewCache();
  const int vocab = reference.config().vocab_size;
  auto step = [&](std::vector<model::SequenceInput> lead_batch,
                  std::vector<model::SequenceInput> ref_batch) {
    model::ForwardOutput got, want;
    EXPECT_TRUE(leader.Forward(lead_batch, &got).ok());
    EXPECT_TRUE(reference.Forward(ref_batch, &want).ok());
    ASSERT_EQ(got.logits.size(), want.logits.size());
    float scale = 0;
    const float diff = MaxAbsDiff(got.logits.data(), want.logits.data(),
                                  static_cast<int>(got.logits.size()), &scale);
    EXPECT_LE(diff, 1e-4f * std::max(1.0f, scale)) << "rows " << got.logits.size() / vocab;
  };
  const std::vector<int32_t> prompt = {5, 6, 7, 8, 9, 10}, block = {11, 12, 13, 14, 15},
                             other = {3, 1, 4, 1, 5};
  step({{a.get(), prompt, model::LogitsMode::kLast}},
       {{ra.get(), prompt, model::LogitsMode::kLast}});
  step({{a.get(), block, model::LogitsMode::kAll}, {b.get(), other, model::LogitsMode::kLast}},
       {{ra.get(), block, model::LogitsMode::kAll}, {rb.get(), other, model::LogitsMode::kLast}});
  // Verification rejected the last 3 of the block: roll back, feed the correction.
  EXPECT_TRUE(a->Truncate(a->length() - 3).ok());
  EXPECT_TRUE(ra->Truncate(ra->length() - 3).ok());
  const std::vector<int32_t> correction = {99};
  step({{a.get(), correction, model::LogitsMode::kLast}},
       {{ra.get(), correction, model::LogitsMode::kLast}});
  // A request ends; a new one starts in its place.
  b.reset();
  rb = reference.NewCache();
  // A request admitted under a KV budget: a cache of its own size, its positions reserved.
  auto c = leader.NewCache(/*max_tokens=*/100);
  EXPECT_TRUE(c->Reserve(90).ok());
  step({{c.get(), other, model::LogitsMode::kAll}, {a.get(), correction, model::LogitsMode::kLast}},
       {{rb.get(), other, model::LogitsMode::kAll},
        {ra.get(), correction, model::LogitsMode::kLast}});
  *reserved = static_cast<uint64_t>(a->reserved_positions() + c->reserved_positions());
  EXPECT_TRUE(leader.KeepAliveIfIdle(absl::InfiniteFuture()).ok());  // an empty step
  a.reset();
  c.reset();
  leader.Leave(/*disband=*/true);
  return leader.status();
}

TEST(GroupStepTest, FollowersMirrorTheLeadersCachesThroughRollbackAndRelease) {
  auto reference = model::Transformer::Load(TinyPath(), {.threads = 1});
  ASSERT_TRUE(reference.ok());
  FollowerCounters counters;
  uint64_t leader_reserved = 0;
  std::atomic<bool> stop{false};
  std::vector<absl::Status> results =
      net::RunGlooRanksAsThreads({.size = 2}, [&](net::Communicator& comm) -> absl::Status {
        auto model = model::Transformer::Load(TinyPath(), &comm, {.threads = 1});
        if (!model.ok()) return model.status();
        if (comm.rank() == 0) {
          GroupLeaderModel leader(model->get(), &comm);
          return LeaderScript(leader, **reference, &leader_reserved);
        }
        absl::StatusOr<FollowerExit> exit = RunGroupFollower(**model, comm, stop, &counters);
        if (!exit.ok()) return exit.status();
        EXPECT_EQ(*exit, FollowerExit::kDisbanded);
        return absl::OkStatus();
      });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(counters.forwards, 4u);
  EXPECT_EQ(counters.steps, 6u);  // 4 forwards, a keep-alive, the leave
  EXPECT_EQ(counters.tokens, 6u + 5 + 5 + 1 + 5 + 1);
  EXPECT_EQ(counters.reserved_positions, leader_reserved);
  EXPECT_EQ(leader_reserved, 64u + 90) << "a grew to 64; c reserved 90 before its first step";
}

TEST(GroupStepTest, APlanTheFollowerCannotFollowIsDataLoss) {
  std::atomic<bool> stop{false};
  std::vector<absl::Status> results =
      net::RunGlooRanksAsThreads({.size = 2}, [&](net::Communicator& comm) -> absl::Status {
        auto model = model::Transformer::Load(TinyPath(), &comm, {.threads = 1});
        if (!model.ok()) return model.status();
        if (comm.rank() == 0) {
          proto::GroupStep step;  // a cache the follower never saw, already 4 positions long
          step.set_step(0);
          proto::GroupStepSequence* s = step.add_sequences();
          s->set_cache_key(77);
          s->set_start(4);
          s->add_tokens(1);
          std::string bytes = step.SerializeAsString();
          RETURN_IF_ERROR(net::BroadcastString(comm, &bytes, 0));
          // The follower tells the group before it leaves: no rank waits for it.
          absl::Status agreed;
          RETURN_IF_ERROR(AgreeOnStep(comm, 0, absl::OkStatus(), &agreed));
          EXPECT_TRUE(absl::IsDataLoss(agreed)) << agreed;
          EXPECT_NE(agreed.message().find("tp step 0: rank 1 refused it"), std::string::npos)
              << agreed;
          return absl::OkStatus();
        }
        absl::StatusOr<FollowerExit> exit = RunGroupFollower(**model, comm, stop);
        EXPECT_TRUE(absl::IsDataLoss(exit.status())) << exit.status();
        EXPECT_NE(exit.status().message().find("tp step 0: cache key 77 is unknown"),
                  std::string::npos)
            << exit.status();
        return absl::OkStatus();
      });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
}

// One refused step, then one the group runs: the refusal comes back at once (no
// rank waits in a collective for a peer that skipped the step) with the refusing
// rank's code, and the next step equals TP=1's. `leader_max_tokens` sizes the
// leader's cache; the follower's hold the model's context (512 positions).
void RefusedThenRun(int leader_max_tokens, int refused_tokens, int refusing_rank) {
  auto reference = model::Transformer::Load(TinyPath(), {.threads = 1});
  ASSERT_TRUE(reference.ok());
  FollowerCounters counters;
  std::atomic<bool> stop{false};
  std::vector<absl::Status> results =
      net::RunGlooRanksAsThreads({.size = 2}, [&](net::Communicator& comm) -> absl::Status {
        auto model = model::Transformer::Load(TinyPath(), &comm, {.threads = 1});
        if (!model.ok()) return model.status();
        if (comm.rank() != 0) {
          absl::StatusOr<FollowerExit> exit = RunGroupFollower(**model, comm, stop, &counters);
          return exit.ok() ? absl::OkStatus() : exit.status();
        }
        GroupLeaderModel leader(model->get(), &comm);
        auto cache = leader.NewCache(leader_max_tokens);
        std::vector<int32_t> long_prompt(refused_tokens);
        for (int i = 0; i < refused_tokens; ++i) long_prompt[i] = 1 + i % 50;
        model::ForwardOutput out;
        const absl::Status refused =
            leader.Forward({{cache.get(), long_prompt, model::LogitsMode::kLast}}, &out);
        EXPECT_TRUE(absl::IsOutOfRange(refused)) << refused;
        EXPECT_NE(refused.message().find("rank " + std::to_string(refusing_rank) + " refused it"),
                  std::string::npos)
            << refused;
        EXPECT_TRUE(leader.status().ok()) << "a refusal must not break the group";
        EXPECT_EQ(cache->length(), 0);
        // The group is still in step: a short prompt runs and equals TP=1.
        const std::vector<int32_t> prompt = {5, 6, 7};
        auto reference_cache = (*reference)->NewCache();
        model::ForwardOutput want;
        RETURN_IF_ERROR(
            (*reference)->Forward({{reference_cache.get(), prompt, model::LogitsMode::kLast}}, &want));
        RETURN_IF_ERROR(leader.Forward({{cache.get(), prompt, model::LogitsMode::kLast}}, &out));
        float scale = 0;
        const float diff = MaxAbsDiff(out.logits.data(), want.logits.data(),
                                      static_cast<int>(want.logits.size()), &scale);
        EXPECT_LE(diff, 1e-4f * std::max(1.0f, scale));
        EXPECT_EQ(cache->length(), 3);
        cache.reset();
        leader.Leave(/*disband=*/true);
        return leader.status();
      });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  EXPECT_EQ(counters.forwards, 1u) << "the follower ran the refused step";
}

TEST(GroupStepTest, ALeaderThatRefusesAStepTellsItsFollowersAtOnce) {
  // The leader's cache holds 16 positions, the follower's 512: only the leader refuses 40.
  RefusedThenRun(/*leader_max_tokens=*/16, /*refused_tokens=*/40, /*refusing_rank=*/0);
}

// Followers size their caches as the leader's (GroupStepSequence.max_tokens), so a
// follower refuses alone only on a local failure (an allocation, a plan it cannot
// run). Here the plan itself is one the leader would never send: 40 tokens for a
// cache of 16. The follower's refusal reaches the leader in the vote, before any
// collective of the forward, and the follower stays in the group.
TEST(GroupStepTest, AFollowerThatRefusesAStepTellsItsLeaderAtOnce) {
  FollowerCounters counters;
  std::atomic<bool> stop{false};
  std::vector<absl::Status> results =
      net::RunGlooRanksAsThreads({.size = 2}, [&](net::Communicator& comm) -> absl::Status {
        auto model = model::Transformer::Load(TinyPath(), &comm, {.threads = 1});
        if (!model.ok()) return model.status();
        if (comm.rank() != 0) {
          absl::StatusOr<FollowerExit> exit = RunGroupFollower(**model, comm, stop, &counters);
          if (!exit.ok()) return exit.status();
          EXPECT_EQ(*exit, FollowerExit::kDisbanded);
          return absl::OkStatus();
        }
        proto::GroupStep step;
        step.set_step(0);
        proto::GroupStepSequence* s = step.add_sequences();
        s->set_cache_key(7);
        s->set_start(0);
        s->set_max_tokens(16);
        for (int i = 0; i < 40; ++i) s->add_tokens(1 + i % 50);
        std::string bytes = step.SerializeAsString();
        RETURN_IF_ERROR(net::BroadcastString(comm, &bytes, 0));
        absl::Status agreed;
        RETURN_IF_ERROR(AgreeOnStep(comm, 0, absl::OkStatus(), &agreed));
        EXPECT_TRUE(absl::IsOutOfRange(agreed)) << agreed;
        EXPECT_NE(agreed.message().find("tp step 0: rank 1 refused it"), std::string::npos)
            << agreed;
        proto::GroupStep leave;  // the follower is still in step: it takes the next plan
        leave.set_step(1);
        leave.set_leave(true);
        leave.set_disband(true);
        bytes = leave.SerializeAsString();
        return net::BroadcastString(comm, &bytes, 0);
      });
  for (int r = 0; r < 2; ++r) EXPECT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  EXPECT_EQ(counters.forwards, 0u) << "the follower ran the refused step";
  EXPECT_EQ(counters.steps, 2u);
}

// Tree drafts are refused by name before anything is broadcast (a GroupStep carries
// no parents), and the leader's caches refuse KeepPath: the engine verifies chains
// there (LanguageModel::RunsTrees is false).
TEST(GroupStepTest, TreesAreRefusedByNameBeforeAnyBroadcast) {
  FollowerCounters counters;
  std::atomic<bool> stop{false};
  std::vector<absl::Status> results =
      net::RunGlooRanksAsThreads({.size = 2}, [&](net::Communicator& comm) -> absl::Status {
        auto model = model::Transformer::Load(TinyPath(), &comm, {.threads = 1});
        if (!model.ok()) return model.status();
        if (comm.rank() != 0) {
          absl::StatusOr<FollowerExit> exit = RunGroupFollower(**model, comm, stop, &counters);
          if (!exit.ok()) return exit.status();
          EXPECT_EQ(*exit, FollowerExit::kDisbanded);
          return absl::OkStatus();
        }
        GroupLeaderModel leader(model->get(), &comm);
        EXPECT_FALSE(leader.RunsTrees());
        std::unique_ptr<model::KvCache> cache = leader.NewCache(64);
        const std::vector<int32_t> tokens = {1, 2, 3};
        const std::vector<int32_t> parents = {-1, 0, 0};
        model::ForwardOutput out;
        const absl::Status tree =
            leader.Forward({{cache.get(), tokens, model::LogitsMode::kAll, parents}}, &out);
        EXPECT_TRUE(absl::IsUnimplemented(tree)) << tree;
        EXPECT_NE(tree.message().find("tree drafts"), std::string::npos) << tree;
        EXPECT_EQ(leader.steps(), 0u) << "nothing was broadcast";
        EXPECT_TRUE(leader.status().ok()) << "the group is not broken";
        RETURN_IF_ERROR(leader.Forward({{cache.get(), tokens, model::LogitsMode::kAll}}, &out));
        const absl::Status keep = cache->KeepPath(0, std::vector<int32_t>{0, 2});
        EXPECT_TRUE(absl::IsUnimplemented(keep)) << keep;
        EXPECT_EQ(cache->length(), 3);
        leader.Leave(/*disband=*/true);
        return absl::OkStatus();
      });
  for (const absl::Status& s : results) EXPECT_TRUE(s.ok()) << s;
  EXPECT_EQ(counters.forwards, 1u);
}

}  // namespace
}  // namespace splitspec::target

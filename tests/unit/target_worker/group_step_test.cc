// The leader/follower step protocol of a tensor-parallel target group
// (GroupLeaderModel + RunGroupFollower), ranks as threads on loopback Gloo.
//
// The leader's forward results must equal TP=1's (F32 model: within float
// rounding of the summation order, tolerance 1e-4 of the logits' scale) after
// every pattern the target engine produces: prefill, decode, a k+1 block,
// rollback by KvCache::Truncate, batching, and caches released and replaced.
// A follower that cannot follow the plan fails with DataLoss naming the step.
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "target_worker/group_follower.h"
#include "target_worker/group_leader_model.h"
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
          return net::BroadcastString(comm, &bytes, 0);
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

}  // namespace
}  // namespace splitspec::target

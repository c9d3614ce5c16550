// RequestRouter's drain policy (run-time scale-down) with a fake clock: no
// placement on draining workers, a draft worker's requests handed over at once,
// a target group's requests finishing or re-placed after the drain timeout,
// Drain sent only once a worker holds nothing, and nothing lost on the way.
#include <algorithm>

#include "coordinator/request_router.h"
#include "gtest/gtest.h"

namespace splitspec::coordinator {
namespace {

const absl::Time t0 = absl::FromUnixSeconds(1000);
const std::string kClient = "client";

std::string PeerOf(uint64_t id) { return "peer-" + std::to_string(id); }

proto::MemberStatus Member(uint64_t id, proto::Role role, int tp_rank = 0,
                           const std::string& group = "") {
  proto::MemberStatus m;
  m.set_worker_id(id);
  m.set_role(role);
  m.set_tp_rank(tp_rank);
  m.set_tp_group(group);
  m.set_data_endpoint("tcp://w" + std::to_string(id));
  return m;
}

class RouterDrainTest : public ::testing::Test {
 protected:
  RouterDrainTest() : router_(Options()) {}

  static RouterOptions Options() {
    RouterOptions options;
    options.drain_timeout = absl::Seconds(30);
    return options;
  }

  void AddWorker(uint64_t id, proto::Role role, int tp_rank = 0, const std::string& group = "") {
    router_.OnWorkerAlive(Member(id, role, tp_rank, group), PeerOf(id), &out_);
  }

  void Submit(const std::string& id, int max_tokens = 8) {
    proto::SubmitRequest submit;
    submit.set_request_id(id);
    for (int32_t t : {5, 6, 7}) submit.add_prompt_tokens(t);
    submit.mutable_params()->set_max_tokens(max_tokens);
    router_.OnSubmit(kClient, submit, &out_);
  }

  // A result from `worker` committing `tokens` after a frontier of `before`.
  void Result(uint64_t worker, const std::string& id, std::vector<int32_t> tokens, int before,
              bool finished = false) {
    proto::VerifyResult r;
    r.set_request_id(id);
    r.mutable_committed_tokens()->Assign(tokens.begin(), tokens.end());
    r.set_frontier(static_cast<uint32_t>(before + tokens.size()));
    r.set_finished(finished);
    if (finished) r.set_finish_reason(proto::FINISH_REASON_LENGTH);
    router_.OnResult(PeerOf(worker), r, &out_);
  }

  // The messages sent since the last Take().
  std::vector<Outgoing> Take() {
    std::vector<Outgoing> taken;
    taken.swap(out_);
    return taken;
  }

  static std::vector<const Outgoing*> Filter(const std::vector<Outgoing>& out,
                                             proto::Envelope::BodyCase body,
                                             const std::string& peer = "") {
    std::vector<const Outgoing*> found;
    for (const Outgoing& o : out) {
      if (o.envelope.body_case() == body && (peer.empty() || o.peer == peer)) found.push_back(&o);
    }
    return found;
  }

  // Every token the client has been streamed for `id`, and whether it finished.
  std::pair<std::vector<int32_t>, bool> Streamed(const std::vector<Outgoing>& out,
                                                 const std::string& id) {
    for (const Outgoing* o : Filter(out, proto::Envelope::kTokenStream, kClient)) {
      const proto::TokenStream& s = o->envelope.token_stream();
      if (s.request_id() != id) continue;
      streamed_[id].insert(streamed_[id].end(), s.tokens().begin(), s.tokens().end());
      if (s.finished()) finished_[id] = true;
    }
    return {streamed_[id], finished_[id]};
  }

  RequestRouter router_;
  std::vector<Outgoing> out_;
  std::map<std::string, std::vector<int32_t>> streamed_;
  std::map<std::string, bool> finished_;
};

proto::DrainRequest DrainIds(std::vector<uint64_t> ids, uint32_t timeout_ms = 0) {
  proto::DrainRequest d;
  for (uint64_t id : ids) d.add_worker_ids(id);
  d.set_reason("test");
  d.set_timeout_ms(timeout_ms);
  return d;
}

proto::DrainRequest DrainCount(proto::Role role, uint32_t count) {
  proto::DrainRequest d;
  d.set_role(role);
  d.set_count(count);
  return d;
}

TEST_F(RouterDrainTest, DrainingWorkersGetNoNewPlacements) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  AddWorker(3, proto::ROLE_DRAFT_WORKER);
  AddWorker(4, proto::ROLE_DRAFT_WORKER);
  auto draining = router_.StartDrain(DrainIds({2, 4}), t0, &out_);
  ASSERT_TRUE(draining.ok()) << draining.status();
  EXPECT_EQ(*draining, (std::vector<uint64_t>{2, 4}));
  EXPECT_TRUE(router_.IsDraining(2));
  EXPECT_FALSE(router_.IsDraining(1));
  // Idle workers are sent Drain at once.
  std::vector<Outgoing> out = Take();
  EXPECT_EQ(Filter(out, proto::Envelope::kDrain, PeerOf(2)).size(), 1u);
  EXPECT_EQ(Filter(out, proto::Envelope::kDrain, PeerOf(4)).size(), 1u);
  for (int i = 0; i < 6; ++i) Submit("r" + std::to_string(i));
  out = Take();
  EXPECT_EQ(Filter(out, proto::Envelope::kAssignment, PeerOf(1)).size(), 6u);
  EXPECT_EQ(Filter(out, proto::Envelope::kAssignment, PeerOf(3)).size(), 6u);
  EXPECT_TRUE(Filter(out, proto::Envelope::kAssignment, PeerOf(2)).empty());
  EXPECT_TRUE(Filter(out, proto::Envelope::kAssignment, PeerOf(4)).empty());
}

TEST_F(RouterDrainTest, DraftDrainHandsRequestsToAnotherDraftThenSendsDrain) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(2, proto::ROLE_DRAFT_WORKER);
  Submit("a");
  Submit("b");  // both on draft 2: the only one
  AddWorker(3, proto::ROLE_DRAFT_WORKER);
  Take();
  ASSERT_TRUE(router_.StartDrain(DrainIds({2}), t0, &out_).ok());
  std::vector<Outgoing> out = Take();
  // Released at the old draft, re-assigned with draft 3 at the target and at draft 3.
  EXPECT_EQ(Filter(out, proto::Envelope::kRelease, PeerOf(2)).size(), 2u);
  auto to_target = Filter(out, proto::Envelope::kAssignment, PeerOf(1));
  ASSERT_EQ(to_target.size(), 2u);
  for (const Outgoing* o : to_target) EXPECT_EQ(o->envelope.assignment().draft_worker_id(), 3u);
  EXPECT_EQ(Filter(out, proto::Envelope::kAssignment, PeerOf(3)).size(), 2u);
  // Drain goes out after the releases, in the same batch: the worker holds nothing now.
  ASSERT_EQ(Filter(out, proto::Envelope::kDrain, PeerOf(2)).size(), 1u);
  EXPECT_EQ(out.back().envelope.body_case(), proto::Envelope::kDrain);
  EXPECT_EQ(out.back().envelope.drain().worker_id(), 2u);
  EXPECT_EQ(router_.counters().reassigned_draft, 2u);
  // The requests go on with the target: results from it still stream.
  Result(1, "a", {9, 9}, 3);
  Result(1, "a", {8}, 5, /*finished=*/true);
  auto [tokens, finished] = Streamed(Take(), "a");
  EXPECT_EQ(tokens, (std::vector<int32_t>{9, 9, 8}));
  EXPECT_TRUE(finished);
}

TEST_F(RouterDrainTest, DraftDrainWithoutAnotherDraftLeavesTheTargetDecodingAlone) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(2, proto::ROLE_DRAFT_WORKER);
  Submit("a");
  Take();
  ASSERT_TRUE(router_.StartDrain(DrainCount(proto::ROLE_DRAFT_WORKER, 1), t0, &out_).ok());
  std::vector<Outgoing> out = Take();
  auto to_target = Filter(out, proto::Envelope::kAssignment, PeerOf(1));
  ASSERT_EQ(to_target.size(), 1u);
  EXPECT_EQ(to_target[0]->envelope.assignment().draft_worker_id(), 0u);
  EXPECT_EQ(Filter(out, proto::Envelope::kDrain, PeerOf(2)).size(), 1u);
  // A draft worker that joins later takes the request over.
  AddWorker(3, proto::ROLE_DRAFT_WORKER);
  out = Take();
  ASSERT_EQ(Filter(out, proto::Envelope::kAssignment, PeerOf(3)).size(), 1u);
}

TEST_F(RouterDrainTest, TargetDrainLetsRunningRequestsFinishThenSendsDrain) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  Submit("a");
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  Take();
  ASSERT_TRUE(router_.StartDrain(DrainIds({1}), t0, &out_).ok());
  EXPECT_TRUE(Filter(Take(), proto::Envelope::kDrain).empty()) << "target 1 still runs request a";
  Submit("b");  // goes to target 2
  std::vector<Outgoing> out = Take();
  EXPECT_EQ(Filter(out, proto::Envelope::kAssignment, PeerOf(2)).size(), 1u);
  router_.Tick(t0 + absl::Seconds(10), &out_);
  EXPECT_TRUE(Filter(Take(), proto::Envelope::kDrain).empty());
  Result(1, "a", {4, 4, 4}, 3, /*finished=*/true);
  router_.Tick(t0 + absl::Seconds(11), &out_);
  out = Take();
  EXPECT_EQ(Streamed(out, "a"), std::make_pair(std::vector<int32_t>{4, 4, 4}, true));
  EXPECT_EQ(Filter(out, proto::Envelope::kDrain, PeerOf(1)).size(), 1u);
  EXPECT_EQ(router_.counters().reassigned_target, 0u);
  // Drain is sent once.
  router_.Tick(t0 + absl::Seconds(60), &out_);
  EXPECT_TRUE(Filter(Take(), proto::Envelope::kDrain).empty());
}

TEST_F(RouterDrainTest, TargetDrainReplacesWhatIsLeftAfterTheTimeoutFromCommittedTokens) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(3, proto::ROLE_DRAFT_WORKER);
  Submit("a", /*max_tokens=*/6);
  Result(1, "a", {11, 12}, 3);
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  Streamed(Take(), "a");
  ASSERT_TRUE(router_.StartDrain(DrainIds({1}, /*timeout_ms=*/5000), t0, &out_).ok());
  router_.Tick(t0 + absl::Milliseconds(4999), &out_);
  std::vector<Outgoing> before = Take();
  EXPECT_TRUE(Filter(before, proto::Envelope::kAssignment).empty());
  EXPECT_TRUE(Filter(before, proto::Envelope::kDrain).empty());
  router_.Tick(t0 + absl::Seconds(5), &out_);
  std::vector<Outgoing> after = Take();
  EXPECT_EQ(Filter(after, proto::Envelope::kRelease, PeerOf(1)).size(), 1u);
  auto moved = Filter(after, proto::Envelope::kAssignment, PeerOf(2));
  ASSERT_EQ(moved.size(), 1u);
  const proto::Assignment& a = moved[0]->envelope.assignment();
  EXPECT_EQ(std::vector<int32_t>(a.committed_tokens().begin(), a.committed_tokens().end()),
            (std::vector<int32_t>{5, 6, 7, 11, 12}));
  EXPECT_EQ(a.prompt_length(), 3u);
  EXPECT_EQ(a.target_worker_id(), 2u);
  EXPECT_EQ(a.draft_worker_id(), 3u);
  EXPECT_GT(a.epoch(), 0u);
  EXPECT_EQ(Filter(after, proto::Envelope::kDrain, PeerOf(1)).size(), 1u);
  EXPECT_EQ(router_.counters().reassigned_target, 1u);
  // The drained target answers late: ignored, so its tokens never mix in.
  Result(1, "a", {99, 99}, 5);
  EXPECT_EQ(router_.counters().ignored_results, 1u);
  EXPECT_EQ(router_.Committed("a"), (std::vector<int32_t>{5, 6, 7, 11, 12}));
  Result(2, "a", {13, 14, 15, 16}, 5, /*finished=*/true);
  auto [tokens, finished] = Streamed(Take(), "a");
  EXPECT_EQ(tokens, (std::vector<int32_t>{11, 12, 13, 14, 15, 16}));
  EXPECT_TRUE(finished);
}

TEST_F(RouterDrainTest, PastTheTimeoutRequestsStayWhenNoOtherTargetIsLeft) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  Submit("a");
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  ASSERT_TRUE(router_.StartDrain(DrainIds({1}, /*timeout_ms=*/1000), t0, &out_).ok());
  router_.OnWorkerGone(2, &out_);  // the only other group dies during the drain
  Streamed(Take(), "a");
  router_.Tick(t0 + absl::Seconds(5), &out_);
  std::vector<Outgoing> out = Take();
  EXPECT_TRUE(Filter(out, proto::Envelope::kRelease).empty());
  EXPECT_TRUE(Filter(out, proto::Envelope::kDrain).empty());
  EXPECT_EQ(router_.running(), 1);
  Result(1, "a", {3, 3}, 3, /*finished=*/true);
  router_.Tick(t0 + absl::Seconds(6), &out_);
  out = Take();
  EXPECT_EQ(Streamed(out, "a"), std::make_pair(std::vector<int32_t>{3, 3}, true));
  EXPECT_EQ(Filter(out, proto::Envelope::kDrain, PeerOf(1)).size(), 1u);
}

TEST_F(RouterDrainTest, CountPicksTheLeastLoadedWorkersOfTheRole) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(2, proto::ROLE_DRAFT_WORKER);
  Submit("a");  // draft 2
  AddWorker(3, proto::ROLE_DRAFT_WORKER);
  Submit("b");  // draft 3
  Submit("c");  // draft 2 (tie: lowest id)
  AddWorker(4, proto::ROLE_DRAFT_WORKER);
  Take();
  auto first = router_.StartDrain(DrainCount(proto::ROLE_DRAFT_WORKER, 1), t0, &out_);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(*first, std::vector<uint64_t>{4});
  auto second = router_.StartDrain(DrainCount(proto::ROLE_DRAFT_WORKER, 1), t0, &out_);
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(*second, std::vector<uint64_t>{3});
  const absl::StatusOr<std::vector<uint64_t>> third =
      router_.StartDrain(DrainCount(proto::ROLE_DRAFT_WORKER, 2), t0, &out_);
  EXPECT_EQ(third.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(third.status().message().find("DrainRequest.count 2"), std::string::npos)
      << third.status();
}

TEST_F(RouterDrainTest, RequestErrorsNameTheFieldAndChangeNothing) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(2, proto::ROLE_DRAFT_WORKER);
  AddWorker(5, proto::ROLE_TARGET_WORKER, /*tp_rank=*/1, "g");
  auto expect_error = [&](const proto::DrainRequest& d, absl::StatusCode code,
                          const std::string& text) {
    auto result = router_.StartDrain(d, t0, &out_);
    EXPECT_EQ(result.status().code(), code) << d.DebugString();
    EXPECT_NE(result.status().message().find(text), std::string::npos) << result.status();
  };
  proto::DrainRequest both = DrainCount(proto::ROLE_DRAFT_WORKER, 1);
  both.add_worker_ids(2);
  expect_error(both, absl::StatusCode::kInvalidArgument, "count or worker_ids, not both");
  expect_error(proto::DrainRequest(), absl::StatusCode::kInvalidArgument, "names no worker");
  expect_error(DrainCount(proto::ROLE_CLIENT, 1), absl::StatusCode::kInvalidArgument,
               "DrainRequest.role");
  expect_error(DrainIds({77}), absl::StatusCode::kNotFound, "77");
  expect_error(DrainIds({5}), absl::StatusCode::kInvalidArgument, "follower of group 'g'");
  proto::DrainRequest wrong_role = DrainIds({2});
  wrong_role.set_role(proto::ROLE_TARGET_WORKER);
  expect_error(wrong_role, absl::StatusCode::kInvalidArgument, "worker 2 is a ROLE_DRAFT_WORKER");
  expect_error(DrainCount(proto::ROLE_TARGET_WORKER, 2), absl::StatusCode::kUnavailable,
               "DrainRequest.count 2");
  EXPECT_FALSE(router_.IsDraining(1));
  EXPECT_FALSE(router_.IsDraining(2));
  EXPECT_TRUE(Take().empty());
}

TEST_F(RouterDrainTest, TheLastTargetGroupIsKeptUnlessForcedWhileIdle) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  Submit("a");
  proto::DrainRequest forced = DrainCount(proto::ROLE_TARGET_WORKER, 1);
  forced.set_force(true);
  for (const proto::DrainRequest& drain : {DrainCount(proto::ROLE_TARGET_WORKER, 1), forced}) {
    auto refused = router_.StartDrain(drain, t0, &out_);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
    EXPECT_NE(refused.status().message().find("no target group serving while 1 request"),
              std::string::npos)
        << refused.status();
  }
  EXPECT_FALSE(router_.IsDraining(1));
  // Idle, it stays unless forced (an admin emptying the cluster on purpose).
  Result(1, "a", {1}, 3, /*finished=*/true);
  auto refused = router_.StartDrain(DrainCount(proto::ROLE_TARGET_WORKER, 1), t0, &out_);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(refused.status().message().find("would remove the last target group serving"),
            std::string::npos)
      << refused.status();
  EXPECT_FALSE(router_.IsDraining(1));
  EXPECT_TRUE(router_.StartDrain(forced, t0, &out_).ok());
  // Then requests are refused at once rather than queued with nobody to serve them.
  Take();
  Submit("b");
  const std::vector<Outgoing> out = Take();
  ASSERT_EQ(Filter(out, proto::Envelope::kError, kClient).size(), 1u);
  EXPECT_EQ(Filter(out, proto::Envelope::kError, kClient)[0]->envelope.error().code(),
            proto::ERROR_CODE_UNAVAILABLE);
  EXPECT_EQ(router_.queued(), 0);
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  Submit("c");
  EXPECT_EQ(router_.running(), 1);
}

// Followers are reported draining; only the leader is sent Drain (it disbands them).
TEST_F(RouterDrainTest, DrainingAGroupLeaderDrainsItsGroup) {
  AddWorker(1, proto::ROLE_TARGET_WORKER, 0, "g0");
  AddWorker(2, proto::ROLE_TARGET_WORKER, 1, "g0");
  AddWorker(3, proto::ROLE_TARGET_WORKER, 0, "g1");
  AddWorker(4, proto::ROLE_TARGET_WORKER, 1, "g1");
  Take();
  auto draining = router_.StartDrain(DrainCount(proto::ROLE_TARGET_WORKER, 1), t0, &out_);
  ASSERT_TRUE(draining.ok()) << draining.status();
  EXPECT_EQ(*draining,
            (std::vector<uint64_t>{3, 4}));  // the newest of two idle groups, then its follower
  std::vector<Outgoing> out = Take();
  EXPECT_EQ(Filter(out, proto::Envelope::kDrain, PeerOf(3)).size(), 1u);
  EXPECT_EQ(Filter(out, proto::Envelope::kDrain).size(), 1u);
}

TEST_F(RouterDrainTest, ADrainingTargetThatDiesLosesNothing) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  Submit("a");
  Result(1, "a", {21}, 3);
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  ASSERT_TRUE(router_.StartDrain(DrainIds({1}), t0, &out_).ok());
  Streamed(Take(), "a");
  router_.OnWorkerGone(1, &out_);
  const std::vector<Outgoing> out = Take();
  auto moved = Filter(out, proto::Envelope::kAssignment, PeerOf(2));
  ASSERT_EQ(moved.size(), 1u);
  EXPECT_EQ(moved[0]->envelope.assignment().committed_tokens_size(), 4);
  Result(2, "a", {22}, 4, /*finished=*/true);
  EXPECT_EQ(Streamed(Take(), "a"), std::make_pair(std::vector<int32_t>{21, 22}, true));
}

}  // namespace
}  // namespace splitspec::coordinator

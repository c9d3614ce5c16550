// RequestRouter's specification (docs/architecture.md), without sockets: placement
// across target groups and draft workers, a worker's death (requests re-placed
// from their committed tokens, nothing lost or repeated), stale results, client
// limits refused with clear errors, cancellation and worker errors. Draining
// has its own file (request_router_drain_test.cc).
#include <map>
#include <set>
#include <string>
#include <vector>

#include "coordinator/request_router.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::coordinator {
namespace {

const std::string kClient = "client";
const std::vector<int32_t> kPrompt = {5, 6, 7};

std::string PeerOf(uint64_t id) { return "peer-" + std::to_string(id); }
std::string EndpointOf(uint64_t id) { return "tcp://w" + std::to_string(id); }

proto::MemberStatus Member(uint64_t id, proto::Role role, int tp_rank = 0,
                           const std::string& group = "") {
  proto::MemberStatus m;
  m.set_worker_id(id);
  m.set_role(role);
  m.set_tp_rank(tp_rank);
  m.set_tp_group(group);
  m.set_data_endpoint(EndpointOf(id));
  return m;
}

std::vector<int32_t> Concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

class RequestRouterTest : public ::testing::Test {
 protected:
  explicit RequestRouterTest(RouterOptions options = {}) : router_(options) {}

  void AddWorker(uint64_t id, proto::Role role, int tp_rank = 0, const std::string& group = "") {
    router_.OnWorkerAlive(Member(id, role, tp_rank, group), PeerOf(id), &out_);
  }

  void Submit(const std::string& id, int max_tokens = 8, const std::string& drafter = "",
              std::vector<int32_t> prompt = kPrompt) {
    proto::SubmitRequest submit;
    submit.set_request_id(id);
    submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
    submit.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
    submit.set_drafter(drafter);
    router_.OnSubmit(kClient, submit, &out_);
  }

  // A result from `worker` committing `tokens` after a frontier of `before`.
  void Result(uint64_t worker, const std::string& id, const std::vector<int32_t>& tokens,
              int before, uint64_t epoch = 0,
              proto::FinishReason finish = proto::FINISH_REASON_UNSPECIFIED) {
    proto::VerifyResult r;
    r.set_request_id(id);
    r.mutable_committed_tokens()->Assign(tokens.begin(), tokens.end());
    r.set_frontier(static_cast<uint32_t>(before + tokens.size()));
    r.set_epoch(epoch);
    r.set_finished(finish != proto::FINISH_REASON_UNSPECIFIED);
    r.set_finish_reason(finish);
    router_.OnResult(PeerOf(worker), r, &out_);
  }

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

  // The assignment sent to `worker` for `id` in `out` (fails the test if none).
  static proto::Assignment AssignmentTo(const std::vector<Outgoing>& out, uint64_t worker,
                                        const std::string& id) {
    for (const Outgoing* o : Filter(out, proto::Envelope::kAssignment, PeerOf(worker))) {
      if (o->envelope.assignment().request_id() == id) return o->envelope.assignment();
    }
    ADD_FAILURE() << "no assignment of " << id << " to worker " << worker;
    return {};
  }

  // Applies the client's stream messages in `out` to streamed_ / finish_.
  void Collect(const std::vector<Outgoing>& out) {
    for (const Outgoing* o : Filter(out, proto::Envelope::kTokenStream, kClient)) {
      const proto::TokenStream& s = o->envelope.token_stream();
      streamed_[s.request_id()].insert(streamed_[s.request_id()].end(), s.tokens().begin(),
                                       s.tokens().end());
      if (s.finished()) finish_[s.request_id()] = s.finish_reason();
    }
  }

  RequestRouter router_;
  std::vector<Outgoing> out_;
  std::map<std::string, std::vector<int32_t>> streamed_;
  std::map<std::string, proto::FinishReason> finish_;
};

TEST_F(RequestRouterTest, PlacesLeastLoadedAcrossTargetGroupsAndDraftWorkers) {
  AddWorker(1, proto::ROLE_TARGET_WORKER, 0, "g1");
  AddWorker(11, proto::ROLE_TARGET_WORKER, 1, "g1");  // a follower: never placed on
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  AddWorker(3, proto::ROLE_DRAFT_WORKER);
  AddWorker(4, proto::ROLE_DRAFT_WORKER);
  Take();
  for (const char* id : {"a", "b", "c", "d"}) Submit(id);
  const std::vector<Outgoing> out = Take();
  EXPECT_EQ(router_.running(), 4);
  EXPECT_EQ(Filter(out, proto::Envelope::kAssignment, PeerOf(1)).size(), 2u);
  EXPECT_EQ(Filter(out, proto::Envelope::kAssignment, PeerOf(2)).size(), 2u);
  EXPECT_EQ(Filter(out, proto::Envelope::kAssignment, PeerOf(3)).size(), 2u);
  EXPECT_EQ(Filter(out, proto::Envelope::kAssignment, PeerOf(4)).size(), 2u);
  EXPECT_TRUE(Filter(out, proto::Envelope::kAssignment, PeerOf(11)).empty());
  // Target and draft get the same assignment: where to send blocks, from what.
  const proto::Assignment at_target = AssignmentTo(out, 1, "a");
  EXPECT_EQ(at_target.target_worker_id(), 1u);
  EXPECT_EQ(at_target.target_endpoint(), EndpointOf(1));
  EXPECT_EQ(at_target.draft_worker_id(), 3u);
  EXPECT_EQ(std::vector<int32_t>(at_target.committed_tokens().begin(),
                                 at_target.committed_tokens().end()),
            kPrompt);
  EXPECT_EQ(at_target.prompt_length(), kPrompt.size());
  EXPECT_EQ(at_target.epoch(), 0u);
  EXPECT_EQ(AssignmentTo(out, 3, "a").SerializeAsString(), at_target.SerializeAsString());
}

// A target that registered Capabilities.runs_trees gets (with its draft) assignments
// that say so; one that did not (CUDA, a tensor-parallel group) gets chains only.
TEST_F(RequestRouterTest, AssignmentsSayWhetherTheTargetRunsTrees) {
  proto::MemberStatus trees = Member(1, proto::ROLE_TARGET_WORKER);
  trees.mutable_capabilities()->set_runs_trees(true);
  router_.OnWorkerAlive(trees, PeerOf(1), &out_);
  AddWorker(3, proto::ROLE_DRAFT_WORKER);
  Take();
  Submit("a");
  std::vector<Outgoing> out = Take();
  EXPECT_TRUE(AssignmentTo(out, 1, "a").target_runs_trees());
  EXPECT_TRUE(AssignmentTo(out, 3, "a").target_runs_trees());
  router_.OnWorkerGone(1, &out_);
  AddWorker(2, proto::ROLE_TARGET_WORKER);  // no runs_trees
  out = Take();
  EXPECT_FALSE(AssignmentTo(out, 2, "a").target_runs_trees());
  EXPECT_FALSE(AssignmentTo(out, 3, "a").target_runs_trees());
}

// Heartbeats report each target's free KV cache: a request goes to a group
// whose room holds its prompt, even if that group is busier, and the prompts
// placed there count against its room until the next heartbeat.
TEST_F(RequestRouterTest, PrefersATargetGroupWithKvRoomForThePrompt) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  Take();
  const std::vector<int32_t> prompt(100, 5);
  proto::LoadReport full, roomy;
  full.set_kv_cache_budget_bytes(1000 * 8);
  full.set_kv_cache_used_bytes(950 * 8);  // 50 positions free
  full.set_kv_cache_bytes_per_position(8);
  roomy = full;
  roomy.set_kv_cache_used_bytes(750 * 8);  // 250 positions free: two prompts of 100
  router_.OnWorkerLoad(1, full);
  router_.OnWorkerLoad(2, roomy);
  for (const char* id : {"a", "b", "c"}) Submit(id, 8, "", prompt);
  const std::vector<Outgoing> out = Take();
  EXPECT_EQ(AssignmentTo(out, 2, "a").request_id(), "a");
  EXPECT_EQ(AssignmentTo(out, 2, "b").request_id(), "b") << "busier, but it has room";
  EXPECT_EQ(AssignmentTo(out, 1, "c").request_id(), "c")
      << "no room anywhere now: the least loaded takes it (and queues it)";
  // Without a budget reported, a target counts as having room.
  router_.OnWorkerLoad(1, proto::LoadReport());
  Submit("d", 8, "", prompt);
  EXPECT_EQ(AssignmentTo(Take(), 1, "d").request_id(), "d");
}

// With no target group at all a submission is refused at once
// (request_router_no_target_test); requests whose only target died wait queued.
TEST_F(RequestRouterTest, QueuesUntilATargetRegistersAndHonoursDrafterNone) {
  AddWorker(3, proto::ROLE_DRAFT_WORKER);
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  Submit("a", 8, "none");
  Submit("b");
  router_.OnWorkerGone(2, &out_);
  EXPECT_EQ(router_.queued(), 2);
  Take();
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  const std::vector<Outgoing> out = Take();
  EXPECT_EQ(router_.queued(), 0);
  EXPECT_EQ(router_.running(), 2);
  EXPECT_EQ(AssignmentTo(out, 1, "a").draft_worker_id(), 0u)
      << "drafter none: the target decodes alone";
  EXPECT_EQ(Filter(out, proto::Envelope::kAssignment, PeerOf(3)).size(), 1u);
  EXPECT_EQ(AssignmentTo(out, 1, "b").draft_worker_id(), 3u);
}

TEST_F(RequestRouterTest, TargetDeathReplacesTheRequestFromItsCommittedTokens) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(2, proto::ROLE_DRAFT_WORKER);
  Submit("r", 6);
  AddWorker(3, proto::ROLE_TARGET_WORKER);
  Take();
  Result(1, "r", {40, 41}, 3, /*epoch=*/2);
  Collect(Take());
  router_.OnWorkerGone(1, &out_);
  std::vector<Outgoing> out = Take();
  Collect(out);
  EXPECT_EQ(router_.counters().reassigned_target, 1u);
  // The draft restarts too; the new target re-prefills prompt + generated tokens.
  EXPECT_EQ(Filter(out, proto::Envelope::kRelease, PeerOf(2)).size(), 1u);
  const proto::Assignment moved = AssignmentTo(out, 3, "r");
  EXPECT_EQ(std::vector<int32_t>(moved.committed_tokens().begin(), moved.committed_tokens().end()),
            Concat(kPrompt, {40, 41}));
  EXPECT_EQ(moved.prompt_length(), 3u);
  EXPECT_GT(moved.epoch(), 2u) << "the new placement starts a new epoch";
  EXPECT_EQ(AssignmentTo(out, 2, "r").target_endpoint(), EndpointOf(3));
  // The dead target's late result is ignored; the new one's completes the request.
  Result(1, "r", {99}, 5);
  EXPECT_EQ(router_.counters().ignored_results, 1u);
  Result(3, "r", {42, 43}, 5, moved.epoch());
  Result(3, "r", {44, 45}, 7, moved.epoch(), proto::FINISH_REASON_LENGTH);
  Collect(Take());
  EXPECT_EQ(streamed_["r"], (std::vector<int32_t>{40, 41, 42, 43, 44, 45}))
      << "nothing lost or repeated";
  EXPECT_EQ(finish_["r"], proto::FINISH_REASON_LENGTH);
  EXPECT_EQ(router_.counters().finished_length, 1u);
}

TEST_F(RequestRouterTest, LastTargetDeathRequeuesUntilAnotherArrives) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  Submit("r", 6, "none");
  Take();
  Result(1, "r", {40}, 3);
  router_.OnWorkerGone(1, &out_);
  EXPECT_EQ(router_.queued(), 1);
  EXPECT_EQ(router_.running(), 0);
  EXPECT_EQ(router_.Committed("r"), Concat(kPrompt, {40}));
  Take();
  AddWorker(5, proto::ROLE_TARGET_WORKER);
  const proto::Assignment placed = AssignmentTo(Take(), 5, "r");
  EXPECT_EQ(
      std::vector<int32_t>(placed.committed_tokens().begin(), placed.committed_tokens().end()),
      Concat(kPrompt, {40}));
}

TEST_F(RequestRouterTest, DraftDeathMovesTheRequestToAnotherDraftOrToNone) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(2, proto::ROLE_DRAFT_WORKER);
  Submit("r");
  AddWorker(3, proto::ROLE_DRAFT_WORKER);
  Take();
  router_.OnWorkerGone(2, &out_);
  std::vector<Outgoing> out = Take();
  EXPECT_EQ(AssignmentTo(out, 1, "r").draft_worker_id(), 3u);
  EXPECT_EQ(AssignmentTo(out, 3, "r").draft_worker_id(), 3u);
  router_.OnWorkerGone(3, &out_);
  out = Take();
  EXPECT_EQ(AssignmentTo(out, 1, "r").draft_worker_id(), 0u)
      << "the target decodes alone meanwhile";
  EXPECT_EQ(router_.counters().reassigned_draft, 2u);
  EXPECT_EQ(router_.running(), 1);
  // A new draft worker takes over a request that was decoding alone.
  AddWorker(4, proto::ROLE_DRAFT_WORKER);
  out = Take();
  EXPECT_EQ(AssignmentTo(out, 1, "r").draft_worker_id(), 4u);
  EXPECT_EQ(AssignmentTo(out, 4, "r").draft_worker_id(), 4u);
}

TEST_F(RequestRouterTest, ResultsFromWorkersNotServingTheRequestAreIgnored) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  Submit("r");  // on target 1
  Take();
  Result(2, "r", {40}, 3);
  router_.OnResult("stranger", proto::VerifyResult(), &out_);
  proto::Error error;
  error.set_request_id("r");
  error.set_message("not yours");
  router_.OnWorkerError(PeerOf(2), error, &out_);
  EXPECT_EQ(router_.counters().ignored_results, 2u);
  EXPECT_TRUE(Take().empty());
  EXPECT_EQ(router_.Committed("r"), kPrompt);
  // A result that leaves a gap is not appended; the full sequence closes it.
  Result(1, "r", {41}, 4);
  EXPECT_EQ(router_.Committed("r"), kPrompt);
  proto::VerifyResult full;
  full.set_request_id("r");
  for (int32_t t : Concat(kPrompt, {40, 41})) full.add_committed_tokens(t);
  full.set_frontier(5);
  full.set_full_sequence(true);
  router_.OnResult(PeerOf(1), full, &out_);
  EXPECT_EQ(router_.Committed("r"), Concat(kPrompt, {40, 41}));
  Collect(Take());
  EXPECT_EQ(streamed_["r"], (std::vector<int32_t>{40, 41}));
}

// The refused submission's Error (code, message) and its finished stream.
void ExpectRefused(const std::vector<Outgoing>& out, proto::ErrorCode code,
                   const std::string& message) {
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].peer, kClient);
  ASSERT_TRUE(out[0].envelope.has_error());
  EXPECT_EQ(out[0].envelope.error().code(), code);
  EXPECT_EQ(out[0].envelope.error().message(), message);
  ASSERT_TRUE(out[1].envelope.has_token_stream());
  EXPECT_TRUE(out[1].envelope.token_stream().finished());
  EXPECT_EQ(out[1].envelope.token_stream().finish_reason(), proto::FINISH_REASON_ERROR);
}

class RequestRouterLimitsTest : public RequestRouterTest {
 protected:
  static RouterOptions Limits() {
    RouterOptions options;
    options.max_queued = 2;
    options.max_new_tokens = 100;
    options.default_max_new_tokens = 20;
    options.context_length = 50;
    return options;
  }
  RequestRouterLimitsTest() : RequestRouterTest(Limits()) {}
};

TEST_F(RequestRouterLimitsTest, RefusesOverLimitSubmissionsWithClearErrors) {
  Submit("big", 101);
  ExpectRefused(Take(), proto::ERROR_CODE_INVALID_ARGUMENT, "max_tokens 101 exceeds the limit 100");
  Submit("long", 48);
  ExpectRefused(Take(), proto::ERROR_CODE_INVALID_ARGUMENT,
                "prompt of 3 tokens plus max_tokens 48 exceeds the context length 50");
  Submit("empty", 8, "", {});
  ExpectRefused(Take(), proto::ERROR_CODE_INVALID_ARGUMENT, "prompt_tokens is empty");
  AddWorker(9, proto::ROLE_TARGET_WORKER);
  Submit("q1");
  Submit("q2");
  router_.OnWorkerGone(9, &out_);  // their only target died: both wait queued
  Take();
  Submit("q1");
  ExpectRefused(Take(), proto::ERROR_CODE_INVALID_ARGUMENT, "request_id 'q1' is already in use");
  Submit("q3");
  ExpectRefused(Take(), proto::ERROR_CODE_RESOURCE_EXHAUSTED, "queue is full (2 requests waiting)");
  EXPECT_EQ(router_.counters().refused, 5u);
  EXPECT_EQ(router_.queued(), 2);
  // The queued requests are placed, with the max_tokens they asked for.
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  EXPECT_EQ(AssignmentTo(Take(), 1, "q1").params().max_tokens(), 8u);
}

TEST_F(RequestRouterLimitsTest, MaxTokensZeroTakesTheDefault) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  Take();
  Submit("r", 0);
  EXPECT_EQ(AssignmentTo(Take(), 1, "r").params().max_tokens(), 20u);
}

TEST_F(RequestRouterTest, CancelFromAnotherClientIsRefusedAndChangesNothing) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  Submit("r");
  Take();
  proto::Cancel cancel;
  cancel.set_request_id("r");
  const absl::Status refused = router_.OnCancel("someone-else", cancel, &out_);
  EXPECT_TRUE(absl::IsPermissionDenied(refused)) << refused;
  EXPECT_THAT(refused.message(), testing::HasSubstr("submitted by another client"));
  EXPECT_TRUE(Take().empty());
  EXPECT_EQ(router_.running(), 1);
}

TEST_F(RequestRouterTest, GeneratedRequestIdsAreRandom128Bit) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  std::set<std::string> ids;
  for (int i = 0; i < 2; ++i) {
    proto::SubmitRequest submit;
    submit.add_prompt_tokens(1);
    router_.OnSubmit(kClient, submit, &out_);
    for (const Outgoing& message : Take()) {
      if (message.envelope.has_assignment()) ids.insert(message.envelope.assignment().request_id());
    }
  }
  ASSERT_EQ(ids.size(), 2u);
  for (const std::string& id : ids) EXPECT_THAT(id, testing::MatchesRegex("req-[0-9a-f]{32}"));
}

TEST_F(RequestRouterTest, CancelReleasesBothWorkersAndFinishesTheStream) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(2, proto::ROLE_DRAFT_WORKER);
  Submit("r");
  Take();
  proto::Cancel cancel;
  cancel.set_request_id("r");
  ASSERT_TRUE(router_.OnCancel(kClient, cancel, &out_).ok());
  const std::vector<Outgoing> out = Take();
  EXPECT_EQ(Filter(out, proto::Envelope::kRelease, PeerOf(1)).size(), 1u);
  EXPECT_EQ(Filter(out, proto::Envelope::kRelease, PeerOf(2)).size(), 1u);
  Collect(out);
  EXPECT_EQ(finish_["r"], proto::FINISH_REASON_CANCELLED);
  EXPECT_EQ(router_.running(), 0);
  EXPECT_EQ(router_.counters().cancelled, 1u);
  EXPECT_TRUE(router_.Committed("r").empty()) << "a finished request is forgotten";
}

TEST_F(RequestRouterTest, WorkerErrorReachesTheClientAndFinishesTheRequest) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  Submit("r");
  Take();
  proto::Error error;
  error.set_request_id("r");
  error.set_code(proto::ERROR_CODE_INTERNAL);
  error.set_message("request r: forward failed");
  router_.OnWorkerError(PeerOf(1), error, &out_);
  const std::vector<Outgoing> out = Take();
  const auto errors = Filter(out, proto::Envelope::kError, kClient);
  ASSERT_EQ(errors.size(), 1u);
  EXPECT_EQ(errors[0]->envelope.error().message(), "request r: forward failed");
  Collect(out);
  EXPECT_EQ(finish_["r"], proto::FINISH_REASON_ERROR);
  EXPECT_EQ(router_.counters().failed, 1u);
}

TEST_F(RequestRouterTest, LogprobsStreamWithTheirTokensAndSurviveAReplacedTarget) {
  AddWorker(1, proto::ROLE_TARGET_WORKER);
  AddWorker(2, proto::ROLE_TARGET_WORKER);
  Take();
  proto::SubmitRequest submit;
  submit.set_request_id("lp");
  submit.mutable_prompt_tokens()->Assign(kPrompt.begin(), kPrompt.end());
  submit.mutable_params()->set_max_tokens(8);
  submit.mutable_params()->set_logprobs(1);
  router_.OnSubmit(kClient, submit, &out_);
  const uint64_t first = Filter(Take(), proto::Envelope::kAssignment, PeerOf(1)).empty() ? 2 : 1;
  auto result = [&](uint64_t worker, std::vector<int32_t> tokens, int before, bool full,
                    int logprobs_start, std::vector<int32_t> entries, bool finished) {
    proto::VerifyResult r;
    r.set_request_id("lp");
    r.mutable_committed_tokens()->Assign(tokens.begin(), tokens.end());
    r.set_frontier(static_cast<uint32_t>(full ? tokens.size() : before + tokens.size()));
    r.set_full_sequence(full);
    r.set_logprobs_start(static_cast<uint32_t>(logprobs_start));
    for (int32_t token : entries) {
      proto::TokenLogprob* entry = r.add_logprobs();
      entry->set_token(token);
      entry->set_logprob(-static_cast<float>(token));
    }
    r.set_finished(finished);
    r.set_finish_reason(finished ? proto::FINISH_REASON_LENGTH : proto::FINISH_REASON_UNSPECIFIED);
    router_.OnResult(PeerOf(worker), r, &out_);
  };
  result(first, {40, 41}, 3, false, 3, {40, 41}, false);
  std::vector<Outgoing> out = Take();
  std::vector<const Outgoing*> streams = Filter(out, proto::Envelope::kTokenStream, kClient);
  ASSERT_EQ(streams.size(), 1u);
  const proto::TokenStream& stream = streams[0]->envelope.token_stream();
  ASSERT_EQ(stream.logprobs_size(), 2);
  EXPECT_EQ(stream.logprobs(1).token(), 41);
  // Its target dies: the next one commits from the committed tokens, and its
  // final full-sequence result repeats nothing the client already has.
  router_.OnWorkerGone(first, &out_);
  const uint64_t second = 3 - first;
  ASSERT_EQ(AssignmentTo(Take(), second, "lp").committed_tokens_size(), 5);
  result(second, Concat(Concat(kPrompt, {40, 41}), {42}), 0, true, 5, {42}, true);
  out = Take();
  streams = Filter(out, proto::Envelope::kTokenStream, kClient);
  ASSERT_EQ(streams.size(), 1u);
  const proto::TokenStream& last = streams[0]->envelope.token_stream();
  ASSERT_EQ(last.tokens_size(), 1);
  ASSERT_EQ(last.logprobs_size(), 1);
  EXPECT_EQ(last.logprobs(0).token(), 42);
  EXPECT_EQ(last.logprobs(0).logprob(), -42.0f);
  EXPECT_TRUE(last.finished());
}

}  // namespace
}  // namespace splitspec::coordinator

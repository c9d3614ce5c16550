// The control plane under attack (issue 16): a coordinator with CURVE keys on
// tcp:// loopback, and peers that each hold one role's key (or none) sending
// what a hostile process on the network would. Every attack is refused, the
// refusal names what the sender lacks, and the coordinator logs it with the
// sender's address and counts it (StatusReply.refused_peers). The last test
// attacks a target worker's data port the same way.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include <unistd.h>

#include "coordinator/coordinator_service.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/channel.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/wire_format.h"
#include "runtime/net/worker_identity.h"
#include "runtime/spec/lookup_drafter.h"
#include "target_worker/local_drafts.h"
#include "target_worker/target_service.h"
#include "tests/integration/stand_in_coordinator.h"
#include "tests/testing/tiny_model.h"

namespace splitspec {
namespace {

using ::testing::HasSubstr;

constexpr absl::Duration kReplyWait = absl::Seconds(10);
// How long a peer whose handshake must fail is given to prove nothing arrives.
constexpr absl::Duration kSilence = absl::Milliseconds(1500);

net::CurveKeyPair NewKeys() {
  absl::StatusOr<net::CurveKeyPair> keys = net::GenerateCurveKeyPair();
  EXPECT_TRUE(keys.ok()) << keys.status();
  return *keys;
}

using testing::AwaitBody;

class ClusterSecurityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    coordinator_keys_ = NewKeys();
    target_keys_ = NewKeys();
    draft_keys_ = NewKeys();
    client_keys_ = NewKeys();
    admin_keys_ = NewKeys();
    draft_0_keys_ = NewKeys();
    draft_1_keys_ = NewKeys();
    target_0_keys_ = NewKeys();
    target_1_keys_ = NewKeys();
    net::ChannelSecurity security;
    security.curve = true;
    security.own = coordinator_keys_;
    security.authorized = {{target_keys_.public_key, net::kTarget},
                           {draft_keys_.public_key, net::kDraft},
                           {client_keys_.public_key, net::kClient},
                           {admin_keys_.public_key, net::kAdmin},
                           // Two draft workers with keys of their own (draft.d/*.pub).
                           {draft_0_keys_.public_key, net::kDraft},
                           {draft_1_keys_.public_key, net::kDraft},
                           // Two targets with keys of their own (target.d/*.pub).
                           {target_0_keys_.public_key, net::kTarget},
                           {target_1_keys_.public_key, net::kTarget}};
    coordinator::CoordinatorOptions options;
    options.control_endpoint = "tcp://127.0.0.1:*";
    options.security = security;
    auto service = coordinator::CoordinatorService::Create(options);
    ASSERT_TRUE(service.ok()) << service.status();
    service_ = *std::move(service);
    endpoint_ = service_->control_endpoint();
    thread_ = std::thread([this] { ASSERT_TRUE(service_->Run(stop_).ok()); });
  }

  void TearDown() override {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }

  // A peer named `name` holding `keys`, expecting the coordinator's key
  // (`server_key` "": the right one).
  std::unique_ptr<net::Channel> Peer(const std::string& name, const net::CurveKeyPair& keys,
                                     const std::string& server_key = "") {
    net::ChannelSecurity security;
    security.curve = true;
    security.own = keys;
    security.coordinator_public_key =
        server_key.empty() ? coordinator_keys_.public_key : server_key;
    auto channel = net::ConnectChannel(endpoint_, name, security);
    EXPECT_TRUE(channel.ok()) << channel.status();
    return *std::move(channel);
  }

  static absl::StatusOr<proto::Envelope> Await(net::Channel& channel,
                                               proto::Envelope::BodyCase body,
                                               absl::Duration wait = kReplyWait) {
    return AwaitBody(channel, body, wait);
  }

  proto::StatusReply Status() {
    std::unique_ptr<net::Channel> admin = Peer(absl::StrCat("status-", ++peers_), admin_keys_);
    proto::Envelope request = net::NewEnvelope();
    request.mutable_status_request();
    EXPECT_TRUE(admin->Send("", request).ok());
    absl::StatusOr<proto::Envelope> reply = Await(*admin, proto::Envelope::kStatusReply);
    EXPECT_TRUE(reply.ok()) << reply.status();
    return reply.ok() ? reply->status_reply() : proto::StatusReply();
  }

  static proto::Envelope RegisterAs(proto::Role role, const std::string& name) {
    proto::Envelope envelope = net::NewEnvelope();
    proto::Register* r = envelope.mutable_register_worker();
    r->set_role(role);
    r->set_worker_name(name);
    r->set_host("localhost");
    r->set_pid(4242);
    r->set_tp_size(1);
    r->set_data_endpoint("tcp://127.0.0.1:1");
    r->mutable_capabilities()->set_max_sequences(4);
    return envelope;
  }

  // Registers a target worker with the target key; returns its id.
  uint64_t RegisterTarget(net::Channel& channel, const std::string& name) {
    EXPECT_TRUE(channel.Send("", RegisterAs(proto::ROLE_TARGET_WORKER, name)).ok());
    absl::StatusOr<proto::Envelope> ack = Await(channel, proto::Envelope::kRegisterAck);
    EXPECT_TRUE(ack.ok()) << ack.status();
    return ack.ok() ? ack->register_ack().worker_id() : 0;
  }

  static proto::Envelope SubmitOf(const std::string& id) {
    proto::Envelope envelope = net::NewEnvelope();
    proto::SubmitRequest* submit = envelope.mutable_submit();
    submit->set_request_id(id);
    submit->add_prompt_tokens(1);
    submit->add_prompt_tokens(2);
    submit->mutable_params()->set_max_tokens(4);
    return envelope;
  }

  // Sends `envelope` and returns the Error the coordinator answers with.
  static proto::Error ExpectRefused(net::Channel& channel, const proto::Envelope& envelope) {
    EXPECT_TRUE(channel.Send("", envelope).ok());
    absl::StatusOr<proto::Envelope> reply = Await(channel, proto::Envelope::kError);
    EXPECT_TRUE(reply.ok()) << reply.status();
    if (!reply.ok()) return proto::Error();
    EXPECT_EQ(reply->error().code(), proto::ERROR_CODE_PERMISSION_DENIED)
        << reply->error().message();
    return reply->error();
  }

  // Registers a worker of `role` named `name` on `channel`; returns its id.
  uint64_t RegisterWorker(net::Channel& channel, proto::Role role, const std::string& name) {
    EXPECT_TRUE(channel.Send("", RegisterAs(role, name)).ok());
    absl::StatusOr<proto::Envelope> ack = Await(channel, proto::Envelope::kRegisterAck);
    EXPECT_TRUE(ack.ok()) << ack.status();
    return ack.ok() ? ack->register_ack().worker_id() : 0;
  }

  net::CurveKeyPair coordinator_keys_, target_keys_, draft_keys_, client_keys_, admin_keys_;
  net::CurveKeyPair draft_0_keys_, draft_1_keys_, target_0_keys_, target_1_keys_;
  std::unique_ptr<coordinator::CoordinatorService> service_;
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  int peers_ = 0;
};

TEST_F(ClusterSecurityTest, RogueRegistrationWithAnUnknownKeyIsRefusedAtTheHandshake) {
  const uint64_t refused_before = Status().refused_peers();
  ::testing::internal::CaptureStderr();
  std::unique_ptr<net::Channel> rogue = Peer("rogue-target", NewKeys());
  ASSERT_TRUE(rogue->Send("", RegisterAs(proto::ROLE_TARGET_WORKER, "rogue")).ok());
  // The ZAP handler logs and counts the refusal; wait for the count.
  while (Status().refused_peers() == refused_before) absl::SleepFor(absl::Milliseconds(20));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("refused peer at 127.0.0.1"));
  EXPECT_THAT(log, HasSubstr("is not authorized"));
  EXPECT_FALSE(Await(*rogue, proto::Envelope::kRegisterAck, kSilence).ok());
  EXPECT_EQ(Status().members_size(), 0);
}

TEST_F(ClusterSecurityTest, RegisteringAsATargetWithTheDraftKeyIsRefused) {
  std::unique_ptr<net::Channel> draft = Peer("draft-impostor", draft_keys_);
  ::testing::internal::CaptureStderr();
  const proto::Error error =
      ExpectRefused(*draft, RegisterAs(proto::ROLE_TARGET_WORKER, "impostor"));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(error.message(), HasSubstr("registering a target needs the target key"));
  EXPECT_THAT(log,
              HasSubstr("refused 'register_worker' from peer 'draft-impostor' at 127.0.0.1 key "));
  EXPECT_EQ(Status().members_size(), 0);
  EXPECT_GE(Status().refused_peers(), 1u);
}

TEST_F(ClusterSecurityTest, DeregisterOfAnotherWorkersIdIsRefused) {
  std::unique_ptr<net::Channel> target = Peer("target-0", target_keys_);
  const uint64_t id = RegisterTarget(*target, "target-0");
  ASSERT_NE(id, 0u);
  std::unique_ptr<net::Channel> other = Peer("target-1", target_keys_);
  proto::Envelope forged = net::NewEnvelope();
  forged.mutable_deregister()->set_worker_id(id);
  forged.mutable_deregister()->set_reason("forged");
  ::testing::internal::CaptureStderr();
  const proto::Error error = ExpectRefused(*other, forged);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(error.message(), HasSubstr("which is not that worker"));
  EXPECT_THAT(log, HasSubstr("refused 'deregister' from peer 'target-1' at 127.0.0.1 key "));
  const proto::StatusReply status = Status();
  ASSERT_EQ(status.members_size(), 1);
  EXPECT_EQ(status.members(0).state(), proto::MEMBER_STATE_ALIVE);
}

// A heartbeat keeps an id alive only if it comes with the key that registered the id:
// a draft worker heartbeating for a target's id is refused, logged and not counted, so
// it cannot hide that target's death. The target key's heartbeat, from its own channel
// (another peer name, as a worker's heartbeat sender has), is acknowledged and counted.
TEST_F(ClusterSecurityTest, HeartbeatForAnIdRegisteredWithAnotherKeyIsRefused) {
  std::unique_ptr<net::Channel> target = Peer("target-0", target_keys_);
  const uint64_t id = RegisterTarget(*target, "target-0");
  ASSERT_NE(id, 0u);
  std::unique_ptr<net::Channel> draft = Peer("draft-0", draft_keys_);
  proto::Envelope heartbeat = net::NewEnvelope();
  heartbeat.mutable_heartbeat()->set_worker_id(id);
  ::testing::internal::CaptureStderr();
  const proto::Error error = ExpectRefused(*draft, heartbeat);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(error.message(),
              HasSubstr(absl::StrCat("Heartbeat of worker ", id, " from 'draft-0', whose key is "
                                     "not the one that registered that worker")));
  EXPECT_THAT(log, HasSubstr("refused 'heartbeat' from peer 'draft-0' at 127.0.0.1 key "));
  proto::StatusReply status = Status();
  ASSERT_EQ(status.members_size(), 1);
  EXPECT_EQ(status.members(0).heartbeats_received(), 0u);
  EXPECT_GE(status.refused_peers(), 1u);

  std::unique_ptr<net::Channel> own = Peer(absl::StrCat("heartbeat-", id), target_keys_);
  ASSERT_TRUE(own->Send("", heartbeat).ok());
  absl::StatusOr<proto::Envelope> ack = Await(*own, proto::Envelope::kHeartbeatAck);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->heartbeat_ack().known());
  status = Status();
  ASSERT_EQ(status.members_size(), 1);
  EXPECT_EQ(status.members(0).heartbeats_received(), 1u);
}

// With a key of its own per draft worker, one draft worker cannot keep another
// draft worker's id alive: its heartbeat for draft-0's id is refused and logged,
// although its key holds the draft role; draft-0's own heartbeat is counted.
TEST_F(ClusterSecurityTest, HeartbeatForAnotherWorkerOfTheSameRoleIsRefused) {
  std::unique_ptr<net::Channel> draft_0 = Peer("draft-0", draft_0_keys_);
  const uint64_t id = RegisterWorker(*draft_0, proto::ROLE_DRAFT_WORKER, "draft-0");
  ASSERT_NE(id, 0u);
  std::unique_ptr<net::Channel> draft_1 = Peer("heartbeat-draft-1", draft_1_keys_);
  proto::Envelope heartbeat = net::NewEnvelope();
  heartbeat.mutable_heartbeat()->set_worker_id(id);
  ::testing::internal::CaptureStderr();
  const proto::Error error = ExpectRefused(*draft_1, heartbeat);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(error.message(),
              HasSubstr(absl::StrCat("Heartbeat of worker ", id,
                                     " from 'heartbeat-draft-1', "
                                     "whose key is not the one that registered that worker")));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("refused 'heartbeat' from peer 'heartbeat-draft-1' at "
                                          "127.0.0.1 key ",
                                          draft_1_keys_.public_key)));
  proto::StatusReply status = Status();
  ASSERT_EQ(status.members_size(), 1);
  EXPECT_EQ(status.members(0).heartbeats_received(), 0u);

  std::unique_ptr<net::Channel> own = Peer(absl::StrCat("heartbeat-", id), draft_0_keys_);
  ASSERT_TRUE(own->Send("", heartbeat).ok());
  absl::StatusOr<proto::Envelope> ack = Await(*own, proto::Envelope::kHeartbeatAck);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->heartbeat_ack().known());
  status = Status();
  ASSERT_EQ(status.members_size(), 1);
  EXPECT_EQ(status.members(0).heartbeats_received(), 1u);
}

// The assignment a target gets names the key that registered the request's draft
// worker, so that the target's data port can hold the draft traffic to that key.
TEST_F(ClusterSecurityTest, AnAssignmentNamesTheKeyOfItsDraftWorker) {
  std::unique_ptr<net::Channel> target = Peer("target-0", target_keys_);
  const uint64_t target_id = RegisterTarget(*target, "target-0");
  ASSERT_NE(target_id, 0u);
  std::unique_ptr<net::Channel> draft = Peer("draft-1", draft_1_keys_);
  const uint64_t draft_id = RegisterWorker(*draft, proto::ROLE_DRAFT_WORKER, "draft-1");
  ASSERT_NE(draft_id, 0u);
  std::unique_ptr<net::Channel> client = Peer("client-0", client_keys_);
  ASSERT_TRUE(client->Send("", SubmitOf("keyed")).ok());
  absl::StatusOr<proto::Envelope> assignment = Await(*target, proto::Envelope::kAssignment);
  ASSERT_TRUE(assignment.ok()) << assignment.status();
  EXPECT_EQ(assignment->assignment().target_worker_id(), target_id);
  EXPECT_EQ(assignment->assignment().draft_worker_id(), draft_id);
  EXPECT_EQ(assignment->assignment().draft_worker_key(), draft_1_keys_.public_key);
}

// With a key of its own per target (target.d/NAME), one target cannot keep another
// target's id alive or leave in its name: its heartbeat for target-0's id is refused
// although its key holds the target role; target-0's own heartbeat is counted.
TEST_F(ClusterSecurityTest, ATargetWithAnotherTargetsKeyIsRefused) {
  std::unique_ptr<net::Channel> target_0 = Peer("target-0", target_0_keys_);
  const uint64_t id = RegisterTarget(*target_0, "target-0");
  ASSERT_NE(id, 0u);
  std::unique_ptr<net::Channel> target_1 = Peer("heartbeat-target-1", target_1_keys_);
  proto::Envelope heartbeat = net::NewEnvelope();
  heartbeat.mutable_heartbeat()->set_worker_id(id);
  ::testing::internal::CaptureStderr();
  const proto::Error error = ExpectRefused(*target_1, heartbeat);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(error.message(),
              HasSubstr(absl::StrCat("Heartbeat of worker ", id,
                                     " from 'heartbeat-target-1', "
                                     "whose key is not the one that registered that worker")));
  EXPECT_THAT(log, HasSubstr(absl::StrCat("key ", target_1_keys_.public_key)));
  proto::StatusReply status = Status();
  ASSERT_EQ(status.members_size(), 1);
  EXPECT_EQ(status.members(0).heartbeats_received(), 0u);

  std::unique_ptr<net::Channel> own = Peer(absl::StrCat("heartbeat-", id), target_0_keys_);
  ASSERT_TRUE(own->Send("", heartbeat).ok());
  absl::StatusOr<proto::Envelope> ack = Await(*own, proto::Envelope::kHeartbeatAck);
  ASSERT_TRUE(ack.ok()) << ack.status();
  EXPECT_TRUE(ack->heartbeat_ack().known());
  EXPECT_EQ(Status().members(0).heartbeats_received(), 1u);
}

// The assignment names the key that registered its target, so that the draft worker
// expects that target's own key as the data port's server key; and a tensor-parallel
// leader's announcement hands its key to the followers that look the group up.
TEST_F(ClusterSecurityTest, AssignmentsAndGroupLookupsNameTheTargetsOwnKey) {
  std::unique_ptr<net::Channel> target = Peer("target-1", target_1_keys_);
  const uint64_t target_id = RegisterTarget(*target, "target-1");
  ASSERT_NE(target_id, 0u);
  std::unique_ptr<net::Channel> draft = Peer("draft-0", draft_0_keys_);
  const uint64_t draft_id = RegisterWorker(*draft, proto::ROLE_DRAFT_WORKER, "draft-0");
  ASSERT_NE(draft_id, 0u);
  std::unique_ptr<net::Channel> client = Peer("client-0", client_keys_);
  ASSERT_TRUE(client->Send("", SubmitOf("keyed-target")).ok());
  absl::StatusOr<proto::Envelope> assignment = Await(*draft, proto::Envelope::kAssignment);
  ASSERT_TRUE(assignment.ok()) << assignment.status();
  EXPECT_EQ(assignment->assignment().target_worker_id(), target_id);
  EXPECT_EQ(assignment->assignment().target_worker_key(), target_1_keys_.public_key);
  EXPECT_EQ(assignment->assignment().draft_worker_key(), draft_0_keys_.public_key);

  std::unique_ptr<net::Channel> leader = Peer("tp-leader", target_0_keys_);
  proto::Envelope announce = net::NewEnvelope();
  announce.mutable_group_announce()->set_group("g");
  announce.mutable_group_announce()->set_rendezvous_endpoint("tcp://127.0.0.1:1");
  announce.mutable_group_announce()->set_generation(1);
  announce.mutable_group_announce()->set_tp_size(2);
  ASSERT_TRUE(leader->Send("", announce).ok());
  ASSERT_TRUE(Await(*leader, proto::Envelope::kGroupInfo).ok());
  std::unique_ptr<net::Channel> follower = Peer("tp-follower", target_1_keys_);
  proto::Envelope lookup = net::NewEnvelope();
  lookup.mutable_group_lookup()->set_group("g");
  ASSERT_TRUE(follower->Send("", lookup).ok());
  absl::StatusOr<proto::Envelope> info = Await(*follower, proto::Envelope::kGroupInfo);
  ASSERT_TRUE(info.ok()) << info.status();
  EXPECT_TRUE(info->group_info().found());
  EXPECT_EQ(info->group_info().leader_key(), target_0_keys_.public_key);
}

TEST_F(ClusterSecurityTest, CancelFromAnotherClientIsRefusedAndTheRequestRuns) {
  std::unique_ptr<net::Channel> target = Peer("target-0", target_keys_);
  ASSERT_NE(RegisterTarget(*target, "target-0"), 0u);
  std::unique_ptr<net::Channel> owner = Peer("client-owner", client_keys_);
  ASSERT_TRUE(owner->Send("", SubmitOf("victim")).ok());
  ASSERT_TRUE(Await(*target, proto::Envelope::kAssignment).ok());

  std::unique_ptr<net::Channel> attacker = Peer("client-attacker", client_keys_);
  proto::Envelope cancel = net::NewEnvelope();
  cancel.mutable_cancel()->set_request_id("victim");
  ::testing::internal::CaptureStderr();
  const proto::Error error = ExpectRefused(*attacker, cancel);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(error.message(), HasSubstr("submitted by another client"));
  EXPECT_THAT(log, HasSubstr("refused 'cancel' from peer 'client-attacker' at 127.0.0.1 key "));
  EXPECT_EQ(Status().running_requests(), 1u);

  // The submitter may cancel: the target is told to release it.
  ASSERT_TRUE(owner->Send("", cancel).ok());
  absl::StatusOr<proto::Envelope> release = Await(*target, proto::Envelope::kRelease);
  ASSERT_TRUE(release.ok()) << release.status();
  EXPECT_EQ(release->release().request_id(), "victim");
}

TEST_F(ClusterSecurityTest, ResultsFromATargetThatDoesNotHoldTheRequestAreIgnored) {
  std::unique_ptr<net::Channel> holder = Peer("target-0", target_keys_);
  ASSERT_NE(RegisterTarget(*holder, "target-0"), 0u);
  std::unique_ptr<net::Channel> owner = Peer("client-owner", client_keys_);
  ASSERT_TRUE(owner->Send("", SubmitOf("victim")).ok());
  ASSERT_TRUE(Await(*holder, proto::Envelope::kAssignment).ok());
  // A second target (the target key, registered) answers for the first one's request.
  std::unique_ptr<net::Channel> rogue = Peer("target-1", target_keys_);
  ASSERT_NE(RegisterTarget(*rogue, "target-1"), 0u);
  proto::Envelope forged = net::NewEnvelope();
  proto::VerifyResult* result = forged.mutable_verify_result();
  result->set_request_id("victim");
  result->set_full_sequence(true);
  for (int32_t token : {1, 2, 66, 66}) result->add_committed_tokens(token);
  result->set_finished(true);
  result->set_finish_reason(proto::FINISH_REASON_LENGTH);
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(rogue->Send("", forged).ok());
  // The same peer's next message is handled after it: a status round trip orders them.
  proto::Envelope status = net::NewEnvelope();
  status.mutable_status_request();
  ASSERT_TRUE(rogue->Send("", status).ok());
  ASSERT_TRUE(Await(*rogue, proto::Envelope::kStatusReply).ok());
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("ignored 'verify_result' for request 'victim' from peer 'target-1' "
                             "at 127.0.0.1"));
  EXPECT_THAT(log, HasSubstr("it does not hold that request"));
  // The client saw no answer and the request still runs on its holder.
  EXPECT_FALSE(Await(*owner, proto::Envelope::kTokenStream, kSilence).ok());
  EXPECT_EQ(Status().running_requests(), 1u);
}

TEST_F(ClusterSecurityTest, SubmissionWithoutTheClientKeyIsRefused) {
  std::unique_ptr<net::Channel> target = Peer("target-0", target_keys_);
  ASSERT_NE(RegisterTarget(*target, "target-0"), 0u);
  std::unique_ptr<net::Channel> draft = Peer("draft-submitter", draft_keys_);
  ::testing::internal::CaptureStderr();
  const proto::Error error = ExpectRefused(*draft, SubmitOf("sneaky"));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(error.message(), HasSubstr("submit needs the client key; the sender holds draft"));
  EXPECT_THAT(log, HasSubstr("refused 'submit' from peer 'draft-submitter'"));
  EXPECT_EQ(Status().running_requests(), 0u);
  EXPECT_EQ(Status().queued_requests(), 0u);
}

TEST_F(ClusterSecurityTest, DrainWithoutTheAdminKeyIsRefused) {
  std::unique_ptr<net::Channel> target = Peer("target-0", target_keys_);
  const uint64_t id = RegisterTarget(*target, "target-0");
  std::unique_ptr<net::Channel> client = Peer("client-drainer", client_keys_);
  proto::Envelope drain = net::NewEnvelope();
  drain.mutable_drain_request()->add_worker_ids(id);
  drain.mutable_drain_request()->set_force(true);
  ::testing::internal::CaptureStderr();
  const proto::Error error = ExpectRefused(*client, drain);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(error.message(), HasSubstr("DrainRequest needs the admin key"));
  EXPECT_THAT(log, HasSubstr("refused 'drain_request' from peer 'client-drainer'"));
  ASSERT_EQ(Status().members_size(), 1);
  EXPECT_EQ(Status().members(0).state(), proto::MEMBER_STATE_ALIVE);
}

TEST_F(ClusterSecurityTest, APeerNameKeepsTheKeyItRegisteredWith) {
  std::unique_ptr<net::Channel> target = Peer("target-0", target_keys_);
  ASSERT_NE(RegisterTarget(*target, "target-0"), 0u);
  target.reset();  // disconnects; its name is free on the socket once the coordinator sees it
  proto::Envelope heartbeat = net::NewEnvelope();
  heartbeat.mutable_heartbeat()->set_worker_id(1);
  // A connection that arrives while the old one still holds the name is not
  // given it (ZeroMQ's ROUTER keeps the first), so each attempt connects anew.
  proto::Error error;
  for (int attempt = 0; attempt < 20 && error.message().empty(); ++attempt) {
    std::unique_ptr<net::Channel> draft = Peer("target-0", draft_keys_);
    EXPECT_TRUE(draft->Send("", heartbeat).ok());
    absl::StatusOr<proto::Envelope> reply = Await(*draft, proto::Envelope::kError, kSilence);
    if (reply.ok()) error = reply->error();
  }
  EXPECT_EQ(error.code(), proto::ERROR_CODE_PERMISSION_DENIED);
  EXPECT_THAT(error.message(), HasSubstr("peer name 'target-0' belongs to another key"));
}

TEST_F(ClusterSecurityTest, AClientWithTheWrongServerKeyGetsNothing) {
  const proto::StatusReply before = Status();
  ::testing::internal::CaptureStderr();
  std::unique_ptr<net::Channel> fooled = Peer("client-fooled", client_keys_, NewKeys().public_key);
  proto::Envelope request = net::NewEnvelope();
  request.mutable_status_request();
  ASSERT_TRUE(fooled->Send("", request).ok());
  // The listener's monitor logs and counts the failed handshake; wait for the count.
  while (Status().refused_peers() == before.refused_peers())
    absl::SleepFor(absl::Milliseconds(20));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr(absl::StrCat("refused a peer on ", endpoint_,
                                          ": CURVE handshake failed (cryptographic error")));
  EXPECT_TRUE(absl::IsDeadlineExceeded(
      Await(*fooled, proto::Envelope::kStatusReply, kSilence).status()));
}

TEST_F(ClusterSecurityTest, APlaintextClientGetsNothing) {
  const uint64_t refused_before = Status().refused_peers();
  ::testing::internal::CaptureStderr();
  auto plain = net::ConnectChannel(endpoint_, "client-plain", net::ChannelSecurity{});
  ASSERT_TRUE(plain.ok()) << plain.status();
  // The send may already fail: a refused plaintext handshake ends the connection for good.
  (void)(*plain)->Send("", SubmitOf("plain"));
  while (Status().refused_peers() == refused_before) absl::SleepFor(absl::Milliseconds(20));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("CURVE handshake failed (the client does not use CURVE)"));
  EXPECT_FALSE(Await(**plain, proto::Envelope::kError, kSilence).ok());
  EXPECT_EQ(Status().queued_requests(), 0u);
}

// A target worker (tiny model) registered with a stand-in coordinator that
// assigns it request "r" with draft worker 7; the target waits for that draft
// worker's blocks, so the request stays open while peers ask for it.
TEST(TargetDataPortSecurityTest, SyncRequestOnlyFromTheAssignedDraftWorker) {
  const net::CurveKeyPair coordinator_keys = NewKeys();
  const net::CurveKeyPair target_keys = NewKeys();
  const net::CurveKeyPair draft_keys = NewKeys();
  const net::CurveKeyPair other_draft_keys = NewKeys();  // another draft worker's own key
  net::ChannelSecurity coordinator_security;
  coordinator_security.curve = true;
  coordinator_security.own = coordinator_keys;
  coordinator_security.authorized = {{target_keys.public_key, net::kTarget}};
  auto coordinator = net::ListenChannel("tcp://127.0.0.1:*", coordinator_security);
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();

  net::ChannelSecurity target_security;
  target_security.curve = true;
  target_security.own = target_keys;
  target_security.coordinator_public_key = coordinator_keys.public_key;
  target_security.target_public_key = target_keys.public_key;
  target_security.authorized = {{draft_keys.public_key, net::kDraft},
                                {other_draft_keys.public_key, net::kDraft},
                                {target_keys.public_key, net::kTarget}};
  net::SetDefaultChannelSecurity(target_security);

  const std::string path = absl::StrCat(::testing::TempDir(), "/", getpid(), "-security.gguf");
  ASSERT_TRUE(model::WriteTinyModel(model::TinyModelOptions{}, path).ok());
  auto model = model::Transformer::Load(path, {.threads = 1});
  ASSERT_TRUE(model.ok()) << model.status();
  target::TargetServiceOptions options;
  options.coordinator_endpoint = (*coordinator)->endpoint();
  options.data_endpoint = "tcp://127.0.0.1:*";
  options.identity.name = "target-0";
  options.identity.model_path = path;
  options.engine.block_wait = absl::Hours(1);  // wait for draft worker 7's blocks
  spec::LookupDrafter lookup(spec::LookupDrafterConfig{});
  options.local_drafter = &lookup;  // drafts requests with no draft worker (local_drafts.h)
  auto service = target::TargetService::Create(model->get(), options);
  ASSERT_TRUE(service.ok()) << service.status();
  net::SetDefaultChannelSecurity(net::ChannelSecurity{});
  std::atomic<bool> stop{false};
  std::thread serving([&] { (void)(*service)->Run(stop); });

  absl::StatusOr<std::string> target_peer =
      testing::AcceptRegistration(**coordinator, 1, kReplyWait);
  ASSERT_TRUE(target_peer.ok()) << target_peer.status();
  proto::Envelope assignment = net::NewEnvelope();
  proto::Assignment* a = assignment.mutable_assignment();
  a->set_request_id("r");
  a->set_target_worker_id(1);
  a->set_draft_worker_id(7);
  a->set_draft_worker_key(draft_keys.public_key);  // the key that registered worker 7
  for (int32_t token : {1, 2, 3}) a->add_committed_tokens(token);
  a->set_prompt_length(3);
  a->mutable_params()->set_max_tokens(8);
  a->set_verify_mode(proto::VERIFY_MODE_GREEDY);
  a->set_draft_k(4);
  a->set_epoch(1);
  ASSERT_TRUE((*coordinator)->Send(*target_peer, assignment).ok());

  auto draft_peer = [&](const std::string& name, const net::CurveKeyPair& keys) {
    net::ChannelSecurity security;
    security.curve = true;
    security.own = keys;
    auto channel = net::ConnectChannel((*service)->data_endpoint(), name, security,
                                       target_keys.public_key);
    EXPECT_TRUE(channel.ok()) << channel.status();
    return *std::move(channel);
  };
  proto::Envelope sync = net::NewEnvelope();
  sync.mutable_sync_request()->set_request_id("r");

  // The assigned draft worker is answered (once the assignment has arrived).
  std::unique_ptr<net::Channel> assigned = draft_peer(net::DraftPeerName(7), draft_keys);
  absl::StatusOr<proto::Envelope> answer;
  do {
    ASSERT_TRUE(assigned->Send("", sync).ok());
    answer = AwaitBody(*assigned, proto::Envelope::kVerifyResult, kSilence);
  } while (!answer.ok());
  EXPECT_EQ(answer->verify_result().request_id(), "r");

  // Another draft worker, same key, is refused and logged.
  std::unique_ptr<net::Channel> other = draft_peer(net::DraftPeerName(8), draft_keys);
  const uint64_t refused_before = net::RefusedMessages();
  ::testing::internal::CaptureStderr();
  ASSERT_TRUE(other->Send("", sync).ok());
  while (net::RefusedMessages() == refused_before) absl::SleepFor(absl::Milliseconds(10));
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(log, HasSubstr("refused 'SyncRequest' from peer 'draft-8' at 127.0.0.1"));
  EXPECT_THAT(log, HasSubstr("'draft-8' is not the draft worker assigned to request 'r'"));
  EXPECT_FALSE(
      AwaitBody(*other, proto::Envelope::kVerifyResult, kSilence).ok());

  // Request "r2" is assigned to draft worker 9, registered with `draft_keys`. A
  // draft worker with a valid key of its own that takes worker 9's peer name is
  // refused by its key, and logged. (A fresh name: a ZeroMQ router ignores a
  // connection that claims a name still in use.)
  proto::Envelope second = assignment;
  second.mutable_assignment()->set_request_id("r2");
  second.mutable_assignment()->set_draft_worker_id(9);
  ASSERT_TRUE((*coordinator)->Send(*target_peer, second).ok());
  std::unique_ptr<net::Channel> impostor = draft_peer(net::DraftPeerName(9), other_draft_keys);
  proto::Envelope sync_r2 = net::NewEnvelope();
  sync_r2.mutable_sync_request()->set_request_id("r2");
  const uint64_t refused_before_impostor = net::RefusedMessages();
  ::testing::internal::CaptureStderr();
  // Sent again until refused: before "r2" has arrived the target knows no such
  // request and drops the SyncRequest without refusing it.
  while (net::RefusedMessages() == refused_before_impostor) {
    ASSERT_TRUE(impostor->Send("", sync_r2).ok());
    for (int i = 0; i < 20 && net::RefusedMessages() == refused_before_impostor; ++i)
      absl::SleepFor(absl::Milliseconds(10));
  }
  const std::string impostor_log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(impostor_log, HasSubstr("refused 'SyncRequest' from peer 'draft-9' at 127.0.0.1"));
  EXPECT_THAT(impostor_log,
              HasSubstr(absl::StrCat("key ", other_draft_keys.public_key,
                                     " of 'draft-9' is not the key of draft worker 9, which "
                                     "request 'r2' is assigned to")));
  EXPECT_FALSE(AwaitBody(*impostor, proto::Envelope::kVerifyResult, kSilence).ok());

  // Request "r3" has no draft worker: the target drafts it itself. A draft worker
  // that takes the name reserved for that drafter is refused whatever its key.
  proto::Envelope third = assignment;
  third.mutable_assignment()->set_request_id("r3");
  third.mutable_assignment()->set_draft_worker_id(0);
  third.mutable_assignment()->clear_draft_worker_key();
  ASSERT_TRUE((*coordinator)->Send(*target_peer, third).ok());
  std::unique_ptr<net::Channel> squatter = draft_peer(target::LocalDrafts::PeerName(), draft_keys);
  proto::Envelope sync_r3 = net::NewEnvelope();
  sync_r3.mutable_sync_request()->set_request_id("r3");
  const uint64_t refused_before_squatter = net::RefusedMessages();
  ::testing::internal::CaptureStderr();
  while (net::RefusedMessages() == refused_before_squatter) {
    ASSERT_TRUE(squatter->Send("", sync_r3).ok());
    for (int i = 0; i < 20 && net::RefusedMessages() == refused_before_squatter; ++i)
      absl::SleepFor(absl::Milliseconds(10));
  }
  const std::string squatter_log = ::testing::internal::GetCapturedStderr();
  EXPECT_THAT(squatter_log, HasSubstr(absl::StrCat("peer name '", target::LocalDrafts::PeerName(),
                                                   "' is reserved for this target's own drafter")));
  EXPECT_FALSE(AwaitBody(*squatter, proto::Envelope::kVerifyResult, kSilence).ok());

  stop = true;
  serving.join();
}

}  // namespace
}  // namespace splitspec

// CoordinatorService end to end over the in-memory transport, on a fake clock:
// whichever sweep of the membership table finds a worker dead, its requests
// are handed on. A status request sweeps too (its report shows liveness as of
// now); a death found there once stayed unknown to the router, and the dead
// target kept its requests (and got new ones) for good: streams hung silently.
//
// The service's receive timeout is a quarter of the heartbeat interval (an
// hour here), so its loop only turns when a message arrives: which sweep sees
// a death first is decided by the order of the messages, not by timing.
#include <atomic>
#include <thread>

#include "absl/strings/str_cat.h"
#include "coordinator/coordinator_service.h"
#include "gtest/gtest.h"
#include "runtime/net/channel.h"
#include "runtime/net/wire_format.h"

namespace splitspec::coordinator {
namespace {

constexpr absl::Duration kInterval = absl::Hours(1);
// A bound on waiting for a message that should come; no assertion on time.
constexpr absl::Duration kPatience = absl::Seconds(20);

// A peer on the coordinator's control channel, speaking raw envelopes.
class Peer {
 public:
  Peer(const std::string& endpoint, const std::string& identity) {
    auto channel = net::ConnectChannel(endpoint, identity);
    EXPECT_TRUE(channel.ok()) << channel.status();
    if (channel.ok()) channel_ = *std::move(channel);
  }

  void Send(const proto::Envelope& envelope) {
    ASSERT_NE(channel_, nullptr);
    ASSERT_TRUE(channel_->Send("", envelope).ok());
  }
  // The next message, or an empty envelope if none came.
  proto::Envelope Next() {
    if (channel_ == nullptr) return {};
    absl::StatusOr<net::Frame> frame = channel_->Receive(kPatience);
    EXPECT_TRUE(frame.ok()) << frame.status();
    return frame.ok() ? frame->envelope : proto::Envelope();
  }

 private:
  std::unique_ptr<net::Channel> channel_;
};

// Registers a target worker named `name` on `peer`; returns its worker id (0 if refused).
uint64_t RegisterTarget(Peer& peer, const std::string& name, uint32_t pid) {
  proto::Envelope envelope = net::NewEnvelope();
  proto::Register* registration = envelope.mutable_register_worker();
  registration->set_role(proto::ROLE_TARGET_WORKER);
  registration->set_worker_name(name);
  registration->set_pid(pid);
  registration->set_data_endpoint("mem://" + name + "-data");
  peer.Send(envelope);
  return peer.Next().register_ack().worker_id();
}

class FakeClock {
 public:
  absl::Time Now() const { return absl::FromUnixNanos(nanos_.load()); }
  void Set(absl::Time t) { nanos_.store(absl::ToUnixNanos(t)); }

 private:
  std::atomic<int64_t> nanos_{absl::ToUnixNanos(absl::FromUnixSeconds(1'000'000))};
};

// A CoordinatorService running on its own thread until destroyed.
class RunningService {
 public:
  explicit RunningService(const CoordinatorOptions& options) {
    auto service = CoordinatorService::Create(options);
    EXPECT_TRUE(service.ok()) << service.status();
    if (!service.ok()) return;
    service_ = *std::move(service);
    loop_ = std::thread([this] { EXPECT_TRUE(service_->Run(stop_).ok()); });
  }
  ~RunningService() {
    if (service_ == nullptr) return;
    stop_ = true;
    Peer waker(endpoint(), "waker");  // the loop turns on a message, then sees stop_
    proto::Envelope ask = net::NewEnvelope();
    ask.mutable_status_request();
    waker.Send(ask);
    loop_.join();
  }
  bool ok() const { return service_ != nullptr; }
  const std::string& endpoint() const { return service_->control_endpoint(); }

 private:
  std::unique_ptr<CoordinatorService> service_;
  std::atomic<bool> stop_{false};
  std::thread loop_;
};

TEST(CoordinatorServiceTest, ADeathFoundByAStatusRequestStillReplacesTheDeadTargetsRequests) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  CoordinatorOptions options;
  options.control_endpoint = "mem://coordinator-service-status-sweep";
  options.membership.heartbeat_interval = kInterval;  // suspect after 2, dead after 5 missed
  options.clock = [&clock] { return clock.Now(); };
  RunningService service(options);
  ASSERT_TRUE(service.ok());
  const std::string endpoint = service.endpoint();

  // Two target workers under the same name: the old process, then its restart.
  Peer old_target(endpoint, "target-old");
  Peer new_target(endpoint, "target-new");
  const uint64_t old_id = RegisterTarget(old_target, "target", 100);
  const uint64_t new_id = RegisterTarget(new_target, "target", 200);
  ASSERT_NE(old_id, 0u);
  ASSERT_NE(new_id, 0u);

  // A request, placed on the first of the equally loaded targets.
  Peer client(endpoint, "client");
  proto::Envelope submit = net::NewEnvelope();
  submit.mutable_submit()->set_request_id("r1");
  submit.mutable_submit()->add_prompt_tokens(5);
  submit.mutable_submit()->add_prompt_tokens(6);
  submit.mutable_submit()->mutable_params()->set_max_tokens(2);
  submit.mutable_submit()->set_drafter("none");
  client.Send(submit);
  const proto::Envelope first = old_target.Next();
  ASSERT_TRUE(first.has_assignment()) << first.DebugString();
  EXPECT_EQ(first.assignment().request_id(), "r1");
  EXPECT_EQ(first.assignment().target_worker_id(), old_id);

  // The old process is killed: only the new one heartbeats. After its
  // heartbeat the old one is past suspect (4 missed intervals), not yet dead.
  clock.Set(start + 4.5 * kInterval);
  proto::Envelope heartbeat = net::NewEnvelope();
  heartbeat.mutable_heartbeat()->set_worker_id(new_id);
  new_target.Send(heartbeat);
  ASSERT_TRUE(new_target.Next().heartbeat_ack().known());

  // Past the old one's deadline, the first message is a status request: its
  // sweep is the one that finds the death.
  clock.Set(start + 6 * kInterval);
  Peer admin(endpoint, "admin");
  proto::Envelope ask = net::NewEnvelope();
  ask.mutable_status_request();
  admin.Send(ask);
  const proto::StatusReply status = admin.Next().status_reply();
  ASSERT_EQ(status.members_size(), 2);
  EXPECT_EQ(status.members(0).state(), proto::MEMBER_STATE_DEAD);
  EXPECT_EQ(status.members(1).state(), proto::MEMBER_STATE_ALIVE);

  // The request is re-placed on the live target from its committed tokens...
  const proto::Envelope moved = new_target.Next();
  ASSERT_TRUE(moved.has_assignment()) << "the dead target kept request r1";
  EXPECT_EQ(moved.assignment().request_id(), "r1");
  EXPECT_EQ(moved.assignment().target_worker_id(), new_id);
  EXPECT_EQ(moved.assignment().epoch(), 1u);
  EXPECT_EQ(std::vector<int32_t>(moved.assignment().committed_tokens().begin(),
                                 moved.assignment().committed_tokens().end()),
            (std::vector<int32_t>{5, 6}));

  // ...and the stream goes on to its end from there.
  proto::Envelope result = net::NewEnvelope();
  proto::VerifyResult* verify = result.mutable_verify_result();
  verify->set_request_id("r1");
  verify->set_epoch(1);
  verify->add_committed_tokens(7);
  verify->add_committed_tokens(8);
  verify->set_frontier(4);
  verify->set_finished(true);
  verify->set_finish_reason(proto::FINISH_REASON_LENGTH);
  new_target.Send(result);
  const proto::Envelope streamed = client.Next();
  ASSERT_TRUE(streamed.has_token_stream()) << streamed.DebugString();
  EXPECT_EQ(streamed.token_stream().request_id(), "r1");
  EXPECT_EQ(std::vector<int32_t>(streamed.token_stream().tokens().begin(),
                                 streamed.token_stream().tokens().end()),
            (std::vector<int32_t>{7, 8}));
  EXPECT_TRUE(streamed.token_stream().finished());
  EXPECT_EQ(streamed.token_stream().finish_reason(), proto::FINISH_REASON_LENGTH);
}

// A stall (the coordinator's thread not scheduled on a loaded machine, or busy) leaves
// frames queued; a heartbeat among them arrived in time and must keep its worker alive.
// Here the loop is paused while a status request and then a heartbeat queue up, and the
// clock passes the worker's deadline: the sweep now runs after the queued frames are
// handled. (The status request's own sweep used to run first and declared it dead.)
TEST(CoordinatorServiceTest, AHeartbeatQueuedDuringAStallIsHandledBeforeTheSweep) {
  FakeClock clock;
  const absl::Time start = clock.Now();
  CoordinatorOptions options;
  options.control_endpoint = "mem://coordinator-service-stall";
  options.membership.heartbeat_interval = kInterval;  // dead after 5 missed
  options.clock = [&clock] { return clock.Now(); };
  auto service = CoordinatorService::Create(options);
  ASSERT_TRUE(service.ok()) << service.status();
  const std::string endpoint = (*service)->control_endpoint();
  std::atomic<bool> stop{false};
  auto run = [&] { return std::thread([&] { EXPECT_TRUE((*service)->Run(stop).ok()); }); };
  int wakers = 0;
  auto pause = [&](std::thread& loop) {
    stop = true;
    Peer waker(endpoint, absl::StrCat("waker-", ++wakers));  // the loop turns on a message
    proto::Envelope ask = net::NewEnvelope();
    ask.mutable_status_request();
    waker.Send(ask);
    loop.join();
    stop = false;
  };

  std::thread loop = run();
  Peer target(endpoint, "target");
  const uint64_t id = RegisterTarget(target, "target", 100);
  ASSERT_NE(id, 0u);
  pause(loop);

  clock.Set(start + 4.5 * kInterval);
  Peer admin(endpoint, "admin");
  proto::Envelope ask = net::NewEnvelope();
  ask.mutable_status_request();
  admin.Send(ask);
  proto::Envelope heartbeat = net::NewEnvelope();
  heartbeat.mutable_heartbeat()->set_worker_id(id);
  target.Send(heartbeat);
  clock.Set(start + 6 * kInterval);  // the stall ends past the registration's deadline
  loop = run();

  const proto::StatusReply status = admin.Next().status_reply();
  ASSERT_EQ(status.members_size(), 1);
  EXPECT_EQ(status.members(0).state(), proto::MEMBER_STATE_ALIVE);
  EXPECT_EQ(status.members(0).heartbeats_received(), 1u);
  EXPECT_TRUE(target.Next().heartbeat_ack().known());
  pause(loop);
}

}  // namespace
}  // namespace splitspec::coordinator

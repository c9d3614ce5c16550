// MembershipClient against a real CoordinatorService running on a thread, over
// the in-memory transport (and the same code over inproc ZeroMQ).
#include "runtime/net/membership_client.h"

#include <atomic>
#include <thread>

#include "coordinator/coordinator_service.h"
#include "gtest/gtest.h"
#include "runtime/net/wire_format.h"

namespace splitspec::net {
namespace {

absl::StatusOr<proto::StatusReply> AskStatus(const std::string& endpoint) {
  // A fresh identity each time: a ZeroMQ ROUTER keeps routing a reused
  // identity to the first (closed) connection.
  static std::atomic<int> counter{0};
  auto channel = ConnectChannel(endpoint, "status-asker-" + std::to_string(counter.fetch_add(1)));
  if (!channel.ok()) return channel.status();
  proto::Envelope request = NewEnvelope();
  request.mutable_status_request();
  if (absl::Status s = (*channel)->Send("", request); !s.ok()) return s;
  auto frame = (*channel)->Receive(absl::Seconds(10));
  if (!frame.ok()) return frame.status();
  return frame->envelope.status_reply();
}

class MembershipClientTest : public ::testing::TestWithParam<std::string> {};

TEST_P(MembershipClientTest, RegistersHeartbeatsAndLeaves) {
  coordinator::CoordinatorOptions options;
  options.control_endpoint = GetParam();
  // Death is not under test here: allow sanitizer-slowed runs plenty of slack.
  options.membership.heartbeat_interval = absl::Milliseconds(20);
  options.membership.dead_after_missed = 500;
  auto service = coordinator::CoordinatorService::Create(options);
  ASSERT_TRUE(service.ok()) << service.status();
  std::atomic<bool> stop{false};
  std::thread coordinator_thread([&] { EXPECT_TRUE((*service)->Run(stop).ok()); });

  proto::Register me;
  me.set_role(proto::ROLE_TARGET_WORKER);
  me.set_worker_name("target-test");
  auto client = MembershipClient::Connect((*service)->control_endpoint(), me);
  ASSERT_TRUE(client.ok()) << client.status();
  // Poll until at least three heartbeats went out (bounded, not timed).
  for (int i = 0; i < 1000 && (*client)->heartbeats_sent() < 3; ++i) {
    ASSERT_TRUE((*client)->Poll(absl::Milliseconds(10)).ok());
  }
  ASSERT_TRUE((*client)->registered());
  ASSERT_GE((*client)->heartbeats_sent(), 3u);

  auto status = AskStatus((*service)->control_endpoint());
  ASSERT_TRUE(status.ok()) << status.status();
  ASSERT_EQ(status->members_size(), 1);
  EXPECT_EQ(status->members(0).worker_name(), "target-test");
  EXPECT_EQ(status->members(0).worker_id(), (*client)->worker_id());
  EXPECT_EQ(status->members(0).role(), proto::ROLE_TARGET_WORKER);
  EXPECT_GE(status->members(0).heartbeats_received(), 1u);

  ASSERT_TRUE((*client)->Deregister("test over").ok());
  proto::MemberState state = proto::MEMBER_STATE_ALIVE;
  for (int i = 0; i < 500 && state != proto::MEMBER_STATE_LEFT; ++i) {
    auto again = AskStatus((*service)->control_endpoint());
    ASSERT_TRUE(again.ok()) << again.status();
    state = again->members(0).state();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(state, proto::MEMBER_STATE_LEFT);
  stop = true;
  coordinator_thread.join();
}

INSTANTIATE_TEST_SUITE_P(Transports, MembershipClientTest,
                         ::testing::Values("mem://membership-test", "inproc://membership-test"),
                         [](const auto& info) {
                           return info.index == 0 ? std::string("mem") : std::string("inproc");
                         });

}  // namespace
}  // namespace splitspec::net

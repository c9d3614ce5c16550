#include "runtime/net/channel.h"

#include <unistd.h>

#include <atomic>
#include <random>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/net/wire_format.h"

namespace splitspec::net {
namespace {

// The same behaviour over every transport: in-memory, and ZeroMQ inproc, ipc, tcp.
class ChannelTest : public ::testing::TestWithParam<std::string> {
 protected:
  std::string FreshEndpoint() {
    static std::atomic<int> counter{0};
    const std::string scheme = GetParam();
    const int n = counter.fetch_add(1);
    if (scheme == "tcp") return "tcp://127.0.0.1:*";
    if (scheme == "ipc")
      return absl::StrCat("ipc:///tmp/splitspec-channel-test-", getpid(), "-", n);
    return absl::StrCat(scheme, "://channel-test-", n);
  }
};

proto::Envelope Heartbeat(uint64_t sequence) {
  proto::Envelope envelope = NewEnvelope();
  envelope.mutable_heartbeat()->set_sequence(sequence);
  return envelope;
}

TEST_P(ChannelTest, ConnectorAndListenerExchangeMessages) {
  auto server = ListenChannel(FreshEndpoint());
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = ConnectChannel((*server)->endpoint(), "client-a");
  ASSERT_TRUE(client.ok()) << client.status();

  ASSERT_TRUE((*client)->Send("", Heartbeat(1)).ok());
  auto frame = (*server)->Receive(absl::Seconds(10));
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->peer, "client-a");
  EXPECT_EQ(frame->envelope.heartbeat().sequence(), 1u);

  ASSERT_TRUE((*server)->Send(frame->peer, Heartbeat(2)).ok());
  auto reply = (*client)->Receive(absl::Seconds(10));
  ASSERT_TRUE(reply.ok()) << reply.status();
  EXPECT_EQ(reply->peer, "");
  EXPECT_EQ(reply->envelope.heartbeat().sequence(), 2u);
}

TEST_P(ChannelTest, ListenerRoutesRepliesByIdentity) {
  auto server = ListenChannel(FreshEndpoint());
  ASSERT_TRUE(server.ok()) << server.status();
  auto a = ConnectChannel((*server)->endpoint(), "peer-a");
  auto b = ConnectChannel((*server)->endpoint(), "peer-b");
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_TRUE((*a)->Send("", Heartbeat(10)).ok());
  ASSERT_TRUE((*b)->Send("", Heartbeat(20)).ok());
  for (int i = 0; i < 2; ++i) {
    auto frame = (*server)->Receive(absl::Seconds(10));
    ASSERT_TRUE(frame.ok()) << frame.status();
    // Echo sequence + 1 to whoever sent it.
    ASSERT_TRUE(
        (*server)->Send(frame->peer, Heartbeat(frame->envelope.heartbeat().sequence() + 1)).ok());
  }
  auto reply_a = (*a)->Receive(absl::Seconds(10));
  auto reply_b = (*b)->Receive(absl::Seconds(10));
  ASSERT_TRUE(reply_a.ok() && reply_b.ok());
  EXPECT_EQ(reply_a->envelope.heartbeat().sequence(), 11u);
  EXPECT_EQ(reply_b->envelope.heartbeat().sequence(), 21u);
}

TEST_P(ChannelTest, GarbageFramesAreDroppedAndCounted) {
  auto server = ListenChannel(FreshEndpoint());
  ASSERT_TRUE(server.ok()) << server.status();
  auto client = ConnectChannel((*server)->endpoint(), "noisy");
  ASSERT_TRUE(client.ok()) << client.status();
  std::mt19937 rng(std::random_device{}());
  constexpr int kGarbage = 200;
  for (int i = 0; i < kGarbage; ++i) {
    std::string bytes(rng() % 128, '\0');
    for (char& c : bytes) c = static_cast<char>(rng());
    ASSERT_TRUE((*client)->SendBytes("", bytes).ok());
  }
  ASSERT_TRUE((*client)->Send("", Heartbeat(99)).ok());
  auto frame = (*server)->Receive(absl::Seconds(10));
  ASSERT_TRUE(frame.ok()) << frame.status();
  EXPECT_EQ(frame->envelope.heartbeat().sequence(), 99u);
  EXPECT_EQ((*server)->counters().malformed_frames, static_cast<uint64_t>(kGarbage));
  EXPECT_EQ((*server)->counters().frames_received, 1u);
}

TEST_P(ChannelTest, ReceiveTimesOutWithDeadlineExceeded) {
  auto server = ListenChannel(FreshEndpoint());
  ASSERT_TRUE(server.ok()) << server.status();
  auto frame = (*server)->Receive(absl::Milliseconds(20));
  EXPECT_EQ(frame.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST_P(ChannelTest, SendToUnknownPeerIsNotFound) {
  auto server = ListenChannel(FreshEndpoint());
  ASSERT_TRUE(server.ok()) << server.status();
  absl::Status status = (*server)->Send("nobody", Heartbeat(1));
  EXPECT_EQ(status.code(), absl::StatusCode::kNotFound) << status;
  EXPECT_EQ((*server)->counters().send_failures, 1u);
}

INSTANTIATE_TEST_SUITE_P(Transports, ChannelTest, ::testing::Values("mem", "inproc", "ipc", "tcp"),
                         [](const auto& info) { return info.param; });

TEST(ChannelEndpointTest, UnknownSchemeIsRefusedByName) {
  auto channel = ListenChannel("udp://127.0.0.1:9");
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(channel.status().message().find("udp://127.0.0.1:9"), std::string::npos);
}

TEST(ChannelEndpointTest, EmptyIdentityIsRefused) {
  auto channel = ConnectChannel("mem://anything", "");
  EXPECT_EQ(channel.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ChannelEndpointTest, MemEndpointCannotBeBoundTwice) {
  auto first = ListenChannel("mem://bound-twice");
  ASSERT_TRUE(first.ok());
  auto second = ListenChannel("mem://bound-twice");
  EXPECT_EQ(second.status().code(), absl::StatusCode::kAlreadyExists);
}

}  // namespace
}  // namespace splitspec::net

#include "runtime/net/fault_injecting_channel.h"

#include <set>

#include "gtest/gtest.h"
#include "runtime/net/wire_format.h"

namespace splitspec::net {
namespace {

struct Pair {
  std::unique_ptr<Channel> client;
  std::unique_ptr<FaultInjectingChannel> server;
};

Pair MakePair(const std::string& name, FaultOptions options) {
  auto server = ListenChannel("mem://" + name);
  EXPECT_TRUE(server.ok());
  auto client = ConnectChannel("mem://" + name, "client");
  EXPECT_TRUE(client.ok());
  return {*std::move(client), std::make_unique<FaultInjectingChannel>(*std::move(server), options)};
}

void SendSequence(Channel& client, int n) {
  for (int i = 0; i < n; ++i) {
    proto::Envelope envelope = NewEnvelope();
    envelope.mutable_heartbeat()->set_sequence(i);
    ASSERT_TRUE(client.Send("", envelope).ok());
  }
}

// Receives until `idle` passes without a frame; returns the sequence numbers seen.
std::vector<uint64_t> Drain(Channel& server, absl::Duration idle) {
  std::vector<uint64_t> seen;
  while (true) {
    auto frame = server.Receive(idle);
    if (!frame.ok()) break;
    seen.push_back(frame->envelope.heartbeat().sequence());
  }
  return seen;
}

TEST(FaultInjectingChannelTest, DropsAboutTheRequestedFraction) {
  Pair pair = MakePair("fault-drop", {.drop_probability = 0.3, .seed = 11});
  SendSequence(*pair.client, 1000);
  const std::vector<uint64_t> seen = Drain(*pair.server, absl::Milliseconds(50));
  EXPECT_EQ(seen.size() + pair.server->fault_counters().dropped, 1000u);
  // Binomial(1000, 0.3): mean 300, sd 14.5; +-6 sd.
  EXPECT_NEAR(static_cast<double>(pair.server->fault_counters().dropped), 300.0, 87.0);
}

TEST(FaultInjectingChannelTest, DelayAndReorderLoseNothing) {
  Pair pair = MakePair("fault-delay", {.delay_probability = 0.3,
                                       .max_delay = absl::Milliseconds(5),
                                       .reorder_probability = 0.2,
                                       .seed = 5});
  SendSequence(*pair.client, 300);
  const std::vector<uint64_t> seen = Drain(*pair.server, absl::Milliseconds(100));
  ASSERT_EQ(seen.size(), 300u);
  EXPECT_EQ(std::set<uint64_t>(seen.begin(), seen.end()).size(), 300u);
  EXPECT_FALSE(std::is_sorted(seen.begin(), seen.end()))
      << "faults should have reordered something";
  EXPECT_GT(pair.server->fault_counters().delayed, 0u);
  EXPECT_GT(pair.server->fault_counters().reordered, 0u);
}

TEST(FaultInjectingChannelTest, NoFaultsMeansInOrderDelivery) {
  Pair pair = MakePair("fault-none", {});
  SendSequence(*pair.client, 100);
  const std::vector<uint64_t> seen = Drain(*pair.server, absl::Milliseconds(20));
  ASSERT_EQ(seen.size(), 100u);
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
}

}  // namespace
}  // namespace splitspec::net

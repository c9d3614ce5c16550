// The coordinator survives 1,000 random-garbage frames on its control socket
// (random bytes, random lengths, some multipart) and keeps serving.
#include <random>
#include <zmq.hpp>

#include "gtest/gtest.h"
#include "runtime/net/membership_client.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"

namespace splitspec::testing {
namespace {

TEST(CoordinatorGarbageTest, SurvivesThousandGarbageFramesAndKeepsServing) {
  const std::string dir = MakeTempDir("splitspec-garbage");
  auto coordinator = StartCoordinator(dir, {"--heartbeat-ms", "100"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string endpoint = coordinator->second;

  constexpr int kGarbageFrames = 1000;
  {
    zmq::context_t context;
    zmq::socket_t attacker(context, zmq::socket_type::dealer);
    attacker.set(zmq::sockopt::linger, 5000);
    attacker.connect(endpoint);
    std::mt19937 rng(std::random_device{}());
    for (int i = 0; i < kGarbageFrames; ++i) {
      const int parts = (rng() % 10 == 0) ? 2 + static_cast<int>(rng() % 2) : 1;
      for (int p = 0; p < parts; ++p) {
        std::string bytes(rng() % 512, '\0');
        for (char& c : bytes) c = static_cast<char>(rng());
        attacker.send(zmq::buffer(bytes),
                      p + 1 < parts ? zmq::send_flags::sndmore : zmq::send_flags::none);
      }
    }
  }  // closing with linger flushes every frame to the coordinator

  // Still serving: status answers and counts every garbage frame.
  proto::StatusReply status;
  ASSERT_TRUE(PollStatusUntil(
      endpoint,
      [](const proto::StatusReply& s) {
        return s.control_channel().malformed_frames() >= kGarbageFrames;
      },
      500, absl::Milliseconds(20), &status))
      << status.DebugString();
  EXPECT_EQ(status.control_channel().malformed_frames(), static_cast<uint64_t>(kGarbageFrames));

  // And a worker can still register.
  proto::Register me;
  me.set_role(proto::ROLE_DRAFT_WORKER);
  me.set_worker_name("after-garbage");
  auto client = net::MembershipClient::Connect(endpoint, me);
  ASSERT_TRUE(client.ok());
  for (int i = 0; i < 1000 && !(*client)->registered(); ++i)
    ASSERT_TRUE((*client)->Poll(absl::Milliseconds(10)).ok());
  EXPECT_TRUE((*client)->registered());
  auto exit_code = coordinator->first.Wait(absl::ZeroDuration());
  EXPECT_FALSE(exit_code.ok()) << "coordinator exited";
}

}  // namespace
}  // namespace splitspec::testing

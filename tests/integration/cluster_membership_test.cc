// The three service binaries as separate processes on loopback: they register,
// heartbeat, and the coordinator notices a killed worker.
#include <csignal>
#include <filesystem>

#include "gtest/gtest.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::testing {
namespace {

constexpr int kHeartbeatMs = 100;
constexpr int kDeadAfterMissed = 5;

const proto::MemberStatus* FindMember(const proto::StatusReply& status, const std::string& name) {
  for (const proto::MemberStatus& m : status.members()) {
    if (m.worker_name() == name) return &m;
  }
  return nullptr;
}

bool HasState(const proto::StatusReply& status, const std::string& name, proto::MemberState state) {
  const proto::MemberStatus* m = FindMember(status, name);
  return m != nullptr && m->state() == state;
}

class ClusterMembershipTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("splitspec-membership");
    ASSERT_FALSE(dir_.empty());
    // A tiny random model: the target worker loads it, and registration
    // carries its fingerprint.
    model_path_ = dir_ + "/tiny.gguf";
    ASSERT_TRUE(model::WriteTinyModel(model::TinyModelOptions{}, model_path_).ok());
    auto coordinator =
        StartCoordinator(dir_, {"--heartbeat-ms", std::to_string(kHeartbeatMs), "--suspect-after",
                                "2", "--dead-after", std::to_string(kDeadAfterMissed)});
    ASSERT_TRUE(coordinator.ok()) << coordinator.status();
    coordinator_.emplace(std::move(coordinator->first));
    endpoint_ = coordinator->second;
  }

  ChildProcess StartWorker(const std::string& binary, const std::string& name) {
    auto process = ChildProcess::Spawn({BinaryPath(binary), "--coordinator", endpoint_, "--name",
                                        name, "--model", model_path_, "--threads", "1"},
                                       dir_ + "/" + name + ".log");
    EXPECT_TRUE(process.ok()) << process.status();
    return *std::move(process);
  }

  std::string dir_;
  std::string model_path_;
  std::string endpoint_;
  std::optional<ChildProcess> coordinator_;
};

TEST_F(ClusterMembershipTest, WorkersRegisterAndAKilledWorkerIsDeclaredDead) {
  ChildProcess draft = StartWorker("splitspec-draft-worker", "draft-0");
  ChildProcess target = StartWorker("splitspec-target-worker", "target-0");

  proto::StatusReply status;
  ASSERT_TRUE(PollStatusUntil(
      endpoint_,
      [](const proto::StatusReply& s) {
        return HasState(s, "draft-0", proto::MEMBER_STATE_ALIVE) &&
               HasState(s, "target-0", proto::MEMBER_STATE_ALIVE) &&
               FindMember(s, "draft-0")->heartbeats_received() >= 2;
      },
      500, absl::Milliseconds(20), &status))
      << status.DebugString() << "\ncoordinator log:\n"
      << coordinator_->ReadLog();
  const proto::MemberStatus& registered = *FindMember(status, "draft-0");
  EXPECT_EQ(registered.role(), proto::ROLE_DRAFT_WORKER);
  EXPECT_EQ(registered.model().file_bytes(), std::filesystem::file_size(model_path_));
  EXPECT_NE(registered.model().content_hash(), 0u);
  EXPECT_EQ(FindMember(status, "target-0")->role(), proto::ROLE_TARGET_WORKER);

  // Kill the draft worker; the live target's heartbeats are the clock.
  const uint64_t target_beats_at_kill = FindMember(status, "target-0")->heartbeats_received();
  draft.Kill(SIGKILL);
  ASSERT_TRUE(PollStatusUntil(
      endpoint_,
      [](const proto::StatusReply& s) { return HasState(s, "draft-0", proto::MEMBER_STATE_DEAD); },
      2000, absl::Milliseconds(10), &status))
      << status.DebugString();
  const uint64_t beats_until_dead =
      FindMember(status, "target-0")->heartbeats_received() - target_beats_at_kill;
  // Stated bound: declared dead after dead_after_missed (5) intervals without a
  // heartbeat; the last beat may precede the kill by one interval, and the
  // sweep and this poll add under one more.
  EXPECT_GE(beats_until_dead, static_cast<uint64_t>(kDeadAfterMissed - 2));
  EXPECT_LE(beats_until_dead, static_cast<uint64_t>(kDeadAfterMissed + 2));
  EXPECT_GE(FindMember(status, "draft-0")->missed_heartbeats(),
            static_cast<uint32_t>(kDeadAfterMissed));
  EXPECT_TRUE(HasState(status, "target-0", proto::MEMBER_STATE_ALIVE)) << status.DebugString();
}

TEST_F(ClusterMembershipTest, TerminatedWorkerDeregistersAsLeft) {
  ChildProcess target = StartWorker("splitspec-target-worker", "target-1");
  proto::StatusReply status;
  ASSERT_TRUE(PollStatusUntil(
      endpoint_,
      [](const proto::StatusReply& s) {
        return HasState(s, "target-1", proto::MEMBER_STATE_ALIVE);
      },
      500, absl::Milliseconds(20), &status));
  ::kill(target.pid(), SIGTERM);
  auto exit_code = target.Wait(absl::Seconds(30));
  ASSERT_TRUE(exit_code.ok()) << exit_code.status();
  EXPECT_EQ(*exit_code, 0) << target.ReadLog();
  ASSERT_TRUE(PollStatusUntil(
      endpoint_,
      [](const proto::StatusReply& s) { return HasState(s, "target-1", proto::MEMBER_STATE_LEFT); },
      500, absl::Milliseconds(20), &status))
      << status.DebugString();
}

TEST_F(ClusterMembershipTest, WorkerWithUnreadableModelFailsWithItsPath) {
  auto process = ChildProcess::Spawn({BinaryPath("splitspec-draft-worker"), "--coordinator",
                                      endpoint_, "--model", dir_ + "/missing.gguf"},
                                     dir_ + "/bad-worker.log");
  ASSERT_TRUE(process.ok());
  auto exit_code = process->Wait(absl::Seconds(30));
  ASSERT_TRUE(exit_code.ok());
  EXPECT_EQ(*exit_code, 1);
  EXPECT_NE(process->ReadLog().find("missing.gguf"), std::string::npos) << process->ReadLog();
}

}  // namespace
}  // namespace splitspec::testing

// Supervisor (tools/serve_supervisor.h) over small shell processes: a worker
// that dies is restarted (its log keeps every run), one that exits 0 is let go,
// a crash loop and the coordinator's exit stop it with the process named.
#include "tools/serve_supervisor.h"

#include <signal.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::tools {
namespace {

using ::testing::HasSubstr;

int Occurrences(const std::string& text, const std::string& needle) {
  int n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("splitspec_supervisor_" + std::to_string(getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    out_ = std::tmpfile();
  }
  void TearDown() override {
    std::fclose(out_);
    std::filesystem::remove_all(dir_);
  }

  PlannedProcess Process(const std::string& name, const std::string& role,
                         const std::string& script) {
    return PlannedProcess{.name = name,
                          .role = role,
                          .log = (dir_ / (name + ".log")).string(),
                          .argv = {"/bin/sh", "-c", script}};
  }

  // Steps until Step fails or `done` holds; bounded by count.
  absl::Status StepUntil(Supervisor& supervisor, const std::function<bool()>& done) {
    for (int attempt = 0; attempt < 3000 && !done(); ++attempt) {
      if (absl::Status step = supervisor.Step(absl::Now()); !step.ok()) return step;
      absl::SleepFor(absl::Milliseconds(10));
    }
    return absl::OkStatus();
  }

  std::string Printed() {
    std::fflush(out_);
    std::rewind(out_);
    std::string text;
    char buffer[4096];
    size_t n;
    while ((n = std::fread(buffer, 1, sizeof(buffer), out_)) > 0) text.append(buffer, n);
    return text;
  }

  std::filesystem::path dir_;
  std::FILE* out_ = nullptr;
  const RestartPolicy fast_{.initial_backoff = absl::Milliseconds(1),
                            .max_backoff = absl::Milliseconds(4),
                            .max_restarts = 2,
                            .window = absl::Seconds(600)};
};

TEST_F(SupervisorTest, ACrashingWorkerIsRestartedUntilItLoops) {
  Supervisor supervisor({Process("coordinator", "coordinator", "exec sleep 60"),
                         Process("draft-0", "draft", "echo run; exit 3")},
                        {}, fast_, out_);
  ASSERT_TRUE(supervisor.StartAll().ok());
  const absl::Status stopped = StepUntil(supervisor, [] { return false; });
  ASSERT_FALSE(stopped.ok());
  EXPECT_THAT(stopped.message(), HasSubstr("draft-0 (pid "));
  EXPECT_THAT(stopped.message(),
              HasSubstr("exited with status 3 and is not restarted: it died 3 times within"));
  EXPECT_EQ(supervisor.restarts(1), 2);
  // The log kept every run (restarts append) and says what serve did.
  const std::string log = ReadFileOrEmpty((dir_ / "draft-0.log").string());
  EXPECT_THAT(log, HasSubstr("run\nsplitspec serve: ==> draft-0 (pid ")) << log;
  EXPECT_EQ(Occurrences(log, "run\n"), 3) << log;
  EXPECT_THAT(log, HasSubstr("splitspec serve: ==> draft-0 restarted (pid "));
  EXPECT_THAT(stopped.message(), HasSubstr("last lines of " + (dir_ / "draft-0.log").string()));
  EXPECT_THAT(Printed(), HasSubstr("restart 2 in"));
  supervisor.StopAll();
  EXPECT_EQ(supervisor.pid(0), 0);
}

TEST_F(SupervisorTest, AWorkerThatExitsZeroWasDrainedAndIsLetGo) {
  Supervisor supervisor({Process("coordinator", "coordinator", "exec sleep 60"),
                         Process("target", "target", "exit 0")},
                        {}, fast_, out_);
  ASSERT_TRUE(supervisor.StartAll().ok());
  ASSERT_TRUE(StepUntil(supervisor, [&] { return supervisor.pid(1) == 0; }).ok());
  EXPECT_EQ(supervisor.pid(1), 0);
  EXPECT_EQ(supervisor.restarts(1), 0);
  EXPECT_THAT(Printed(), HasSubstr("target (pid "));
  EXPECT_THAT(Printed(), HasSubstr("drained; the cluster keeps running without it"));
  EXPECT_NE(supervisor.pid(0), 0);  // the coordinator still runs
  supervisor.StopAll();
}

TEST_F(SupervisorTest, TheCoordinatorsExitStopsEverythingNamingIt) {
  Supervisor supervisor({Process("coordinator", "coordinator", "echo bound; sleep 0.2; exit 1"),
                         Process("draft-0", "draft", "exec sleep 60")},
                        {}, fast_, out_);
  ASSERT_TRUE(supervisor.StartAll().ok());
  const pid_t worker = supervisor.pid(1);
  const absl::Status stopped = StepUntil(supervisor, [] { return false; });
  ASSERT_FALSE(stopped.ok());
  EXPECT_THAT(stopped.message(), HasSubstr("coordinator (pid "));
  EXPECT_THAT(stopped.message(), HasSubstr("exited with status 1; the cluster cannot serve"));
  EXPECT_THAT(stopped.message(), HasSubstr("coordinator.log:\nbound\n"));
  supervisor.StopAll();
  EXPECT_NE(::kill(worker, 0), 0);  // stopped and reaped
}

TEST_F(SupervisorTest, ADeathDuringStartUpIsReportedWithItsLog) {
  Supervisor supervisor({Process("coordinator", "coordinator", "exec sleep 60"),
                         Process("target", "target", "echo no model; exit 2")},
                        {}, fast_, out_);
  ASSERT_TRUE(supervisor.StartAll().ok());
  absl::Status started = absl::OkStatus();
  for (int attempt = 0; attempt < 3000 && started.ok(); ++attempt) {
    started = supervisor.CheckStarted();
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_THAT(started.message(), HasSubstr("target exited with status 2 during start-up"));
  EXPECT_THAT(started.message(), HasSubstr("no model"));
  supervisor.StopAll();
}

proto::MemberStatus Member(uint32_t pid, proto::MemberState state) {
  proto::MemberStatus m;
  m.set_pid(pid);
  m.set_state(state);
  return m;
}

TEST(PidsDeclaredDeadTest, DeadWithoutALiveRegistrationUnderThePid) {
  const std::set<uint32_t> dead = PidsDeclaredDead(
      {Member(10, proto::MEMBER_STATE_DEAD), Member(11, proto::MEMBER_STATE_DEAD),
       Member(11, proto::MEMBER_STATE_ALIVE),  // resumed and registered again
       Member(12, proto::MEMBER_STATE_SUSPECT), Member(13, proto::MEMBER_STATE_LEFT),
       Member(14, proto::MEMBER_STATE_DEAD), Member(14, proto::MEMBER_STATE_DRAINING),
       Member(0, proto::MEMBER_STATE_DEAD)});
  EXPECT_EQ(dead, std::set<uint32_t>{10});
}

// A stopped worker never exits; once the coordinator declares its pid dead it is
// SIGKILLed, reaped and restarted like a crash, and its successor (a new pid) is left
// alone. The coordinator is never killed for this.
TEST_F(SupervisorTest, AHungWorkerTheCoordinatorDeclaredDeadIsKilledAndRestarted) {
  Supervisor supervisor({Process("coordinator", "coordinator", "exec sleep 60"),
                         Process("target", "target", "exec sleep 60")},
                        {}, fast_, out_);
  ASSERT_TRUE(supervisor.StartAll().ok());
  const pid_t coordinator = supervisor.pid(0), hung = supervisor.pid(1);
  ASSERT_EQ(::kill(hung, SIGSTOP), 0);
  int probes = 0;
  supervisor.WatchHeartbeats(
      [&]() -> absl::StatusOr<std::vector<proto::MemberStatus>> {
        ++probes;
        return std::vector<proto::MemberStatus>{
            Member(static_cast<uint32_t>(coordinator), proto::MEMBER_STATE_DEAD),
            Member(static_cast<uint32_t>(hung), proto::MEMBER_STATE_DEAD)};
      },
      absl::ZeroDuration());
  ASSERT_TRUE(StepUntil(supervisor, [&] {
                return supervisor.pid(1) != 0 && supervisor.pid(1) != hung;
              }).ok());
  ASSERT_NE(supervisor.pid(1), 0);
  ASSERT_NE(supervisor.pid(1), hung);
  const pid_t successor = supervisor.pid(1);
  const int probes_then = probes;
  ASSERT_TRUE(StepUntil(supervisor, [&] { return probes >= probes_then + 5; }).ok());
  EXPECT_EQ(supervisor.pid(1), successor);
  EXPECT_EQ(supervisor.restarts(1), 1);
  EXPECT_EQ(supervisor.pid(0), coordinator);
  const std::string printed = Printed();
  EXPECT_THAT(printed, HasSubstr(absl::StrCat("==> target (pid ", hung,
                                              ") stopped heartbeating: the coordinator "
                                              "declared it dead; SIGKILL")));
  EXPECT_THAT(printed, HasSubstr(absl::StrCat("==> target (pid ", hung,
                                              ") was killed by signal 9 (Killed); restart 1")));
  supervisor.StopAll();
}

// A worker stuck before its first registration never heartbeats, so the coordinator
// never declares it dead: once --register-timeout has passed since its start without
// its pid among the members, it is SIGKILLed and restarted with back-off, counted like
// a crash; during start-up too, where any other exit stops the start. Its successor,
// which registers, is left alone.
TEST_F(SupervisorTest, AWorkerThatDoesNotRegisterInTimeIsKilledAndRestarted) {
  Supervisor supervisor({Process("coordinator", "coordinator", "exec sleep 60"),
                         Process("draft-0", "draft", "exec sleep 60")},
                        {}, fast_, out_);
  ASSERT_TRUE(supervisor.StartAll().ok());
  const pid_t coordinator = supervisor.pid(0), stuck = supervisor.pid(1);
  ASSERT_EQ(::kill(stuck, SIGSTOP), 0);  // hung right after its spawn
  // The coordinator lists the coordinator's process and, once it runs, the successor.
  int probes = 0;
  supervisor.WatchHeartbeats(
      [&]() -> absl::StatusOr<std::vector<proto::MemberStatus>> {
        ++probes;
        std::vector<proto::MemberStatus> members;
        const pid_t now = supervisor.pid(1);
        if (now != 0 && now != stuck)
          members.push_back(Member(static_cast<uint32_t>(now), proto::MEMBER_STATE_ALIVE));
        return members;
      },
      absl::ZeroDuration());
  supervisor.SetRegisterTimeout(absl::Milliseconds(50));
  absl::Status started = absl::OkStatus();
  for (int attempt = 0; attempt < 3000 && started.ok() &&
                        (supervisor.pid(1) == 0 || supervisor.pid(1) == stuck);
       ++attempt) {
    started = supervisor.CheckStarted();  // start-up: this kill is not a start failure
    absl::SleepFor(absl::Milliseconds(10));
  }
  ASSERT_TRUE(started.ok()) << started;
  const pid_t successor = supervisor.pid(1);
  ASSERT_NE(successor, 0);
  ASSERT_NE(successor, stuck);
  EXPECT_EQ(supervisor.restarts(1), 1);
  // Registered: left alone however long it runs.
  const int probes_then = probes;
  ASSERT_TRUE(StepUntil(supervisor, [&] { return probes >= probes_then + 20; }).ok());
  EXPECT_EQ(supervisor.pid(1), successor);
  EXPECT_EQ(supervisor.pid(0), coordinator);
  const std::string printed = Printed();
  EXPECT_THAT(printed, HasSubstr(absl::StrCat(
                           "==> draft-0 (pid ", stuck,
                           ") did not register with the coordinator within 50ms of its start; "
                           "SIGKILL")));
  EXPECT_THAT(printed, HasSubstr(absl::StrCat("==> draft-0 (pid ", stuck,
                                              ") was killed by signal 9 (Killed); restart 1")));
  EXPECT_THAT(printed, HasSubstr(absl::StrCat("==> draft-0 restarted (pid ", successor,
                                              ", restart 1)")));
  supervisor.StopAll();
}

}  // namespace
}  // namespace splitspec::tools

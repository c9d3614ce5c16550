// Subprocess (runtime/base/subprocess.h): the one way splitspec starts processes.
#include "runtime/base/subprocess.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <optional>
#include <string>
#include <thread>

#include "gtest/gtest.h"

namespace splitspec {
namespace {

std::string TempLog(const std::string& name) {
  const char* dir = std::getenv("TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/splitspec-subprocess-" +
         std::to_string(getpid()) + "-" + name + ".log";
}

TEST(SubprocessTest, RunsWithExtraEnvironmentAndLogsOutput) {
  const std::string log = TempLog("env");
  absl::StatusOr<Subprocess> child =
      Subprocess::Spawn({"/bin/sh", "-c", "echo value=$SPLITSPEC_TEST_VALUE; exit 3"}, log,
                        {"SPLITSPEC_TEST_VALUE=42"});
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<int> code = child->Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 3);
  EXPECT_EQ(child->ReadLog(), "value=42\n");
  std::remove(log.c_str());
}

TEST(SubprocessTest, DetachedChildHasItsOwnSessionAndNoStdin) {
  const std::string log = TempLog("detached");
  // Prints whether it leads its own session (sid == pid) and what stdin gives.
  absl::StatusOr<Subprocess> child = Subprocess::SpawnDetached(
      {"/bin/sh", "-c",
       "sid=$(ps -o sid= -p $$ | tr -d ' '); [ \"$sid\" = \"$$\" ] && echo own-session; "
       "read line || echo stdin-empty"},
      log);
  ASSERT_TRUE(child.ok()) << child.status();
  absl::StatusOr<int> code = child->Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(child->ReadLog(), "own-session\nstdin-empty\n");
  std::remove(log.c_str());
}

TEST(SubprocessTest, DetachedChildOutlivesItsSubprocessObject) {
  const std::string log = TempLog("outlive");
  pid_t pid = -1;
  {
    absl::StatusOr<Subprocess> child = Subprocess::SpawnDetached({"/bin/sleep", "30"}, log);
    ASSERT_TRUE(child.ok()) << child.status();
    pid = child->pid();
  }
  EXPECT_EQ(::kill(pid, 0), 0) << "the detached child was killed with its Subprocess";
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
  std::remove(log.c_str());
}

TEST(SubprocessTest, MissingBinaryIsNamed) {
  absl::StatusOr<Subprocess> child = Subprocess::Spawn({"/no/such/binary"}, TempLog("missing"));
  ASSERT_FALSE(child.ok());
  EXPECT_NE(std::string(child.status().message()).find("/no/such/binary"), std::string::npos);
}

// OnParentDeath::kDie: the kernel kills the child when the thread that spawned it
// exits (a process's death ends all its threads), while a kKeepRunning child spawned
// the same way runs on. The log and the environment work as with posix_spawn.
TEST(SubprocessTest, AChildThatDiesWithItsParentDiesWithTheSpawningThread) {
  const std::string log = TempLog("pdeathsig");
  absl::StatusOr<Subprocess> echo =
      Subprocess::Spawn({"/bin/sh", "-c", "echo value=$SPLITSPEC_TEST_VALUE; exit 3"}, log,
                        {"SPLITSPEC_TEST_VALUE=7"}, LogMode::kTruncate, OnParentDeath::kDie);
  ASSERT_TRUE(echo.ok()) << echo.status();
  absl::StatusOr<int> code = echo->Wait(absl::Minutes(2));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 3);
  EXPECT_EQ(ReadFileOrEmpty(log), "value=7\n");

  std::optional<Subprocess> dying, surviving;
  std::thread spawner([&] {
    absl::StatusOr<Subprocess> child = Subprocess::Spawn(
        {"/bin/sleep", "600"}, log, {}, LogMode::kTruncate, OnParentDeath::kDie);
    ASSERT_TRUE(child.ok()) << child.status();
    dying.emplace(*std::move(child));
    absl::StatusOr<Subprocess> kept = Subprocess::Spawn({"/bin/sleep", "600"},
                                                        TempLog("pdeathsig-keep"));
    ASSERT_TRUE(kept.ok()) << kept.status();
    surviving.emplace(*std::move(kept));
  });
  spawner.join();
  ASSERT_TRUE(dying.has_value() && surviving.has_value());
  code = dying->Wait(absl::Minutes(2));  // bounded wait for the kernel's kill
  ASSERT_TRUE(code.ok()) << "the child outlived the thread that spawned it";
  EXPECT_EQ(*code, 128 + SIGKILL);
  EXPECT_TRUE(absl::IsDeadlineExceeded(surviving->Wait(absl::ZeroDuration()).status()));
  surviving->Kill();
  std::remove(log.c_str());
  std::remove(TempLog("pdeathsig-keep").c_str());
}

TEST(SubprocessTest, MissingBinaryIsNamedWhenTheChildDiesWithItsParent) {
  absl::StatusOr<Subprocess> child = Subprocess::Spawn(
      {"/no/such/binary"}, TempLog("missing"), {}, LogMode::kTruncate, OnParentDeath::kDie);
  ASSERT_FALSE(child.ok());
  EXPECT_NE(std::string(child.status().message()).find("/no/such/binary"), std::string::npos);
  EXPECT_NE(std::string(child.status().message()).find("No such file"), std::string::npos);
}

TEST(SubprocessTest, AppendModeKeepsWhatAnEarlierRunLogged) {
  const std::string log = TempLog("append");
  for (const char* word : {"first", "second"}) {
    absl::StatusOr<Subprocess> child =
        Subprocess::Spawn({"/bin/sh", "-c", std::string("echo ") + word}, log, {},
                          word[0] == 'f' ? LogMode::kTruncate : LogMode::kAppend);
    ASSERT_TRUE(child.ok()) << child.status();
    ASSERT_TRUE(child->Wait(absl::Seconds(30)).ok());
  }
  EXPECT_EQ(ReadFileOrEmpty(log), "first\nsecond\n");
  // Truncate (the default) starts the log afresh.
  absl::StatusOr<Subprocess> child = Subprocess::Spawn({"/bin/sh", "-c", "echo third"}, log);
  ASSERT_TRUE(child.ok()) << child.status();
  ASSERT_TRUE(child->Wait(absl::Seconds(30)).ok());
  EXPECT_EQ(ReadFileOrEmpty(log), "third\n");
  std::remove(log.c_str());
}

TEST(SubprocessTest, KilledChildIsDescribedBySignal) {
  absl::StatusOr<Subprocess> child = Subprocess::Spawn({"/bin/sleep", "30"}, TempLog("killed"));
  ASSERT_TRUE(child.ok()) << child.status();
  child->Signal(SIGKILL);
  absl::StatusOr<int> code = child->Wait(absl::Seconds(30));
  ASSERT_TRUE(code.ok()) << code.status();
  EXPECT_EQ(*code, 128 + SIGKILL);
  EXPECT_EQ(DescribeExit(*code), "was killed by signal 9 (Killed)");
  EXPECT_EQ(DescribeExit(3), "exited with status 3");
  std::remove(TempLog("killed").c_str());
}

TEST(SubprocessTest, LastLinesKeepsTheTail) {
  EXPECT_EQ(LastLines("a\nb\nc\n", 2), "b\nc\n");
  EXPECT_EQ(LastLines("a\nb\nc", 2), "b\nc");
  EXPECT_EQ(LastLines("a\nb\n", 5), "a\nb\n");
  EXPECT_EQ(LastLines("one line", 1), "one line");
  EXPECT_EQ(LastLines("", 3), "");
  EXPECT_EQ(LastLines("a\nb\n", 0), "");
}

}  // namespace
}  // namespace splitspec

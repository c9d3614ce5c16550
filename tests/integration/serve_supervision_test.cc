// `splitspec serve` supervises its workers (tools/serve_supervisor.h). Under a
// steady load of streamed greedy completions, the draft worker and then the
// target are killed with SIGKILL: each comes back (a new pid registers under
// its name, serve's output and /metrics say so), the cluster keeps serving,
// and every stream finishes equal to plain greedy decoding. The coordinator's
// death, or a worker crash-looping past --max-restarts, stops the cluster with
// a message naming the process and quoting its log.
//
// Waits are bounded by attempt counts on conditions, never timed assertions.
#include <signal.h>
#include <unistd.h>

#include <fstream>
#include <set>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/channel_security.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/http_stream_load.h"
#include "tests/testing/http_test_client.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::testing {
namespace {

constexpr int kMaxTokens = 40;

// A `splitspec serve` of one target and one lookup draft worker on the tiny
// chat model, on free loopback ports.
class ServeCluster {
 public:
  void Start(const std::string& name, const std::vector<std::string>& extra_flags) {
    dir_ = MakeTempDir(absl::StrCat("splitspec-", name, "-", getpid()));
    ASSERT_FALSE(dir_.empty());
    model_path_ = dir_ + "/tiny-chat.gguf";
    ASSERT_TRUE(model::MakeTinyChatModel().WriteFile(model_path_).ok());
    control_ = absl::StrCat("tcp://127.0.0.1:", FreeLoopbackPort());
    http_port_ = FreeLoopbackPort();
    ASSERT_NE(http_port_, 0);
    const std::string config = dir_ + "/cluster.toml";
    std::ofstream(config) << "[cluster]\nrun_dir = \"" << dir_ << "\"\n"
                          << "[coordinator]\ncontrol = \"" << control_ << "\"\n"
                          << "http = \"127.0.0.1:" << http_port_ << "\"\n"
                          << "[models]\ntarget = \"" << model_path_ << "\"\n"
                          << "[[target_group]]\nname = \"target\"\nthreads = 1\n"
                          << "[[draft_pool]]\nname = \"draft\"\ncount = 1\ndrafter = \"lookup\"\n";
    std::vector<std::string> argv = {BinaryPath("splitspec"), "serve", "--config", config,
                                     "--heartbeat-ms",        "100"};
    argv.insert(argv.end(), extra_flags.begin(), extra_flags.end());
    auto serve = ChildProcess::Spawn(argv, dir_ + "/serve.out");
    ASSERT_TRUE(serve.ok()) << serve.status();
    serve_.emplace(*std::move(serve));
    for (int attempt = 0; attempt < 1200 && !absl::StrContains(Output(), "cluster ready");
         ++attempt)
      absl::SleepFor(absl::Milliseconds(100));
    ASSERT_TRUE(absl::StrContains(Output(), "cluster ready")) << Output();
    // serve made the cluster's CURVE keys in its run dir; this process asks
    // the coordinator for its status with the admin key, as `splitspec status` does.
    absl::StatusOr<net::ChannelSecurity> admin =
        net::LoadChannelSecurity(dir_ + "/keys", net::kAdmin);
    ASSERT_TRUE(admin.ok()) << admin.status();
    net::SetDefaultChannelSecurity(*admin);
  }

  ~ServeCluster() {
    if (serve_.has_value() && serve_->running()) serve_->Kill(SIGTERM);
  }

  std::string Output() const { return ReadFileOrEmpty(dir_ + "/serve.out"); }
  std::string LogOf(const std::string& name) const {
    return ReadFileOrEmpty(absl::StrCat(dir_, "/", name, ".log"));
  }
  ChildProcess& serve() { return *serve_; }
  const std::string& model_path() const { return model_path_; }
  const std::string& dir() const { return dir_; }
  int http_port() const { return http_port_; }

  // The pids of the live (alive or suspect) members named `name`.
  std::set<uint32_t> LivePids(const std::string& name) const {
    std::set<uint32_t> pids;
    absl::StatusOr<proto::StatusReply> status = FetchStatus(control_);
    if (!status.ok()) return pids;
    for (const proto::MemberStatus& m : status->members()) {
      if (m.worker_name() == name &&
          (m.state() == proto::MEMBER_STATE_ALIVE || m.state() == proto::MEMBER_STATE_SUSPECT)) {
        pids.insert(m.pid());
      }
    }
    return pids;
  }

  std::string Metrics() const {
    auto response = coordinator::http::HttpRequestOnce(http_port_, "GET", "/metrics");
    return response.ok() ? response->body : "";
  }

  // Waits (bounded) for serve to exit; its exit code, or -1.
  int WaitForExit() {
    absl::StatusOr<int> code = serve_->Wait(absl::Minutes(2));
    return code.ok() ? *code : -1;
  }

 private:
  std::string dir_;
  std::string model_path_;
  std::string control_;
  int http_port_ = 0;
  std::optional<ChildProcess> serve_;
};

// The public keys a process's log says it loaded ("CURVE on: ROLE key KEY from DIR"), in order.
std::vector<std::string> CurveKeysIn(const std::string& log) {
  std::vector<std::string> keys;
  for (absl::string_view line : absl::StrSplit(log, '\n')) {
    const size_t at = line.find("CURVE on: ");
    if (at == absl::string_view::npos) continue;
    const size_t key = line.find(" key ", at);
    if (key != absl::string_view::npos) keys.emplace_back(line.substr(key + 5, 40));
  }
  return keys;
}

// Sends `signal` (SIGKILL: a crash; SIGSTOP: a hang) to the one live process named
// `name`; waits (bounded) until another pid registered under the name. Returns the
// signalled pid (0 on failure).
uint32_t KillAndAwaitRestart(ServeCluster& cluster, const std::string& name,
                             int signal = SIGKILL) {
  const std::set<uint32_t> before = cluster.LivePids(name);
  EXPECT_EQ(before.size(), 1u) << name;
  if (before.size() != 1) return 0;
  const uint32_t pid = *before.begin();
  EXPECT_EQ(::kill(static_cast<pid_t>(pid), signal), 0);
  for (int attempt = 0; attempt < 1200; ++attempt) {
    std::set<uint32_t> now = cluster.LivePids(name);
    now.erase(pid);
    if (!now.empty()) return pid;
    absl::SleepFor(absl::Milliseconds(100));
  }
  ADD_FAILURE() << name << " (pid " << pid << ") did not come back; serve:\n" << cluster.Output();
  return 0;
}

// The pid serve printed when it started `name` ("==> NAME (pid N, log ...)"), or 0.
pid_t StartedPid(const std::string& output, const std::string& name) {
  const std::string prefix = absl::StrCat("==> ", name, " (pid ");
  const size_t at = output.find(prefix);
  if (at == std::string::npos) return 0;
  const size_t digits = at + prefix.size();
  int pid = 0;
  return absl::SimpleAtoi(output.substr(digits, output.find(',', digits) - digits), &pid) ? pid
                                                                                          : 0;
}

// Whether `pid` has stopped running: gone, or a zombie no one reaped yet (an orphan's
// new parent may be slow to reap, or never do it in a container).
bool ProcessGone(pid_t pid) {
  const std::string stat = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/stat"));
  const size_t paren = stat.rfind(')');
  if (stat.empty() || paren == std::string::npos || paren + 2 >= stat.size()) return true;
  return stat[paren + 2] == 'Z' || stat[paren + 2] == 'X';
}

// Waits (bounded) until `pid` has stopped running.
bool AwaitGone(pid_t pid) {
  for (int attempt = 0; attempt < 1200 && !ProcessGone(pid); ++attempt)
    absl::SleepFor(absl::Milliseconds(100));
  return ProcessGone(pid);
}

TEST(ServeSupervisionTest, KilledWorkersComeBackAndEveryStreamStaysExact) {
  ServeCluster cluster;
  // A queued request may wait out a restart on a slow machine (also checks that
  // serve passes the flag on).
  ASSERT_NO_FATAL_FAILURE(cluster.Start("serve-supervision", {"--queue-timeout-ms", "300000"}));
  const std::vector<std::vector<int32_t>> prompts = {
      {10, 20, 30, 10, 20, 30}, {7, 8}, {200, 5, 200, 5, 200}, {1, 2, 3, 4}, {99, 98, 97}};
  const std::vector<std::string> expected = PlainGreedyTexts(cluster.model_path(), prompts, kMaxTokens);
  ASSERT_EQ(expected.size(), prompts.size());
  StreamingLoad load(cluster.http_port(), prompts, expected, kMaxTokens);
  load.Start(3);
  ASSERT_TRUE(load.WaitForMore(3)) << cluster.Output();

  for (const std::string name : {"draft-0", "target"}) {
    SCOPED_TRACE(name);
    const uint32_t killed = KillAndAwaitRestart(cluster, name);
    ASSERT_NE(killed, 0u);
    // Streams keep finishing once it is back.
    EXPECT_TRUE(load.WaitForMore(3)) << cluster.Output();
    const std::string output = cluster.Output();
    EXPECT_TRUE(absl::StrContains(
        output, absl::StrCat("==> ", name, " (pid ", killed, ") was killed by signal 9")))
        << output;
    EXPECT_TRUE(absl::StrContains(output, absl::StrCat("==> ", name, " restarted (pid ")))
        << output;
    // The restarted process loaded the same key as its predecessor (its log is
    // appended to): serve's keys outlive a worker restart.
    const std::vector<std::string> keys = CurveKeysIn(cluster.LogOf(name));
    ASSERT_EQ(keys.size(), 2u) << cluster.LogOf(name);
    EXPECT_EQ(keys[0], keys[1]);
    if (name == "draft-0") {  // its own key (draft.d/draft-0), not the shared draft key
      const std::string keys_dir = cluster.dir() + "/keys";
      EXPECT_EQ(keys[0], *net::ReadPublicKeyFile(keys_dir + "/draft.d/draft-0.pub"));
      EXPECT_NE(keys[0], *net::ReadPublicKeyFile(keys_dir + "/draft.pub"));
    }
    EXPECT_TRUE(absl::StrContains(
        cluster.Metrics(),
        absl::StrCat("splitspec_worker_restarts_total{worker_name=\"", name, "\",role=\"",
                     name == "target" ? "target" : "draft", "\"} 1\n")));
  }
  load.Stop();
  EXPECT_TRUE(load.failures().empty())
      << absl::StrJoin(load.failures(), "\n") << "\nserve:\n"
      << cluster.Output() << "\nworker and coordinator logs: " << cluster.dir();
  EXPECT_GE(load.exact(), 9);

  cluster.serve().Signal(SIGTERM);
  EXPECT_EQ(cluster.WaitForExit(), 0) << cluster.Output();
  EXPECT_TRUE(absl::StrContains(cluster.Output(), "==> stopped"));
}

TEST(ServeSupervisionTest, TheCoordinatorsDeathStopsTheClusterNamingIt) {
  ServeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start("serve-coordinator-death", {}));
  const std::string output = cluster.Output();
  const size_t at = output.find("==> coordinator (pid ");
  ASSERT_NE(at, std::string::npos) << output;
  int pid = 0;
  const size_t digits = at + std::string("==> coordinator (pid ").size();
  ASSERT_TRUE(absl::SimpleAtoi(output.substr(digits, output.find(',', digits) - digits), &pid));
  const std::set<uint32_t> target = cluster.LivePids("target");
  ASSERT_EQ(target.size(), 1u);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  EXPECT_EQ(cluster.WaitForExit(), 1) << cluster.Output();
  const std::string final_output = cluster.Output();
  EXPECT_TRUE(absl::StrContains(final_output,
                                absl::StrCat("coordinator (pid ", pid, ") was killed by signal 9")))
      << final_output;
  EXPECT_TRUE(absl::StrContains(final_output, "coordinator.log:\n")) << final_output;
  // The workers were stopped (and reaped) with it.
  EXPECT_NE(::kill(static_cast<pid_t>(*target.begin()), 0), 0);
}

TEST(ServeSupervisionTest, ACrashLoopPastTheLimitStopsTheClusterNamingTheWorker) {
  ServeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start("serve-crash-loop", {"--max-restarts", "1"}));
  const uint32_t first = KillAndAwaitRestart(cluster, "draft-0");
  ASSERT_NE(first, 0u);
  const std::set<uint32_t> second = cluster.LivePids("draft-0");
  ASSERT_FALSE(second.empty());
  uint32_t pid = 0;
  for (uint32_t p : second) pid = p != first ? p : pid;
  ASSERT_NE(pid, 0u);
  ASSERT_EQ(::kill(static_cast<pid_t>(pid), SIGKILL), 0);
  EXPECT_EQ(cluster.WaitForExit(), 1) << cluster.Output();
  const std::string output = cluster.Output();
  EXPECT_TRUE(absl::StrContains(
      output, absl::StrCat("draft-0 (pid ", pid,
                           ") was killed by signal 9 (Killed) and is not restarted: it died 2 "
                           "times within 1m")))
      << output;
  EXPECT_TRUE(absl::StrContains(output, "draft-0.log:\n")) << output;
}

// serve killed with SIGKILL cannot stop its processes; the kernel does (they were
// spawned with PR_SET_PDEATHSIG): no coordinator or worker is left orphaned.
TEST(ServeSupervisionTest, ServeKilledWithSigkillLeavesNoProcessBehind) {
  ServeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start("serve-sigkill", {}));
  const std::string output = cluster.Output();
  std::vector<std::pair<std::string, pid_t>> processes;
  for (const std::string name : {"coordinator", "target", "draft-0"}) {
    const pid_t pid = StartedPid(output, name);
    ASSERT_NE(pid, 0) << name << " not in serve's output:\n" << output;
    ASSERT_FALSE(ProcessGone(pid)) << name;
    processes.emplace_back(name, pid);
  }
  cluster.serve().Signal(SIGKILL);
  EXPECT_EQ(cluster.WaitForExit(), 128 + SIGKILL);
  for (const auto& [name, pid] : processes) {
    EXPECT_TRUE(AwaitGone(pid)) << name << " (pid " << pid << ") outlived serve";
    if (!ProcessGone(pid)) ::kill(pid, SIGKILL);  // leave nothing behind either way
  }
}

// A worker that hangs alive (SIGSTOP) never exits; serve kills it once the coordinator
// has declared it dead (no heartbeat for the liveness window) and restarts it, and
// every stream still finishes equal to plain greedy.
TEST(ServeSupervisionTest, StoppedWorkersAreKilledAndRestartedAndEveryStreamStaysExact) {
  ServeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start("serve-hung", {"--queue-timeout-ms", "300000"}));
  const std::vector<std::vector<int32_t>> prompts = {{10, 20, 30, 10, 20, 30}, {7, 8}, {1, 2, 3}};
  const std::vector<std::string> expected = PlainGreedyTexts(cluster.model_path(), prompts, kMaxTokens);
  ASSERT_EQ(expected.size(), prompts.size());
  StreamingLoad load(cluster.http_port(), prompts, expected, kMaxTokens);
  load.Start(2);
  ASSERT_TRUE(load.WaitForMore(2)) << cluster.Output();
  for (const std::string name : {"draft-0", "target"}) {
    SCOPED_TRACE(name);
    const uint32_t stopped = KillAndAwaitRestart(cluster, name, SIGSTOP);
    ASSERT_NE(stopped, 0u);
    EXPECT_TRUE(load.WaitForMore(2)) << cluster.Output();
    const std::string output = cluster.Output();
    EXPECT_TRUE(absl::StrContains(
        output, absl::StrCat("==> ", name, " (pid ", stopped,
                             ") stopped heartbeating: the coordinator declared it dead; SIGKILL")))
        << output;
    EXPECT_TRUE(absl::StrContains(
        output, absl::StrCat("==> ", name, " (pid ", stopped, ") was killed by signal 9")))
        << output;
    EXPECT_TRUE(AwaitGone(static_cast<pid_t>(stopped)));
  }
  load.Stop();
  EXPECT_TRUE(load.failures().empty())
      << absl::StrJoin(load.failures(), "\n") << "\nserve:\n"
      << cluster.Output() << "\nworker and coordinator logs: " << cluster.dir();
  cluster.serve().Signal(SIGTERM);
  EXPECT_EQ(cluster.WaitForExit(), 0) << cluster.Output();
}

}  // namespace
}  // namespace splitspec::testing

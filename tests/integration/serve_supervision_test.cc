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

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/channel.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/wire_format.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/http_stream_load.h"
#include "tests/testing/http_test_client.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::testing {
namespace {

constexpr int kMaxTokens = 40;

// A `splitspec serve` of one target and one lookup draft worker on the tiny
// chat model, on free loopback ports (extra flags may override the config).
class ServeCluster {
 public:
  // Runs this `splitspec` instead of the built one (serve starts the worker
  // binaries from the folder of the splitspec it runs).
  void set_serve_binary(const std::string& path) { serve_binary_ = path; }

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
                          << "[[draft_pool]]\nname = \"draft\"\ncount = 1\ndrafter = \"lookup\"\n"
                          // A draft worker process, which these tests supervise (lookup would
                          // otherwise run inside the target).
                          << "placement = \"workers\"\n";
    std::vector<std::string> argv = {serve_binary_, "serve", "--config", config,
                                     "--heartbeat-ms", "100"};
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
  // Whether serve's output shows `text` within `timeout`: serve reports what its
  // supervisor observed (a child reaped, a restart) asynchronously, after the
  // command that caused it has returned.
  bool OutputShows(absl::string_view text, absl::Duration timeout = absl::Seconds(15)) const {
    const absl::Time deadline = absl::Now() + timeout;
    while (!absl::StrContains(Output(), text)) {
      if (absl::Now() > deadline) return false;
      absl::SleepFor(absl::Milliseconds(50));
    }
    return true;
  }
  std::string LogOf(const std::string& name) const {
    return ReadFileOrEmpty(absl::StrCat(dir_, "/", name, ".log"));
  }
  ChildProcess& serve() { return *serve_; }
  const std::string& model_path() const { return model_path_; }
  const std::string& dir() const { return dir_; }
  const std::string& control() const { return control_; }
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
  std::string serve_binary_ = BinaryPath("splitspec");
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
    // Its own key (draft.d/draft-0, target.d/target), not the role's shared key.
    const std::string keys_dir = cluster.dir() + "/keys";
    const std::string role = name == "draft-0" ? "draft" : "target";
    EXPECT_EQ(keys[0], *net::ReadPublicKeyFile(absl::StrCat(keys_dir, "/", role, ".d/", name,
                                                            ".pub")));
    EXPECT_NE(keys[0], *net::ReadPublicKeyFile(absl::StrCat(keys_dir, "/", role, ".pub")));
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

// A worker stuck before its first registration never heartbeats, so the coordinator
// cannot declare it dead; serve kills it --register-timeout after its start and
// restarts it with back-off, counting the restart, and the cluster comes up. The
// draft worker here is a script that stops itself (SIGSTOP) the first time, before it
// execs the real worker: serve runs the worker binaries of its own folder, so the test
// runs serve from a folder of hard links to the built binaries beside that script.
TEST(ServeSupervisionTest, AWorkerStuckBeforeRegisteringIsKilledAndRestarted) {
  const std::string bin = MakeTempDir(absl::StrCat("splitspec-stuck-bin-", getpid()));
  ASSERT_FALSE(bin.empty());
  for (const std::string name : {"splitspec", "splitspec-coordinator", "splitspec-target-worker"}) {
    std::error_code error;
    std::filesystem::create_hard_link(BinaryPath(name), bin + "/" + name, error);
    if (error) std::filesystem::copy_file(BinaryPath(name), bin + "/" + name, error);
    ASSERT_FALSE(error) << name << ": " << error.message();
  }
  const std::string script = bin + "/splitspec-draft-worker";
  std::ofstream(script) << "#!/bin/sh\n"
                        << "if mkdir '" << bin << "/stopped-once' 2>/dev/null; then kill -STOP $$; fi\n"
                        << "exec '" << BinaryPath("splitspec-draft-worker") << "' \"$@\"\n";
  std::filesystem::permissions(script, std::filesystem::perms::owner_all);

  ServeCluster cluster;
  cluster.set_serve_binary(bin + "/splitspec");
  ASSERT_NO_FATAL_FAILURE(cluster.Start("serve-stuck", {"--register-timeout", "3s"}));
  const std::string output = cluster.Output();
  const pid_t stuck = StartedPid(output, "draft-0");
  ASSERT_NE(stuck, 0) << output;
  EXPECT_TRUE(absl::StrContains(
      output, absl::StrCat("==> draft-0 (pid ", stuck,
                           ") did not register with the coordinator within 3s of its start; "
                           "SIGKILL")))
      << output;
  EXPECT_TRUE(absl::StrContains(
      output, absl::StrCat("==> draft-0 (pid ", stuck, ") was killed by signal 9 (Killed); "
                           "restart 1")))
      << output;
  EXPECT_TRUE(absl::StrContains(output, "==> draft-0 restarted (pid ")) << output;
  EXPECT_TRUE(AwaitGone(stuck));
  const std::set<uint32_t> live = cluster.LivePids("draft-0");
  ASSERT_EQ(live.size(), 1u) << output;
  EXPECT_NE(*live.begin(), static_cast<uint32_t>(stuck));
  // The target registered in time and was left alone, as was the successor.
  EXPECT_EQ(output.find("did not register"), output.rfind("did not register")) << output;
  cluster.serve().Signal(SIGTERM);
  EXPECT_EQ(cluster.WaitForExit(), 0) << cluster.Output();
  std::filesystem::remove_all(bin);
}

// Whether a peer holding `keys` gets an answer to a StatusRequest from the
// coordinator at `control` (whose key is in `keys_dir`) within 3 s.
bool AnswersStatus(const std::string& control, const std::string& keys_dir,
                   const net::CurveKeyPair& keys) {
  static int peers = 0;
  net::ChannelSecurity security;
  security.curve = true;
  security.own = keys;
  security.coordinator_public_key = *net::ReadPublicKeyFile(keys_dir + "/coordinator.pub");
  absl::StatusOr<std::unique_ptr<net::Channel>> channel =
      net::ConnectChannel(control, absl::StrCat("rotation-probe-", ++peers), security);
  if (!channel.ok()) return false;
  proto::Envelope request = net::NewEnvelope();
  request.mutable_status_request();
  if (!(*channel)->Send("", request).ok()) return false;
  const absl::Time deadline = absl::Now() + absl::Seconds(3);
  while (absl::Now() < deadline) {
    absl::StatusOr<net::Frame> frame = (*channel)->Receive(deadline - absl::Now());
    if (!frame.ok()) return false;
    if (frame->envelope.has_status_reply()) return true;
  }
  return false;
}

// Runs `argv` to its end (bounded); its exit code and output.
std::pair<int, std::string> RunToEnd(const std::vector<std::string>& argv, const std::string& log,
                                     const std::vector<std::string>& env = {}) {
  absl::StatusOr<ChildProcess> child = ChildProcess::Spawn(argv, log, env);
  if (!child.ok()) return {-1, std::string(child.status().message())};
  absl::StatusOr<int> code = child->Wait(absl::Minutes(5));
  return {code.ok() ? *code : -1, ReadFileOrEmpty(log)};
}

// Key rotation without downtime: under a steady load, `keygen --rotate draft` makes
// new draft keys while the old ones stay accepted for the grace period; `scale --roll
// draft` starts a replacement draft worker (on a key of its own it issues) and drains
// the old one; every stream still finishes equal to plain greedy, and once the grace
// period is over the coordinator refuses the old key.
TEST(ServeSupervisionTest, RotatingKeysUnderLoadLosesNoRequestAndRetiresTheOldKeys) {
  ServeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start("serve-rotate", {"--queue-timeout-ms", "300000"}));
  const std::string keys = cluster.dir() + "/keys";
  const std::string control = cluster.control();
  const std::vector<std::vector<int32_t>> prompts = {{10, 20, 30, 10, 20, 30}, {7, 8}, {1, 2, 3}};
  const std::vector<std::string> expected =
      PlainGreedyTexts(cluster.model_path(), prompts, kMaxTokens);
  ASSERT_EQ(expected.size(), prompts.size());
  StreamingLoad load(cluster.http_port(), prompts, expected, kMaxTokens);
  load.Start(2);
  ASSERT_TRUE(load.WaitForMore(2)) << cluster.Output();

  absl::StatusOr<net::CurveKeyPair> old_key = net::ReadKeyPairFiles(keys, "draft.d/draft-0");
  ASSERT_TRUE(old_key.ok()) << old_key.status();
  auto [rotated, rotate_out] =
      RunToEnd({BinaryPath("splitspec"), "keygen", "--out", keys, "--rotate", "draft",
                "--grace-s", "15"},
               cluster.dir() + "/rotate.out");
  ASSERT_EQ(rotated, 0) << rotate_out;
  absl::StatusOr<net::CurveKeyPair> new_key = net::ReadKeyPairFiles(keys, "draft.d/draft-0");
  ASSERT_TRUE(new_key.ok()) << new_key.status();
  EXPECT_NE(new_key->public_key, old_key->public_key);
  EXPECT_TRUE(absl::StrContains(rotate_out, "old draft keys accepted until ")) << rotate_out;
  // Within the grace period the old key still works (draft-0 keeps serving with it).
  EXPECT_TRUE(AnswersStatus(control, keys, *old_key));

  auto [rolled, roll_out] = RunToEnd(
      {BinaryPath("splitspec"), "scale", "--coordinator", control, "--roll", "draft", "--drafter",
       "lookup", "--model", cluster.model_path(), "--log-dir", cluster.dir()},
      cluster.dir() + "/roll.out", {absl::StrCat("SPLITSPEC_KEYS=", keys)});
  // The replacement runs detached from scale and serve: stop it at the end.
  pid_t replacement = 0;
  const size_t pid_at = roll_out.find("\"pid\":");
  if (pid_at != std::string::npos) replacement = std::atoi(roll_out.c_str() + pid_at + 6);
  EXPECT_EQ(rolled, 0) << roll_out << "\nserve:\n" << cluster.Output();
  EXPECT_TRUE(absl::StrContains(roll_out, "\"event\":\"left\",\"role\":\"draft\"")) << roll_out;
  EXPECT_TRUE(cluster.OutputShows("drained; the cluster keeps running without it"))
      << cluster.Output();
  // The replacement has a key of its own, issued by scale, not the shared draft key.
  const size_t name_at = roll_out.find("\"name\":\"scale-");
  ASSERT_NE(name_at, std::string::npos) << roll_out;
  const std::string name =
      roll_out.substr(name_at + 8, roll_out.find('"', name_at + 8) - (name_at + 8));
  const std::vector<std::string> replacement_keys =
      CurveKeysIn(ReadFileOrEmpty(absl::StrCat(cluster.dir(), "/", name, ".log")));
  ASSERT_EQ(replacement_keys.size(), 1u) << name;
  EXPECT_EQ(replacement_keys[0],
            *net::ReadPublicKeyFile(absl::StrCat(keys, "/draft.d/", name, ".pub")));
  EXPECT_NE(replacement_keys[0], *net::ReadPublicKeyFile(keys + "/draft.pub"));
  EXPECT_TRUE(load.WaitForMore(2)) << cluster.Output();
  load.Stop();  // (a load is bounded; the next phase gets its own)
  EXPECT_TRUE(load.failures().empty())
      << absl::StrJoin(load.failures(), "\n") << "\nserve:\n"
      << cluster.Output() << "\nworker and coordinator logs: " << cluster.dir();

  // Past the grace period the old key is refused; the new one is not.
  bool refused = false;
  for (int attempt = 0; attempt < 60 && !refused; ++attempt) {
    refused = !AnswersStatus(control, keys, *old_key);
    if (!refused) absl::SleepFor(absl::Seconds(1));
  }
  EXPECT_TRUE(refused) << "the old draft key still works after its grace period";
  EXPECT_TRUE(AnswersStatus(control, keys, *new_key));
  // And the cluster, now on the new keys only, still serves exactly.
  StreamingLoad after(cluster.http_port(), prompts, expected, kMaxTokens);
  after.Start(2);
  EXPECT_TRUE(after.WaitForMore(4)) << cluster.Output();
  after.Stop();
  EXPECT_TRUE(after.failures().empty())
      << absl::StrJoin(after.failures(), "\n") << "\nserve:\n"
      << cluster.Output() << "\nworker and coordinator logs: " << cluster.dir();
  if (replacement > 0) {
    ::kill(replacement, SIGTERM);
    AwaitGone(replacement);
  }
  cluster.serve().Signal(SIGTERM);
  EXPECT_EQ(cluster.WaitForExit(), 0) << cluster.Output();
}

}  // namespace
}  // namespace splitspec::testing

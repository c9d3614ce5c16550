// Run-time scaling across "hosts": each process runs in its own network
// namespace with its own 10.77.0.x address, joined by veth pairs to a bridge
// that lives in a switch namespace (the machine's own namespace is not
// touched). The coordinator, two draft workers, the two ranks of a
// tensor-parallel target group (--tp-size 2, Gloo across namespaces) and this
// test's client are all on different addresses. Under a steady greedy load a
// draft worker is added on a new host (`splitspec scale --draft +1` run there)
// and one of the old ones is drained (`splitspec scale --draft -1` run in the
// coordinator's namespace); every request must equal plain greedy decoding.
// Finally the idle group is drained: both ranks exit with status 0.
//
// Needs root and iproute2 (`ip`); skipped, with the reason, otherwise.
// Namespaces are named ssn-<pid>-<host>; they are removed at the end, and
// those of an earlier run whose process is gone are removed at the start.
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/scale_test_util.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::testing {
namespace {

constexpr char kIp[] = "/usr/sbin/ip";
constexpr char kPrefix[] = "ssn-";

// Runs `ip args...`; returns its exit code, output in *out.
int Ip(const std::vector<std::string>& args, const std::string& log, std::string* out = nullptr) {
  std::vector<std::string> argv = {kIp};
  argv.insert(argv.end(), args.begin(), args.end());
  absl::StatusOr<ChildProcess> process = ChildProcess::Spawn(argv, log);
  if (!process.ok()) return -1;
  absl::StatusOr<int> code = process->Wait(absl::Seconds(30));
  if (out != nullptr) *out = process->ReadLog();
  return code.ok() ? *code : -1;
}

// Kills every process in namespace `ns`, then removes it.
void RemoveNamespace(const std::string& ns, const std::string& log) {
  std::string pids;
  Ip({"netns", "pids", ns}, log, &pids);
  for (absl::string_view pid : absl::StrSplit(pids, '\n', absl::SkipWhitespace())) {
    int value = 0;
    if (absl::SimpleAtoi(pid, &value) && value > 1 && value != getpid()) ::kill(value, SIGKILL);
  }
  Ip({"netns", "del", ns}, log);
}

// The namespaces of one test run: a switch with a bridge, and one namespace
// per host with an address on it. Removed (processes killed) on destruction.
class NetnsHosts {
 public:
  explicit NetnsHosts(std::string dir)
      : dir_(std::move(dir)), tag_(absl::StrCat(kPrefix, getpid(), "-")) {}
  ~NetnsHosts() {
    for (auto it = made_.rbegin(); it != made_.rend(); ++it)
      RemoveNamespace(*it, dir_ + "/ip-cleanup.log");
  }

  // Removes namespaces of earlier runs whose test process no longer exists.
  void RemoveLeftovers() {
    std::string list;
    Ip({"netns", "list"}, dir_ + "/ip-list.log", &list);
    for (absl::string_view line : absl::StrSplit(list, '\n', absl::SkipWhitespace())) {
      const std::string name(line.substr(0, line.find(' ')));
      if (name.rfind(kPrefix, 0) != 0) continue;
      int pid = 0;
      const std::string rest = name.substr(std::string(kPrefix).size());
      if (!absl::SimpleAtoi(rest.substr(0, rest.find('-')), &pid) || pid == getpid()) continue;
      if (::kill(pid, 0) == 0) continue;  // a run in progress
      RemoveNamespace(name, dir_ + "/ip-leftovers.log");
    }
  }

  // Creates the switch; "" on success, else the failing command's output.
  std::string CreateSwitch() {
    return Run({{"netns", "add", Name("sw")},
                {"-n", Name("sw"), "link", "add", "br0", "type", "bridge"},
                {"-n", Name("sw"), "link", "set", "br0", "up"}},
               "sw");
  }

  // Adds host `host` at 10.77.0.<octet>; "" on success, else the output.
  std::string AddHost(const std::string& host, int octet) {
    const std::string ns = Name(host);
    const std::string port = absl::StrCat("v", octet);
    std::string error =
        Run({{"netns", "add", ns},
             {"-n", ns, "link", "set", "lo", "up"},
             {"-n", Name("sw"), "link", "add", port, "type", "veth", "peer", "name", "eth0",
              "netns", ns},
             {"-n", Name("sw"), "link", "set", port, "master", "br0", "up"},
             {"-n", ns, "addr", "add", absl::StrCat(Address(octet), "/24"), "dev", "eth0"},
             {"-n", ns, "link", "set", "eth0", "up"}},
            host);
    return error;
  }

  std::string Name(const std::string& host) const { return tag_ + host; }
  static std::string Address(int octet) { return absl::StrCat("10.77.0.", octet); }

  // `ip netns exec NS` as a command prefix.
  std::vector<std::string> Exec(const std::string& host) const {
    return {kIp, "netns", "exec", Name(host)};
  }

 private:
  std::string Run(const std::vector<std::vector<std::string>>& commands, const std::string& host) {
    for (const std::vector<std::string>& args : commands) {
      std::string out;
      const int code = Ip(args, absl::StrCat(dir_, "/ip-", host, ".log"), &out);
      if (args[0] == "netns" && args[1] == "add" && code == 0) made_.push_back(args[2]);
      if (code != 0)
        return absl::StrCat("ip ", absl::StrJoin(args, " "), " failed (", code, "): ", out);
    }
    return "";
  }

  std::string dir_;
  std::string tag_;
  std::vector<std::string> made_;
};

// Moves the calling thread (and the threads it starts later, ZeroMQ's I/O
// threads among them) into namespace `ns`; restores the original on destruction.
class EnterNamespace {
 public:
  explicit EnterNamespace(const std::string& ns)
      : original_(::open("/proc/self/ns/net", O_RDONLY)) {
    const int fd = ::open(absl::StrCat("/var/run/netns/", ns).c_str(), O_RDONLY);
    ok_ = fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) ::close(fd);
  }
  ~EnterNamespace() {
    if (original_ >= 0) {
      (void)::setns(original_, CLONE_NEWNET);
      ::close(original_);
    }
  }
  bool ok() const { return ok_; }

 private:
  int original_;
  bool ok_ = false;
};

const proto::MemberStatus* Find(const proto::StatusReply& s, const std::string& name) {
  for (const proto::MemberStatus& m : s.members()) {
    if (m.worker_name() == name) return &m;
  }
  return nullptr;
}

bool Alive(const proto::StatusReply& s, const std::string& name) {
  const proto::MemberStatus* m = Find(s, name);
  return m != nullptr && m->state() == proto::MEMBER_STATE_ALIVE;
}

TEST(NetnsScaleTest, DraftPoolScalesAcrossHostsUnderLoadWithATensorParallelTarget) {
  if (geteuid() != 0)
    GTEST_SKIP() << "needs root (network namespaces, veth, bridge); CI runs it as root";
  if (::access(kIp, X_OK) != 0) GTEST_SKIP() << kIp << " not found (iproute2)";
  const std::string dir = MakeTempDir(absl::StrCat("splitspec-netns-", getpid()));
  ASSERT_FALSE(dir.empty());
  NetnsHosts hosts(dir);
  hosts.RemoveLeftovers();
  if (std::string error = hosts.CreateSwitch(); !error.empty()) {
    GTEST_SKIP() << "cannot create network namespaces here: " << error;
  }
  const std::vector<std::pair<std::string, int>> layout = {
      {"coord", 1}, {"draft-a", 2}, {"draft-b", 3}, {"tgt0", 4},
      {"tgt1", 5},  {"draft-c", 6}, {"client", 10}};
  for (const auto& [host, octet] : layout) ASSERT_EQ(hosts.AddHost(host, octet), "");

  // A tiny model whose 2 KV heads split over TP=2.
  const std::string model_path = dir + "/tiny.gguf";
  model::TinyModelOptions tiny;
  tiny.weight_type = kernels::GgmlType::kQ8_0;
  ASSERT_EQ(tiny.n_kv_heads % 2, 0);
  ASSERT_TRUE(model::WriteTinyModel(tiny, model_path).ok());

  // This test is the client host: everything below talks over the bridge.
  EnterNamespace client_host(hosts.Name("client"));
  ASSERT_TRUE(client_host.ok()) << "setns into " << hosts.Name("client");
  const std::string endpoint = absl::StrCat("tcp://", NetnsHosts::Address(1), ":5555");
  auto spawn = [&](const std::string& host, std::vector<std::string> argv,
                   const std::string& name) {
    std::vector<std::string> full = hosts.Exec(host);
    full.insert(full.end(), argv.begin(), argv.end());
    auto process = ChildProcess::Spawn(full, absl::StrCat(dir, "/", name, ".log"));
    EXPECT_TRUE(process.ok()) << process.status();
    return std::move(process).value();
  };
  ChildProcess coordinator =
      spawn("coord",
            {BinaryPath("splitspec-coordinator"), "--control", endpoint, "--heartbeat-ms", "100"},
            "coordinator");
  std::vector<ChildProcess> ranks;
  for (int rank = 0; rank < 2; ++rank) {
    ranks.push_back(
        spawn(absl::StrCat("tgt", rank),
              {BinaryPath("splitspec-target-worker"), "--coordinator", endpoint, "--name",
               absl::StrCat("g0-rank-", rank), "--model", model_path, "--threads", "1",
               "--tp-group", "g0", "--tp-rank", std::to_string(rank), "--tp-size", "2",
               "--data-endpoint", absl::StrCat("tcp://", NetnsHosts::Address(4 + rank), ":5600")},
              absl::StrCat("g0-rank-", rank)));
  }
  std::vector<ChildProcess> drafts;
  for (const std::string host : {"draft-a", "draft-b"}) {
    drafts.push_back(spawn(host,
                           {BinaryPath("splitspec-draft-worker"), "--coordinator", endpoint,
                            "--name", host, "--threads", "1", "--drafter", "model", "--draft",
                            model_path, "--target-model", model_path},
                           host));
  }
  auto logs = [&] {
    std::string all = "coordinator:\n" + coordinator.ReadLog();
    for (const ChildProcess& p : ranks) all += "\n" + p.log_path() + ":\n" + p.ReadLog();
    for (const ChildProcess& p : drafts) all += "\n" + p.log_path() + ":\n" + p.ReadLog();
    return all;
  };
  proto::StatusReply status;
  ASSERT_TRUE(PollStatusUntil(
      endpoint,
      [](const proto::StatusReply& s) {
        return Alive(s, "g0-rank-0") && Alive(s, "g0-rank-1") && Alive(s, "draft-a") &&
               Alive(s, "draft-b");
      },
      600, absl::Milliseconds(100), &status))
      << status.DebugString() << logs();
  const uint64_t draft_a = Find(status, "draft-a")->worker_id();
  EXPECT_NE(Find(status, "g0-rank-0")->data_endpoint().find(NetnsHosts::Address(4)),
            std::string::npos);

  auto reference = model::Transformer::Load(model_path, {.threads = 1});
  ASSERT_TRUE(reference.ok());
  const std::vector<std::vector<int32_t>> prompts = {
      {10, 20, 30, 10, 20, 30}, {7}, {200, 5, 200, 5, 200}, {1, 2, 3}};
  std::atomic<bool> stop{false};
  std::atomic<int> phase{0};
  std::vector<ScaleRun> runs;
  std::vector<pid_t> detached;
  std::thread scaler([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
    // A new host joins the draft pool, then draft-a is drained from the coordinator's host.
    runs.push_back(
        RunScale(hosts.Exec("draft-c"),
                 {"--coordinator", endpoint, "--draft", "+1", "--draft-model", model_path,
                  "--model", model_path, "--log-dir", dir, "--wait-s", "120"},
                 dir + "/scale-up.log"));
    for (int64_t pid : runs.back().Values("started", "pid"))
      detached.push_back(static_cast<pid_t>(pid));
    phase = 1;
    if (runs.back().exit_code == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      runs.push_back(RunScale(hosts.Exec("coord"),
                              {"--coordinator", endpoint, "--draft", "-1", "--worker-ids",
                               std::to_string(draft_a), "--wait-s", "120"},
                              dir + "/scale-down.log"));
      phase = 2;
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
    }
    stop = true;
  });
  LoadOptions load;
  load.in_flight = 8;
  load.max_tokens = 32;
  LoadOutcome outcome = RunGreedyLoad(endpoint, **reference, prompts, load, stop, phase);
  scaler.join();
  for (const ScaleRun& run : runs)
    std::printf("--- splitspec scale (exit %d):\n%s", run.exit_code, run.output.c_str());
  std::printf(
      "requests: %d submitted, %d finished equal to plain greedy (%d tokens each), %zu failures\n",
      outcome.submitted, outcome.finished_ok, load.max_tokens, outcome.failures.size());

  ASSERT_EQ(runs.size(), 2u) << runs.back().output << logs();
  for (const ScaleRun& run : runs) EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_EQ(runs[0].Values("registered", "worker_id").size(), 1u) << runs[0].output;
  EXPECT_EQ(runs[1].Values("left", "worker_id"),
            std::vector<int64_t>{static_cast<int64_t>(draft_a)})
      << runs[1].output;
  EXPECT_EQ(runs[1].Values("pools", "draft_workers"), std::vector<int64_t>{2});
  EXPECT_TRUE(outcome.failures.empty()) << absl::StrJoin(outcome.failures, "\n") << "\n" << logs();
  EXPECT_EQ(outcome.finished_ok, outcome.submitted);
  EXPECT_GE(outcome.submitted, 16);
  auto draft_exit = drafts[0].Wait(absl::Seconds(30));
  ASSERT_TRUE(draft_exit.ok()) << drafts[0].ReadLog();
  EXPECT_EQ(*draft_exit, 0) << drafts[0].ReadLog();
  EXPECT_NE(drafts[0].ReadLog().find("drained"), std::string::npos) << drafts[0].ReadLog();

  // The idle group may go (forced: it is the last one); its leader is drained
  // and disbands the follower.
  ScaleRun group_down =
      RunScale(hosts.Exec("coord"),
               {"--coordinator", endpoint, "--target-groups", "-1", "--wait-s", "120", "--force"},
               dir + "/scale-group-down.log");
  std::printf("--- splitspec scale (exit %d):\n%s", group_down.exit_code,
              group_down.output.c_str());
  EXPECT_EQ(group_down.exit_code, 0) << group_down.output << logs();
  EXPECT_EQ(group_down.Values("left", "worker_id").size(), 2u) << group_down.output;
  for (ChildProcess& rank : ranks) {
    auto exit = rank.Wait(absl::Seconds(60));
    ASSERT_TRUE(exit.ok()) << rank.ReadLog();
    EXPECT_EQ(*exit, 0) << rank.ReadLog();
  }
  StopDetached(detached);
}

}  // namespace
}  // namespace splitspec::testing

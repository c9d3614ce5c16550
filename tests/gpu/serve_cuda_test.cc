// `splitspec serve` on one GPU (issue 19, item 7): a config with devices = ["cuda:0"]
// for the target group and for a model-drafter pool puts the target and the draft worker,
// separate processes, on cuda:0 (each started with --device cuda:0 and
// CUDA_VISIBLE_DEVICES=0). Completions requested over HTTP equal plain greedy decoding of
// the same model on the GPU, and a target worker killed with SIGKILL under load loses no
// request (serve restarts it; every stream finishes exactly) -- the GPU twins of
// tests/integration/serve_supervision_test.cc. Skips without a device or without the
// service binaries.
//
// Waits are bounded by attempt counts on conditions, never timed assertions.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/model/transformer.h"
#include "runtime/net/channel_security.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/http_stream_load.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::testing {
namespace {

constexpr int kMaxTokens = 40;
constexpr model::DeviceSpec kCuda0{model::DeviceSpec::Kind::kCuda, 0};

// The NUL-separated fields of /proc/PID/FILE (cmdline, environ).
std::vector<std::string> ProcFields(uint32_t pid, const std::string& file) {
  std::vector<std::string> fields;
  const std::string text = ReadFileOrEmpty(absl::StrCat("/proc/", pid, "/", file));
  size_t start = 0;
  for (size_t at = text.find('\0'); at != std::string::npos; at = text.find('\0', start)) {
    fields.push_back(text.substr(start, at - start));
    start = at + 1;
  }
  return fields;
}

// Whether process `pid` was started on the GPU the way serve promises for "cuda:0".
void ExpectOnCuda0(uint32_t pid, const std::string& name) {
  const std::vector<std::string> argv = ProcFields(pid, "cmdline");
  bool device_flag = false;
  for (size_t i = 0; i + 1 < argv.size(); ++i) device_flag |= argv[i] == "--device" &&
                                                              argv[i + 1] == "cuda:0";
  EXPECT_TRUE(device_flag) << name << " argv: " << absl::StrJoin(argv, " ");
  const std::vector<std::string> env = ProcFields(pid, "environ");
  EXPECT_NE(std::find(env.begin(), env.end(), "CUDA_VISIBLE_DEVICES=0"), env.end()) << name;
}

// `splitspec serve` of one target group and one model-drafter pool, both on cuda:0, on
// the tiny chat model (its own draft), on free loopback ports.
class GpuServeCluster {
 public:
  void Start(const std::string& name) {
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
                          << "draft = \"" << model_path_ << "\"\n"
                          << "[[target_group]]\nname = \"target\"\nthreads = 1\n"
                          << "devices = [\"cuda:0\"]\n"
                          << "[[draft_pool]]\nname = \"draft\"\ncount = 1\ndrafter = \"model\"\n"
                          << "threads = 1\ndevices = [\"cuda:0\"]\n";
    auto serve = ChildProcess::Spawn({BinaryPath("splitspec"), "serve", "--config", config,
                                      "--heartbeat-ms", "100", "--queue-timeout-ms", "300000"},
                                     dir_ + "/serve.out");
    ASSERT_TRUE(serve.ok()) << serve.status();
    serve_.emplace(*std::move(serve));
    for (int attempt = 0; attempt < 1200 && !absl::StrContains(Output(), "cluster ready");
         ++attempt)
      absl::SleepFor(absl::Milliseconds(100));
    ASSERT_TRUE(absl::StrContains(Output(), "cluster ready")) << Output();
    absl::StatusOr<net::ChannelSecurity> admin =
        net::LoadChannelSecurity(dir_ + "/keys", net::kAdmin);
    ASSERT_TRUE(admin.ok()) << admin.status();
    net::SetDefaultChannelSecurity(*admin);
  }

  ~GpuServeCluster() {
    if (serve_.has_value() && serve_->running()) serve_->Kill(SIGTERM);
  }

  std::string Output() const { return ReadFileOrEmpty(dir_ + "/serve.out"); }
  ChildProcess& serve() { return *serve_; }
  const std::string& model_path() const { return model_path_; }
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

const std::vector<std::vector<int32_t>>& Prompts() {
  static const auto* prompts = new std::vector<std::vector<int32_t>>{
      {10, 20, 30, 10, 20, 30}, {7, 8}, {200, 5, 200, 5, 200}, {1, 2, 3, 4}, {99, 98, 97}};
  return *prompts;
}

class ServeCudaTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    for (const char* binary : {"splitspec", "splitspec-coordinator", "splitspec-target-worker",
                               "splitspec-draft-worker"}) {
      if (::access(BinaryPath(binary).c_str(), X_OK) != 0)
        GTEST_SKIP() << BinaryPath(binary) << " is not built";
    }
  }
};

TEST_F(ServeCudaTest, RequestsOverHttpEqualPlainGreedyWithDraftAndTargetOnOneGpu) {
  GpuServeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start("serve-cuda"));
  for (const std::string name : {"target", "draft-0"}) {
    const std::set<uint32_t> pids = cluster.LivePids(name);
    ASSERT_EQ(pids.size(), 1u) << name << "\n" << cluster.Output();
    ExpectOnCuda0(*pids.begin(), name);
  }
  const std::vector<std::string> expected = PlainGreedyTexts(cluster.model_path(), Prompts(), kMaxTokens, kCuda0);
  ASSERT_EQ(expected.size(), Prompts().size());
  for (size_t p = 0; p < Prompts().size(); ++p) {
    const StreamOutcome outcome = StreamCompletion(cluster.http_port(), Prompts()[p], kMaxTokens);
    ASSERT_TRUE(outcome.completed) << "prompt " << p << ": " << outcome.failure << "\n"
                                   << cluster.Output();
    EXPECT_EQ(outcome.text, expected[p]) << "prompt " << p;
  }
  // Concurrent clients: batched verification on the GPU changes nothing either.
  StreamingLoad load(cluster.http_port(), Prompts(), expected, kMaxTokens);
  load.Start(3);
  EXPECT_TRUE(load.WaitForMore(10)) << cluster.Output();
  load.Stop();
  EXPECT_TRUE(load.failures().empty()) << absl::StrJoin(load.failures(), "\n");
  cluster.serve().Signal(SIGTERM);
  EXPECT_EQ(cluster.WaitForExit(), 0) << cluster.Output();
}

TEST_F(ServeCudaTest, AKilledGpuTargetWorkerLosesNoRequest) {
  GpuServeCluster cluster;
  ASSERT_NO_FATAL_FAILURE(cluster.Start("serve-cuda-kill"));
  const std::vector<std::string> expected = PlainGreedyTexts(cluster.model_path(), Prompts(), kMaxTokens, kCuda0);
  ASSERT_EQ(expected.size(), Prompts().size());
  StreamingLoad load(cluster.http_port(), Prompts(), expected, kMaxTokens);
  load.Start(3);
  ASSERT_TRUE(load.WaitForMore(3)) << cluster.Output();

  const std::set<uint32_t> before = cluster.LivePids("target");
  ASSERT_EQ(before.size(), 1u) << cluster.Output();
  const uint32_t killed = *before.begin();
  ExpectOnCuda0(killed, "target");
  ASSERT_EQ(::kill(static_cast<pid_t>(killed), SIGKILL), 0);
  std::set<uint32_t> after;
  for (int attempt = 0; attempt < 1200 && after.empty(); ++attempt) {
    after = cluster.LivePids("target");
    after.erase(killed);
    if (after.empty()) absl::SleepFor(absl::Milliseconds(100));
  }
  ASSERT_EQ(after.size(), 1u) << "the target did not come back:\n" << cluster.Output();
  ExpectOnCuda0(*after.begin(), "restarted target");
  EXPECT_TRUE(load.WaitForMore(3)) << cluster.Output();
  load.Stop();

  const std::string output = cluster.Output();
  EXPECT_TRUE(absl::StrContains(
      output, absl::StrCat("==> target (pid ", killed, ") was killed by signal 9")))
      << output;
  EXPECT_TRUE(absl::StrContains(output, "==> target restarted (pid ")) << output;
  // Every stream, including those in flight when the target died, finished exactly.
  EXPECT_TRUE(load.failures().empty()) << absl::StrJoin(load.failures(), "\n") << "\n" << output;
  EXPECT_GE(load.exact(), 6);
  cluster.serve().Signal(SIGTERM);
  EXPECT_EQ(cluster.WaitForExit(), 0) << cluster.Output();
}

}  // namespace
}  // namespace splitspec::testing

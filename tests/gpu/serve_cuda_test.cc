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
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/model/transformer.h"
#include "runtime/net/channel_security.h"
#include "runtime/tokenizer/detokenizer.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/plain_greedy.h"
#include "tests/testing/http_test_client.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::testing {
namespace {

using coordinator::http::TestHttpConnection;
using coordinator::http::TestHttpResponse;

constexpr int kMaxTokens = 40;
constexpr model::DeviceSpec kCuda0{model::DeviceSpec::Kind::kCuda, 0};

int FreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

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
    control_ = absl::StrCat("tcp://127.0.0.1:", FreePort());
    http_port_ = FreePort();
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

struct StreamOutcome {
  bool completed = false;  // HTTP 200, a finish_reason, [DONE], no error event
  std::string text = {};
  std::string failure = {};
};

// One streamed greedy completion of `prompt` over HTTP.
StreamOutcome StreamCompletion(int port, const std::vector<int32_t>& prompt) {
  StreamOutcome outcome;
  auto connection = TestHttpConnection::Connect(port);
  if (!connection.ok()) return {.failure = std::string(connection.status().message())};
  const std::string body =
      absl::StrCat(R"({"prompt":[)", absl::StrJoin(prompt, ","), R"(],"max_tokens":)", kMaxTokens,
                   R"(,"temperature":0,"stream":true})");
  absl::Status sent = (*connection)
                          ->Send(absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: ",
                                              body.size(), "\r\n\r\n", body));
  if (!sent.ok()) return {.failure = std::string(sent.message())};
  absl::StatusOr<TestHttpResponse> response = (*connection)->ReadResponse();
  if (!response.ok()) return {.failure = absl::StrCat("cut: ", response.status().message())};
  if (response->status != 200)
    return {.failure = absl::StrCat("HTTP ", response->status, ": ", response->body)};
  const std::vector<std::string> events = coordinator::http::SseData(response->body);
  bool finished = false;
  for (const std::string& event : events) {
    if (event == "[DONE]") continue;
    google::protobuf::Value value;
    if (!google::protobuf::util::JsonStringToMessage(event, &value).ok())
      return {.failure = absl::StrCat("not JSON: ", event)};
    const auto& fields = value.struct_value().fields();
    if (fields.contains("error")) return {.failure = absl::StrCat("error event: ", event)};
    const auto& choice = fields.at("choices").list_value().values(0).struct_value().fields();
    outcome.text += choice.at("text").string_value();
    finished |= choice.at("finish_reason").has_string_value();
  }
  if (events.empty() || events.back() != "[DONE]" || !finished)
    return {.failure = absl::StrCat("stream ended without a finish and [DONE]: ", response->body)};
  outcome.completed = true;
  return outcome;
}

// Plain greedy decoding of each prompt by the same model loaded on cuda:0 in this
// process, cut at the first end-of-generation token, decoded as the front door streams it.
std::vector<std::string> ExpectedTexts(const std::string& model_path,
                                       const std::vector<std::vector<int32_t>>& prompts) {
  std::vector<std::string> texts;
  auto reference = model::Transformer::Load(model_path, {.threads = 1, .device = kCuda0});
  EXPECT_TRUE(reference.ok()) << reference.status();
  if (!reference.ok()) return texts;
  auto tokenizer = model::LoadTokenizerFromGguf((*reference)->file());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (!tokenizer.ok()) return texts;
  for (const std::vector<int32_t>& prompt : prompts) {
    model::StreamingDetokenizer detokenizer(&*tokenizer);
    std::string text;
    for (int32_t token : PlainGreedy(**reference, prompt, kMaxTokens)) {
      if (tokenizer->IsEndOfGeneration(token)) break;
      text += *detokenizer.Push(token);
    }
    texts.push_back(text + detokenizer.Finish());
  }
  return texts;
}

// Clients streaming completions, one after another, until stopped.
class Load {
 public:
  Load(int port, std::vector<std::vector<int32_t>> prompts, std::vector<std::string> expected)
      : port_(port), prompts_(std::move(prompts)), expected_(std::move(expected)) {}
  ~Load() { Stop(); }

  void Start(int clients) {
    for (int c = 0; c < clients; ++c) {
      threads_.emplace_back([this, c] {
        for (int i = c; !stop_.load() && i < 10000; i += 7) {
          const size_t p = static_cast<size_t>(i) % prompts_.size();
          StreamOutcome outcome = StreamCompletion(port_, prompts_[p]);
          std::lock_guard<std::mutex> lock(mu_);
          if (outcome.completed && outcome.text == expected_[p]) {
            ++exact_;
          } else {
            failures_.push_back(absl::StrCat(
                "prompt ", p, ": ",
                outcome.completed
                    ? absl::StrCat("text '", outcome.text, "' != plain greedy '", expected_[p], "'")
                    : outcome.failure));
          }
        }
      });
    }
  }
  void Stop() {
    stop_.store(true);
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }
  int exact() {
    std::lock_guard<std::mutex> lock(mu_);
    return exact_;
  }
  std::vector<std::string> failures() {
    std::lock_guard<std::mutex> lock(mu_);
    return failures_;
  }
  // Waits (bounded) until `more` further streams finished exactly.
  bool WaitForMore(int more) {
    const int goal = exact() + more;
    for (int attempt = 0; attempt < 1200 && exact() < goal; ++attempt)
      absl::SleepFor(absl::Milliseconds(100));
    return exact() >= goal;
  }

 private:
  const int port_;
  const std::vector<std::vector<int32_t>> prompts_;
  const std::vector<std::string> expected_;
  std::atomic<bool> stop_{false};
  std::vector<std::thread> threads_;
  std::mutex mu_;
  int exact_ = 0;
  std::vector<std::string> failures_;
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
  const std::vector<std::string> expected = ExpectedTexts(cluster.model_path(), Prompts());
  ASSERT_EQ(expected.size(), Prompts().size());
  for (size_t p = 0; p < Prompts().size(); ++p) {
    const StreamOutcome outcome = StreamCompletion(cluster.http_port(), Prompts()[p]);
    ASSERT_TRUE(outcome.completed) << "prompt " << p << ": " << outcome.failure << "\n"
                                   << cluster.Output();
    EXPECT_EQ(outcome.text, expected[p]) << "prompt " << p;
  }
  // Concurrent clients: batched verification on the GPU changes nothing either.
  Load load(cluster.http_port(), Prompts(), expected);
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
  const std::vector<std::string> expected = ExpectedTexts(cluster.model_path(), Prompts());
  ASSERT_EQ(expected.size(), Prompts().size());
  Load load(cluster.http_port(), Prompts(), expected);
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

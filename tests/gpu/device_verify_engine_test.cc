// The target engine verifying on the GPU (TargetEngine::UseDeviceRows with the
// CUDA store, target_worker/device_rows.h) against the same engine verifying on
// the host, both over a CUDA model of a tiny generated GGUF: the same traffic
// (greedy, guided greedy with the CUDA guidance kernel, seeded rejection
// sampling, guided sampling; drafts that are partly right) must commit the same
// tokens. Both read the same logits bits (the CUDA forward is batch invariant),
// so greedy agrees token for token by construction; the sampled requests agree
// unless a uniform falls within the round-off of kernels/cuda/sampling.h (~1e-12
// per choice). Also: the device path moves no logits row to the host, and a
// store on a missing device is refused. The same holds for the leader of a TP=2
// group on one GPU (Gloo staged through the host): verifying on its device the
// gathered logits commits what verifying them on its host commits. Requests the
// CUDA verifier does not serve (penalties, logit_bias, a grammar, logprobs) take
// the host pipeline from rows copied off the device (device_rows.h), next to
// plain requests verified on it: they commit what the host engine commits, with
// the same logprobs, bit for bit (both run the host pipeline over the same logits).
// Skips without a device. Written without a GPU; tools/gpu/device_session.sh runs it.
#include <unistd.h>

#include <atomic>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/base/status_macros.h"
#include "runtime/grammar/grammar_spec.h"
#include "runtime/net/spec_proto.h"
#include "runtime/dist/host_staged_communicator.h"
#include "runtime/model/transformer.h"
#include "target_worker/device_rows.h"
#include "target_worker/group_follower.h"
#include "target_worker/group_leader_model.h"
#include "target_worker/request_setup.h"
#include "target_worker/target_engine.h"
#include "tests/testing/gloo_group.h"
#include "tests/testing/tiny_model.h"
#include "tests/unit/target_worker/engine_driver.h"

namespace splitspec::target {
namespace {

constexpr model::DeviceSpec kCuda0{model::DeviceSpec::Kind::kCuda, 0};

std::string TinyPath(kernels::GgmlType type) {
  static std::map<kernels::GgmlType, std::string> paths;
  auto it = paths.find(type);
  if (it != paths.end()) return it->second;
  model::TinyModelOptions tiny;
  tiny.weight_type = type;
  const std::string path = ::testing::TempDir() + "/" + std::to_string(::getpid()) +
                           "-device-verify-" + std::to_string(static_cast<int>(type)) + ".gguf";
  EXPECT_TRUE(model::WriteTinyModel(tiny, path).ok());
  return paths[type] = path;
}

proto::Assignment Assign(const std::string& id, const std::vector<int32_t>& prompt, int max_tokens,
                         proto::VerifyMode mode, float scale, uint64_t draft_worker) {
  proto::Assignment a;
  a.set_request_id(id);
  a.mutable_committed_tokens()->Assign(prompt.begin(), prompt.end());
  a.set_prompt_length(static_cast<uint32_t>(prompt.size()));
  a.set_draft_worker_id(draft_worker);
  a.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  a.mutable_params()->set_temperature(mode == proto::VERIFY_MODE_REJECTION ? 0.9f : 0.0f);
  a.mutable_params()->set_seed(77 + prompt.size());
  if (mode == proto::VERIFY_MODE_REJECTION) a.mutable_params()->set_top_k(40);
  if (scale != 1.0f) {
    a.mutable_params()->set_guidance_scale(scale);
    a.mutable_params()->add_negative_prompt_tokens(1);
    a.mutable_params()->add_negative_prompt_tokens(44);
  }
  a.set_verify_mode(mode);
  return a;
}

std::vector<proto::Assignment> Traffic(uint64_t draft_worker) {
  return {
      Assign("greedy", {3, 1, 4, 1, 5, 9, 2, 6}, 24, proto::VERIFY_MODE_GREEDY, 1.0f, draft_worker),
      Assign("guided", {7, 7, 100, 12}, 20, proto::VERIFY_MODE_GREEDY, 1.8f, draft_worker),
      Assign("sampled", {42, 17}, 20, proto::VERIFY_MODE_REJECTION, 1.0f, draft_worker),
      Assign("guided-sampled", {5, 6, 7}, 16, proto::VERIFY_MODE_REJECTION, 0.6f, draft_worker)};
}

TargetEngineOptions Options() {
  TargetEngineOptions options;
  options.step_token_budget = 24;
  options.prefill_chunk = 4;
  options.max_requests = 8;
  options.block_wait = absl::Hours(1);
  options.feed_wait = absl::ZeroDuration();
  return options;
}

class DeviceVerifyEngineTest : public ::testing::TestWithParam<kernels::GgmlType> {
 protected:
  void SetUp() override {
    if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  }
  std::unique_ptr<model::Transformer> Load() {
    auto loaded = model::Transformer::Load(TinyPath(GetParam()), {.threads = 1, .device = kCuda0});
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    return loaded.ok() ? *std::move(loaded) : nullptr;
  }
};

TEST_P(DeviceVerifyEngineTest, CommitsWhatHostVerificationCommitsOnTheSameCudaLogits) {
  std::unique_ptr<model::Transformer> host_model = Load();
  std::unique_ptr<model::Transformer> device_model = Load();
  ASSERT_NE(host_model, nullptr);
  ASSERT_NE(device_model, nullptr);
  const int vocab = host_model->config().vocab_size;
  // The oracle: what the host-verifying engine commits alone (no draft worker).
  std::map<std::string, std::vector<int32_t>> oracles;
  for (const proto::Assignment& a : Traffic(0)) {
    oracles[a.request_id()].assign(a.committed_tokens().begin(), a.committed_tokens().end());
  }
  TargetEngine alone(host_model.get(), Options());
  oracles = testing::DriveEngine(alone, Traffic(0), oracles, vocab);

  TargetEngine host(host_model.get(), Options());
  const auto want = testing::DriveEngine(host, Traffic(7), oracles, vocab);
  EXPECT_EQ(want.at("greedy"), oracles.at("greedy")) << "greedy speculation must be lossless";
  EXPECT_EQ(want.at("guided"), oracles.at("guided"));

  TargetEngine device(device_model.get(), Options());
  auto rows = NewCudaDeviceRows(0, vocab, Options().max_requests);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_TRUE(device.UseDeviceRows(*std::move(rows)).ok());
  EXPECT_EQ(device_model->logits_device(), 0);
  const auto got = testing::DriveEngine(device, Traffic(7), oracles, vocab);
  EXPECT_EQ(got, want);
  EXPECT_GT(device.counters().steps, 10u);
  EXPECT_GT(device.counters().companion_forward_tokens, 0u);
}

// Plain requests and requests only the host pipeline serves, mixed in one engine.
std::vector<proto::Assignment> MixedTraffic(uint64_t draft_worker) {
  std::vector<proto::Assignment> traffic = {
      Assign("greedy", {3, 1, 4, 1, 5, 9, 2, 6}, 20, proto::VERIFY_MODE_GREEDY, 1.0f, draft_worker),
      Assign("sampled", {42, 17}, 16, proto::VERIFY_MODE_REJECTION, 1.0f, draft_worker)};
  proto::Assignment penalized =
      Assign("penalized", {3, 1, 4, 1, 5}, 20, proto::VERIFY_MODE_GREEDY, 1.0f, draft_worker);
  penalized.mutable_params()->mutable_processors()->set_frequency_penalty(1.5f);
  penalized.mutable_params()->mutable_processors()->set_repetition_penalty(1.3f);
  traffic.push_back(penalized);
  proto::Assignment biased =
      Assign("biased-sampled", {42, 17}, 16, proto::VERIFY_MODE_REJECTION, 1.0f, draft_worker);
  (*biased.mutable_params()->mutable_processors()->mutable_logit_bias())[100] = 3.0f;
  biased.mutable_params()->mutable_processors()->set_presence_penalty(0.5f);
  traffic.push_back(biased);
  proto::Assignment choice =
      Assign("choice", {7, 7, 100}, 12, proto::VERIFY_MODE_GREEDY, 1.0f, draft_worker);
  choice.mutable_params()->add_stop_token_ids(0);  // the tiny tokenizer's end of text
  net::GrammarToProto(grammar::GrammarSpec::Choice({"yes", "no", "maybe not"}),
                      choice.mutable_params()->mutable_processors()->mutable_grammar());
  traffic.push_back(choice);
  proto::Assignment logprobs =
      Assign("logprobs", {5, 6, 7}, 16, proto::VERIFY_MODE_GREEDY, 1.0f, draft_worker);
  logprobs.mutable_params()->set_logprobs(5);
  traffic.push_back(logprobs);
  proto::Assignment guided_logprobs =
      Assign("guided-sampled-logprobs", {8, 9}, 12, proto::VERIFY_MODE_REJECTION, 1.4f,
             draft_worker);
  guided_logprobs.mutable_params()->set_logprobs(2);
  traffic.push_back(guided_logprobs);
  return traffic;
}

TEST_P(DeviceVerifyEngineTest, HostPipelineRequestsCommitWhatTheHostEngineCommits) {
  std::unique_ptr<model::Transformer> host_model = Load();
  std::unique_ptr<model::Transformer> device_model = Load();
  ASSERT_NE(host_model, nullptr);
  ASSERT_NE(device_model, nullptr);
  const int vocab = host_model->config().vocab_size;
  TargetEngineOptions options = Options();
  auto compiler = GrammarCompilerForModel(TinyPath(GetParam()), vocab);
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  options.grammar_compiler = *std::move(compiler);
  std::map<std::string, std::vector<int32_t>> oracles;
  for (const proto::Assignment& a : MixedTraffic(0)) {
    oracles[a.request_id()].assign(a.committed_tokens().begin(), a.committed_tokens().end());
  }
  TargetEngine alone(host_model.get(), options);
  oracles = testing::DriveEngine(alone, MixedTraffic(0), oracles, vocab);

  TargetEngine host(host_model.get(), options);
  std::map<std::string, proto::VerifyResult> want_finals;
  const auto want =
      testing::DriveEngine(host, MixedTraffic(7), oracles, vocab, 2000, &want_finals);
  for (const char* id : {"greedy", "penalized", "choice", "logprobs"}) {
    EXPECT_EQ(want.at(id), oracles.at(id)) << id << ": greedy speculation must be lossless";
  }

  TargetEngine device(device_model.get(), options);
  auto rows = NewCudaDeviceRows(0, vocab, options.max_requests);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_TRUE(device.UseDeviceRows(*std::move(rows)).ok());
  std::map<std::string, proto::VerifyResult> got_finals;
  const auto got =
      testing::DriveEngine(device, MixedTraffic(7), oracles, vocab, 2000, &got_finals);
  EXPECT_EQ(got, want);
  EXPECT_GT(device.counters().host_rows_copied, 0u);
  for (const char* id : {"logprobs", "guided-sampled-logprobs"}) {
    const proto::VerifyResult& w = want_finals.at(id);
    const proto::VerifyResult& g = got_finals.at(id);
    ASSERT_GT(w.logprobs_size(), 0) << id;
    ASSERT_EQ(g.logprobs_size(), w.logprobs_size()) << id;
    for (int i = 0; i < w.logprobs_size(); ++i) {
      EXPECT_EQ(g.logprobs(i).SerializeAsString(), w.logprobs(i).SerializeAsString())
          << id << " token " << i << ": " << g.logprobs(i).ShortDebugString() << " vs "
          << w.logprobs(i).ShortDebugString();
    }
  }
}

// The forward of a model told to keep its logits leaves them on the device:
// nothing vocabulary-sized comes to the host.
TEST_P(DeviceVerifyEngineTest, AModelKeepingItsLogitsLeavesNoneOnTheHost) {
  std::unique_ptr<model::Transformer> m = Load();
  ASSERT_NE(m, nullptr);
  ASSERT_TRUE(m->KeepLogitsOnDevice(true).ok());
  auto cache = m->NewCache(64);
  const std::vector<int32_t> prompt = {3, 1, 4};
  model::ForwardOutput out;
  ASSERT_TRUE(m->Forward({{cache.get(), prompt, model::LogitsMode::kAll}}, &out).ok());
  EXPECT_TRUE(out.logits.empty());
  EXPECT_NE(out.device_logits, nullptr);
  EXPECT_EQ(out.num_rows, std::vector<int>{3});
}

// A TP=2 group's leader (ranks as threads on cuda:0, Gloo staged through the
// host; NCCL needs a GPU per rank): the engine verifying on the leader's device,
// from the gathered logits kept there in one block per rank, commits what the
// engine verifying the same logits on the host commits.
TEST_P(DeviceVerifyEngineTest, AGroupLeaderVerifyingOnItsDeviceCommitsWhatItsHostCommits) {
  std::map<std::string, std::vector<int32_t>> oracles, want, got;
  int logits_device = -1;
  net::GlooGroupOptions ranks;
  ranks.size = 2;
  const std::vector<absl::Status> results =
      net::RunGlooRanksAsThreads(ranks, [&](net::Communicator& gloo) -> absl::Status {
        net::HostStagedCommunicator staged(&gloo, 0);
        ASSIGN_OR_RETURN(auto model, model::Transformer::Load(TinyPath(GetParam()), &staged,
                                                              {.threads = 1, .device = kCuda0}));
        if (gloo.rank() != 0) {
          std::atomic<bool> stop{false};
          return RunGroupFollower(*model, gloo, stop).status();
        }
        GroupLeaderModel leader(model.get(), &gloo);
        const int vocab = leader.config().vocab_size;
        for (const proto::Assignment& a : Traffic(0)) {
          oracles[a.request_id()].assign(a.committed_tokens().begin(), a.committed_tokens().end());
        }
        {
          TargetEngine alone(&leader, Options());
          oracles = testing::DriveEngine(alone, Traffic(0), oracles, vocab);
          TargetEngine host(&leader, Options());
          want = testing::DriveEngine(host, Traffic(7), oracles, vocab);
          TargetEngine device(&leader, Options());
          ASSIGN_OR_RETURN(std::unique_ptr<DeviceRows> rows,
                           NewCudaDeviceRows(0, vocab, Options().max_requests));
          RETURN_IF_ERROR(device.UseDeviceRows(std::move(rows)));
          logits_device = leader.logits_device();
          got = testing::DriveEngine(device, Traffic(7), oracles, vocab);
        }
        leader.Leave(/*disband=*/true);
        return leader.status();
      });
  for (int r = 0; r < 2; ++r) ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r];
  EXPECT_EQ(logits_device, 0);
  EXPECT_EQ(want.at("greedy"), oracles.at("greedy")) << "greedy speculation must be lossless";
  EXPECT_EQ(got, want);
}

INSTANTIATE_TEST_SUITE_P(FloatAndQuantized, DeviceVerifyEngineTest,
                         ::testing::Values(kernels::GgmlType::kF32, kernels::GgmlType::kQ4_1),
                         [](const ::testing::TestParamInfo<kernels::GgmlType>& info) {
                           return info.param == kernels::GgmlType::kF32 ? "F32" : "Q4_1";
                         });

TEST(DeviceRowsTest, AStoreOnAMissingDeviceIsRefusedNamingIt) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  auto rows = NewCudaDeviceRows(64, 1000, 4);
  ASSERT_FALSE(rows.ok());
  EXPECT_EQ(rows.status().code(), absl::StatusCode::kFailedPrecondition) << rows.status();
  EXPECT_NE(rows.status().message().find("cuda:64"), std::string::npos) << rows.status();
}

TEST(DeviceRowsTest, AHostModelCannotKeepItsLogitsOnADevice) {
  model::TinyModelOptions tiny;
  const std::string path = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-host.gguf";
  ASSERT_TRUE(model::WriteTinyModel(tiny, path).ok());
  auto m = model::Transformer::Load(path, {.threads = 1});
  ASSERT_TRUE(m.ok()) << m.status();
  const absl::Status status = (*m)->KeepLogitsOnDevice(true);
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition) << status;
  EXPECT_NE(status.message().find("runs on cpu"), std::string::npos) << status;
  EXPECT_EQ((*m)->logits_device(), -1);
}

}  // namespace
}  // namespace splitspec::target

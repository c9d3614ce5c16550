// The one-rank target of a worker on a GPU (target_worker/single_rank_model.h):
// in a build with NCCL it joins a one-rank NCCL group, and its logits, and what
// the target engine commits with it (verifying on the device, CUDA graphs on),
// are bitwise / token for token those of the same model with no group. On the
// CPU it has no group. Skips the device parts without a GPU. Written without a
// GPU; tools/gpu/device_session.sh runs it.
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"
#include "target_worker/device_rows.h"
#include "target_worker/single_rank_model.h"
#include "target_worker/target_engine.h"
#include "tests/testing/tiny_model.h"
#include "tests/unit/target_worker/engine_driver.h"

namespace splitspec::target {
namespace {

constexpr model::DeviceSpec kCuda0{model::DeviceSpec::Kind::kCuda, 0};

std::string TinyPath() {
  static const std::string path = [] {
    model::TinyModelOptions tiny;
    tiny.weight_type = kernels::GgmlType::kQ4_0;
    const std::string p =
        ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-single-rank.gguf";
    EXPECT_TRUE(model::WriteTinyModel(tiny, p).ok());
    return p;
  }();
  return path;
}

std::vector<float> PromptLogits(model::Transformer& m, const std::vector<int32_t>& prompt) {
  auto cache = m.NewCache(64);
  model::ForwardOutput out;
  EXPECT_TRUE(m.Forward({{cache.get(), prompt, model::LogitsMode::kAll}}, &out).ok());
  return out.logits;
}

TEST(SingleRankModelTest, OnTheCpuThereIsNoGroup) {
  auto loaded = LoadSingleRankModel(TinyPath(), {.threads = 1});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->group, nullptr);
}

TEST(SingleRankModelTest, OnAGpuItJoinsAOneRankNcclGroupAndChangesNoBit) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  auto loaded = LoadSingleRankModel(TinyPath(), {.threads = 1, .device = kCuda0});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
#if defined(SPLITSPEC_HAVE_NCCL)
  ASSERT_NE(loaded->group, nullptr);
  EXPECT_STREQ(loaded->group->backend_name(), "nccl");
  EXPECT_EQ(loaded->group->size(), 1);
#else
  EXPECT_EQ(loaded->group, nullptr) << "no NCCL in this build";
#endif
  auto alone = model::Transformer::Load(TinyPath(), {.threads = 1, .device = kCuda0});
  ASSERT_TRUE(alone.ok()) << alone.status();
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  EXPECT_EQ(PromptLogits(*loaded->model, prompt), PromptLogits(**alone, prompt));

  // The worker's whole TP=1 path: the grouped model, verification on the device.
  TargetEngineOptions options;
  options.max_requests = 4;
  options.block_wait = absl::Hours(1);
  options.feed_wait = absl::ZeroDuration();
  std::vector<proto::Assignment> traffic;
  for (int r = 0; r < 3; ++r) {
    proto::Assignment a;
    a.set_request_id("r" + std::to_string(r));
    for (int i = 0; i < 5 + r; ++i) a.add_committed_tokens((11 * i + 3 * r + 1) % 200);
    a.set_prompt_length(static_cast<uint32_t>(a.committed_tokens_size()));
    a.set_draft_worker_id(0);
    a.mutable_params()->set_max_tokens(16);
    a.mutable_params()->set_temperature(0.0f);
    a.set_verify_mode(proto::VERIFY_MODE_GREEDY);
    traffic.push_back(a);
  }
  std::map<std::string, std::vector<int32_t>> oracles;
  for (const auto& a : traffic) oracles[a.request_id()] = {};
  const int vocab = (*alone)->config().vocab_size;
  TargetEngine host(alone->get(), options);
  const auto want = testing::DriveEngine(host, traffic, oracles, vocab);
  TargetEngine device(loaded->model.get(), options);
  auto rows = NewCudaDeviceRows(0, vocab, options.max_requests);
  ASSERT_TRUE(rows.ok()) << rows.status();
  ASSERT_TRUE(device.UseDeviceRows(*std::move(rows)).ok());
  EXPECT_EQ(testing::DriveEngine(device, traffic, oracles, vocab), want);
}

TEST(SingleRankModelTest, AMissingGpuIsNamed) {
  if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  auto loaded = LoadSingleRankModel(TinyPath(),
                                    {.threads = 1, .device = {model::DeviceSpec::Kind::kCuda, 64}});
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find("cuda:64"), std::string::npos) << loaded.status();
}

}  // namespace
}  // namespace splitspec::target

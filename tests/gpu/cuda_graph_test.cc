// CUDA graph capture and replay in the CUDA backend (runtime/model/cuda_backend.h,
// policy in cuda_graph_plan.h): a model with graphs and one without run the same
// decode and verify steps (ragged batches, blocks of 1..8 tokens, rollbacks as
// after a rejection) on their own caches, and every logit must be bitwise equal,
// whether the step was eager, captured or replayed with padding. The test also
// checks that graphs were captured and replayed (or it would prove nothing).
// Skips without a device. Written without a GPU; tools/gpu/device_session.sh runs it.
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/model/transformer.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::model {
namespace {

constexpr DeviceSpec kCuda0{DeviceSpec::Kind::kCuda, 0};

class CudaGraphTest : public ::testing::TestWithParam<kernels::GgmlType> {
 protected:
  void SetUp() override {
    if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
    TinyModelOptions tiny;
    tiny.weight_type = GetParam();
    path_ = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-cuda-graph-" +
            std::to_string(static_cast<int>(GetParam())) + ".gguf";
    ASSERT_TRUE(WriteTinyModel(tiny, path_).ok());
  }
  std::string path_;
};

// One step's batch for `caches`: sequence s feeds `lengths[s]` tokens (all logits
// when more than one, as a verify block does).
std::vector<SequenceInput> Batch(const std::vector<std::unique_ptr<KvCache>>& caches,
                                 const std::vector<std::vector<int32_t>>& tokens) {
  std::vector<SequenceInput> batch;
  for (size_t s = 0; s < tokens.size(); ++s) {
    if (tokens[s].empty()) continue;
    batch.push_back(
        {caches[s].get(), tokens[s], tokens[s].size() > 1 ? LogitsMode::kAll : LogitsMode::kLast});
  }
  return batch;
}

TEST_P(CudaGraphTest, ReplayedStepsGiveBitwiseTheEagerLogits) {
  auto eager = Transformer::Load(path_, {.threads = 1, .device = kCuda0, .cuda_graphs = false});
  auto graphed = Transformer::Load(path_, {.threads = 1, .device = kCuda0, .cuda_graphs = true});
  ASSERT_TRUE(eager.ok()) << eager.status();
  ASSERT_TRUE(graphed.ok()) << graphed.status();
  const int vocab = (*eager)->config().vocab_size;
  constexpr int kSequences = 3;
  std::vector<std::unique_ptr<KvCache>> eager_caches, graphed_caches;
  for (int s = 0; s < kSequences; ++s) {
    eager_caches.push_back((*eager)->NewCache(256));
    graphed_caches.push_back((*graphed)->NewCache(256));
  }
  // Prompts of 20+ tokens: a prefill, always eager.
  std::vector<std::vector<int32_t>> step(kSequences);
  for (int s = 0; s < kSequences; ++s) {
    for (int i = 0; i < 20 + 3 * s; ++i) step[s].push_back((7 * i + 11 * s + 1) % vocab);
  }
  uint32_t lcg = 12345;
  auto next = [&lcg](int n) {
    lcg = lcg * 1664525u + 1013904223u;
    return static_cast<int>((lcg >> 8) % static_cast<uint32_t>(n));
  };
  for (int iteration = 0; iteration < 40; ++iteration) {
    ForwardOutput want, got;
    ASSERT_TRUE((*eager)->Forward(Batch(eager_caches, step), &want).ok()) << iteration;
    ASSERT_TRUE((*graphed)->Forward(Batch(graphed_caches, step), &got).ok()) << iteration;
    ASSERT_EQ(want.logits.size(), got.logits.size()) << iteration;
    ASSERT_EQ(
        std::memcmp(want.logits.data(), got.logits.data(), want.logits.size() * sizeof(float)), 0)
        << "step " << iteration << ": graph replay differs from eager execution";
    // Next step: a decode token or a verify block of 2..8 per sequence (some idle),
    // after rolling back part of a block as a rejection would.
    for (int s = 0; s < kSequences; ++s) {
      const int fed = static_cast<int>(step[s].size());
      if (fed > 1 && fed <= 8 && next(2) == 0) {
        const int keep = eager_caches[s]->length() - next(fed);
        ASSERT_TRUE(eager_caches[s]->Truncate(keep).ok());
        ASSERT_TRUE(graphed_caches[s]->Truncate(keep).ok());
      }
      step[s].clear();
      const int kind = next(4);
      const int n = kind == 0 ? 0 : kind == 1 ? 1 : 2 + next(7);
      for (int i = 0; i < n; ++i) step[s].push_back(next(vocab));
    }
    if (step[0].empty() && step[1].empty() && step[2].empty()) step[0].push_back(1);
  }
  const BackendCounters counters = (*graphed)->backend_counters();
  EXPECT_GT(counters.graph_captures, 0);
  EXPECT_GT(counters.graph_replays, 5) << "too few replays to compare";
  EXPECT_EQ((*eager)->backend_counters().graph_captures, 0);
  EXPECT_EQ((*eager)->backend_counters().graph_replays, 0);
  std::printf("[ cuda graphs ] %lld eager, %lld captured, %lld replayed\n",
              static_cast<long long>(counters.eager_calls),
              static_cast<long long>(counters.graph_captures),
              static_cast<long long>(counters.graph_replays));
}

// A capture that fails (here: a stream synchronization CUDA forbids during a capture,
// injected once) must not fail the call: it runs again eagerly, gives the eager
// model's logits bit for bit, and is counted; the next eligible call captures again.
TEST_P(CudaGraphTest, AFailedCaptureRunsTheCallEagerlyAndCountsIt) {
  auto eager = Transformer::Load(path_, {.threads = 1, .device = kCuda0, .cuda_graphs = false});
  auto graphed = Transformer::Load(path_, {.threads = 1, .device = kCuda0, .cuda_graphs = true});
  ASSERT_TRUE(eager.ok()) << eager.status();
  ASSERT_TRUE(graphed.ok()) << graphed.status();
  std::unique_ptr<KvCache> eager_cache = (*eager)->NewCache(256);
  std::unique_ptr<KvCache> graphed_cache = (*graphed)->NewCache(256);
  const std::vector<int32_t> prompt = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3};
  ForwardOutput want, got;
  ASSERT_TRUE((*eager)->Forward({{eager_cache.get(), prompt, LogitsMode::kLast}}, &want).ok());
  ASSERT_TRUE((*graphed)->Forward({{graphed_cache.get(), prompt, LogitsMode::kLast}}, &got).ok());
  // Decode steps: the first warms the bucket up (eager), the second is its capture.
  for (int step = 0; step < 6; ++step) {
    if (step == 1) (*graphed)->FailNextGraphCaptureForTesting();
    const std::vector<int32_t> next = {static_cast<int32_t>(7 + step)};
    ASSERT_TRUE((*eager)->Forward({{eager_cache.get(), next, LogitsMode::kLast}}, &want).ok());
    const absl::Status s =
        (*graphed)->Forward({{graphed_cache.get(), next, LogitsMode::kLast}}, &got);
    ASSERT_TRUE(s.ok()) << "step " << step << ": " << s;
    ASSERT_EQ(want.logits.size(), got.logits.size());
    EXPECT_EQ(std::memcmp(want.logits.data(), got.logits.data(), want.logits.size() * 4), 0)
        << "step " << step;
    EXPECT_EQ(graphed_cache->length(), eager_cache->length());
  }
  const BackendCounters counters = (*graphed)->backend_counters();
  EXPECT_EQ(counters.graph_capture_fallbacks, 1);
  EXPECT_GE(counters.graph_captures, 1) << "the next eligible call captured again";
  EXPECT_GE(counters.graph_replays, 1);
}

INSTANTIATE_TEST_SUITE_P(FloatAndQuantized, CudaGraphTest,
                         ::testing::Values(kernels::GgmlType::kF32, kernels::GgmlType::kQ4_1),
                         [](const ::testing::TestParamInfo<kernels::GgmlType>& info) {
                           return info.param == kernels::GgmlType::kF32 ? "F32" : "Q4_1";
                         });

}  // namespace
}  // namespace splitspec::model

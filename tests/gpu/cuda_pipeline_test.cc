// Greedy speculative decoding through the in-process pipeline (coordinator,
// target and draft workers as threads) with the target on cuda:0 equals plain
// greedy decoding of the same CUDA model, token for token, for every drafter.
// The model and layerskip drafters run on the GPU too (gpu_drafter: a second,
// different CUDA model in the same process). And against the CPU target: fed the
// prompt and the GPU's tokens, the CPU model's logits make every GPU token a
// greedy choice within the CUDA-vs-CPU bound of cuda_transformer_test.cc (its
// logit is within bound * max |logit| of the row's largest). Skips without a device.
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <ostream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "kernels/cuda/cuda_check.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/integration/plain_greedy.h"
#include "tests/testing/tiny_model.h"
#include "tools/cluster/in_process_cluster.h"

namespace splitspec {
namespace {

constexpr int kMaxTokens = 32;
constexpr model::DeviceSpec kCuda0{model::DeviceSpec::Kind::kCuda, 0};

struct Mode {
  std::string name;
  std::string drafter;
  kernels::GgmlType type;
  bool own_draft_model = false;  // "model": a different GGUF (1 layer, another seed)
};

// CUDA-vs-CPU logit bounds, relative to the row's largest |logit| (cuda_transformer_test.cc).
double CpuBound(kernels::GgmlType type) {
  return type == kernels::GgmlType::kF32 || type == kernels::GgmlType::kF16 ||
                 type == kernels::GgmlType::kBF16
             ? 2e-3
             : 3e-2;
}

// Each of `generated` (after `prompt`) is, by the CPU model's logits, within `bound`
// of a greedy choice; "" when all are, else the first that is not.
std::string NotACpuGreedyChoice(model::Transformer& cpu, const std::vector<int32_t>& prompt,
                                const std::vector<int32_t>& generated, double bound) {
  if (generated.empty()) return "";
  std::vector<int32_t> fed = prompt;
  fed.insert(fed.end(), generated.begin(), generated.end() - 1);
  auto cache = cpu.NewCache();
  model::ForwardOutput out;
  const absl::Status s = cpu.Forward({{cache.get(), fed, model::LogitsMode::kAll}}, &out);
  if (!s.ok()) return s.ToString();
  const int vocab = cpu.config().vocab_size;
  for (size_t i = 0; i < generated.size(); ++i) {
    const float* row = out.Row(0, static_cast<int>(prompt.size() - 1 + i));
    float best = row[0], scale = 0;
    for (int v = 0; v < vocab; ++v) {
      best = std::max(best, row[v]);
      scale = std::max(scale, std::fabs(row[v]));
    }
    if (row[generated[i]] < best - bound * scale) {
      return "token " + std::to_string(i) + " (" + std::to_string(generated[i]) + "): logit " +
             std::to_string(row[generated[i]]) + ", the CPU's best " + std::to_string(best);
    }
  }
  return "";
}

void PrintTo(const Mode& mode, std::ostream* os) { *os << mode.name; }

class CudaPipelineGreedyTest : public ::testing::TestWithParam<Mode> {
 protected:
  void SetUp() override {
    if (!kernels::CudaDeviceAvailable()) GTEST_SKIP() << "no CUDA device";
  }
};

TEST_P(CudaPipelineGreedyTest, SpeculativeGreedyEqualsPlainGreedyOnTheGpu) {
  model::TinyModelOptions tiny;
  tiny.weight_type = GetParam().type;
  const std::string path = ::testing::TempDir() + "/" + std::to_string(::getpid()) +
                           "-cuda-pipeline-" + GetParam().name + ".gguf";
  ASSERT_TRUE(model::WriteTinyModel(tiny, path).ok());
  auto loaded = model::Transformer::Load(path, {.threads = 1, .device = kCuda0});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::unique_ptr<model::Transformer> target = *std::move(loaded);
  auto tokenizer = model::LoadTokenizerFromGguf(target->file());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  std::string draft_path = path;
  if (GetParam().own_draft_model) {
    model::TinyModelOptions draft = tiny;
    draft.n_layers = 1;
    draft.seed = 2;
    draft_path = ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-cuda-drafter.gguf";
    ASSERT_TRUE(model::WriteTinyModel(draft, draft_path).ok());
  }
  auto cpu = model::Transformer::Load(path, {.threads = 2});
  ASSERT_TRUE(cpu.ok()) << cpu.status();
  auto spec = spec::ParseDrafterSpec(GetParam().drafter, draft_path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  spec->device = kCuda0;
  auto drafter = spec::MakeDrafter(*spec, path, &*tokenizer, target->config().vocab_size, 1);
  ASSERT_TRUE(drafter.ok()) << drafter.status();

  tools::InProcessClusterOptions options;
  options.target = target.get();
  options.drafter = drafter->get();
  auto cluster = tools::InProcessCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = net::RequestClient::Connect((*cluster)->coordinator_endpoint());
  ASSERT_TRUE(client.ok()) << client.status();

  const std::vector<std::vector<int32_t>> prompts = {
      {10, 20, 30, 40, 10, 20, 30}, {5, 6, 7, 5, 6, 7, 5, 6}, {100, 3, 100, 3, 100}, {42}};
  uint64_t drafted = 0;
  int i = 0;
  for (const std::vector<int32_t>& prompt : prompts) {
    const std::vector<int32_t> want = testing::PlainGreedy(*target, prompt, kMaxTokens);
    proto::SubmitRequest submit;
    submit.set_request_id("cuda-greedy-" + std::to_string(i++));
    submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
    submit.mutable_params()->set_temperature(0.0f);
    submit.mutable_params()->set_max_tokens(kMaxTokens);
    submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
    submit.set_draft_k(4);
    auto got = (*client)->Generate(submit, absl::Seconds(120));
    ASSERT_TRUE(got.ok()) << got.status();
    EXPECT_EQ(got->tokens, want) << "prompt " << i;
    EXPECT_EQ(NotACpuGreedyChoice(**cpu, prompt, got->tokens, CpuBound(GetParam().type)), "")
        << "prompt " << i;
    EXPECT_TRUE(got->error.empty()) << got->error;
    drafted += got->stats.drafted();
  }
  if (*drafter != nullptr) {
    EXPECT_GT(drafted, 0u) << "the drafter never proposed anything";
  }
}

INSTANTIATE_TEST_SUITE_P(
    EveryDrafter, CudaPipelineGreedyTest,
    ::testing::Values(Mode{"target_only", "none", kernels::GgmlType::kQ8_0},
                      Mode{"ngram", "ngram", kernels::GgmlType::kQ8_0},
                      Mode{"lookup", "lookup", kernels::GgmlType::kQ4_1},
                      Mode{"self_draft", "model", kernels::GgmlType::kQ4_1},
                      Mode{"gpu_drafter", "model", kernels::GgmlType::kQ8_0, true},
                      Mode{"layerskip", "layerskip:1", kernels::GgmlType::kF16}),
    [](const ::testing::TestParamInfo<Mode>& info) { return info.param.name; });

}  // namespace
}  // namespace splitspec

// The simulated drafter of `bench spec` (tools/sim_drafter.h) through the whole in-process
// pipeline on a tiny random model: greedy output equals plain greedy token for token at
// every acceptance rate, sequential and overlapped, and the target accepts exactly the
// drafts that are the reference (alpha 1: all of them, alpha 0: none).
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "tests/integration/plain_greedy.h"
#include "tests/testing/tiny_model.h"
#include "tools/cluster/in_process_cluster.h"
#include "tools/sim_drafter.h"

namespace splitspec {
namespace {

constexpr int kMaxTokens = 24;

struct SimCase {
  double alpha;
  int lookahead;
};

class SimDrafterPipelineTest : public ::testing::TestWithParam<SimCase> {};

TEST_P(SimDrafterPipelineTest, GreedyOutputIsTheReference) {
  model::TinyModelOptions tiny;
  tiny.weight_type = kernels::GgmlType::kQ8_0;
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-sim-pipeline.gguf";
  ASSERT_TRUE(model::WriteTinyModel(tiny, path).ok());
  auto loaded = model::Transformer::Load(path, {.threads = 1});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  std::unique_ptr<model::Transformer> model = *std::move(loaded);

  const std::vector<int32_t> prompt = {10, 20, 30, 40, 10, 20, 30};
  std::vector<int32_t> reference = prompt;
  const std::vector<int32_t> greedy = testing::PlainGreedy(*model, prompt, kMaxTokens);
  reference.insert(reference.end(), greedy.begin(), greedy.end());
  tools::SimDrafter drafter({.alpha = GetParam().alpha, .cost_ratio = 10}, reference,
                            model->config().vocab_size, absl::Milliseconds(1), /*seed=*/7);

  tools::InProcessClusterOptions options;
  options.target = model.get();
  options.drafter = &drafter;
  options.draft_engine.lookahead_blocks = GetParam().lookahead;
  auto cluster = tools::InProcessCluster::Start(options);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  auto client = net::RequestClient::Connect((*cluster)->coordinator_endpoint());
  ASSERT_TRUE(client.ok()) << client.status();

  proto::SubmitRequest submit;
  submit.set_request_id("sim");
  submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  submit.mutable_params()->set_temperature(0.0f);
  submit.mutable_params()->set_max_tokens(kMaxTokens);
  submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
  submit.set_draft_k(4);
  auto got = (*client)->Generate(submit, absl::Seconds(60));
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_TRUE(got->error.empty()) << got->error;
  EXPECT_EQ(got->tokens, greedy);
  EXPECT_GT(got->stats.verified(), 0u);
  if (GetParam().alpha == 1.0) EXPECT_EQ(got->stats.accepted(), got->stats.verified());
  if (GetParam().alpha == 0.0) EXPECT_EQ(got->stats.accepted(), 0u);
  EXPECT_GT(drafter.proposed(), 0);
}

INSTANTIATE_TEST_SUITE_P(AlphaAndLookahead, SimDrafterPipelineTest,
                         ::testing::Values(SimCase{1.0, 1}, SimCase{1.0, 2}, SimCase{0.0, 1},
                                           SimCase{0.0, 2}, SimCase{0.7, 1}, SimCase{0.7, 2}));

}  // namespace
}  // namespace splitspec

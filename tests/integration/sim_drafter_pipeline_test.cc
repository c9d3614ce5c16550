// The simulated drafter of `bench spec` (tools/sim_drafter.h) through the whole in-process
// pipeline on a tiny random model: greedy output equals plain greedy token for token at
// every acceptance rate, sequential and overlapped, and the target accepts exactly the
// drafts that are the reference (alpha 1: all of them, alpha 0: none); and `bench spec`
// with a sim drafter prints its JSON rows, the cache configuration with its hit rates.
#include <unistd.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "tests/integration/plain_greedy.h"
#include "tests/testing/tiny_model.h"
#include "tools/cluster/in_process_cluster.h"
#include "tools/commands.h"
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
  if (GetParam().alpha == 1.0) {
    EXPECT_EQ(got->stats.accepted(), got->stats.verified());
  }
  if (GetParam().alpha == 0.0) {
    EXPECT_EQ(got->stats.accepted(), 0u);
  }
  EXPECT_GT(drafter.proposed(), 0);
}

INSTANTIATE_TEST_SUITE_P(AlphaAndLookahead, SimDrafterPipelineTest,
                         ::testing::Values(SimCase{1.0, 1}, SimCase{1.0, 2}, SimCase{0.0, 1},
                                           SimCase{0.0, 2}, SimCase{0.7, 1}, SimCase{0.7, 2}));

// The number after `key` in a JSON line; -1 (and a failure) if there is none.
double NumberAfter(const std::string& line, const char* key) {
  const size_t at = line.find(key);
  double value = -1;
  if (at == std::string::npos || !absl::SimpleAtod(line.substr(at + std::strlen(key), 6), &value)) {
    ADD_FAILURE() << key << " is not followed by a number: " << line;
    return -1;
  }
  return value;
}

// `splitspec bench spec --drafters 'sim:..' --json` on the tiny chat model: one object per
// configuration, each measured (alpha 1: every verified draft accepted); only
// overlapped+cache has cache hit rates, numbers in [0, 1] (how many hit depends on timing).
TEST(SimBenchTest, JsonRowsPerConfiguration) {
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-sim-bench-chat.gguf";
  ASSERT_TRUE(model::MakeTinyChatModel().WriteFile(path).ok());
  ::testing::internal::CaptureStdout();
  const int code = tools::RunBenchSpec({"--model", path, "--drafters", "sim:alpha=1,ratio=1000",
                                        "--max-tokens", "8", "--k", "2", "--json"});
  const std::string out = ::testing::internal::GetCapturedStdout();
  ASSERT_EQ(code, 0) << out;
  const std::vector<std::string> lines = absl::StrSplit(out, '\n', absl::SkipEmpty());
  ASSERT_EQ(lines.size(), 3u) << out;
  const std::string drafter = "{\"drafter\":\"sim:alpha=1,ratio=1000\",";
  const char* configurations[] = {"sequential", "overlapped", "overlapped+cache"};
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(
        lines[i].rfind(
            absl::StrCat(drafter, "\"configuration\":\"", configurations[i], "\",\"speedup\":"), 0),
        0u)
        << lines[i];
    EXPECT_EQ(lines[i].find("\"speedup\":null"), std::string::npos) << lines[i];
    EXPECT_EQ(lines[i].find("\"predicted\":null"), std::string::npos) << lines[i];
    EXPECT_NE(lines[i].find(",\"k\":2,\"acceptance\":1.0000,"), std::string::npos) << lines[i];
  }
  for (int i = 0; i < 2; ++i) {
    EXPECT_NE(lines[i].find("\"cache_hit_rate\":null,"), std::string::npos) << lines[i];
    EXPECT_NE(lines[i].find("\"cache_partial_hit_rate\":null,"), std::string::npos) << lines[i];
  }
  // The calibrated model inputs (measured on the pipeline), the same in every row.
  for (const char* key : {"\"verify_slope\":", "\"block_overhead\":"}) {
    EXPECT_GE(NumberAfter(lines[0], key), 0.0) << lines[0];
    const size_t at = lines[0].find(key);
    const std::string field = lines[0].substr(at, lines[0].find_first_of(",}", at) - at);
    EXPECT_NE(lines[1].find(field), std::string::npos) << lines[1];
    EXPECT_NE(lines[2].find(field), std::string::npos) << lines[2];
  }
  for (const char* key : {"\"cache_hit_rate\":", "\"cache_partial_hit_rate\":"}) {
    const double rate = NumberAfter(lines[2], key);
    EXPECT_GE(rate, 0.0) << lines[2];
    EXPECT_LE(rate, 1.0) << lines[2];
  }
}

TEST(SimBenchTest, RefusesRealDraftersBesideSimOnes) {
  ::testing::internal::CaptureStderr();
  const int code = tools::RunBenchSpec({"--drafters", "sim:alpha=0.8,ratio=10,ngram"});
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(code, 2);
  EXPECT_NE(err.find("drafter 'ngram': a run with sim drafters"), std::string::npos) << err;
}

}  // namespace
}  // namespace splitspec

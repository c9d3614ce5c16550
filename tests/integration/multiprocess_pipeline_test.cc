// The speculative pipeline as separate processes on loopback (the binaries
// `splitspec serve` starts): speculative greedy output equals plain greedy
// decoding token for token, overlapped and sequential, for the ngram drafter
// and for the target as its own draft (which must accept every draft token).
// The processes run as `splitspec serve` starts them: CURVE keys for every role
// (SPLITSPEC_KEYS), this test submitting with the client key.
#include <stdlib.h>

#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/sampling.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/plain_greedy.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::testing {
namespace {

constexpr int kMaxTokens = 32;

struct DraftSetup {
  std::string name;
  std::vector<std::string> flags;  // the model path is appended where "MODEL" appears
  bool accepts_everything;
};

class MultiprocessPipelineTest : public ::testing::TestWithParam<DraftSetup> {};

TEST_P(MultiprocessPipelineTest, SpeculativeGreedyEqualsPlainGreedy) {
  const std::string dir = MakeTempDir("splitspec-multiprocess");
  const std::string model_path = dir + "/tiny.gguf";
  model::TinyModelOptions tiny;
  tiny.weight_type = kernels::GgmlType::kQ8_0;
  ASSERT_TRUE(model::WriteTinyModel(tiny, model_path).ok());
  ASSERT_TRUE(net::WriteEphemeralClusterKeys(dir + "/keys").ok());
  setenv("SPLITSPEC_KEYS", (dir + "/keys").c_str(), 1);  // the children inherit it
  absl::StatusOr<net::ChannelSecurity> client_keys =
      net::LoadChannelSecurity(dir + "/keys", net::kClient);
  ASSERT_TRUE(client_keys.ok()) << client_keys.status();
  net::SetDefaultChannelSecurity(*client_keys);
  auto coordinator = StartCoordinator(dir, {"--heartbeat-ms", "100"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string endpoint = coordinator->second;
  auto target =
      ChildProcess::Spawn({BinaryPath("splitspec-target-worker"), "--coordinator", endpoint,
                           "--name", "target-0", "--model", model_path, "--threads", "1"},
                          dir + "/target.log");
  ASSERT_TRUE(target.ok());
  std::vector<std::string> draft_argv = {BinaryPath("splitspec-draft-worker"),
                                         "--coordinator",
                                         endpoint,
                                         "--name",
                                         "draft-0",
                                         "--threads",
                                         "1"};
  for (const std::string& flag : GetParam().flags)
    draft_argv.push_back(flag == "MODEL" ? model_path : flag);
  auto draft = ChildProcess::Spawn(draft_argv, dir + "/draft.log");
  ASSERT_TRUE(draft.ok());
  proto::StatusReply status;
  ASSERT_TRUE(PollStatusUntil(
      endpoint,
      [](const proto::StatusReply& s) {
        int alive = 0;
        for (const auto& m : s.members()) alive += m.state() == proto::MEMBER_STATE_ALIVE;
        return alive == 2;
      },
      1000, absl::Milliseconds(20), &status))
      << status.DebugString() << target->ReadLog() << draft->ReadLog();

  auto reference = model::Transformer::Load(model_path, {.threads = 1});
  ASSERT_TRUE(reference.ok());
  auto client = net::RequestClient::Connect(endpoint);
  ASSERT_TRUE(client.ok());
  const std::vector<std::vector<int32_t>> prompts = {
      {10, 20, 30, 10, 20, 30}, {7}, {200, 5, 200, 5, 200}};
  for (size_t i = 0; i < prompts.size(); ++i) {
    proto::SubmitRequest submit;
    submit.set_request_id("mp-" + std::to_string(i));
    submit.mutable_prompt_tokens()->Assign(prompts[i].begin(), prompts[i].end());
    submit.mutable_params()->set_temperature(0.0f);
    submit.mutable_params()->set_max_tokens(kMaxTokens);
    submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
    submit.set_draft_k(4);
    auto got = (*client)->Generate(submit, absl::Seconds(120));
    ASSERT_TRUE(got.ok()) << got.status() << "\n" << target->ReadLog() << draft->ReadLog();
    EXPECT_EQ(got->tokens, PlainGreedy(**reference, prompts[i], kMaxTokens)) << submit.request_id();
    if (GetParam().accepts_everything) {
      EXPECT_GT(got->stats.verified(), 0u);
      EXPECT_EQ(got->stats.accepted(), got->stats.verified())
          << "a self-draft must be accepted in full";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(
    Drafters, MultiprocessPipelineTest,
    ::testing::Values(
        DraftSetup{"ngram_overlapped", {"--drafter", "ngram"}, false},
        DraftSetup{"ngram_sequential", {"--drafter", "ngram", "--lookahead", "1"}, false},
        DraftSetup{"self_draft_overlapped",
                   {"--drafter", "model", "--draft", "MODEL", "--target-model", "MODEL"},
                   true},
        DraftSetup{
            "layerskip_overlapped", {"--drafter", "layerskip:1", "--target-model", "MODEL"}, false},
        DraftSetup{"layerskip_sequential",
                   {"--drafter", "layerskip:1", "--target-model", "MODEL", "--lookahead", "1"},
                   false},
        DraftSetup{"self_draft_sequential",
                   {"--drafter", "model", "--draft", "MODEL", "--target-model", "MODEL",
                    "--lookahead", "1"},
                   true}),
    [](const auto& info) { return info.param.name; });

}  // namespace
}  // namespace splitspec::testing

// Classifier-free guidance across a target worker's death, as processes on loopback:
// guided requests run on target-0, which is killed with SIGKILL mid-generation; the
// coordinator re-places them on a spare target, which re-prefills both sequences of
// each (the conditional prompt + the tokens committed so far, and the unconditional
// companion: the negative prompt + the same tokens), and every request finishes with
// exactly the tokens greedy guided decoding of the model gives, computed here. A
// companion that was not re-prefilled, or re-prefilled with the wrong tokens, changes
// the guided logits and so the output. Then cancelling a guided request stops it: the
// coordinator reports it cancelled, the spare reports no active request left, and the
// next guided request on the same target is again exact.
// (tests/unit/target_worker/guided_engine_test.cc checks in the engine that the
// companion is never fed without its conditional sequence and not after release.)
// Every wait is bounded by attempts, never timed.
#include <csignal>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/sampling.h"
#include "tests/integration/child_process.h"
#include "tests/integration/cluster_test_util.h"
#include "tests/integration/plain_greedy.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::testing {
namespace {

constexpr float kScale = 2.5f;
// Long enough that target-0 is still generating when it is killed: a wider model
// than the default tiny one makes each step cost milliseconds, not microseconds.
constexpr int kLongTokens = 360;
const std::vector<int32_t> kNegative = {0, 250, 7, 7};
const std::vector<std::vector<int32_t>> kPrompts = {{10, 20, 30, 10, 20, 30}, {200, 5, 200, 5}};

std::string WriteModel(const std::string& dir) {
  model::TinyModelOptions options;
  options.weight_type = kernels::GgmlType::kQ8_0;
  options.n_embd = 256;
  options.n_ff = 768;
  options.n_layers = 4;
  options.context_length = 1024;
  const std::string path = dir + "/guided-failover.gguf";
  EXPECT_TRUE(model::WriteTinyModel(options, path).ok());
  return path;
}

// Greedy guided decoding of `model` directly: both sequences decoded incrementally,
// each token the argmax of the guided distribution at temperature 0.
std::vector<int32_t> GuidedGreedy(model::LanguageModel& model, const std::vector<int32_t>& prompt,
                                  int n) {
  auto cond_cache = model.NewCache(), uncond_cache = model.NewCache();
  std::vector<int32_t> cond_feed = prompt, uncond_feed = kNegative, out;
  spec::SamplingParams params;
  params.temperature = 0.0f;
  params.guidance_scale = kScale;
  std::vector<float> probs(model.config().vocab_size);
  for (int i = 0; i < n; ++i) {
    model::ForwardOutput logits;
    EXPECT_TRUE(model
                    .Forward({{cond_cache.get(), cond_feed, model::LogitsMode::kLast},
                              {uncond_cache.get(), uncond_feed, model::LogitsMode::kLast}},
                             &logits)
                    .ok());
    EXPECT_TRUE(spec::GuidedLogitsToProbs(
                    params, absl::MakeConstSpan(logits.Row(0, 0), logits.vocab_size),
                    absl::MakeConstSpan(logits.Row(1, 0), logits.vocab_size), absl::MakeSpan(probs))
                    .ok());
    out.push_back(*spec::ChooseTargetToken(spec::VerifyMode::kGreedy, probs, 0, 0));
    cond_feed = uncond_feed = {out.back()};
  }
  return out;
}

proto::SubmitRequest GuidedRequest(const std::string& id, const std::vector<int32_t>& prompt,
                                   int max_tokens) {
  proto::SubmitRequest submit;
  submit.set_request_id(id);
  submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  submit.mutable_params()->set_temperature(0.0f);
  submit.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  submit.mutable_params()->set_guidance_scale(kScale);
  submit.mutable_params()->mutable_negative_prompt_tokens()->Assign(kNegative.begin(),
                                                                    kNegative.end());
  submit.set_verify_mode(proto::VERIFY_MODE_GREEDY);
  submit.set_drafter("none");
  return submit;
}

ChildProcess SpawnTarget(const std::string& dir, const std::string& endpoint,
                         const std::string& model_path, const std::string& name) {
  auto child =
      ChildProcess::Spawn({BinaryPath("splitspec-target-worker"), "--coordinator", endpoint,
                           "--name", name, "--model", model_path, "--threads", "1"},
                          absl::StrCat(dir, "/", name, ".log"));
  EXPECT_TRUE(child.ok()) << child.status();
  return std::move(*child);
}

bool AliveNamed(const proto::StatusReply& s, const std::string& name) {
  for (const proto::MemberStatus& m : s.members()) {
    if (m.worker_name() == name && m.state() == proto::MEMBER_STATE_ALIVE) return true;
  }
  return false;
}

TEST(GuidanceFailoverTest, KilledTargetRePlacesAndRePrefillsBothSequencesAndCancelStopsBoth) {
  const std::string dir = MakeTempDir("splitspec-guided-failover");
  const std::string model_path = WriteModel(dir);
  auto reference = model::Transformer::Load(model_path, {.threads = 1});
  ASSERT_TRUE(reference.ok()) << reference.status();
  std::vector<std::vector<int32_t>> expected;
  for (const std::vector<int32_t>& prompt : kPrompts)
    expected.push_back(GuidedGreedy(**reference, prompt, kLongTokens));
  for (size_t p = 0; p < kPrompts.size(); ++p) {
    // Guidance must change the output, or an unguided re-placement would pass too.
    ASSERT_NE(PlainGreedy(**reference, kPrompts[p], 32),
              std::vector<int32_t>(expected[p].begin(), expected[p].begin() + 32))
        << "prompt " << p;
  }

  auto coordinator = StartCoordinator(dir, {"--heartbeat-ms", "100"});
  ASSERT_TRUE(coordinator.ok()) << coordinator.status();
  const std::string endpoint = coordinator->second;
  ChildProcess first = SpawnTarget(dir, endpoint, model_path, "target-0");
  proto::StatusReply status;
  ASSERT_TRUE(PollStatusUntil(
      endpoint, [](const proto::StatusReply& s) { return AliveNamed(s, "target-0"); }, 1500,
      absl::Milliseconds(20), &status))
      << status.DebugString() << first.ReadLog();

  // Only target-0 serves at first, so every request starts on it.
  auto client = net::RequestClient::Connect(endpoint);
  ASSERT_TRUE(client.ok());
  constexpr int kRequests = 4;
  for (int i = 0; i < kRequests; ++i) {
    ASSERT_TRUE((*client)
                    ->Submit(GuidedRequest(absl::StrCat("guided-", i),
                                           kPrompts[i % kPrompts.size()], kLongTokens))
                    .ok());
  }
  // Wait until every request has tokens (so each has a companion with generated
  // tokens to re-prefill), then kill target-0 mid-flight.
  for (int attempt = 0; attempt < 6000; ++attempt) {
    ASSERT_TRUE((*client)->Poll(absl::Milliseconds(10)).ok());
    int with_tokens = 0;
    for (int i = 0; i < kRequests; ++i)
      with_tokens += !(*client)->Result(absl::StrCat("guided-", i)).tokens.empty();
    if (with_tokens == kRequests) break;
  }
  ChildProcess spare = SpawnTarget(dir, endpoint, model_path, "spare");
  first.Kill(SIGKILL);
  ASSERT_TRUE((*client)->Poll(absl::ZeroDuration()).ok());
  int unfinished_with_tokens = 0;
  for (int i = 0; i < kRequests; ++i) {
    const std::string id = absl::StrCat("guided-", i);
    unfinished_with_tokens += !(*client)->Done(id) && !(*client)->Result(id).tokens.empty();
  }
  ASSERT_GT(unfinished_with_tokens, 0)
      << "no request was mid-generation when target-0 died: the test saw nothing";

  for (int i = 0; i < kRequests; ++i) {
    const std::string id = absl::StrCat("guided-", i);
    for (int attempt = 0; attempt < 12000 && !(*client)->Done(id); ++attempt) {
      ASSERT_TRUE((*client)->Poll(absl::Milliseconds(10)).ok());
    }
    ASSERT_TRUE((*client)->Done(id)) << id << spare.ReadLog();
    const net::GenerationResult& got = (*client)->Result(id);
    EXPECT_EQ(got.finish_reason, proto::FINISH_REASON_LENGTH) << id << " " << got.error;
    EXPECT_EQ(got.tokens, expected[i % kPrompts.size()]) << id;
  }

  // Cancelling a guided request mid-generation stops it on the spare.
  ASSERT_TRUE((*client)->Submit(GuidedRequest("cancel-me", kPrompts[0], kLongTokens)).ok());
  for (int attempt = 0; attempt < 6000 && (*client)->Result("cancel-me").tokens.empty();
       ++attempt) {
    ASSERT_TRUE((*client)->Poll(absl::Milliseconds(10)).ok());
  }
  ASSERT_FALSE((*client)->Result("cancel-me").tokens.empty()) << spare.ReadLog();
  ASSERT_TRUE((*client)->Cancel("cancel-me").ok());
  for (int attempt = 0; attempt < 3000 && !(*client)->Done("cancel-me"); ++attempt) {
    ASSERT_TRUE((*client)->Poll(absl::Milliseconds(10)).ok());
  }
  ASSERT_TRUE((*client)->Done("cancel-me"));
  const net::GenerationResult& cancelled = (*client)->Result("cancel-me");
  EXPECT_EQ(cancelled.finish_reason, proto::FINISH_REASON_CANCELLED) << cancelled.error;
  EXPECT_LT(cancelled.tokens.size(), static_cast<size_t>(kLongTokens));
  // The spare's heartbeats carry its load: the request is gone there.
  ASSERT_TRUE(PollStatusUntil(
      endpoint,
      [](const proto::StatusReply& s) {
        for (const proto::MemberStatus& m : s.members()) {
          if (m.worker_name() == "spare" && m.state() == proto::MEMBER_STATE_ALIVE)
            return m.load().active_requests() == 0 && s.running_requests() == 0;
        }
        return false;
      },
      1500, absl::Milliseconds(20), &status))
      << status.DebugString() << spare.ReadLog();
  auto after =
      (*client)->Generate(GuidedRequest("after-cancel", kPrompts[1], 48), absl::Seconds(120));
  ASSERT_TRUE(after.ok()) << after.status() << spare.ReadLog();
  EXPECT_EQ(after->tokens, std::vector<int32_t>(expected[1].begin(), expected[1].begin() + 48));
}

}  // namespace
}  // namespace splitspec::testing

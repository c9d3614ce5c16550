// Log probabilities through the whole pipeline (coordinator, target worker,
// draft worker over channels) on tiny generated GGUFs (runtime/spec/token_logprobs.h):
//   - a greedy run with speculation reports, token for token, bitwise the
//     logprobs of a plain run, for drafters that are rejected (a different
//     model: corrections) and accepted (the target itself: bonus tokens);
//   - each committed token's logprob and its top list equal an independent
//     double-precision log_softmax of the model's logits at that position,
//     computed here with the model directly, under greedy and rejection
//     sampling with speculation (so entries sit at the right positions);
//   - the processed mode reflects the request's temperature; the raw one does not.

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/net/spec_proto.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/tiny_model_pair.h"
#include "tools/cluster/in_process_cluster.h"

namespace splitspec {
namespace {

constexpr int kNew = 20;
constexpr int kTop = 5;
const std::vector<int32_t> kPrompt = {17, 42, 99, 5};

struct Fixture : model::TinyModelPair {
  void Load() { TinyModelPair::Load("logprobs"); }

  // "none", "ngram", "model" (the draft model: often rejected), "self" (the
  // target as its own draft: every token accepted, bonus rows).
  absl::StatusOr<std::unique_ptr<spec::Drafter>> Drafter(const std::string& name) const {
    const bool self = name == "self";
    return spec::MakeDrafter(
        *spec::ParseDrafterSpec(self ? "model" : name, self ? target_path : draft_path),
        target_path, tokenizer.get(), target->config().vocab_size, 1);
  }
};

// The model's log_softmax at the position after `tokens`, in double.
std::vector<double> ReferenceLogSoftmax(model::Transformer& model,
                                        const std::vector<int32_t>& tokens, double temperature) {
  auto cache = model.NewCache();
  model::ForwardOutput out;
  EXPECT_TRUE(model.Forward({{cache.get(), tokens, model::LogitsMode::kLast}}, &out).ok());
  const float* logits = out.Row(0, 0);
  double max = -INFINITY;
  for (int v = 0; v < out.vocab_size; ++v) max = std::max(max, logits[v] / temperature);
  double sum = 0.0;
  for (int v = 0; v < out.vocab_size; ++v) sum += std::exp(logits[v] / temperature - max);
  std::vector<double> row(out.vocab_size);
  for (int v = 0; v < out.vocab_size; ++v) row[v] = logits[v] / temperature - max - std::log(sum);
  return row;
}

// Every entry of `result` against the model's own row at its position.
void ExpectEntriesMatchTheModel(model::Transformer& model, const net::GenerationResult& result,
                                double temperature) {
  ASSERT_EQ(result.logprobs.size(), result.tokens.size());
  std::vector<int32_t> context = kPrompt;
  for (size_t i = 0; i < result.tokens.size(); ++i) {
    SCOPED_TRACE(absl::StrCat("token ", i));
    const proto::TokenLogprob& entry = result.logprobs[i];
    const std::vector<double> row = ReferenceLogSoftmax(model, context, temperature);
    EXPECT_EQ(entry.token(), result.tokens[i]);
    const double expected = row[result.tokens[i]];
    EXPECT_NEAR(entry.logprob(), expected, 1e-6 * std::max(1.0, std::fabs(expected)));
    ASSERT_EQ(entry.top_ids_size(), kTop);
    ASSERT_EQ(entry.top_logprobs_size(), kTop);
    std::vector<int32_t> order(row.size());
    for (size_t v = 0; v < order.size(); ++v) order[v] = static_cast<int32_t>(v);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return row[a] > row[b]; });
    for (int j = 0; j < kTop; ++j) {
      EXPECT_EQ(entry.top_ids(j), order[j]) << "rank " << j;
      EXPECT_NEAR(entry.top_logprobs(j), row[order[j]],
                  1e-6 * std::max(1.0, std::fabs(row[order[j]])));
      if (j > 0) {
        EXPECT_GE(entry.top_logprobs(j - 1), entry.top_logprobs(j));
      }
    }
    context.push_back(result.tokens[i]);
  }
}

proto::SubmitRequest Submit(const std::string& id, float temperature, proto::VerifyMode mode,
                            const std::string& drafter, proto::LogprobsMode logprobs_mode) {
  proto::SubmitRequest submit;
  submit.set_request_id(id);
  submit.mutable_prompt_tokens()->Assign(kPrompt.begin(), kPrompt.end());
  proto::SamplingParams* params = submit.mutable_params();
  params->set_temperature(temperature);
  params->set_seed(1234);
  params->set_max_tokens(kNew);
  params->set_logprobs(kTop);
  params->set_logprobs_mode(logprobs_mode);
  submit.set_verify_mode(mode);
  submit.set_draft_k(3);
  submit.set_drafter(drafter == "none" ? "none" : "");
  return submit;
}

net::GenerationResult Generate(const Fixture& f, const std::string& drafter_name,
                               const proto::SubmitRequest& submit) {
  auto drafter = f.Drafter(drafter_name == "none" ? "ngram" : drafter_name);
  EXPECT_TRUE(drafter.ok()) << drafter.status();
  tools::InProcessClusterOptions options;
  options.target = f.target.get();
  options.drafter = drafter->get();
  auto cluster = tools::InProcessCluster::Start(options);
  EXPECT_TRUE(cluster.ok()) << cluster.status();
  auto client = net::RequestClient::Connect((*cluster)->coordinator_endpoint());
  EXPECT_TRUE(client.ok());
  auto result = (*client)->Generate(submit, absl::Minutes(5));
  EXPECT_TRUE(result.ok()) << result.status();
  EXPECT_NE(result->finish_reason, proto::FINISH_REASON_ERROR) << result->error;
  EXPECT_EQ(result->tokens.size(), static_cast<size_t>(kNew));
  return *std::move(result);
}

TEST(PipelineLogprobsTest, GreedyLogprobsUnderSpeculationEqualPlainOnesBitwise) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.Load());
  const net::GenerationResult plain =
      Generate(f, "none",
               Submit("plain", 0.0f, proto::VERIFY_MODE_GREEDY, "none", proto::LOGPROBS_MODE_RAW));
  ASSERT_NO_FATAL_FAILURE(ExpectEntriesMatchTheModel(*f.target, plain, 1.0));
  for (const std::string drafter : {"model", "self"}) {
    SCOPED_TRACE(drafter);
    const net::GenerationResult spec = Generate(
        f, drafter,
        Submit(drafter, 0.0f, proto::VERIFY_MODE_GREEDY, drafter, proto::LOGPROBS_MODE_RAW));
    EXPECT_GT(spec.stats.drafted(), 0u) << "speculation must run, or the test proves nothing";
    EXPECT_EQ(spec.tokens, plain.tokens);
    ASSERT_EQ(spec.logprobs.size(), plain.logprobs.size());
    for (size_t i = 0; i < plain.logprobs.size(); ++i) {
      EXPECT_EQ(spec.logprobs[i].SerializeAsString(), plain.logprobs[i].SerializeAsString())
          << "token " << i << ": " << spec.logprobs[i].ShortDebugString() << " vs "
          << plain.logprobs[i].ShortDebugString();
    }
  }
}

TEST(PipelineLogprobsTest, SampledLogprobsUnderRejectionAreTheModelsRowAtEachPosition) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.Load());
  const net::GenerationResult result = Generate(
      f, "model",
      Submit("rejection", 1.0f, proto::VERIFY_MODE_REJECTION, "model", proto::LOGPROBS_MODE_RAW));
  EXPECT_GT(result.stats.drafted(), 0u);
  EXPECT_LT(result.stats.accepted(), result.stats.verified()) << "no correction was exercised";
  ExpectEntriesMatchTheModel(*f.target, result, 1.0);
}

TEST(PipelineLogprobsTest, ProcessedLogprobsReflectTheTemperatureAndRawOnesDoNot) {
  Fixture f;
  ASSERT_NO_FATAL_FAILURE(f.Load());
  const net::GenerationResult processed =
      Generate(f, "none",
               Submit("processed", 0.5f, proto::VERIFY_MODE_REJECTION, "none",
                      proto::LOGPROBS_MODE_PROCESSED));
  ASSERT_NO_FATAL_FAILURE(ExpectEntriesMatchTheModel(*f.target, processed, 0.5));
  const net::GenerationResult raw =
      Generate(f, "none",
               Submit("raw", 0.5f, proto::VERIFY_MODE_REJECTION, "none", proto::LOGPROBS_MODE_RAW));
  EXPECT_EQ(raw.tokens, processed.tokens);  // the mode changes the report, never the output
  ASSERT_NO_FATAL_FAILURE(ExpectEntriesMatchTheModel(*f.target, raw, 1.0));
  EXPECT_NE(raw.logprobs[0].logprob(), processed.logprobs[0].logprob());
}

}  // namespace
}  // namespace splitspec

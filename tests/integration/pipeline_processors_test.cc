// The context processors of the logits pipeline (runtime/spec/logits_pipeline.h:
// logit_bias, repetition, frequency and presence penalties) through the whole
// pipeline (coordinator, target worker, draft worker over channels) on a tiny
// generated GGUF pair:
//   - the joint law of 3 tokens, target alone and speculative (rejection k = 2
//     and k = 4, coupled), matches the processed law computed here in double
//     precision from the target's raw logits, with the penalties counting the
//     tokens before each position (chi-square: 1e-3 per draw, Bonferroni over its
//     checks; failing only if two independent draws fail);
//   - the same counts against a deliberately wrong processor (penalties blind to
//     the tokens generated before the position, the mistake a block verifier
//     makes when it penalizes every row by the committed tokens alone) fail, so
//     the harness can tell;
//   - greedy speculative == greedy plain, token for token, for every drafter.

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/net/spec_proto.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/spec/logits_pipeline.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/integration/in_process_pipeline.h"
#include "tests/integration/pipeline_law_check.h"
#include "tests/testing/chi_square.h"
#include "tests/testing/sequence_law.h"
#include "tests/testing/tiny_model_pair.h"
#include "tools/cluster/in_process_cluster.h"

namespace splitspec {
namespace {

using model::LastLogits;

constexpr int kTokens = 3;
const std::vector<int32_t> kPrompt = {17, 42, 99};

// The reference processors in double, written from their definitions (not from
// logits_pipeline.cc): bias, then repetition over prompt + generated, then
// frequency / presence over the generated tokens. `counted` are the generated
// tokens the penalties see (all of them for the true law).
std::vector<double> ReferenceProcessed(const std::vector<float>& logits,
                                       const spec::SamplingParams& params,
                                       const std::vector<int32_t>& counted) {
  std::vector<double> g(logits.begin(), logits.end());
  for (const auto& [id, bias] : params.logit_bias) g[id] += bias;
  std::set<int32_t> seen(kPrompt.begin(), kPrompt.end());
  seen.insert(counted.begin(), counted.end());
  for (int32_t token : seen) {
    g[token] = g[token] > 0 ? g[token] / params.repetition_penalty
                            : g[token] * params.repetition_penalty;
  }
  std::map<int32_t, int> count;
  for (int32_t token : counted) ++count[token];
  for (const auto& [token, n] : count) {
    g[token] -= n * params.frequency_penalty + params.presence_penalty;
  }
  return g;
}

// The law of the first kTokens processed tokens: sequence -> probability. With
// `blind` the weights (not the support) come from penalties that see none of
// the generated tokens: the deliberately wrong processor.
std::map<std::vector<int32_t>, double> ExactLaw(model::Transformer& model,
                                                const spec::SamplingParams& params, bool blind) {
  return spec::testing::ExactSequenceLaw(kTokens, [&](const std::vector<int32_t>& generated) {
    std::vector<int32_t> context = kPrompt;
    context.insert(context.end(), generated.begin(), generated.end());
    const std::vector<float> logits = LastLogits(model, context);
    const std::vector<double> truth = ReferenceProcessed(logits, params, generated);
    return spec::testing::TopKSoftmax(truth, blind ? ReferenceProcessed(logits, params, {}) : truth,
                                      params);
  });
}

// Every test runs on the tiny pair processors-target.gguf / processors-draft.gguf.
class PipelineProcessorsTest : public ::testing::Test, public model::TinyModelPair {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(Load("processors")); }
};

// Strong penalties and a bias that lifts a prompt token and buries the first
// row's favourite, so every processor changes the law.
spec::SamplingParams ProcessedParams(model::Transformer& target, float temperature) {
  spec::SamplingParams params;
  params.temperature = temperature;
  params.top_k = 3;  // 27 continuations: a small table
  params.presence_penalty = 0.6f;
  params.frequency_penalty = 0.8f;
  params.repetition_penalty = 1.5f;
  const std::vector<float> first = LastLogits(target, kPrompt);
  const int32_t favourite =
      static_cast<int32_t>(std::max_element(first.begin(), first.end()) - first.begin());
  params.logit_bias = {{kPrompt[1], 4.0f}, {favourite, -100.0f}};
  std::sort(params.logit_bias.begin(), params.logit_bias.end());
  EXPECT_NE(favourite, kPrompt[1]);
  return params;
}

proto::SubmitRequest Submit(const std::string& id, const spec::SamplingParams& params,
                            proto::VerifyMode mode, int k, const std::string& drafter,
                            int max_tokens) {
  return testing::MakeSubmit(id, kPrompt, net::SamplingParamsToProto(params), max_tokens, mode, k,
                             drafter);
}

TEST_F(PipelineProcessorsTest, ProcessedTokensFollowTheProcessedLawWithAndWithoutSpeculation) {
  auto pipeline = testing::StartTinyPairPipeline(*this, "model");
  ASSERT_TRUE(pipeline.ok()) << pipeline.status();

  const spec::SamplingParams params = ProcessedParams(*target, 1.0f);
  const auto law = ExactLaw(*target, params, /*blind=*/false);
  const auto wrong_law = ExactLaw(*target, params, /*blind=*/true);
  const testing::LawCheck check{.law = law,
                                .wrong_law = wrong_law,
                                .tokens = kTokens,
                                .samples = 3000,
                                .id_prefix = "p",
                                .label = "pipeline processors",
                                .wrong_label = "  the same counts vs penalties blind to the block"};
  testing::ExpectSetupsFollowTheLaw(*pipeline->client, testing::LawCheckSetups("plain"), check,
                                    [&](const std::string& id, const testing::SampledSetup& setup) {
                                      return Submit(id, params, setup.mode, setup.k, setup.drafter,
                                                    kTokens);
                                    });
}

// The first n greedy tokens of the target alone through the pipeline's rows.
std::vector<int32_t> PlainGreedy(model::Transformer& model, const spec::SamplingParams& params,
                                 int n) {
  return spec::testing::GreedySequence(n, [&](const std::vector<int32_t>& generated) {
    std::vector<int32_t> context = kPrompt;
    context.insert(context.end(), generated.begin(), generated.end());
    const std::vector<float> logits = LastLogits(model, context);
    std::vector<float> p(logits.size());
    spec::RowContext row;
    row.tokens = context;
    row.prompt_length = static_cast<int>(kPrompt.size());
    EXPECT_TRUE(spec::ProcessRow(params, row, logits, absl::MakeSpan(p)).ok());
    return p;
  });
}

TEST_F(PipelineProcessorsTest, GreedySpeculativeEqualsGreedyPlainForEveryDrafter) {
  constexpr int kNew = 24;
  const spec::SamplingParams params = ProcessedParams(*target, 0.0f);
  const std::vector<int32_t> plain = PlainGreedy(*target, params, kNew);
  spec::SamplingParams unprocessed;
  unprocessed.temperature = 0.0f;
  ASSERT_NE(plain, PlainGreedy(*target, unprocessed, kNew))
      << "the processors must change this output, or the test proves nothing";
  testing::ExpectGreedyEqualsPlainForEveryDrafter(
      *this, plain, [&](const std::string& id, int k, const std::string& drafter) {
        return Submit(id, params, proto::VERIFY_MODE_GREEDY, k, drafter, kNew);
      });
}

}  // namespace
}  // namespace splitspec

// The logits pipeline's context processors (runtime/spec/logits_pipeline.h):
// each transform's arithmetic on hand-made rows, their fixed order, the grammar
// mask's bitmask layout, and the errors that name what is wrong.
#include "runtime/spec/logits_pipeline.h"

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/spec/sampling.h"

namespace splitspec::spec {
namespace {

using ::testing::ElementsAre;
using ::testing::FloatEq;
using ::testing::HasSubstr;

RowContext Context(absl::Span<const int32_t> tokens, int prompt_length,
                   absl::Span<const uint32_t> allowed = {}) {
  RowContext context;
  context.tokens = tokens;
  context.prompt_length = prompt_length;
  context.allowed = allowed;
  return context;
}

std::vector<float> Processed(const SamplingParams& params, const RowContext& context,
                             std::vector<float> logits) {
  const absl::Status status = ProcessContext(params, context, absl::MakeSpan(logits));
  EXPECT_TRUE(status.ok()) << status;
  return logits;
}

TEST(LogitsPipelineTest, WithoutProcessorsARowIsBitwiseLogitsToProbs) {
  SamplingParams params;
  params.temperature = 0.7f;
  params.top_k = 3;
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 0.25f, -INFINITY};
  std::vector<float> expected(logits.size()), got(logits.size());
  ASSERT_TRUE(LogitsToProbs(params, logits, absl::MakeSpan(expected)).ok());
  const std::vector<int32_t> tokens = {1, 2, 2};
  ASSERT_TRUE(ProcessRow(params, Context(tokens, 1), logits,
                         absl::MakeSpan(got))
                  .ok());
  EXPECT_EQ(got, expected);
}

TEST(LogitsPipelineTest, LogitBiasAddsToTheNamedTokens) {
  SamplingParams params;
  params.logit_bias = {{0, -100.0f}, {2, std::log(3.0f)}};
  const std::vector<float> logits = {0.0f, 0.0f, 0.0f, 0.0f};
  std::vector<float> p(4);
  ASSERT_TRUE(ProcessRow(params, {}, logits, absl::MakeSpan(p)).ok());
  // exp(-100) is below float's resolution next to 1: token 0 is all but masked.
  EXPECT_NEAR(p[0], 0.0f, 1e-30f);
  EXPECT_NEAR(p[1], 0.2f, 1e-6f);
  EXPECT_NEAR(p[2], 0.6f, 1e-6f);
  EXPECT_NEAR(p[3], 0.2f, 1e-6f);
}

TEST(LogitsPipelineTest, RepetitionDividesPositiveAndMultipliesNegativeLogitsOfPromptAndOutput) {
  SamplingParams params;
  params.repetition_penalty = 2.0f;
  // Token 0 in the prompt, token 1 in the output (twice: penalized once), 2 and 3 unseen.
  const std::vector<int32_t> tokens = {0, 1, 1};
  EXPECT_THAT(Processed(params, Context(tokens, 1), {2.0f, -2.0f, 1.0f, 0.0f}),
              ElementsAre(FloatEq(1.0f), FloatEq(-4.0f), FloatEq(1.0f), FloatEq(0.0f)));
}

TEST(LogitsPipelineTest, FrequencyAndPresenceCountOnlyTheOutput) {
  SamplingParams params;
  params.frequency_penalty = 0.5f;
  params.presence_penalty = 0.25f;
  // Prompt: 3, 0. Output: 0, 0, 1.
  const std::vector<int32_t> tokens = {3, 0, 0, 0, 1};
  EXPECT_THAT(Processed(params, Context(tokens, 2), {1.0f, 1.0f, 1.0f, 1.0f}),
              ElementsAre(FloatEq(1.0f - 2 * 0.5f - 0.25f), FloatEq(1.0f - 0.5f - 0.25f),
                          FloatEq(1.0f), FloatEq(1.0f)));
  // The same tokens all in the prompt: nothing to count.
  EXPECT_THAT(Processed(params, Context(tokens, 5), {1.0f, 1.0f, 1.0f, 1.0f}),
              ElementsAre(FloatEq(1.0f), FloatEq(1.0f), FloatEq(1.0f), FloatEq(1.0f)));
}

TEST(LogitsPipelineTest, TheOrderIsMaskThenBiasThenRepetitionThenFrequency) {
  SamplingParams params;
  params.logit_bias = {{0, 1.0f}, {1, 5.0f}};
  params.repetition_penalty = 2.0f;
  params.frequency_penalty = 1.0f;
  const std::vector<int32_t> tokens = {0};
  const std::vector<uint32_t> allowed = {0b1101u};  // token 1 masked
  // Token 0: (1 + 1) / 2 - 1 = 0 (bias before repetition before frequency);
  // bias after repetition would give 1.5 - 1, frequency before repetition 0.5.
  EXPECT_THAT(Processed(params, Context(tokens, 0, allowed),
                        {1.0f, 1.0f, 1.0f, 1.0f}),
              ElementsAre(FloatEq(0.0f), -INFINITY, FloatEq(1.0f), FloatEq(1.0f)));
}

TEST(LogitsPipelineTest, GrammarMaskUsesXgrammarsBitmaskLayout) {
  SamplingParams params;
  std::vector<float> logits(40, 0.0f);
  std::vector<uint32_t> allowed = {0u, 1u << 3};  // only token 35
  std::vector<float> p(40);
  ASSERT_TRUE(ProcessRow(params, Context({}, 0, allowed), logits, absl::MakeSpan(p)).ok());
  for (int v = 0; v < 40; ++v) EXPECT_EQ(p[v], v == 35 ? 1.0f : 0.0f) << v;
  allowed = {0u, 0u};
  EXPECT_THAT(std::string(ProcessRow(params, Context({}, 0, allowed), logits, absl::MakeSpan(p))
                              .message()),
              HasSubstr("allows no token"));
  allowed = {1u};
  EXPECT_THAT(std::string(ProcessRow(params, Context({}, 0, allowed), logits, absl::MakeSpan(p))
                              .message()),
              HasSubstr("grammar mask has 1 words; a vocabulary of 40 needs 2"));
}

TEST(LogitsPipelineTest, ErrorsNameTheTokenOrTheField) {
  SamplingParams params;
  params.logit_bias = {{7, 1.0f}};
  std::vector<float> logits(4, 0.0f), p(4);
  EXPECT_THAT(std::string(ProcessRow(params, {}, logits, absl::MakeSpan(p)).message()),
              HasSubstr("logit_bias names token 7, outside the vocabulary [0, 4)"));
  params.logit_bias = {{1, 101.0f}};
  EXPECT_THAT(std::string(params.Validate().message()),
              HasSubstr("logit_bias of token 1 must be in [-100, 100], got 101"));
  params.logit_bias = {{2, 1.0f}, {1, 1.0f}};
  EXPECT_THAT(std::string(params.Validate().message()), HasSubstr("ascending and distinct"));
  params.logit_bias.clear();
  params.repetition_penalty = 0.0f;
  EXPECT_THAT(std::string(params.Validate().message()), HasSubstr("repetition_penalty"));
  params.repetition_penalty = 1.0f;
  params.presence_penalty = 2.5f;
  EXPECT_THAT(std::string(params.Validate().message()), HasSubstr("presence_penalty"));
  params.presence_penalty = 0.0f;
  params.frequency_penalty = 1.0f;
  const std::vector<int32_t> tokens = {9};
  EXPECT_THAT(std::string(ProcessRow(params, Context(tokens, 0), logits, absl::MakeSpan(p))
                              .message()),
              HasSubstr("context token 9 at index 0 is outside the vocabulary"));
}

TEST(LogitsPipelineTest, GuidedRowsRunTheProcessorsOnTheGuidedLogits) {
  SamplingParams params;
  params.temperature = 0.0f;  // greedy: the argmax of the processed guided logits
  params.guidance_scale = 2.0f;
  params.frequency_penalty = 2.0f;
  const std::vector<float> cond = {1.0f, 0.9f, 0.0f}, uncond = {0.0f, 0.5f, 0.0f};
  // Guided: {2, 1.3, 0}. Token 0 generated twice: 2 - 4 = -2, so token 1 wins.
  const std::vector<int32_t> tokens = {0, 0};
  std::vector<float> p(3);
  ASSERT_TRUE(GuidedProcessRow(params, Context(tokens, 0), cond, uncond, absl::MakeSpan(p)).ok());
  EXPECT_THAT(p, ElementsAre(0.0f, 1.0f, 0.0f));
  ASSERT_TRUE(GuidedProcessRow(params, {}, cond, uncond, absl::MakeSpan(p)).ok());
  EXPECT_THAT(p, ElementsAre(1.0f, 0.0f, 0.0f));
}

}  // namespace
}  // namespace splitspec::spec

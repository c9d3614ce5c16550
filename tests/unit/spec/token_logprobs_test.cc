// Log probabilities of committed tokens (runtime/spec/token_logprobs.h): the raw
// and processed rows against independent double-precision references, and the
// top-N selection.
#include "runtime/spec/token_logprobs.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/spec/logits_pipeline.h"

namespace splitspec::spec {
namespace {

// log_softmax(x / t) over the entries `keep` accepts, in double; -inf elsewhere.
std::vector<double> ReferenceLogSoftmax(const std::vector<float>& x, double t,
                                        const std::vector<bool>& keep) {
  double max = -INFINITY;
  for (size_t v = 0; v < x.size(); ++v)
    if (keep[v]) max = std::max(max, x[v] / t);
  double sum = 0.0;
  for (size_t v = 0; v < x.size(); ++v)
    if (keep[v]) sum += std::exp(x[v] / t - max);
  std::vector<double> out(x.size(), -INFINITY);
  for (size_t v = 0; v < x.size(); ++v)
    if (keep[v]) out[v] = x[v] / t - max - std::log(sum);
  return out;
}

std::vector<float> Logits() {
  std::vector<float> logits(300);
  for (size_t v = 0; v < logits.size(); ++v)
    logits[v] = static_cast<float>(std::sin(0.37 * v) * 6.0 + 0.01 * v);
  return logits;
}

void ExpectNear(const std::vector<float>& row, const std::vector<double>& reference) {
  ASSERT_EQ(row.size(), reference.size());
  for (size_t v = 0; v < row.size(); ++v) {
    if (std::isinf(reference[v])) {
      EXPECT_EQ(row[v], -INFINITY) << "token " << v;
    } else {
      EXPECT_NEAR(row[v], reference[v], 1e-6 * std::max(1.0, std::fabs(reference[v])))
          << "token " << v;
    }
  }
}

TEST(TokenLogprobsTest, RawRowIsTheLogSoftmaxOfTheLogits) {
  const std::vector<float> logits = Logits();
  SamplingParams params;
  params.temperature = 0.5f;  // raw ignores every processor
  params.logit_bias = {{3, 50.0f}};
  std::vector<float> row(logits.size());
  ASSERT_TRUE(LogprobRow(params, {}, logits, {}, {}, absl::MakeSpan(row)).ok());
  ExpectNear(row, ReferenceLogSoftmax(logits, 1.0, std::vector<bool>(logits.size(), true)));
}

TEST(TokenLogprobsTest, ProcessedRowAppliesBiasTemperatureAndTopK) {
  const std::vector<float> logits = Logits();
  SamplingParams params;
  params.temperature = 0.5f;
  params.top_k = 7;
  params.logit_bias = {{3, 5.0f}};
  params.logprobs_mode = LogprobsMode::kProcessed;
  std::vector<float> probs(logits.size());
  ASSERT_TRUE(ProcessRow(params, {}, logits, absl::MakeSpan(probs)).ok());
  std::vector<float> row(logits.size());
  ASSERT_TRUE(LogprobRow(params, {}, logits, {}, probs, absl::MakeSpan(row)).ok());
  // Reference: the biased logits / 0.5, normalized over the 7 best.
  std::vector<float> biased = logits;
  biased[3] += 5.0f;
  std::vector<int> order(biased.size());
  for (size_t v = 0; v < order.size(); ++v) order[v] = static_cast<int>(v);
  std::sort(order.begin(), order.end(), [&](int a, int b) { return biased[a] > biased[b]; });
  std::vector<bool> keep(biased.size(), false);
  for (int i = 0; i < 7; ++i) keep[order[i]] = true;
  const std::vector<double> reference = ReferenceLogSoftmax(biased, 0.5, keep);
  ExpectNear(row, reference);
  // exp(row) is the very p that is sampled.
  for (size_t v = 0; v < row.size(); ++v) EXPECT_NEAR(std::exp(row[v]), probs[v], 1e-6);
}

TEST(TokenLogprobsTest, ProcessedRowOfAGreedyRequestHasNoTemperatureAndNoTruncation) {
  const std::vector<float> logits = Logits();
  SamplingParams params;
  params.temperature = 0.0f;
  params.top_k = 3;  // not applied to a greedy request's processed row (vLLM)
  params.presence_penalty = 1.5f;
  params.logprobs_mode = LogprobsMode::kProcessed;
  const std::vector<int32_t> tokens = {9, 4, 4};
  RowContext context;
  context.tokens = tokens;
  context.prompt_length = 1;
  std::vector<float> row(logits.size());
  ASSERT_TRUE(LogprobRow(params, context, logits, {}, {}, absl::MakeSpan(row)).ok());
  std::vector<float> penalized = logits;
  penalized[4] -= 1.5f;  // in the output; token 9 is the prompt's
  ExpectNear(row, ReferenceLogSoftmax(penalized, 1.0, std::vector<bool>(logits.size(), true)));
}

TEST(TokenLogprobsTest, TemperatureChangesTheProcessedRowButNotTheRawOne) {
  const std::vector<float> logits = Logits();
  SamplingParams params;
  params.temperature = 2.0f;
  std::vector<float> probs(logits.size());
  ASSERT_TRUE(ProcessRow(params, {}, logits, absl::MakeSpan(probs)).ok());
  std::vector<float> raw(logits.size()), processed(logits.size());
  ASSERT_TRUE(LogprobRow(params, {}, logits, {}, probs, absl::MakeSpan(raw)).ok());
  params.logprobs_mode = LogprobsMode::kProcessed;
  ASSERT_TRUE(LogprobRow(params, {}, logits, {}, probs, absl::MakeSpan(processed)).ok());
  // Flatter at temperature 2: the best token is less likely than in the raw row.
  const TokenLogprob best_raw = TokenLogprobAt(raw, 0, 1);
  const TokenLogprob best_processed = TokenLogprobAt(processed, 0, 1);
  ASSERT_EQ(best_raw.top_ids, best_processed.top_ids);
  EXPECT_LT(best_processed.top_logprobs[0], best_raw.top_logprobs[0]);
  ExpectNear(processed, ReferenceLogSoftmax(logits, 2.0, std::vector<bool>(logits.size(), true)));
}

TEST(TokenLogprobsTest, TopListIsSortedWithLowerIdsFirstOnTies) {
  const std::vector<float> row = {-3.0f, -1.0f, -2.0f, -1.0f, -INFINITY, -0.5f};
  const TokenLogprob entry = TokenLogprobAt(row, 2, 4);
  EXPECT_EQ(entry.token, 2);
  EXPECT_EQ(entry.logprob, -2.0f);
  EXPECT_EQ(entry.top_ids, (std::vector<int32_t>{5, 1, 3, 2}));
  EXPECT_EQ(entry.top_logprobs, (std::vector<float>{-0.5f, -1.0f, -1.0f, -2.0f}));
  EXPECT_TRUE(TokenLogprobAt(row, 4, 0).top_ids.empty());
  EXPECT_EQ(TokenLogprobAt(row, 4, 0).logprob, -INFINITY);
  EXPECT_EQ(TokenLogprobAt(row, 0, 20).top_ids.size(), row.size());  // n past the vocabulary
}

TEST(TokenLogprobsTest, SamplingParamsRefuseMoreThanTwentyAlternatives) {
  SamplingParams params;
  params.logprobs = 21;
  EXPECT_NE(params.Validate().message().find("logprobs"), absl::string_view::npos);
  params.logprobs = 20;
  EXPECT_TRUE(params.Validate().ok());
}

}  // namespace
}  // namespace splitspec::spec

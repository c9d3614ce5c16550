#include "tests/integration/plain_greedy.h"

#include "gtest/gtest.h"
#include "runtime/spec/sampling.h"

namespace splitspec::testing {

std::vector<int32_t> PlainGreedy(model::LanguageModel& model, const std::vector<int32_t>& prompt,
                                 int n) {
  auto cache = model.NewCache();
  std::vector<int32_t> out, feed = prompt;
  spec::SamplingParams greedy;
  greedy.temperature = 0.0f;
  std::vector<float> probs(model.config().vocab_size);
  for (int i = 0; i < n; ++i) {
    model::ForwardOutput logits;
    EXPECT_TRUE(model.Forward({{cache.get(), feed, model::LogitsMode::kLast}}, &logits).ok());
    EXPECT_TRUE(spec::LogitsToProbs(greedy,
                                    absl::MakeConstSpan(logits.Row(0, 0), logits.vocab_size),
                                    absl::MakeSpan(probs))
                    .ok());
    out.push_back(*spec::ChooseTargetToken(spec::VerifyMode::kGreedy, probs, 0, 0));
    feed = {out.back()};
  }
  return out;
}

}  // namespace splitspec::testing

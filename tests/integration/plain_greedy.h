// The reference every speculative greedy test compares against: target-only
// greedy decoding with the model directly (prefill, then one token per step,
// argmax with the lowest id on ties, as the verification kernels choose it).
#ifndef SPLITSPEC_TESTS_INTEGRATION_PLAIN_GREEDY_H_
#define SPLITSPEC_TESTS_INTEGRATION_PLAIN_GREEDY_H_

#include <cstdint>
#include <vector>

#include "runtime/model/transformer.h"

namespace splitspec::testing {

// The first `n` greedy tokens after `prompt`. Fails the current test on error.
std::vector<int32_t> PlainGreedy(model::LanguageModel& model, const std::vector<int32_t>& prompt,
                                 int n);

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_INTEGRATION_PLAIN_GREEDY_H_

// Exact laws over short token sequences, in double, for the distribution tests to
// compare sampled sequences against (chi_square.h: ChiSquareTestAgainstLaw).
//
//   auto law = ExactSequenceLaw(3, [&](const std::vector<int32_t>& generated) {
//     return TopKSoftmax(logits_after(generated), logits_after(generated), params);
//   });
#ifndef SPLITSPEC_TESTS_TESTING_SEQUENCE_LAW_H_
#define SPLITSPEC_TESTS_TESTING_SEQUENCE_LAW_H_

#include <cstdint>
#include <functional>
#include <map>
#include <vector>

#include "runtime/spec/sampling_params.h"

namespace splitspec::spec::testing {

// The law of the first `length` tokens of a sequence whose next token after
// `generated` (the tokens so far) has probability next(generated)[id]: each sequence
// of nonzero probability -> the product of its tokens' probabilities, first to last.
std::map<std::vector<int32_t>, double> ExactSequenceLaw(
    int length,
    const std::function<std::vector<double>(const std::vector<int32_t>& generated)>& next);

// The greedy sequence of `length` tokens: each the argmax (the lowest id on ties) of
// next(generated), `generated` being the tokens so far.
std::vector<int32_t> GreedySequence(
    int length,
    const std::function<std::vector<float>(const std::vector<int32_t>& generated)>& next);

// Top-k then softmax at params.temperature: the `params.top_k` highest of `support`
// (ties at the cutoff all kept) get weights exp(weights / T), normalized; the rest 0.
// `weights` differing from `support` gives a deliberately wrong law on the same support.
std::vector<double> TopKSoftmax(const std::vector<double>& support,
                                const std::vector<double>& weights, const SamplingParams& params);

}  // namespace splitspec::spec::testing

#endif  // SPLITSPEC_TESTS_TESTING_SEQUENCE_LAW_H_

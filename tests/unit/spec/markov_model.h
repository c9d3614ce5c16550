// A tiny Markov "language model" for the runtime/spec tests: the distribution of
// the next token depends only on the previous one, p(x_t | x_{t-1}) = rows[x_{t-1}].
// It lets a test run the real speculative loop (draft, target rows, VerifyBlock)
// and compare the committed sequences with sampling the chain directly.
#ifndef SPLITSPEC_TESTS_UNIT_SPEC_MARKOV_MODEL_H_
#define SPLITSPEC_TESTS_UNIT_SPEC_MARKOV_MODEL_H_

#include <cstdint>
#include <random>
#include <vector>

#include "tests/unit/spec/spec_test_util.h"

namespace splitspec::spec::testing {

struct MarkovModel {
  int vocab = 0;
  std::vector<std::vector<float>> rows;  // [vocab][vocab], row = previous token

  static MarkovModel Random(int vocab, std::mt19937_64& rng, double zero_fraction) {
    MarkovModel m;
    m.vocab = vocab;
    for (int v = 0; v < vocab; ++v) m.rows.push_back(RandomDistribution(vocab, rng, zero_fraction));
    return m;
  }

  const std::vector<float>& Next(int32_t previous) const { return rows[previous]; }

  // Probability of the sequence `tokens` following `first`.
  double SequenceProbability(int32_t first, const std::vector<int32_t>& tokens) const {
    double probability = 1.0;
    int32_t previous = first;
    for (int32_t t : tokens) {
      probability *= ToDouble(rows[previous])[t];
      previous = t;
    }
    return probability;
  }
};

}  // namespace splitspec::spec::testing

#endif  // SPLITSPEC_TESTS_UNIT_SPEC_MARKOV_MODEL_H_

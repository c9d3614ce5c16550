// A distribution over a vocabulary given by its support: what a draft ships per
// drafted token (its top-q_top_k probabilities, renormalized), instead of a
// dense vocab-sized vector. Mirrors proto SparseDistribution.
//
//   SparseDistribution q = SparseDistribution::OneHot(token);
//   float mass = q.ProbabilityOf(token);  // 1
#ifndef SPLITSPEC_RUNTIME_SPEC_SPARSE_DISTRIBUTION_H_
#define SPLITSPEC_RUNTIME_SPEC_SPARSE_DISTRIBUTION_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"

namespace splitspec::spec {

struct SparseDistribution {
  std::vector<int32_t> token_ids;  // [n], unique, in [0, vocab)
  std::vector<float> probs;        // [n], >= 0, sums to 1 up to round-off

  static SparseDistribution OneHot(int32_t token) { return {{token}, {1.0f}}; }

  // Probability of `token` (0 outside the support). Linear in the support size.
  float ProbabilityOf(int32_t token) const;

  // OK, or InvalidArgument naming the entry at fault: sizes differ, an id outside
  // [0, vocab) or repeated, a probability negative or non-finite, no mass.
  absl::Status Validate(int32_t vocab) const;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_SPARSE_DISTRIBUTION_H_

#include "runtime/spec/sparse_distribution.h"

#include <cmath>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"

namespace splitspec::spec {

float SparseDistribution::ProbabilityOf(int32_t token) const {
  for (size_t j = 0; j < token_ids.size(); ++j) {
    if (token_ids[j] == token) return probs[j];
  }
  return 0.0f;
}

absl::Status SparseDistribution::Validate(int32_t vocab) const {
  if (token_ids.size() != probs.size()) {
    return absl::InvalidArgumentError(absl::StrCat("sparse distribution has ", token_ids.size(),
                                                   " token ids but ", probs.size(), " probs"));
  }
  absl::flat_hash_set<int32_t> seen;
  double total = 0.0;
  for (size_t j = 0; j < token_ids.size(); ++j) {
    const int32_t id = token_ids[j];
    if (id < 0 || id >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("sparse distribution entry ", j, ": token id ",
                                                     id, " outside [0, ", vocab, ")"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("sparse distribution entry ", j, ": token id ", id, " repeated"));
    }
    if (!std::isfinite(probs[j]) || probs[j] < 0.0f) {
      return absl::InvalidArgumentError(absl::StrCat("sparse distribution entry ", j, " (token ",
                                                     id, "): probability ", probs[j],
                                                     " is not finite and >= 0"));
    }
    total += probs[j];
  }
  if (!(total > 0.0)) return absl::InvalidArgumentError("sparse distribution has no mass");
  return absl::OkStatus();
}

}  // namespace splitspec::spec

#include "runtime/spec/ngram_drafter.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "runtime/spec/lookup_drafter.h"

namespace splitspec::spec {

absl::Status NgramDrafterConfig::Validate() const {
  if (min_n < 1)
    return absl::InvalidArgumentError(absl::StrCat("ngram min_n must be >= 1, got ", min_n));
  if (max_n < min_n) {
    return absl::InvalidArgumentError(
        absl::StrCat("ngram max_n must be >= min_n (", min_n, "), got ", max_n));
  }
  if (window < max_n + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("ngram window must be >= max_n + 1 (", max_n + 1, "), got ", window));
  }
  return absl::OkStatus();
}

std::vector<std::vector<int32_t>> NgramContinuations(absl::Span<const int32_t> context, int k,
                                                     int max_count,
                                                     const NgramDrafterConfig& config,
                                                     std::vector<int>* match_lengths) {
  std::vector<std::vector<int32_t>> continuations;
  if (match_lengths != nullptr) match_lengths->clear();
  if (k < 1 || max_count < 1) return continuations;
  absl::flat_hash_set<std::vector<int32_t>> seen;
  const int64_t length = static_cast<int64_t>(context.size());
  const int64_t window_begin = std::max<int64_t>(0, length - config.window);
  for (int n = std::min<int64_t>(config.max_n, length - 1); n >= config.min_n; --n) {
    const int32_t* suffix = context.data() + length - n;
    // Candidate matches start at j and end before the suffix itself; latest first.
    for (int64_t j = length - n - 1; j >= window_begin; --j) {
      if (!std::equal(suffix, suffix + n, context.data() + j)) continue;
      const int64_t from = j + n;
      const int64_t count = std::min<int64_t>(k, length - from);
      std::vector<int32_t> continuation(context.begin() + from, context.begin() + from + count);
      if (!seen.insert(continuation).second) continue;
      continuations.push_back(std::move(continuation));
      if (match_lengths != nullptr) match_lengths->push_back(n);
      if (static_cast<int>(continuations.size()) == max_count) return continuations;
    }
  }
  return continuations;
}

namespace {

// Whether a match of the context's last min_n tokens in the window continues
// with a token other than `token`: a match of any longer suffix ends in one.
bool ContestedAfterSuffix(absl::Span<const int32_t> context, int32_t token,
                          const NgramDrafterConfig& config) {
  const int64_t length = static_cast<int64_t>(context.size());
  const int n = config.min_n;
  const int32_t* suffix = context.data() + length - n;
  for (int64_t j = length - n - 1; j >= std::max<int64_t>(0, length - config.window); --j) {
    if (context[j + n] != token && std::equal(suffix, suffix + n, context.data() + j)) return true;
  }
  return false;
}

}  // namespace

std::vector<int32_t> NgramLookup(absl::Span<const int32_t> context, int k,
                                 const NgramDrafterConfig& config, std::vector<int8_t>* classes) {
  std::vector<int> lengths;
  std::vector<std::vector<int32_t>> first = NgramContinuations(context, k, 1, config, &lengths);
  if (classes != nullptr) classes->clear();
  if (first.empty()) return {};
  if (classes != nullptr) {
    const bool contested = ContestedAfterSuffix(context, first[0][0], config);
    for (int j = 0; j < static_cast<int>(first[0].size()); ++j)
      classes->push_back(LookupConfidenceClass(lengths[0] + j, j == 0 && contested));
  }
  return std::move(first[0]);
}

DraftTree NgramTreeProposal(absl::Span<const int32_t> context, int k, int tree_nodes,
                            const NgramDrafterConfig& config, std::vector<int8_t>* classes) {
  std::vector<int> lengths;
  const std::vector<std::vector<int32_t>> continuations =
      NgramContinuations(context, k, tree_nodes, config, &lengths);
  DraftTree tree = TrieFromContinuations(continuations, tree_nodes);
  if (classes != nullptr) {
    // As the chain's first position: node 0 is the chain's first token.
    const bool contested =
        !tree.tokens.empty() && ContestedAfterSuffix(context, tree.tokens[0], config);
    *classes = SuffixMatchTreeClasses(tree, continuations, lengths, contested);
  }
  return tree;
}

absl::Status NgramDrafter::Start(const std::string& request_id, absl::Span<const int32_t> tokens) {
  if (!held_.try_emplace(request_id, static_cast<int64_t>(tokens.size())).second) {
    return absl::AlreadyExistsError(
        absl::StrCat("ngram drafter: request '", request_id, "' already started"));
  }
  return absl::OkStatus();
}

absl::Status NgramDrafter::Truncate(const std::string& request_id, int64_t length) {
  auto it = held_.find(request_id);
  if (it == held_.end()) {
    return absl::NotFoundError(absl::StrCat("ngram drafter: unknown request '", request_id, "'"));
  }
  if (length < 0 || length > it->second) {
    return absl::OutOfRangeError(absl::StrCat("ngram drafter: cannot truncate request '",
                                              request_id, "' to ", length, " tokens, it holds ",
                                              it->second));
  }
  it->second = length;
  return absl::OkStatus();
}

void NgramDrafter::ProposeOne(DraftRequest& request) {
  request.tokens.clear();
  request.parents.clear();
  request.q.clear();
  request.confidence.clear();
  request.status = absl::OkStatus();
  auto it = held_.find(request.request_id);
  if (it == held_.end()) {
    request.status = absl::FailedPreconditionError(
        absl::StrCat("ngram drafter: request '", request.request_id, "' was not started"));
    return;
  }
  if (static_cast<int64_t>(request.context.size()) < it->second) {
    request.status = absl::FailedPreconditionError(absl::StrCat(
        "ngram drafter: request '", request.request_id, "' context has ", request.context.size(),
        " tokens but the drafter holds ", it->second, "; call Truncate first"));
    return;
  }
  if (request.k < 0 || request.q_top_k < 1 || request.tree_nodes < 0) {
    request.status = absl::InvalidArgumentError(
        absl::StrCat("ngram drafter: request '", request.request_id, "' has k = ", request.k,
                     ", q_top_k = ", request.q_top_k, ", tree_nodes = ", request.tree_nodes));
    return;
  }
  int64_t first_path = 0;  // the proposed tokens the drafter holds
  if (request.tree_nodes > 0) {
    DraftTree tree = NgramTreeProposal(request.context, request.k, request.tree_nodes, config_,
                                       &request.confidence);
    first_path = tree.FirstPathLength();
    request.tokens = std::move(tree.tokens);
    if (!tree.IsChain()) request.parents = std::move(tree.parents);
  } else {
    request.tokens = NgramLookup(request.context, request.k, config_, &request.confidence);
    first_path = static_cast<int64_t>(request.tokens.size());
  }
  if (request.mode == VerifyMode::kRejection) {
    for (int32_t token : request.tokens) request.q.push_back(SparseDistribution::OneHot(token));
  }
  it->second = static_cast<int64_t>(request.context.size()) + first_path;
}

absl::Status NgramDrafter::Propose(absl::Span<DraftRequest> batch) {
  for (DraftRequest& request : batch) ProposeOne(request);
  return absl::OkStatus();
}

}  // namespace splitspec::spec

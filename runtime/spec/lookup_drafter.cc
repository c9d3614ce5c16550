#include "runtime/spec/lookup_drafter.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"

namespace splitspec::spec {

absl::Status LookupDrafterConfig::Validate() const {
  auto bad = [](const char* field, int value, const std::string& want) {
    return absl::InvalidArgumentError(
        absl::StrCat("lookup drafter: ", field, " must be ", want, ", got ", value));
  };
  if (min_match < 1) return bad("min_match", min_match, ">= 1");
  if (max_match < min_match)
    return bad("max_match", max_match, absl::StrCat(">= min_match (", min_match, ")"));
  if (tokens_per_matched < 1) return bad("tokens_per_matched", tokens_per_matched, ">= 1");
  if (max_candidates < 1) return bad("max_candidates", max_candidates, ">= 1");
  return absl::OkStatus();
}

void LookupIndex::Extend(absl::Span<const int32_t> tokens) {
  for (int64_t i = size(); i < static_cast<int64_t>(tokens.size()); ++i) {
    tokens_.push_back(tokens[i]);
    positions_[tokens[i]].push_back(i);
  }
}

void LookupIndex::Truncate(int64_t length) {
  while (size() > std::max<int64_t>(length, 0)) {
    auto it = positions_.find(tokens_.back());
    it->second.pop_back();
    if (it->second.empty()) positions_.erase(it);
    tokens_.pop_back();
  }
}

int LookupIndex::SuffixMatchLength(int64_t j, int max_match) const {
  const int64_t n = size();
  int length = 1;
  while (length < max_match && j - length >= 0 && tokens_[j - length] == tokens_[n - 1 - length]) {
    ++length;
  }
  return length;
}

LookupMatch LookupIndex::Find(const LookupDrafterConfig& config) const {
  const int64_t n = size();
  LookupMatch best;
  if (n < 2) return best;
  auto it = positions_.find(tokens_[n - 1]);
  const std::vector<int64_t>& occurrences = it->second;  // the last token itself is the final entry
  int examined = 0;
  for (auto pos = occurrences.rbegin() + 1;
       pos != occurrences.rend() && examined < config.max_candidates; ++pos, ++examined) {
    const int64_t j = *pos;
    const int length = SuffixMatchLength(j, config.max_match);
    if (length > best.length) best = {j + 1, length};
    if (length == config.max_match) break;  // nothing later can be longer; this is the latest such
  }
  if (best.length < config.min_match) return LookupMatch{};
  return best;
}

std::vector<LookupMatch> LookupIndex::FindAll(const LookupDrafterConfig& config) const {
  const int64_t n = size();
  std::vector<LookupMatch> matches;
  if (n < 2) return matches;
  const std::vector<int64_t>& occurrences = positions_.find(tokens_[n - 1])->second;
  int examined = 0;
  for (auto pos = occurrences.rbegin() + 1;
       pos != occurrences.rend() && examined < config.max_candidates; ++pos, ++examined) {
    const int64_t j = *pos;
    const int length = SuffixMatchLength(j, config.max_match);
    if (length >= config.min_match) matches.push_back({j + 1, length});
  }
  // Latest first already: a stable sort by length keeps the latest among equals first.
  std::stable_sort(matches.begin(), matches.end(),
                   [](const LookupMatch& a, const LookupMatch& b) { return a.length > b.length; });
  return matches;
}

int8_t LookupConfidenceClass(int suffix_match, bool contested) {
  // Measured on the grounded workload (26 requests, README "Speculation policy"):
  // a contested 1-token match is accepted ~13% of the time; an uncontested one or a
  // contested 2-token match ~45%; 2-5 tokens ~60-76%; 6 or more ~85-92%.
  if (suffix_match <= 1) return contested ? 0 : 1;
  if (suffix_match == 2 && contested) return 1;
  return suffix_match < 6 ? 2 : 3;
}

std::vector<int8_t> SuffixMatchTreeClasses(const DraftTree& tree,
                                           absl::Span<const std::vector<int32_t>> continuations,
                                           absl::Span<const int> match_lengths, bool contested) {
  std::vector<int8_t> classes;
  classes.reserve(tree.tokens.size());
  std::vector<std::vector<int32_t>> paths(tree.tokens.size());  // each node's tokens from the root
  for (size_t i = 0; i < tree.tokens.size(); ++i) {
    if (tree.parents[i] >= 0) paths[i] = paths[tree.parents[i]];
    paths[i].push_back(tree.tokens[i]);
    // Continuations were inserted in order: the first through the node added it.
    size_t j = 0;
    while (j + 1 < continuations.size() &&
           !(continuations[j].size() >= paths[i].size() &&
             std::equal(paths[i].begin(), paths[i].end(), continuations[j].begin()))) {
      ++j;
    }
    const int depth = static_cast<int>(paths[i].size());
    classes.push_back(
        LookupConfidenceClass(match_lengths[j] + depth - 1, depth == 1 && contested));
  }
  return classes;
}

namespace {

// The continuation of `match` in `context` that the chain would propose.
absl::Span<const int32_t> MatchContinuation(absl::Span<const int32_t> context,
                                            const LookupMatch& match, int k,
                                            const LookupDrafterConfig& config) {
  const int64_t available = static_cast<int64_t>(context.size()) - match.continuation;
  const int64_t count = std::min<int64_t>(
      {k, static_cast<int64_t>(config.tokens_per_matched) * match.length, available});
  return context.subspan(match.continuation, std::max<int64_t>(count, 0));
}

// The trie of every match's continuation; `classes` (if not null) gets each node's
// confidence class (SuffixMatchTreeClasses).
DraftTree TreeFromMatches(absl::Span<const int32_t> context, const LookupIndex& index, int k,
                          int tree_nodes, const LookupDrafterConfig& config,
                          std::vector<int8_t>* classes) {
  const std::vector<LookupMatch> matches = index.FindAll(config);
  std::vector<std::vector<int32_t>> continuations;
  std::vector<int> lengths;
  bool contested = false;
  for (const LookupMatch& match : matches) {
    const absl::Span<const int32_t> c = MatchContinuation(context, match, k, config);
    continuations.emplace_back(c.begin(), c.end());
    lengths.push_back(match.length);
    contested = contested || (!c.empty() && !continuations.front().empty() &&
                              c[0] != continuations.front()[0]);
  }
  DraftTree tree = TrieFromContinuations(continuations, tree_nodes);
  if (classes != nullptr) *classes = SuffixMatchTreeClasses(tree, continuations, lengths, contested);
  return tree;
}

}  // namespace

std::vector<int32_t> LookupProposal(absl::Span<const int32_t> context, int k,
                                    const LookupDrafterConfig& config) {
  LookupIndex index;
  index.Extend(context);
  const LookupMatch match = index.Find(config);
  if (match.length == 0 || k <= 0) return {};
  const absl::Span<const int32_t> c = MatchContinuation(context, match, k, config);
  return std::vector<int32_t>(c.begin(), c.end());
}

DraftTree LookupTreeProposal(absl::Span<const int32_t> context, int k, int tree_nodes,
                             const LookupDrafterConfig& config, std::vector<int8_t>* classes) {
  LookupIndex index;
  index.Extend(context);
  return TreeFromMatches(context, index, k, tree_nodes, config, classes);
}

absl::Status LookupDrafter::Start(const std::string& request_id, absl::Span<const int32_t> tokens) {
  auto [it, inserted] = requests_.try_emplace(request_id);
  if (!inserted) {
    return absl::AlreadyExistsError(
        absl::StrCat("lookup drafter: request '", request_id, "' already started"));
  }
  it->second.held = static_cast<int64_t>(tokens.size());
  it->second.index.Extend(tokens);
  return absl::OkStatus();
}

absl::Status LookupDrafter::Truncate(const std::string& request_id, int64_t length) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("lookup drafter: unknown request '", request_id, "'"));
  }
  if (length < 0 || length > it->second.held) {
    return absl::OutOfRangeError(absl::StrCat("lookup drafter: cannot truncate request '",
                                              request_id, "' to ", length, " tokens, it holds ",
                                              it->second.held));
  }
  it->second.held = length;
  it->second.index.Truncate(length);
  return absl::OkStatus();
}

void LookupDrafter::ProposeOne(DraftRequest& request) {
  request.tokens.clear();
  request.parents.clear();
  request.q.clear();
  request.confidence.clear();
  request.status = absl::OkStatus();
  auto it = requests_.find(request.request_id);
  if (it == requests_.end()) {
    request.status = absl::FailedPreconditionError(
        absl::StrCat("lookup drafter: request '", request.request_id, "' was not started"));
    return;
  }
  RequestState& state = it->second;
  const int64_t length = static_cast<int64_t>(request.context.size());
  if (length < state.held) {
    request.status = absl::FailedPreconditionError(
        absl::StrCat("lookup drafter: request '", request.request_id, "' context has ", length,
                     " tokens but the drafter holds ", state.held, "; call Truncate first"));
    return;
  }
  if (request.k < 0 || request.q_top_k < 1 || request.tree_nodes < 0) {
    request.status = absl::InvalidArgumentError(
        absl::StrCat("lookup drafter: request '", request.request_id, "' has k = ", request.k,
                     ", q_top_k = ", request.q_top_k, ", tree_nodes = ", request.tree_nodes));
    return;
  }
  state.index.Extend(request.context);
  int64_t first_path = 0;  // the proposed tokens the drafter holds
  if (request.tree_nodes > 0 && request.k > 0) {
    DraftTree tree = TreeFromMatches(request.context, state.index, request.k,
                                     request.tree_nodes, config_, &request.confidence);
    first_path = tree.FirstPathLength();
    request.tokens = std::move(tree.tokens);
    if (!tree.IsChain()) request.parents = std::move(tree.parents);
  } else {
    const LookupMatch match = state.index.Find(config_);
    if (match.length > 0 && request.k > 0) {
      const absl::Span<const int32_t> c =
          MatchContinuation(request.context, match, request.k, config_);
      request.tokens.assign(c.begin(), c.end());
      // Contested: another occurrence of the suffix continues differently.
      bool contested = false;
      for (const LookupMatch& other : state.index.FindAll(config_)) {
        if (c.empty() || other.continuation >= length) continue;
        contested = contested || request.context[other.continuation] != c[0];
      }
      for (int j = 0; j < static_cast<int>(c.size()); ++j)
        request.confidence.push_back(LookupConfidenceClass(match.length + j, j == 0 && contested));
    }
    first_path = static_cast<int64_t>(request.tokens.size());
  }
  if (request.mode == VerifyMode::kRejection) {
    for (int32_t token : request.tokens) request.q.push_back(SparseDistribution::OneHot(token));
  }
  state.held = length + first_path;
}

absl::Status LookupDrafter::Propose(absl::Span<DraftRequest> batch) {
  for (DraftRequest& request : batch) ProposeOne(request);
  return absl::OkStatus();
}

}  // namespace splitspec::spec

#include "runtime/spec/speculation_cache.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace splitspec::spec {
namespace {

// The guesses in `top` other than `excluded`, with their shares of the guesses' mass.
std::vector<std::pair<int32_t, double>> Shares(const SparseDistribution& top, int32_t excluded,
                                               int limit) {
  std::vector<std::pair<int32_t, double>> out;
  double total = 0.0;
  for (size_t i = 0; i < top.token_ids.size(); ++i) {
    if (top.token_ids[i] == excluded) continue;
    if (static_cast<int>(out.size()) >= limit) break;
    out.emplace_back(top.token_ids[i], top.probs[i]);
    total += top.probs[i];
  }
  for (auto& [token, share] : out) share = total > 0.0 ? share / total : 1.0 / out.size();
  return out;
}

}  // namespace

absl::Status SpeculationCacheConfig::Validate() const {
  if (max_branches < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("max_branches must be >= 1, got ", max_branches));
  if (bonus_candidates < 1)
    return absl::InvalidArgumentError(
        absl::StrCat("bonus_candidates must be >= 1, got ", bonus_candidates));
  if (correction_candidates < 0)
    return absl::InvalidArgumentError(
        absl::StrCat("correction_candidates must be >= 0, got ", correction_candidates));
  if (!(min_probability >= 0.0 && min_probability < 1.0))
    return absl::InvalidArgumentError(
        absl::StrCat("min_probability must be in [0, 1), got ", min_probability));
  return absl::OkStatus();
}

void SpeculationCacheCounters::Merge(const SpeculationCacheCounters& o) {
  planned_blocks += o.planned_blocks;
  branches += o.branches;
  drafted_tokens += o.drafted_tokens;
  lookups += o.lookups;
  hits += o.hits;
  partial_hits += o.partial_hits;
  misses += o.misses;
  used_tokens += o.used_tokens;
  lookups_all_accepted += o.lookups_all_accepted;
  hits_all_accepted += o.hits_all_accepted;
  lookups_rejected += o.lookups_rejected;
  hits_rejected += o.hits_rejected;
  dropped += o.dropped;
  unplanned_blocks += o.unplanned_blocks;
}

double SpeculationCacheCounters::HitRate() const {
  return lookups == 0 ? 0.0 : static_cast<double>(hits + partial_hits) / lookups;
}

SpeculationCache::SpeculationCache(const SpeculationCacheConfig& config) : config_(config) {}

void SpeculationCache::AddBranch(CacheOutcome outcome, double probability, int wanted) {
  if (probability < config_.min_probability) return;
  if (static_cast<int>(branches_.size()) >= config_.max_branches) return;
  CacheBranch branch;
  branch.outcome = outcome;
  branch.probability = probability;
  branch.wanted = wanted;
  branches_.push_back(std::move(branch));
}

void SpeculationCache::Plan(uint64_t epoch, uint64_t block_sequence,
                            absl::Span<const int32_t> block,
                            absl::Span<const SparseDistribution> top, double alpha,
                            int branch_tokens, int budget) {
  Clear();
  if (block.empty() || branch_tokens < 1) return;
  alpha = std::clamp(alpha, 0.0, 1.0);
  planned_ = true;
  epoch_ = epoch;
  block_sequence_ = block_sequence;
  block_.assign(block.begin(), block.end());
  alpha_ = alpha;
  branch_tokens_ = branch_tokens;
  budget_ = std::max(0, budget);
  spent_ = 0;
  ++counters_.planned_blocks;
  const int k = static_cast<int>(block.size());
  // The all-accepted branch drafts its bonus pick first: one token more.
  AddBranch({k, -1}, std::pow(alpha, k) * alpha, branch_tokens + 1);
  if (top.size() != block.size()) return;
  for (int j = 0; j < k; ++j) {
    const double rejected_here = std::pow(alpha, j) * (1.0 - alpha);
    for (const auto& [token, share] : Shares(top[j], block[j], config_.correction_candidates))
      AddBranch({j, token}, rejected_here * share, branch_tokens);
  }
}

void SpeculationCache::AddBonusAlternatives(int32_t pick, const SparseDistribution& top) {
  const double all_accepted = std::pow(alpha_, static_cast<int>(block_.size()));
  for (const auto& [token, share] : Shares(top, pick, config_.bonus_candidates - 1)) {
    AddBranch({static_cast<int>(block_.size()), token}, all_accepted * (1.0 - alpha_) * share,
              branch_tokens_);
  }
}

std::optional<CacheWork> SpeculationCache::Next() const {
  if (!planned_ || spent_ >= budget_) return std::nullopt;
  int best = -1;
  for (size_t i = 0; i < branches_.size(); ++i) {
    const CacheBranch& b = branches_[i];
    if (b.closed) continue;
    if (best < 0 || b.probability > branches_[best].probability) best = static_cast<int>(i);
  }
  if (best < 0) return std::nullopt;
  const CacheBranch& b = branches_[best];
  const int left = b.wanted - static_cast<int>(b.tokens.size());
  return CacheWork{best, std::min(left, budget_ - spent_)};
}

std::vector<int32_t> SpeculationCache::Prefix(int branch) const {
  const CacheBranch& b = branches_[branch];
  std::vector<int32_t> prefix(block_.begin(), block_.begin() + b.outcome.accepted);
  if (b.outcome.next_token >= 0) prefix.push_back(b.outcome.next_token);
  return prefix;
}

void SpeculationCache::Extend(int branch, absl::Span<const int32_t> tokens,
                              absl::Span<const SparseDistribution> q,
                              absl::Span<const SparseDistribution> top) {
  CacheBranch& b = branches_[branch];
  if (tokens.empty()) return;
  if (b.drafted == 0) ++counters_.branches;
  b.drafted += static_cast<int>(tokens.size());
  spent_ += static_cast<int>(tokens.size());
  counters_.drafted_tokens += tokens.size();
  size_t first = 0;
  if (b.outcome.next_token < 0) {
    // The bonus pick: it names this branch's outcome and ranks the other candidates.
    b.outcome.next_token = tokens[0];
    b.wanted -= 1;
    first = 1;
    if (!top.empty()) {
      const SparseDistribution bonus_top = top[0];
      AddBonusAlternatives(tokens[0], bonus_top);  // may reallocate branches_
    }
  }
  CacheBranch& extended = branches_[branch];
  for (size_t i = first; i < tokens.size(); ++i) {
    extended.tokens.push_back(tokens[i]);
    if (i < q.size()) extended.q.push_back(q[i]);
    if (i < top.size()) extended.top.push_back(top[i]);
  }
  if (static_cast<int>(extended.tokens.size()) >= extended.wanted) extended.closed = true;
}

void SpeculationCache::Close(int branch) { branches_[branch].closed = true; }

std::optional<CacheBranch> SpeculationCache::Take(uint64_t epoch, uint64_t block_sequence,
                                                  CacheOutcome outcome) {
  ++counters_.lookups;
  const bool all_accepted = planned_ && outcome.accepted == static_cast<int>(block_.size());
  ++(all_accepted ? counters_.lookups_all_accepted : counters_.lookups_rejected);
  std::optional<CacheBranch> found;
  if (planned_ && epoch == epoch_ && block_sequence == block_sequence_) {
    for (CacheBranch& b : branches_) {
      if (b.outcome == outcome && !b.tokens.empty()) {
        found = std::move(b);
        break;
      }
    }
  }
  if (found.has_value()) {
    const bool complete = static_cast<int>(found->tokens.size()) >= found->wanted;
    ++(complete ? counters_.hits : counters_.partial_hits);
    ++(all_accepted ? counters_.hits_all_accepted : counters_.hits_rejected);
    counters_.used_tokens += found->tokens.size();
  } else {
    ++counters_.misses;
  }
  planned_ = false;
  branches_.clear();
  block_.clear();
  return found;
}

void SpeculationCache::Clear() {
  if (planned_) ++counters_.dropped;
  planned_ = false;
  branches_.clear();
  block_.clear();
  budget_ = spent_ = 0;
}

void SpeculationCache::SkipBlock() {
  Clear();
  ++counters_.unplanned_blocks;
}

}  // namespace splitspec::spec

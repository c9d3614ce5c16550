// The speculation cache's bookkeeping (issue #18; cf. SSD / Saguaro): while the
// target verifies a block, the draft worker pre-drafts the next block for the
// most likely outcomes of that verification, so that on a hit it can send the
// next block the moment the result arrives instead of drafting it then.
//
//   SpeculationCache cache(config);
//   cache.Plan(epoch, block_sequence, block_tokens, block_top, alpha, next_k, budget);
//   while (std::optional<CacheWork> work = cache.Next()) {   // between polls for the result
//     context = base + cache.Prefix(work->branch) + branch's drafted tokens;
//     ... draft up to work->tokens tokens from context ...
//     cache.Extend(work->branch, tokens, q, top);
//   }
//   std::optional<CacheBranch> hit = cache.Take(block_sequence, {accepted, next_token});
//
// Outcomes of a block of k drafts: the first rejection at position j (0 <= j < k:
// j tokens accepted, then the target's correction) or all k accepted (then the
// target's bonus token). A branch is one outcome with one guess at its next token:
//   all accepted: the draft's own pick for position k (the branch drafts it first,
//     then the block after it), and after that the draft's other top candidates;
//   rejection at j: the draft's most likely tokens at j other than the rejected one.
// Probabilities (geometric fan-out under the measured per-token acceptance alpha):
//   P(all accepted) = alpha^k,  P(first rejection at j) = alpha^j (1 - alpha);
//   the draft's own bonus pick is right with probability alpha; any other guess c
//   takes its share of the rest by the draft's probabilities (renormalized over
//   the guesses, the drafted/picked token excluded).
// Branches are drafted one after another, most probable first, each to completion
// (a result that arrives earlier may still hit the branch in progress: a partial
// hit, whose rest is drafted then). At most `max_branches` branches, none below
// `min_probability`, and at most `budget` drafted tokens per block in flight: the
// caller sets the budget from the measured cost ratio (the draft tokens that fit
// in one verification), so a fast draft fans out wide and a slow one stays on the
// likeliest outcome.
//
// Exactness: nothing here decides what is committed. A cached branch is a block
// drafted by the same drafter from exactly the context it will be proposed at (the
// outcome fixes that context), with the q it was drafted from; the target verifies
// it like any other block. The cache only changes when a block is drafted, and
// which one arrives first.
//
// Thread-compatible; one per request, owned by the draft worker's loop.
#ifndef SPLITSPEC_RUNTIME_SPEC_SPECULATION_CACHE_H_
#define SPLITSPEC_RUNTIME_SPEC_SPECULATION_CACHE_H_

#include <cstdint>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/spec/sparse_distribution.h"

namespace splitspec::spec {

struct SpeculationCacheConfig {
  int max_branches = 8;           // branches per block in flight; >= 1
  int bonus_candidates = 2;       // all-accepted branches: the draft's pick + others; >= 1
  int correction_candidates = 1;  // branches per rejection position; >= 0
  double min_probability = 0.02;  // skip outcomes estimated less likely; [0, 1)

  // OK, or InvalidArgument naming the first field out of range and its value.
  absl::Status Validate() const;
};

// What the target did with a block: `accepted` drafts, then `next_token`.
struct CacheOutcome {
  int accepted = 0;
  int32_t next_token = -1;
  bool operator==(const CacheOutcome&) const = default;
};

struct CacheBranch {
  // next_token is -1 while the all-accepted branch has not drafted its bonus pick.
  CacheOutcome outcome;
  double probability = 0.0;             // estimated P(this outcome and this next token)
  int wanted = 0;                       // tokens still wanted in all: block length (+1 pick)
  int drafted = 0;                      // tokens drafted for it, the bonus pick included
  std::vector<int32_t> tokens;          // the pre-drafted block after next_token
  std::vector<SparseDistribution> q;    // [tokens.size()] in rejection mode, else empty
  std::vector<SparseDistribution> top;  // [tokens.size()] or empty: alternatives per token
  bool closed = false;                  // complete, or abandoned after a draft failure
};

// One unit of work for the caller: draft up to `tokens` tokens for branch `branch`.
struct CacheWork {
  int branch = 0;
  int tokens = 0;
};

struct SpeculationCacheCounters {
  uint64_t planned_blocks = 0;  // blocks the cache planned branches for
  uint64_t branches = 0;        // branches started (at least one token drafted)
  uint64_t drafted_tokens = 0;  // tokens drafted for branches (bonus picks included)
  uint64_t lookups = 0;         // results looked up
  uint64_t hits = 0;            // complete branch found: sent at once
  uint64_t partial_hits = 0;    // branch found with part of its block drafted
  uint64_t misses = 0;          // no drafted branch for the outcome
  uint64_t used_tokens = 0;     // pre-drafted tokens that went out in a block
  uint64_t lookups_all_accepted = 0, hits_all_accepted = 0;  // hits: full or partial
  uint64_t lookups_rejected = 0, hits_rejected = 0;
  uint64_t dropped = 0;           // plans dropped without a lookup (new epoch, resync)
  uint64_t unplanned_blocks = 0;  // blocks left without a plan (the caller's SkipBlock)

  void Merge(const SpeculationCacheCounters& other);
  // (hits + partial_hits) / lookups; 0 without lookups.
  double HitRate() const;
};

class SpeculationCache {
 public:
  // REQUIRES config.Validate().ok().
  explicit SpeculationCache(const SpeculationCacheConfig& config);

  // Plans branches for the block `block_sequence` of `epoch` now in flight and
  // drops every earlier entry. `block` [k >= 1] the drafted tokens; `top` [k] the
  // draft's alternatives per position, or empty (then only all-accepted branches);
  // `alpha` in [0, 1]; `branch_tokens` >= 1 the next block's length; `budget` >= 0
  // draft tokens this block's branches may spend. An empty block plans nothing.
  void Plan(uint64_t epoch, uint64_t block_sequence, absl::Span<const int32_t> block,
            absl::Span<const SparseDistribution> top, double alpha, int branch_tokens, int budget);

  // The next work while the budget lasts: the most probable open branch. nullopt
  // when nothing is planned or left.
  std::optional<CacheWork> Next() const;

  // The tokens between the block's start and the branch's drafted tokens: the
  // accepted drafts, then next_token (the whole block for the all-accepted branch
  // before its bonus pick). Draft the branch from start context + Prefix + tokens.
  std::vector<int32_t> Prefix(int branch) const;

  // Appends drafted tokens to `branch` (q, top: parallel to tokens, or empty). For
  // the all-accepted branch without a bonus pick, the first token is that pick and
  // its `top` row adds the other bonus candidates. Charges the budget.
  void Extend(int branch, absl::Span<const int32_t> tokens, absl::Span<const SparseDistribution> q,
              absl::Span<const SparseDistribution> top);
  // Stops drafting `branch` (its drafter failed); what it has stays usable.
  void Close(int branch);

  // The result of the block in flight: the branch drafted for `outcome` (tokens
  // possibly fewer than wanted: a partial hit), or nullopt (a miss, also for any
  // other block or epoch). Drops every entry either way.
  std::optional<CacheBranch> Take(uint64_t epoch, uint64_t block_sequence, CacheOutcome outcome);

  // Drops every entry without a lookup (a new epoch or a resync made them stale).
  void Clear();
  // The block just sent gets no plan (the caller judged pre-drafting not worth it):
  // Clear, counted as unplanned_blocks.
  void SkipBlock();

  bool planned() const { return planned_; }
  uint64_t block_sequence() const { return block_sequence_; }
  int budget_left() const { return budget_ - spent_; }
  const std::vector<CacheBranch>& branches() const { return branches_; }
  const SpeculationCacheCounters& counters() const { return counters_; }

 private:
  void AddBranch(CacheOutcome outcome, double probability, int wanted);
  void AddBonusAlternatives(int32_t pick, const SparseDistribution& top);

  SpeculationCacheConfig config_;
  bool planned_ = false;
  uint64_t epoch_ = 0;
  uint64_t block_sequence_ = 0;
  std::vector<int32_t> block_;
  double alpha_ = 0.0;
  int branch_tokens_ = 0;
  int budget_ = 0;
  int spent_ = 0;
  std::vector<CacheBranch> branches_;
  SpeculationCacheCounters counters_;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_SPECULATION_CACHE_H_

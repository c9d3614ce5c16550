// SpeculationCache (runtime/spec/speculation_cache.h): which outcomes it plans, in
// which order, within which budget; hit / partial hit / miss for every outcome
// shape of a block; stale entries dropped.
#include "runtime/spec/speculation_cache.h"

#include <cmath>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::spec {
namespace {

// Alternatives at one position: `tokens` with decreasing probabilities.
SparseDistribution Top(std::vector<int32_t> tokens) {
  SparseDistribution d;
  float p = 0.5f;
  for (int32_t t : tokens) {
    d.token_ids.push_back(t);
    d.probs.push_back(p);
    p /= 2;
  }
  return d;
}

// A block of 3 drafts {10, 11, 12}; at each position the draft ranks its own token
// first, then 20 + j, then 30 + j.
const std::vector<int32_t> kBlock = {10, 11, 12};
std::vector<SparseDistribution> BlockTop() {
  return {Top({10, 20, 30}), Top({11, 21, 31}), Top({12, 22, 32})};
}

// Drafts every branch to completion, with block tokens 100 * (branch + 1) + i
// (and, for the all-accepted branch, the bonus pick 50 ranked before 51, 52).
void DraftAll(SpeculationCache& cache, int max_steps = 100) {
  for (int step = 0; step < max_steps; ++step) {
    std::optional<CacheWork> work = cache.Next();
    if (!work.has_value()) return;
    ASSERT_GE(work->tokens, 1);
    const CacheBranch& b = cache.branches()[work->branch];
    if (b.outcome.next_token < 0) {
      cache.Extend(work->branch, std::vector<int32_t>{50}, {}, {Top({50, 51, 52})});
      continue;
    }
    const int32_t token = 100 * (work->branch + 1) + static_cast<int>(b.tokens.size());
    cache.Extend(work->branch, std::vector<int32_t>{token}, {}, {Top({token})});
  }
}

TEST(SpeculationCacheTest, PlansTheLikeliestOutcomesFirstWithGeometricFanOut) {
  SpeculationCacheConfig config;
  config.max_branches = 16;
  config.bonus_candidates = 3;
  config.correction_candidates = 2;
  config.min_probability = 0.0;
  SpeculationCache cache(config);
  const double alpha = 0.8;
  cache.Plan(/*epoch=*/1, /*block_sequence=*/5, kBlock, BlockTop(), alpha, /*branch_tokens=*/2,
             /*budget=*/1000);
  // Before any drafting: the all-accepted branch (pick unknown) and 2 corrections per j.
  ASSERT_EQ(cache.branches().size(), 7u);
  EXPECT_EQ(cache.branches()[0].outcome, (CacheOutcome{3, -1}));
  EXPECT_NEAR(cache.branches()[0].probability, std::pow(alpha, 3) * alpha, 1e-12);
  // Rejection at j with the draft's runner-up (share 2/3 of the two guesses).
  EXPECT_EQ(cache.branches()[1].outcome, (CacheOutcome{0, 20}));
  EXPECT_NEAR(cache.branches()[1].probability, (1 - alpha) * 2.0 / 3.0, 1e-6);
  EXPECT_EQ(cache.branches()[2].outcome, (CacheOutcome{0, 30}));
  EXPECT_EQ(cache.branches()[5].outcome, (CacheOutcome{2, 22}));
  EXPECT_NEAR(cache.branches()[5].probability, alpha * alpha * (1 - alpha) * 2.0 / 3.0, 1e-6);
  // The first work is the likeliest outcome: all accepted, pick + 2 tokens.
  std::optional<CacheWork> first = cache.Next();
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->branch, 0);
  EXPECT_EQ(first->tokens, 3);
  EXPECT_EQ(cache.Prefix(0), kBlock);
  // Its bonus pick adds the other bonus candidates (51, 52), less likely.
  cache.Extend(0, std::vector<int32_t>{50}, {}, {Top({50, 51, 52})});
  ASSERT_EQ(cache.branches().size(), 9u);
  EXPECT_EQ(cache.branches()[0].outcome, (CacheOutcome{3, 50}));
  EXPECT_EQ(cache.branches()[7].outcome, (CacheOutcome{3, 51}));
  EXPECT_EQ(cache.branches()[8].outcome, (CacheOutcome{3, 52}));
  EXPECT_NEAR(cache.branches()[7].probability, std::pow(alpha, 3) * (1 - alpha) * 2.0 / 3.0,
              1e-6);
  EXPECT_EQ(cache.Prefix(0), (std::vector<int32_t>{10, 11, 12, 50}));
  EXPECT_EQ(cache.Prefix(3), (std::vector<int32_t>{10, 21}));
  // It stays the work until complete; then the next likeliest (rejection at 0).
  EXPECT_EQ(cache.Next()->branch, 0);
  EXPECT_EQ(cache.Next()->tokens, 2);
  cache.Extend(0, std::vector<int32_t>{60, 61}, {}, {});
  EXPECT_TRUE(cache.branches()[0].closed);
  EXPECT_EQ(cache.Next()->branch, 1);
  // Geometric: rejection at 0 (0.133) before all-accepted's second pick (0.068) before
  // rejection at 2 (0.085)? No: 0.085 > 0.068, so every work comes in decreasing probability.
  double last = 1.0;
  std::vector<int> order;
  while (std::optional<CacheWork> work = cache.Next()) {
    const double p = cache.branches()[work->branch].probability;
    EXPECT_LE(p, last + 1e-12);
    last = p;
    order.push_back(work->branch);
    std::vector<int32_t> tokens(work->tokens, 7);
    cache.Extend(work->branch, tokens, {}, {});
  }
  EXPECT_EQ(order.size(), 8u);
}

TEST(SpeculationCacheTest, HitsEveryOutcomeShapeItDrafted) {
  SpeculationCacheConfig config;
  config.max_branches = 16;
  config.bonus_candidates = 3;
  config.correction_candidates = 1;
  config.min_probability = 0.0;
  // All accepted, with each bonus candidate.
  for (int32_t bonus : {50, 51, 52}) {
    SpeculationCache cache(config);
    cache.Plan(1, 5, kBlock, BlockTop(), 0.8, 2, 1000);
    DraftAll(cache);
    std::optional<CacheBranch> hit = cache.Take(1, 5, {3, bonus});
    ASSERT_TRUE(hit.has_value()) << bonus;
    EXPECT_EQ(hit->outcome, (CacheOutcome{3, bonus}));
    EXPECT_EQ(hit->tokens.size(), 2u);
    EXPECT_EQ(cache.counters().hits, 1u);
    EXPECT_EQ(cache.counters().hits_all_accepted, 1u);
    EXPECT_FALSE(cache.planned());
  }
  // The first rejection at each position j, with the draft's runner-up.
  for (int j = 0; j < 3; ++j) {
    SpeculationCache cache(config);
    cache.Plan(1, 5, kBlock, BlockTop(), 0.8, 2, 1000);
    DraftAll(cache);
    const int branch = 1 + j;  // planned after the all-accepted branch, in j order
    std::optional<CacheBranch> hit = cache.Take(1, 5, {j, 20 + j});
    ASSERT_TRUE(hit.has_value()) << j;
    EXPECT_EQ(hit->tokens, (std::vector<int32_t>{100 * (branch + 1), 100 * (branch + 1) + 1}));
    EXPECT_EQ(hit->top.size(), 2u);
    EXPECT_EQ(cache.counters().hits_rejected, 1u);
  }
  // Misses: a correction nobody guessed, a bonus outside the candidates, the
  // rejected token itself, and the right outcome of another block or epoch.
  const std::vector<std::tuple<uint64_t, uint64_t, CacheOutcome>> misses = {
      {1, 5, {1, 31}}, {1, 5, {3, 53}}, {1, 5, {2, 12}}, {1, 6, {3, 50}}, {2, 5, {3, 50}}};
  for (const auto& [epoch, sequence, outcome] : misses) {
    SpeculationCache cache(config);
    cache.Plan(1, 5, kBlock, BlockTop(), 0.8, 2, 1000);
    DraftAll(cache);
    EXPECT_FALSE(cache.Take(epoch, sequence, outcome).has_value())
        << outcome.accepted << " " << outcome.next_token;
    EXPECT_EQ(cache.counters().misses, 1u);
    EXPECT_EQ(cache.counters().HitRate(), 0.0);
    EXPECT_FALSE(cache.planned());
  }
}

TEST(SpeculationCacheTest, PartialBranchIsAPartialHitAndAnUndraftedOneAMiss) {
  SpeculationCacheConfig config;
  config.min_probability = 0.0;
  SpeculationCache cache(config);
  cache.Plan(1, 5, kBlock, BlockTop(), 0.8, 4, 1000);
  cache.Extend(0, std::vector<int32_t>{50, 60}, {}, {Top({50, 51}), Top({60})});
  EXPECT_FALSE(cache.branches()[0].closed);
  std::optional<CacheBranch> hit = cache.Take(1, 5, {3, 50});
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->tokens, std::vector<int32_t>{60});
  EXPECT_EQ(hit->wanted, 4);
  EXPECT_EQ(cache.counters().partial_hits, 1u);
  EXPECT_EQ(cache.counters().used_tokens, 1u);
  // Planned but not yet drafted: a miss.
  cache.Plan(2, 6, kBlock, BlockTop(), 0.8, 4, 1000);
  EXPECT_FALSE(cache.Take(2, 6, {0, 20}).has_value());
  EXPECT_EQ(cache.counters().misses, 1u);
  EXPECT_DOUBLE_EQ(cache.counters().HitRate(), 0.5);
}

TEST(SpeculationCacheTest, BudgetCapsTheDraftedTokensAndFollowsTheCostRatio) {
  SpeculationCacheConfig config;
  config.max_branches = 16;
  config.min_probability = 0.0;
  for (int budget : {0, 1, 3, 7, 12}) {
    SpeculationCache cache(config);
    cache.Plan(1, 5, kBlock, BlockTop(), 0.8, 3, budget);
    int drafted = 0;
    while (std::optional<CacheWork> work = cache.Next()) {
      ASSERT_GE(work->tokens, 1);
      ASSERT_LE(work->tokens, cache.budget_left());
      std::vector<int32_t> tokens(work->tokens, 9);
      if (cache.branches()[work->branch].outcome.next_token < 0) tokens[0] = 50;
      cache.Extend(work->branch, tokens, {}, {});
      drafted += work->tokens;
    }
    EXPECT_EQ(drafted, std::min(budget, 4 + 3 * 3)) << budget;  // 4 branches in all
    EXPECT_EQ(cache.counters().drafted_tokens, static_cast<uint64_t>(drafted));
  }
  // max_branches and min_probability cap the fan-out.
  config.max_branches = 2;
  SpeculationCache narrow(config);
  narrow.Plan(1, 5, kBlock, BlockTop(), 0.8, 3, 1000);
  EXPECT_EQ(narrow.branches().size(), 2u);
  config.max_branches = 16;
  // Keeps all-accepted (0.41) and rejection at 0 (0.2), not rejection at 1 (0.16).
  config.min_probability = 0.17;
  SpeculationCache likely(config);
  likely.Plan(1, 5, kBlock, BlockTop(), 0.8, 3, 1000);
  ASSERT_EQ(likely.branches().size(), 2u);
  EXPECT_EQ(likely.branches()[1].outcome, (CacheOutcome{0, 20}));
}

TEST(SpeculationCacheTest, WithoutAlternativesOnlyAllAcceptedIsPlanned) {
  SpeculationCache cache(SpeculationCacheConfig{});
  cache.Plan(1, 5, kBlock, {}, 0.5, 2, 100);
  ASSERT_EQ(cache.branches().size(), 1u);
  EXPECT_EQ(cache.branches()[0].outcome.accepted, 3);
  cache.Plan(1, 6, {}, {}, 0.5, 2, 100);  // an empty block: nothing
  EXPECT_FALSE(cache.planned());
  EXPECT_FALSE(cache.Next().has_value());
}

TEST(SpeculationCacheTest, StaleEntriesAreDroppedOnANewPlanOrClear) {
  SpeculationCacheConfig config;
  config.min_probability = 0.0;
  SpeculationCache cache(config);
  cache.Plan(1, 5, kBlock, BlockTop(), 0.8, 2, 100);
  DraftAll(cache);
  cache.Clear();  // a resync / new epoch: nothing survives
  EXPECT_FALSE(cache.planned());
  EXPECT_TRUE(cache.branches().empty());
  EXPECT_FALSE(cache.Take(1, 5, {3, 50}).has_value());
  EXPECT_EQ(cache.counters().dropped, 1u);
  cache.Plan(1, 5, kBlock, BlockTop(), 0.8, 2, 100);
  DraftAll(cache);
  cache.Plan(1, 6, {40, 41}, {}, 0.8, 2, 100);  // the next block replaces the old plan
  EXPECT_FALSE(cache.Take(1, 5, {3, 50}).has_value());
  EXPECT_EQ(cache.counters().dropped, 2u);
}

TEST(SpeculationCacheTest, ConfigValidationNamesTheField) {
  SpeculationCacheConfig config;
  EXPECT_TRUE(config.Validate().ok());
  config.max_branches = 0;
  EXPECT_NE(config.Validate().message().find("max_branches"), std::string::npos);
  config = {};
  config.bonus_candidates = 0;
  EXPECT_NE(config.Validate().message().find("bonus_candidates"), std::string::npos);
  config = {};
  config.correction_candidates = -1;
  EXPECT_NE(config.Validate().message().find("correction_candidates"), std::string::npos);
  config = {};
  config.min_probability = 1.0;
  EXPECT_NE(config.Validate().message().find("min_probability"), std::string::npos);
}

}  // namespace
}  // namespace splitspec::spec

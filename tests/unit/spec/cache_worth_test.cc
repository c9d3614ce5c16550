#include "runtime/spec/cache_worth.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace splitspec::spec {
namespace {

// Drives `blocks` blocks: each one asks PlanNext, then its round trip is T = 10 ms
// plus `contention` if it pre-drafted, and a pre-drafted block's lookup saves
// `saved`. Returns the plan of each block.
std::vector<bool> Drive(CacheWorth& worth, int blocks, double contention, double saved) {
  constexpr double kVerify = 0.010;
  std::vector<bool> plans;
  for (int i = 0; i < blocks; ++i) {
    const bool plan = worth.PlanNext();
    plans.push_back(plan);
    worth.RecordRoundTrip(plan, kVerify + (plan ? contention : 0.0), kVerify);
    if (plan) worth.RecordLookup(saved);
  }
  return plans;
}

int CountPlanned(const std::vector<bool>& plans, size_t from) {
  int n = 0;
  for (size_t i = from; i < plans.size(); ++i) n += plans[i] ? 1 : 0;
  return n;
}

// Pre-drafting that slows each verification by 3 ms and saves 0.5 ms per lookup
// stops once both sides are measured: after that only the probes (1 in 16)
// pre-draft, and the counters say so.
TEST(CacheWorthTest, ACacheThatCostsMoreThanItSavesStopsButForProbes) {
  CacheWorth worth({});
  const std::vector<bool> plans = Drive(worth, 96, 0.003, 0.0005);
  EXPECT_FALSE(worth.Worth());
  EXPECT_NEAR(worth.CostSeconds(), 0.003, 1e-9);
  EXPECT_NEAR(worth.GainSeconds(), 0.0005, 1e-9);
  EXPECT_EQ(CountPlanned(plans, 32), 4) << "blocks 32..95: the probes at 48, 64, 80 and 96";
  EXPECT_EQ(worth.blocks(), 96);
  EXPECT_EQ(worth.unplanned(), 96 - CountPlanned(plans, 0));
}

// Where pre-drafting costs the target nothing (separate devices, a sleeping sim
// drafter), every block but the idle probes pre-drafts.
TEST(CacheWorthTest, FreePreDraftingKeepsRunningButForIdleProbes) {
  CacheWorth worth({});
  const std::vector<bool> plans = Drive(worth, 96, 0.0, 0.0005);
  EXPECT_TRUE(worth.Worth());
  EXPECT_NEAR(worth.CostSeconds(), 0.0, 1e-12);
  // Bootstrap: every 3rd block is idle until 3 idle blocks are timed (blocks 3, 6,
  // 9); then every 16th (16, 32, 48, 64, 80, 96).
  const std::vector<int> idle = {3, 6, 9, 16, 32, 48, 64, 80, 96};
  for (int block = 1; block <= 96; ++block) {
    const bool expected_idle = std::find(idle.begin(), idle.end(), block) != idle.end();
    EXPECT_EQ(plans[block - 1], !expected_idle) << "block " << block;
  }
}

// A cache whose hits save more than its contention costs keeps running; one that
// starts out costly comes back when its hits grow (the probes keep both measured).
TEST(CacheWorthTest, GainAboveCostKeepsItAndTheProbesBringItBack) {
  CacheWorth worth({});
  Drive(worth, 64, 0.002, 0.001);
  EXPECT_FALSE(worth.Worth());
  const std::vector<bool> later = Drive(worth, 160, 0.002, 0.006);
  EXPECT_TRUE(worth.Worth());
  EXPECT_GE(CountPlanned(later, 96), 60) << "blocks 96..159 of the second phase";
}

// Until both sides are timed (and one lookup made) the cache pre-drafts, but for
// the bootstrap's idle blocks, whatever the round trips say.
TEST(CacheWorthTest, UnmeasuredMeansWorthIt) {
  CacheWorth worth({});
  EXPECT_TRUE(worth.Worth());
  worth.RecordRoundTrip(true, 0.5, 0.01);  // a huge cost, but no idle sample yet
  EXPECT_TRUE(worth.Worth());
  EXPECT_EQ(worth.CostSeconds(), 0.0);
  // Malformed samples are ignored.
  worth.RecordRoundTrip(false, -1.0, 0.01);
  worth.RecordRoundTrip(false, 0.01, 0.0);
  worth.RecordLookup(-1.0);
  EXPECT_EQ(worth.CostSeconds(), 0.0);
  EXPECT_EQ(worth.GainSeconds(), 0.0);
}

// Lookups that never hit stop the cache before any idle block is timed: a
// pre-draft that is never sent saves nothing wherever it runs.
TEST(CacheWorthTest, NoHitsInMinSamplesLookupsStopsWithoutACost) {
  CacheWorth worth({});
  for (int i = 0; i < 2; ++i) {
    ASSERT_TRUE(worth.PlanNext());
    worth.RecordLookup(0.0);
  }
  EXPECT_TRUE(worth.Worth());  // two lookups: not yet
  worth.RecordLookup(0.0);
  EXPECT_FALSE(worth.Worth());
  EXPECT_EQ(worth.CostSeconds(), 0.0);
  worth.RecordLookup(0.004);  // one hit brings it back (gain > 0, cost unmeasured)
  EXPECT_TRUE(worth.Worth());
}

TEST(CacheWorthTest, ConfigValidationNamesTheField) {
  EXPECT_TRUE(CacheWorthConfig{}.Validate().ok());
  EXPECT_NE(CacheWorthConfig{.probe_interval = 1}.Validate().message().find(
                "probe_interval must be >= 2, got 1"),
            std::string::npos);
  EXPECT_NE(CacheWorthConfig{.bootstrap_interval = 0}.Validate().message().find(
                "bootstrap_interval must be >= 2, got 0"),
            std::string::npos);
  EXPECT_NE(CacheWorthConfig{.min_samples = 0}.Validate().message().find(
                "min_samples must be >= 1, got 0"),
            std::string::npos);
  EXPECT_NE(CacheWorthConfig{.decay = 1.0}.Validate().message().find("decay must be in [0, 1)"),
            std::string::npos);
}

}  // namespace
}  // namespace splitspec::spec

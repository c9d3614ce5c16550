#include "runtime/spec/spec_metrics.h"

#include "gtest/gtest.h"

namespace splitspec::spec {
namespace {

TEST(SpecMetricsTest, CountsVerifiedUpToTheRejectionOnly) {
  SpecMetrics m;
  m.RecordBlock(/*drafted=*/5, /*accepted=*/2, /*rejected=*/true,
                /*committed=*/3);  // tail of 2 discarded
  m.RecordBlock(/*drafted=*/4, /*accepted=*/4, /*rejected=*/false, /*committed=*/5);  // + bonus
  EXPECT_EQ(m.drafted, 9u);
  EXPECT_EQ(m.accepted, 6u);
  EXPECT_EQ(m.verified, 7u);
  EXPECT_EQ(m.steps, 2u);
  EXPECT_DOUBLE_EQ(m.AcceptanceRate(), 6.0 / 7.0);
  EXPECT_DOUBLE_EQ(m.DraftUtilization(), 6.0 / 9.0);
  EXPECT_DOUBLE_EQ(m.TokensPerStep(), 4.0);
  // Positions 0, 1 accepted twice; position 2 verified twice (rejected once); 3 once.
  EXPECT_DOUBLE_EQ(m.AcceptanceRateAt(0), 1.0);
  EXPECT_DOUBLE_EQ(m.AcceptanceRateAt(2), 0.5);
  EXPECT_DOUBLE_EQ(m.AcceptanceRateAt(3), 1.0);
  EXPECT_EQ(m.verified_at.size(), 4u);
  EXPECT_DOUBLE_EQ(m.AcceptanceRateAt(9), 0.0);
}

TEST(SpecMetricsTest, MergeAddsEveryCounter) {
  SpecMetrics a, b, both;
  a.RecordBlock(3, 1, true, 2);
  b.RecordBlock(6, 6, false, 7);
  b.RecordBlock(2, 0, true, 1);
  both.RecordBlock(3, 1, true, 2);
  both.RecordBlock(6, 6, false, 7);
  both.RecordBlock(2, 0, true, 1);
  a.Merge(b);
  EXPECT_EQ(a.steps, both.steps);
  EXPECT_EQ(a.drafted, both.drafted);
  EXPECT_EQ(a.verified, both.verified);
  EXPECT_EQ(a.accepted, both.accepted);
  EXPECT_EQ(a.committed, both.committed);
  EXPECT_EQ(a.accepted_at, both.accepted_at);
  EXPECT_EQ(a.verified_at, both.verified_at);
}

TEST(SpecMetricsTest, EmptyRatiosAreZero) {
  const SpecMetrics m;
  EXPECT_EQ(m.AcceptanceRate(), 0.0);
  EXPECT_EQ(m.DraftUtilization(), 0.0);
  EXPECT_EQ(m.TokensPerStep(), 0.0);
}

}  // namespace
}  // namespace splitspec::spec

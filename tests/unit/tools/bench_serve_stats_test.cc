#include "tools/bench_serve_stats.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::tools {
namespace {

using ::testing::Eq;
using ::testing::Optional;

TEST(PercentileTest, InterpolatesBetweenTheClosestRanks) {
  EXPECT_EQ(Percentile({}, 50), 0.0);
  EXPECT_EQ(Percentile({7}, 99), 7.0);
  // Unsorted input; numpy.percentile([1, 2, 3, 4], q) for q = 0, 50, 99, 100.
  const std::vector<double> values = {4, 1, 3, 2};
  EXPECT_EQ(Percentile(values, 0), 1.0);
  EXPECT_DOUBLE_EQ(Percentile(values, 50), 2.5);
  EXPECT_NEAR(Percentile(values, 99), 3.97, 1e-12);
  EXPECT_EQ(Percentile(values, 100), 4.0);
  // 1..101: the p-th percentile is 1 + p.
  std::vector<double> ramp;
  for (int i = 1; i <= 101; ++i) ramp.push_back(i);
  EXPECT_DOUBLE_EQ(Percentile(ramp, 50), 51.0);
  EXPECT_DOUBLE_EQ(Percentile(ramp, 99), 100.0);
}

TEST(ServeTotalsTest, RatesOverSumsAndLatencyPercentilesOverRequests) {
  ServeTotals totals;
  totals.AddRound({.tokens = 300, .wall_seconds = 2.0});
  totals.AddRound({.tokens = 100, .wall_seconds = 2.0});
  totals.AddRequest({.ttft_s = 0.1, .event_gaps_s = {0.01, 0.03}, .tokens = 5, .e2e_s = 0.5});
  totals.AddRequest({.ttft_s = 0.3, .event_gaps_s = {0.02}, .tokens = 3, .e2e_s = 0.7});
  // One token: a TTFT but no TPOT.
  totals.AddRequest({.ttft_s = 0.2, .event_gaps_s = {}, .tokens = 1, .e2e_s = 0.2});
  const ServeSummary s = totals.Summary();
  EXPECT_EQ(s.rounds, 2);
  EXPECT_EQ(s.requests, 3);
  EXPECT_EQ(s.tokens, 400);
  EXPECT_DOUBLE_EQ(s.seconds, 4.0);
  EXPECT_DOUBLE_EQ(s.tok_s, 100.0);  // 400 / 4, not the mean of 150 and 50 per round
  EXPECT_DOUBLE_EQ(s.ttft_p50_s, 0.2);
  EXPECT_NEAR(s.ttft_p99_s, 0.298, 1e-12);
  EXPECT_DOUBLE_EQ(s.itl_p50_s, 0.02);  // the gaps of every request pooled: 0.01 0.02 0.03
  EXPECT_NEAR(s.itl_p99_s, 0.0298, 1e-12);
  // TPOT: (0.5 - 0.1) / 4 = 0.1 and (0.7 - 0.3) / 2 = 0.2.
  EXPECT_NEAR(s.tpot_p50_s, 0.15, 1e-12);
  EXPECT_NEAR(s.tpot_p99_s, 0.199, 1e-12);
}

TEST(ServeTotalsTest, EmptyTotalsReportZeros) {
  const ServeSummary s = ServeTotals().Summary();
  EXPECT_EQ(s.tok_s, 0.0);
  EXPECT_EQ(s.ttft_p99_s, 0.0);
  EXPECT_EQ(s.tpot_p50_s, 0.0);
}

TEST(SpeedRatioTest, OnOverOffAndZeroWithoutAnOffRate) {
  ServeSummary on, off;
  on.tok_s = 90;
  off.tok_s = 100;
  EXPECT_DOUBLE_EQ(SpeedRatio(on, off), 0.9);
  off.tok_s = 0;
  EXPECT_EQ(SpeedRatio(on, off), 0.0);
}

std::string Piece(int32_t id) { return absl::StrCat("<", id, ">"); }

TEST(DescribeOutputDifferenceTest, IdenticalOutputsPass) {
  EXPECT_EQ(DescribeOutputDifference("request 0", {1, 2, 3}, {1, 2, 3}, Piece), std::nullopt);
  EXPECT_EQ(DescribeOutputDifference("request 0", {}, {}, Piece), std::nullopt);
}

TEST(DescribeOutputDifferenceTest, NamesTheRequestAndTheFirstDifferingToken) {
  EXPECT_THAT(
      DescribeOutputDifference("request 4 (suite.jsonl:5, qa)", {10, 11, 12, 13, 14},
                               {10, 11, 99, 13, 14}, Piece),
      Optional(Eq("request 4 (suite.jsonl:5, qa): greedy outputs with speculation on and off "
                  "differ at output token 2 (after \"<10><11>\"): on has token 12 \"<12>\", off "
                  "has token 99 \"<99>\" (5 and 5 tokens)")));
}

TEST(DescribeOutputDifferenceTest, QuotesAtMostEightTokensBefore) {
  std::vector<int32_t> on = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  std::vector<int32_t> off = on;
  off[10] = 42;
  EXPECT_THAT(DescribeOutputDifference("r", on, off, Piece),
              Optional(Eq("r: greedy outputs with speculation on and off differ at output token "
                          "10 (after \"<2><3><4><5><6><7><8><9>\"): on has token 10 \"<10>\", "
                          "off has token 42 \"<42>\" (11 and 11 tokens)")));
}

TEST(DescribeOutputDifferenceTest, AShorterOutputDiffersAtItsEnd) {
  EXPECT_THAT(DescribeOutputDifference("r", {5, 6}, {5, 6, 7}, Piece),
              Optional(Eq("r: greedy outputs with speculation on and off differ at output token "
                          "2 (after \"<5><6>\"): on has the end of the output, off has token 7 "
                          "\"<7>\" (2 and 3 tokens)")));
  EXPECT_THAT(DescribeOutputDifference("r", {5}, {}, Piece),
              Optional(Eq("r: greedy outputs with speculation on and off differ at output token "
                          "0 (after \"\"): on has token 5 \"<5>\", off has the end of the output "
                          "(1 and 0 tokens)")));
}

TEST(ServeSummaryJsonTest, WritesEveryField) {
  ServeSummary s;
  s.rounds = 2;
  s.requests = 10;
  s.tokens = 640;
  s.seconds = 8;
  s.tok_s = 80;
  s.ttft_p50_s = 0.125;
  s.itl_p99_s = 0.5;
  EXPECT_EQ(ServeSummaryJson(s),
            "{\"rounds\":2,\"requests\":10,\"tokens\":640,\"seconds\":8.0000,\"tok_s\":80.000,"
            "\"ttft_p50_s\":0.12500,\"ttft_p99_s\":0.00000,\"itl_p50_s\":0.00000,"
            "\"itl_p99_s\":0.50000,\"tpot_p50_s\":0.00000,\"tpot_p99_s\":0.00000}");
}

}  // namespace
}  // namespace splitspec::tools

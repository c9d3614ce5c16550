// `splitspec plan` end to end through RunPlanCommand: the seeds' table, the JSON
// fields, and input validation naming the flag.
#include <string>

#include "gtest/gtest.h"
#include "tools/commands.h"

namespace splitspec::tools {
namespace {

std::string RunAndCaptureStdout(const CommandArgs& args, int* exit_code) {
  ::testing::internal::CaptureStdout();
  *exit_code = RunPlanCommand(args);
  return ::testing::internal::GetCapturedStdout();
}

std::string RunAndCaptureStderr(const CommandArgs& args, int* exit_code) {
  ::testing::internal::CaptureStderr();
  *exit_code = RunPlanCommand(args);
  return ::testing::internal::GetCapturedStderr();
}

TEST(PlanCommandTest, JsonReproducesTheSeedTable) {
  int code = -1;
  const std::string out =
      RunAndCaptureStdout({"--alpha", "0.8", "--cost-ratio", "20", "--json"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("\"optimal_k\":8,"), std::string::npos) << out;
  EXPECT_NE(out.find("\"optimal_speedup\":3.09208"), std::string::npos) << out;
  EXPECT_NE(out.find("\"expected_tokens\":4.32891"), std::string::npos) << out;
  EXPECT_NE(out.find("\"overlapped_optimal_k\":20,"), std::string::npos) << out;
  EXPECT_NE(out.find("\"overlapped_optimal_speedup\":4.95388"), std::string::npos) << out;
  EXPECT_EQ(out.find('\n'), out.size() - 1) << "one object per line";
}

TEST(PlanCommandTest, JsonAtAGivenK) {
  int code = -1;
  // alpha 0.6, C 4, k 3: E[N] = 2.176, sequential 2.176 / 1.75, overlapped 2.176.
  const std::string out =
      RunAndCaptureStdout({"--alpha=0.6", "--cost-ratio=4", "--k=3", "--json"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("\"k\":3,\"expected_tokens\":2.176,\"speedup\":1.24343,"), std::string::npos)
      << out;
  EXPECT_NE(
      out.find(
          "\"overlapped_k\":3,\"overlapped_expected_tokens\":2.176,\"overlapped_speedup\":2.176,"),
      std::string::npos)
      << out;
  EXPECT_NE(out.find("\"optimal_k\":2,"), std::string::npos) << out;
}

// The pipeline model by hand (runtime/spec/analytic_model.h), alpha 0.8, C 10, k 4, slope
// 0.25: overlapped, 2.952 tokens over 0.4096 * 1.75 + 0.5904 * (2 + 0.4) = 2.13376 -> 1.38347;
// the cache at H 0.5: 3.3616 / (2 + 0.2) = 1.528; sequential 3.3616 / 2.4 = 1.40067.
TEST(PlanCommandTest, JsonCarriesThePipelineModel) {
  int code = -1;
  const std::string out =
      RunAndCaptureStdout({"--alpha", "0.8", "--cost-ratio", "10", "--k", "4", "--verify-slope",
                           "0.25", "--cache-hit-rate", "0.5", "--json"},
                          &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("\"speedup\":1.40067,"), std::string::npos) << out;
  EXPECT_NE(out.find("\"verify_slope\":0.25,\"cache_hit_rate\":0.5,\"overlapped_refill_k\":4,"
                     "\"overlapped_refill_tokens\":2.952,\"overlapped_refill_speedup\":1.38347,"),
            std::string::npos)
      << out;
  // Cached: 3.3616 / (2 + 0.05 + 0.5 * 0.4), the result waiting half a draft token.
  EXPECT_NE(out.find("\"cached_k\":4,\"cached_speedup\":1.49404,"), std::string::npos) << out;
}

// Without a slope the pipeline model's columns sit beside the old two: alpha 0.8, C 10, k 4:
// 2.952 / 1.23616 = 2.388 (the bound says 3.362); the cache at H 1: 3.3616 / 1.05 = 3.202.
TEST(PlanCommandTest, TableShowsTheBoundAndThePipelineModel) {
  int code = -1;
  const std::string out = RunAndCaptureStdout(
      {"--alpha", "0.8", "--cost-ratio", "10", "--k", "4", "--cache-hit-rate", "1"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("   4    3.362      2.401x       3.362x       2.388x       3.202x  <- --k"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("k = 6 -> 2.557x (pipeline model)"), std::string::npos) << out;
}

TEST(PlanCommandTest, TableListsKOneToTenAndTheOptimum) {
  int code = -1;
  const std::string out = RunAndCaptureStdout({"--alpha", "0.8", "--cost-ratio", "20"}, &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("   8    4.329      3.092x"), std::string::npos) << out;
  EXPECT_NE(out.find("  10"), std::string::npos) << out;
  EXPECT_NE(out.find("sequential k = 8 -> 3.092x"), std::string::npos) << out;
}

TEST(PlanCommandTest, ValidationNamesTheFlag) {
  int code = -1;
  EXPECT_NE(RunAndCaptureStderr({"--alpha", "1.5", "--cost-ratio", "2"}, &code).find("--alpha"),
            std::string::npos);
  EXPECT_EQ(code, 2);
  EXPECT_NE(
      RunAndCaptureStderr({"--alpha", "0.5", "--cost-ratio", "0"}, &code).find("--cost-ratio"),
      std::string::npos);
  EXPECT_NE(
      RunAndCaptureStderr({"--alpha", "0.5", "--cost-ratio", "-3"}, &code).find("--cost-ratio"),
      std::string::npos);
  EXPECT_NE(RunAndCaptureStderr({"--alpha", "x", "--cost-ratio", "2"}, &code).find("--alpha"),
            std::string::npos);
  EXPECT_NE(RunAndCaptureStderr({"--cost-ratio", "2"}, &code).find("--alpha is required"),
            std::string::npos);
  EXPECT_NE(
      RunAndCaptureStderr({"--alpha", "0.5", "--cost-ratio", "2", "--k", "0"}, &code).find("--k"),
      std::string::npos);
  EXPECT_EQ(code, 2);
  EXPECT_NE(
      RunAndCaptureStderr({"--alpha", "0.5", "--cost-ratio", "2", "--cache-hit-rate", "2"}, &code)
          .find("--cache-hit-rate must be in [0, 1], got 2"),
      std::string::npos);
  EXPECT_NE(
      RunAndCaptureStderr({"--alpha", "0.5", "--cost-ratio", "2", "--verify-slope", "-1"}, &code)
          .find("--verify-slope must be finite and >= 0, got -1"),
      std::string::npos);
  EXPECT_EQ(code, 2);
  EXPECT_NE(RunAndCaptureStderr({"--alpha", "0.5", "--cost-ratio", "2", "--block-overhead", "-0.1"},
                                &code)
                .find("--block-overhead must be finite and >= 0, got -0.1"),
            std::string::npos);
  EXPECT_EQ(code, 2);
}

// The block overhead by hand, alpha 0.8, C 10, k 4, slope 0.25, O 0.1, H 0.5:
// sequential 3.3616 / 2.5 = 1.34464; overlapped 2.952 / (0.4096 * 1.75 + 0.5904 * 2.5)
// = 2.952 / 2.1928 = 1.34622; cached 3.3616 / (2 + 0.05 + 0.1 + 0.2) = 1.43047.
TEST(PlanCommandTest, BlockOverheadLandsWhereTheModelChargesIt) {
  int code = -1;
  const std::string out =
      RunAndCaptureStdout({"--alpha", "0.8", "--cost-ratio", "10", "--k", "4", "--verify-slope",
                           "0.25", "--cache-hit-rate", "0.5", "--block-overhead", "0.1", "--json"},
                          &code);
  EXPECT_EQ(code, 0);
  EXPECT_NE(out.find("\"speedup\":1.34464,"), std::string::npos) << out;
  EXPECT_NE(out.find("\"overlapped_refill_speedup\":1.34622,"), std::string::npos) << out;
  EXPECT_NE(out.find("\"cached_k\":4,\"cached_speedup\":1.43047,"), std::string::npos) << out;
  EXPECT_NE(out.find("\"block_overhead\":0.1}"), std::string::npos) << out;
}

}  // namespace
}  // namespace splitspec::tools

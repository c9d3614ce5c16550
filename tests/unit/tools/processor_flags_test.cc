// The logits-processor flags of generate and client (tools/processor_flags.h):
// what reaches SamplingParams.processors, and the errors that name the flag.
#include "tools/processor_flags.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::tools {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<proto::LogitsProcessors> Parse(const std::vector<std::string>& argv) {
  static const cli::FlagTable table{"splitspec test", "processor flags", ProcessorFlags()};
  absl::StatusOr<cli::CliArgs> args = cli::CliArgs::Parse(argv, table);
  if (!args.ok()) return args.status();
  return ParseProcessorFlags(*args);
}

TEST(ProcessorFlagsTest, EveryFlagReachesTheProcessors) {
  auto processors = Parse({"--logit-bias", "5:-100,12:2.5", "--presence-penalty", "0.5",
                           "--frequency-penalty", "-1", "--repetition-penalty", "1.2"});
  ASSERT_TRUE(processors.ok()) << processors.status();
  EXPECT_FLOAT_EQ(processors->logit_bias().at(5), -100.0f);
  EXPECT_FLOAT_EQ(processors->logit_bias().at(12), 2.5f);
  EXPECT_FLOAT_EQ(processors->presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(processors->frequency_penalty(), -1.0f);
  EXPECT_FLOAT_EQ(processors->repetition_penalty(), 1.2f);
  proto::SamplingParams params;
  ASSERT_TRUE(ApplyProcessors(*processors, 100, &params).ok());
  EXPECT_EQ(params.processors().logit_bias().size(), 2u);
}

TEST(ProcessorFlagsTest, NoFlagsPutNothingOnTheWire) {
  auto processors = Parse({});
  ASSERT_TRUE(processors.ok()) << processors.status();
  proto::SamplingParams params;
  ASSERT_TRUE(ApplyProcessors(*processors, 100, &params).ok());
  EXPECT_FALSE(params.has_processors());
}

TEST(ProcessorFlagsTest, BadValuesAreRefusedNamingTheFlag) {
  EXPECT_THAT(std::string(Parse({"--logit-bias", "5=1"}).status().message()),
              HasSubstr("--logit-bias: '5=1' is not ID:BIAS"));
  EXPECT_THAT(std::string(Parse({"--logit-bias", "5:1,5:2"}).status().message()),
              HasSubstr("--logit-bias names token 5 twice"));
  EXPECT_THAT(std::string(Parse({"--logit-bias", "5:101"}).status().message()),
              HasSubstr("--logit-bias of token 5 must be in [-100, 100], got 101"));
  EXPECT_THAT(std::string(Parse({"--presence-penalty", "3"}).status().message()),
              HasSubstr("--presence-penalty must be in [-2, 2], got 3"));
  EXPECT_THAT(std::string(Parse({"--repetition-penalty", "0"}).status().message()),
              HasSubstr("--repetition-penalty must be in (0, 10], got 0"));
  auto processors = Parse({"--logit-bias", "100:1"});
  ASSERT_TRUE(processors.ok());
  proto::SamplingParams params;
  EXPECT_THAT(std::string(ApplyProcessors(*processors, 100, &params).message()),
              HasSubstr("--logit-bias names token 100, outside the vocabulary [0, 100)"));
}

}  // namespace
}  // namespace splitspec::tools

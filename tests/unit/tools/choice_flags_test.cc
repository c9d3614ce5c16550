// The choice and log-probability flags of generate and client (tools/choice_flags.h):
// what reaches SamplingParams, the errors that name the flag, and the printed table.
#include "tools/choice_flags.h"

#include <cmath>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/unit/tokenizer/tokenizer_test_util.h"

namespace splitspec::tools {
namespace {

using ::testing::HasSubstr;

absl::StatusOr<ChoiceFlagValues> Parse(const std::vector<std::string>& argv) {
  static const cli::FlagTable table{"splitspec test", "choice flags", ChoiceFlags()};
  absl::StatusOr<cli::CliArgs> args = cli::CliArgs::Parse(argv, table);
  if (!args.ok()) return args.status();
  return ParseChoiceFlags(*args);
}

TEST(ChoiceFlagsTest, FlagsReachTheSamplingParams) {
  auto values = Parse({"--n", "3", "--logprobs", "5", "--logprobs-mode", "processed"});
  ASSERT_TRUE(values.ok()) << values.status();
  EXPECT_EQ(values->n, 3);
  proto::SamplingParams params;
  ApplyLogprobs(*values, &params);
  ASSERT_TRUE(params.has_logprobs());
  EXPECT_EQ(params.logprobs(), 5u);
  EXPECT_EQ(params.logprobs_mode(), proto::LOGPROBS_MODE_PROCESSED);
  auto none = Parse({});
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(none->n, 1);
  proto::SamplingParams plain;
  ApplyLogprobs(*none, &plain);
  EXPECT_FALSE(plain.has_logprobs());
  auto zero = Parse({"--logprobs", "0"});
  ASSERT_TRUE(zero.ok());
  ApplyLogprobs(*zero, &plain);
  EXPECT_TRUE(plain.has_logprobs());  // the chosen token's logprob, no alternatives
}

TEST(ChoiceFlagsTest, BadValuesAreRefusedNamingTheFlag) {
  EXPECT_THAT(std::string(Parse({"--n", "0"}).status().message()),
              HasSubstr("--n must be in [1, 64], got 0"));
  EXPECT_THAT(std::string(Parse({"--logprobs", "21"}).status().message()),
              HasSubstr("--logprobs must be in [0, 20], got 21"));
  EXPECT_THAT(std::string(Parse({"--logprobs-mode", "logits"}).status().message()),
              HasSubstr("--logprobs-mode 'logits' is not raw or processed"));
}

TEST(ChoiceFlagsTest, TableAndJsonNameEachTokenAndItsAlternatives) {
  model::TokenizerVocab vocab = model::testing::MakeByteLevelVocab({}, "smollm", {});
  absl::StatusOr<model::Tokenizer> tokenizer = model::Tokenizer::Create(std::move(vocab));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  const int32_t a = tokenizer->Encode("a")[0];
  const int32_t newline = tokenizer->Encode("\n")[0];
  proto::TokenLogprob entry;
  entry.set_token(a);
  entry.set_logprob(-0.25f);
  entry.add_top_ids(newline);
  entry.add_top_logprobs(-0.125f);
  entry.add_top_ids(a);
  entry.add_top_logprobs(-0.25f);
  proto::TokenLogprob excluded;
  excluded.set_token(newline);
  excluded.set_logprob(-INFINITY);
  const std::string table = LogprobsTable(*tokenizer, {entry, excluded});
  EXPECT_THAT(table, HasSubstr("logprob"));
  EXPECT_THAT(table, HasSubstr(absl::StrCat(a, "   -0.2500  \"a\"")));
  EXPECT_THAT(table, HasSubstr("\"\\n\" -0.1250 | \"a\" -0.2500"));
  EXPECT_THAT(table, HasSubstr("-9999.0000"));
  EXPECT_EQ(LogprobsTable(*tokenizer, {}), "");
  EXPECT_EQ(LogprobsJson(*tokenizer, {entry}),
            absl::StrCat(R"([{"id":)", a, R"(,"token":"a","logprob":-0.25,"top":[{"id":)", newline,
                         R"(,"token":"\n","logprob":-0.125},{"id":)", a,
                         R"(,"token":"a","logprob":-0.25}]}])"));
}

}  // namespace
}  // namespace splitspec::tools

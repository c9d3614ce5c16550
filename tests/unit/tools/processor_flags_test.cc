// The logits-processor flags of generate and client (tools/processor_flags.h):
// what reaches SamplingParams.processors, and the errors that name the flag.
#include "tools/processor_flags.h"

#include <cstdio>
#include <fstream>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/net/spec_proto.h"

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

// The file's path under the test's temporary directory, written with `text`.
std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

// The constraint the flags put on the wire, read back as the target reads it.
grammar::GrammarSpec GrammarOf(const std::vector<std::string>& argv) {
  absl::StatusOr<proto::LogitsProcessors> processors = Parse(argv);
  EXPECT_TRUE(processors.ok()) << processors.status();
  EXPECT_TRUE(processors.ok() && processors->has_grammar());
  if (!processors.ok()) return {};
  proto::SamplingParams wire;
  *wire.mutable_processors() = *processors;
  absl::StatusOr<spec::SamplingParams> params = net::SamplingParamsFromProto(wire);
  EXPECT_TRUE(params.ok() && params->grammar.has_value()) << params.status();
  return params.ok() && params->grammar ? *params->grammar : grammar::GrammarSpec{};
}

TEST(ProcessorFlagsTest, ConstraintFlagsBecomeTheGrammarOnTheWire) {
  const std::string schema = R"({"type": "object", "properties": {"a": {"type": "integer"}}})";
  grammar::GrammarSpec spec = GrammarOf({"--json-schema", WriteTemp("schema.json", schema)});
  EXPECT_EQ(spec.kind, grammar::GrammarKind::kJsonSchema);
  EXPECT_EQ(spec.text, schema);
  EXPECT_FALSE(spec.strict);  // as structured_outputs.json
  spec = GrammarOf({"--regex", "[0-9]{3}"});
  EXPECT_EQ(spec.kind, grammar::GrammarKind::kRegex);
  EXPECT_EQ(spec.text, "[0-9]{3}");
  spec = GrammarOf({"--grammar", WriteTemp("g.ebnf", "root ::= \"yes\" | \"no\"\n")});
  EXPECT_EQ(spec.kind, grammar::GrammarKind::kEbnf);
  EXPECT_EQ(spec.text, "root ::= \"yes\" | \"no\"\n");
  spec = GrammarOf({"--choice", "red,green,blue"});
  EXPECT_EQ(spec.kind, grammar::GrammarKind::kChoice);
  EXPECT_THAT(spec.choices, ::testing::ElementsAre("red", "green", "blue"));
  // With the other processors, the grammar survives ApplyProcessors.
  auto processors = Parse({"--choice", "a,b", "--presence-penalty", "1"});
  ASSERT_TRUE(processors.ok()) << processors.status();
  proto::SamplingParams params;
  ASSERT_TRUE(ApplyProcessors(*processors, 100, &params).ok());
  EXPECT_EQ(params.processors().grammar().kind(), "choice");
}

TEST(ProcessorFlagsTest, BadConstraintFlagsAreRefusedNamingThem) {
  EXPECT_EQ(Parse({"--regex", "a", "--choice", "a,b"}).status().message(),
            "give at most one of --json-schema, --regex, --grammar, --choice; got --regex and "
            "--choice");
  EXPECT_THAT(std::string(Parse({"--json-schema", "/no/such/schema.json"}).status().message()),
              HasSubstr("--json-schema: cannot open '/no/such/schema.json'"));
  EXPECT_THAT(std::string(Parse({"--choice", "a,,b"}).status().message()),
              HasSubstr("--choice 'a,,b' has an empty choice"));
  EXPECT_EQ(Parse({"--regex", ""}).status().message(), "--regex must not be empty");
}

}  // namespace
}  // namespace splitspec::tools

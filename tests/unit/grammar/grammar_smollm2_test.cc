// runtime/grammar on the default model's real vocabulary (SmolLM2, 49152 byte-level BPE
// tokens): constrained random sampling gives outputs that match, decoded by the tokenizer,
// and a repeated schema is compiled once.
//
// The model comes from $SPLITSPEC_MODEL, else <source dir>/models/SmolLM2-135M-Instruct.Q4_1.gguf
// (deploy/setup.sh downloads it); without it the test is skipped, saying so.
#include <cstdlib>
#include <fstream>
#include <memory>
#include <random>
#include <regex>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/unit/grammar/grammar_test_util.h"

namespace splitspec::grammar {
namespace {

std::string ModelPath() {
  if (const char* env = std::getenv("SPLITSPEC_MODEL"); env != nullptr && *env != '\0') return env;
  return std::string(SPLITSPEC_SOURCE_DIR) + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

class GrammarSmolLM2Test : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::ifstream(ModelPath())) {
      GTEST_SKIP() << "model not found: " << ModelPath() << " (deploy/setup.sh downloads it)";
    }
    absl::StatusOr<std::unique_ptr<model::GgufFile>> file = model::GgufFile::Open(ModelPath());
    ASSERT_TRUE(file.ok()) << file.status();
    absl::StatusOr<model::Tokenizer> tokenizer = model::LoadTokenizerFromGguf(**file);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::make_unique<model::Tokenizer>(std::move(tokenizer).value());
    absl::StatusOr<std::unique_ptr<GrammarCompiler>> compiler = GrammarCompiler::Create(*tokenizer_);
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = std::move(compiler).value();
  }

  // The tokenizer's decoding of `samples` constrained random outputs, each terminated.
  std::vector<std::string> SampleOutputs(const GrammarSpec& spec, int samples, int max_tokens) {
    absl::StatusOr<std::shared_ptr<const CompiledGrammar>> grammar = compiler_->Compile(spec);
    EXPECT_TRUE(grammar.ok()) << grammar.status();
    std::vector<std::string> outputs;
    if (!grammar.ok()) return outputs;
    std::mt19937 rng(42);
    for (int i = 0; i < samples; ++i) {
      GrammarMatcher matcher(*grammar);
      testing::SampledText sampled = testing::SampleConstrained(matcher, *tokenizer_, rng, max_tokens);
      EXPECT_TRUE(sampled.terminated) << "'" << sampled.text << "'";
      absl::StatusOr<std::string> decoded = tokenizer_->Decode(sampled.ids);
      EXPECT_TRUE(decoded.ok()) << decoded.status();
      EXPECT_EQ(*decoded, sampled.text);
      outputs.push_back(*decoded);
    }
    return outputs;
  }

  std::unique_ptr<model::Tokenizer> tokenizer_;
  std::unique_ptr<GrammarCompiler> compiler_;
};

TEST_F(GrammarSmolLM2Test, JsonSchemaOutputsMatchTheSchema) {
  const std::string schema = R"({"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 12},
      "population": {"type": "integer", "minimum": 1},
      "tags": {"type": "array", "items": {"type": "string", "maxLength": 5}, "maxItems": 3}},
    "required": ["city", "population", "tags"]})";
  for (const std::string& text : SampleOutputs(GrammarSpec::JsonSchema(schema, true), 5, 300)) {
    EXPECT_TRUE(testing::IsJson(text)) << "'" << text << "'";
    absl::StatusOr<google::protobuf::Value> value = testing::ParseJson(text);
    ASSERT_TRUE(value.ok()) << "'" << text << "': " << value.status();
    const auto& fields = value->struct_value().fields();
    ASSERT_EQ(fields.size(), 3u) << text;
    EXPECT_TRUE(fields.at("city").has_string_value()) << text;
    EXPECT_GE(fields.at("population").number_value(), 1) << text;
    EXPECT_LE(fields.at("tags").list_value().values_size(), 3) << text;
  }
}

TEST_F(GrammarSmolLM2Test, JsonObjectAndRegexAndChoiceOutputsMatch) {
  for (const std::string& text : SampleOutputs(GrammarSpec::JsonObject(), 3, 2000)) {
    EXPECT_TRUE(testing::IsJsonObject(text)) << "'" << text << "'";
  }
  const std::regex date(R"(\d{4}-\d{2}-\d{2}( ok)?)");
  for (const std::string& text :
       SampleOutputs(GrammarSpec::Regex(R"(\d{4}-\d{2}-\d{2}( ok)?)"), 5, 40)) {
    EXPECT_TRUE(std::regex_match(text, date)) << "'" << text << "'";
  }
  const std::vector<std::string> choices = {"positive", "negative", "neutral"};
  for (const std::string& text : SampleOutputs(GrammarSpec::Choice(choices), 5, 20)) {
    EXPECT_THAT(choices, ::testing::Contains(text));
  }
}

TEST_F(GrammarSmolLM2Test, DraftBlockMasksEqualFeedingTheTokensAndRollbackRestoresTheState) {
  const std::string schema = R"({"type": "object", "properties": {
      "name": {"type": "string"}, "ids": {"type": "array", "items": {"type": "integer"}}},
    "required": ["name", "ids"]})";
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> grammar =
      compiler_->Compile(GrammarSpec::JsonSchema(schema, true));
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  std::mt19937 rng(11);
  for (int trial = 0; trial < 8; ++trial) {
    GrammarMatcher matcher(*grammar);
    testing::SampledText prefix =
        testing::SampleConstrained(matcher, *tokenizer_, rng, 1 + rng() % 10, 0.0f);
    if (prefix.terminated) continue;
    const std::vector<model::TokenId> draft =
        testing::RandomDraft(*grammar, prefix.ids, 1 + rng() % 5, rng);
    std::vector<int32_t> rows((draft.size() + 1) * matcher.bitmask_words());
    absl::StatusOr<int> valid = matcher.FillDraftBitmasks(draft, absl::MakeSpan(rows));
    ASSERT_TRUE(valid.ok()) << valid.status();
    for (int i = 0; i <= *valid; ++i) {
      std::vector<model::TokenId> fed = prefix.ids;
      fed.insert(fed.end(), draft.begin(), draft.begin() + i);
      std::vector<int32_t> row(rows.begin() + i * matcher.bitmask_words(),
                               rows.begin() + (i + 1) * matcher.bitmask_words());
      EXPECT_EQ(row, testing::MaskAfter(*grammar, fed)) << "trial " << trial << " row " << i;
    }
    std::vector<int32_t> mask(matcher.bitmask_words());
    ASSERT_TRUE(matcher.FillNextTokenBitmask(absl::MakeSpan(mask)).ok());
    EXPECT_EQ(mask, testing::MaskAfter(*grammar, prefix.ids)) << "trial " << trial;
  }
}

TEST_F(GrammarSmolLM2Test, TheEndOfTurnTokenEndsACompleteOutput) {
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> grammar =
      compiler_->Compile(GrammarSpec::Choice({"yes"}));
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  GrammarMatcher matcher(*grammar);
  const std::vector<model::TokenId> yes = tokenizer_->Encode("yes", {.add_special = false});
  for (model::TokenId t : yes) ASSERT_TRUE(matcher.AcceptToken(t));
  const std::vector<model::TokenId> im_end =
      tokenizer_->Encode("<|im_end|>", {.add_special = false, .parse_special = true});
  ASSERT_EQ(im_end.size(), 1u);
  ASSERT_TRUE(tokenizer_->IsEndOfGeneration(im_end[0]));
  EXPECT_TRUE(matcher.AcceptToken(im_end[0]));
  EXPECT_TRUE(matcher.IsTerminated());
}

}  // namespace
}  // namespace splitspec::grammar

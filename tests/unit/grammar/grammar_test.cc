// runtime/grammar on small in-memory vocabularies: the bytes each token stands for, each kind
// of grammar constraining random sampling to valid outputs, the matcher's state under
// rollback (speculation), errors by message, and the compiled-grammar cache.
#include <algorithm>
#include <memory>
#include <random>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/grammar/grammar_spec.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/unit/grammar/grammar_test_util.h"
#include "tests/unit/tokenizer/tokenizer_test_util.h"

namespace splitspec::grammar {
namespace {

using ::testing::HasSubstr;
using model::TokenId;
using model::Tokenizer;
using testing::ParseJson;
using testing::MaskAfter;
using testing::RandomDraft;
using testing::SampleConstrained;

// Byte-level BPE: the 256 bytes, a few merges (multi-byte tokens the grammar must split
// correctly), then <|im_start|> and <|im_end|> (end of generation, as SmolLM2's).
Tokenizer ByteLevelTokenizer() {
  model::TokenizerVocab vocab = model::testing::MakeByteLevelVocab(
      {{"{", "\""}, {"\"", ":"}, {"t", "r"}, {"tr", "u"}, {"tru", "e"}, {" ", "1"}, {"\"", ","}},
      "smollm", {"<|im_start|>", "<|im_end|>"});
  vocab.eos_id = model::testing::IdOf(vocab, "<|im_end|>");
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::Create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return std::move(tokenizer).value();
}

// SentencePiece with byte fallback: 0 <unk>, 1 <s>, 2 </s>, 3 "▁", 4 a, 5 b, 6 "▁a", then
// <0x00>..<0xFF> at 7..262.
Tokenizer SentencePieceTokenizer() {
  model::TokenizerVocab vocab;
  vocab.model = "llama";
  vocab.tokens = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "\xE2\x96\x81"
                                                                    "a"};
  vocab.scores = {0, 0, 0, -10, -10, -10, -3};
  vocab.token_types = {model::TokenType::kUnknown, model::TokenType::kControl,
                       model::TokenType::kControl};
  vocab.token_types.resize(vocab.tokens.size(), model::TokenType::kNormal);
  for (int b = 0; b < 256; ++b) {
    vocab.tokens.push_back(absl::StrFormat("<0x%02X>", b));
    vocab.scores.push_back(0);
    vocab.token_types.push_back(model::TokenType::kByte);
  }
  vocab.unk_id = 0;
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  absl::StatusOr<Tokenizer> tokenizer = Tokenizer::Create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return std::move(tokenizer).value();
}

class GrammarTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::unique_ptr<GrammarCompiler>> compiler =
        GrammarCompiler::Create(tokenizer_, {.vocab_size = tokenizer_.vocab_size() + 5});
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = std::move(compiler).value();
  }

  std::shared_ptr<const CompiledGrammar> Compile(const GrammarSpec& spec) {
    absl::StatusOr<std::shared_ptr<const CompiledGrammar>> grammar = compiler_->Compile(spec);
    EXPECT_TRUE(grammar.ok()) << grammar.status();
    return grammar.ok() ? *grammar : nullptr;
  }

  // `samples` random constrained outputs of `spec`, each required to terminate.
  std::vector<std::string> SampleOutputs(const GrammarSpec& spec, int samples, int max_tokens) {
    std::shared_ptr<const CompiledGrammar> grammar = Compile(spec);
    std::vector<std::string> outputs;
    if (grammar == nullptr) return outputs;
    std::mt19937 rng(1234);
    for (int i = 0; i < samples; ++i) {
      GrammarMatcher matcher(grammar);
      testing::SampledText sampled = SampleConstrained(matcher, tokenizer_, rng, max_tokens);
      EXPECT_TRUE(sampled.terminated) << "no end of generation after " << max_tokens
                                      << " tokens: '" << sampled.text << "'";
      EXPECT_TRUE(matcher.IsTerminated());
      outputs.push_back(sampled.text);
    }
    return outputs;
  }

  Tokenizer tokenizer_ = ByteLevelTokenizer();
  std::unique_ptr<GrammarCompiler> compiler_;
};

TEST(GrammarTokenBytesTest, ByteLevelTokensAreTheirBytesAndControlTokensAreEmpty) {
  Tokenizer tokenizer = ByteLevelTokenizer();
  std::vector<std::string> bytes = GrammarTokenBytes(tokenizer);
  ASSERT_EQ(bytes.size(), static_cast<size_t>(tokenizer.vocab_size()));
  EXPECT_EQ(bytes[' '], " ");    // stored as "Ġ"
  EXPECT_EQ(bytes['\n'], "\n");  // stored as "Ċ"
  EXPECT_EQ(bytes[0xE2], "\xE2");  // a lone UTF-8 lead byte, stored as "â"
  EXPECT_EQ(bytes[256 + 5], " 1");  // the merge " " + "1", stored as "Ġ1"
  EXPECT_EQ(bytes[tokenizer.eos_id()], "");
  EXPECT_EQ(bytes[tokenizer.eos_id() - 1], "");  // <|im_start|>
}

TEST(GrammarTokenBytesTest, SentencePieceSpacesAndByteFallback) {
  Tokenizer tokenizer = SentencePieceTokenizer();
  std::vector<std::string> bytes = GrammarTokenBytes(tokenizer);
  EXPECT_EQ(bytes[3], " ");
  EXPECT_EQ(bytes[6], " a");
  EXPECT_EQ(bytes[7 + 0x0A], "\n");    // <0x0A>
  EXPECT_EQ(bytes[7 + 0xE2], "\xE2");  // <0xE2>
  EXPECT_EQ(bytes[0], "");             // <unk>
  EXPECT_EQ(bytes[2], "");             // </s>
}

TEST(GrammarTokenBytesTest, SentencePieceByteFallbackSpellsARegexMatch) {
  // "é" exists only as the byte tokens <0xC3><0xA9>: the grammar must accept that pair.
  Tokenizer tokenizer = SentencePieceTokenizer();
  absl::StatusOr<std::unique_ptr<GrammarCompiler>> compiler = GrammarCompiler::Create(tokenizer);
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  absl::StatusOr<std::shared_ptr<const CompiledGrammar>> grammar =
      (*compiler)->Compile(GrammarSpec::Regex("a\xC3\xA9"));
  ASSERT_TRUE(grammar.ok()) << grammar.status();
  GrammarMatcher matcher(*grammar);
  EXPECT_FALSE(matcher.AcceptToken(5));  // "b"
  EXPECT_TRUE(matcher.AcceptToken(4));   // "a"
  EXPECT_FALSE(matcher.AcceptToken(7 + 0xA9));
  EXPECT_TRUE(matcher.AcceptToken(7 + 0xC3));
  EXPECT_TRUE(matcher.AcceptToken(7 + 0xA9));
  EXPECT_TRUE(matcher.IsCompleted());
  EXPECT_TRUE(matcher.AcceptToken(2));  // </s>
  EXPECT_TRUE(matcher.IsTerminated());
}

TEST_F(GrammarTest, JsonObjectOutputsParseAsObjects) {
  for (const std::string& text : SampleOutputs(GrammarSpec::JsonObject(), 20, 3000)) {
    EXPECT_TRUE(testing::IsJsonObject(text)) << "'" << text << "'";
  }
}

TEST_F(GrammarTest, JsonSchemaOutputsMatchTheSchema) {
  const std::string schema = R"({
    "type": "object",
    "properties": {
      "name": {"type": "string", "maxLength": 6},
      "n": {"type": "integer", "minimum": 0, "maximum": 99},
      "ok": {"type": "boolean"},
      "tag": {"enum": ["red", "green"]}
    },
    "required": ["name", "n", "ok", "tag"]
  })";
  for (const std::string& text : SampleOutputs(GrammarSpec::JsonSchema(schema, true), 20, 400)) {
    EXPECT_TRUE(testing::IsJson(text)) << "'" << text << "'";
    absl::StatusOr<google::protobuf::Value> value = ParseJson(text);
    ASSERT_TRUE(value.ok()) << "'" << text << "': " << value.status();
    const auto& fields = value->struct_value().fields();
    EXPECT_EQ(fields.size(), 4u) << text;  // strict: no other property
    ASSERT_TRUE(fields.contains("name") && fields.contains("n") && fields.contains("ok") &&
                fields.contains("tag"))
        << text;
    EXPECT_TRUE(fields.at("name").has_string_value()) << text;
    // maxLength counts characters (code points), not bytes.
    const std::string& name = fields.at("name").string_value();
    EXPECT_LE(std::count_if(name.begin(), name.end(), [](char c) { return (c & 0xC0) != 0x80; }),
              6)
        << text;
    const double n = fields.at("n").number_value();
    EXPECT_TRUE(n >= 0 && n <= 99 && n == static_cast<int>(n)) << text;
    EXPECT_EQ(fields.at("ok").kind_case(), google::protobuf::Value::kBoolValue) << text;
    EXPECT_THAT(fields.at("tag").string_value(), ::testing::AnyOf("red", "green")) << text;
  }
}

TEST_F(GrammarTest, RegexOutputsMatchThePattern) {
  const std::string pattern = "[a-c]{2,4}-[0-9]+(x|yz)?";
  const std::regex reference(pattern);
  for (const std::string& text : SampleOutputs(GrammarSpec::Regex(pattern), 30, 100)) {
    EXPECT_TRUE(std::regex_match(text, reference)) << "'" << text << "'";
  }
}

TEST_F(GrammarTest, ChoiceOutputsAreOneOfTheChoicesAndEveryChoiceComesUp) {
  const std::vector<std::string> choices = {"yes", "no", "say \"hi\"\\\n", "true"};
  std::set<std::string> seen;
  for (const std::string& text : SampleOutputs(GrammarSpec::Choice(choices), 60, 50)) {
    EXPECT_THAT(choices, ::testing::Contains(text));
    seen.insert(text);
  }
  EXPECT_EQ(seen.size(), choices.size());
}

TEST_F(GrammarTest, EbnfOutputsMatchTheGrammar) {
  const std::string ebnf = R"ebnf(root ::= "(" item ("," item)* ")"
item ::= [0-9] | "ab")ebnf";
  const std::regex reference(R"(\(([0-9]|ab)(,([0-9]|ab))*\))");
  for (const std::string& text : SampleOutputs(GrammarSpec::Ebnf(ebnf), 30, 200)) {
    EXPECT_TRUE(std::regex_match(text, reference)) << "'" << text << "'";
  }
}

TEST_F(GrammarTest, PaddedLogitsColumnsAndControlTokensAreNeverAllowed) {
  GrammarMatcher matcher(Compile(GrammarSpec::JsonObject()));
  std::vector<int32_t> mask(matcher.bitmask_words());
  ASSERT_TRUE(matcher.FillNextTokenBitmask(absl::MakeSpan(mask)).ok());
  EXPECT_TRUE(BitmaskAllows(mask, '{'));
  EXPECT_FALSE(BitmaskAllows(mask, 'a'));
  EXPECT_FALSE(BitmaskAllows(mask, tokenizer_.eos_id() - 1));  // <|im_start|>
  EXPECT_FALSE(BitmaskAllows(mask, tokenizer_.eos_id()));      // not complete yet
  for (TokenId t = tokenizer_.vocab_size(); t < matcher.vocab_size(); ++t) {
    EXPECT_FALSE(BitmaskAllows(mask, t)) << t;
  }
  std::vector<float> logits(matcher.vocab_size(), 1.0f);
  ASSERT_TRUE(matcher.MaskLogits(absl::MakeSpan(logits)).ok());
  for (TokenId t = 0; t < matcher.vocab_size(); ++t) {
    EXPECT_EQ(std::isinf(logits[t]), !BitmaskAllows(mask, t)) << t;
  }
}

TEST_F(GrammarTest, TerminationAllowsOnlyEndOfGenerationThenNothing) {
  GrammarMatcher matcher(Compile(GrammarSpec::Choice({"no"})));
  EXPECT_TRUE(matcher.AcceptToken('n'));
  EXPECT_FALSE(matcher.AcceptToken(tokenizer_.eos_id()));  // "n" is not complete
  EXPECT_TRUE(matcher.AcceptToken('o'));
  EXPECT_TRUE(matcher.IsCompleted());
  std::vector<int32_t> mask(matcher.bitmask_words());
  ASSERT_TRUE(matcher.FillNextTokenBitmask(absl::MakeSpan(mask)).ok());
  for (TokenId t = 0; t < matcher.vocab_size(); ++t) {
    EXPECT_EQ(BitmaskAllows(mask, t), t == tokenizer_.eos_id()) << t;
  }
  EXPECT_TRUE(matcher.AcceptToken(tokenizer_.eos_id()));
  EXPECT_TRUE(matcher.IsTerminated());
  EXPECT_FALSE(matcher.AcceptToken('o'));
  ASSERT_TRUE(matcher.FillNextTokenBitmask(absl::MakeSpan(mask)).ok());
  EXPECT_TRUE(std::all_of(mask.begin(), mask.end(), [](int32_t w) { return w == 0; }));
  // Rollback undoes termination.
  ASSERT_TRUE(matcher.Rollback(1).ok());
  EXPECT_FALSE(matcher.IsTerminated());
  EXPECT_EQ(matcher.num_accepted_tokens(), 2);
}

TEST_F(GrammarTest, RollbackOfDraftedTokensEqualsFeedingOnlyTheCommittedOnes) {
  const std::string schema = R"({"type": "object", "properties": {
    "a": {"type": "array", "items": {"type": "integer"}}, "b": {"type": "string"}},
    "required": ["a", "b"]})";
  std::shared_ptr<const CompiledGrammar> grammar = Compile(GrammarSpec::JsonSchema(schema, true));
  ASSERT_NE(grammar, nullptr);
  std::mt19937 rng(7);
  int drafts_left_grammar = 0;
  for (int trial = 0; trial < 40; ++trial) {
    // A committed prefix, sampled under the grammar.
    GrammarMatcher matcher(grammar);
    testing::SampledText prefix = SampleConstrained(matcher, tokenizer_, rng, rng() % 12, 0.0f);
    if (prefix.terminated) continue;
    const std::vector<TokenId> committed = prefix.ids;
    const std::vector<TokenId> draft = RandomDraft(grammar, committed, 1 + rng() % 6, rng);

    // Fed one by one, then rolled back: the same state as never having seen the draft.
    int fed = 0;
    while (fed < static_cast<int>(draft.size()) && matcher.AcceptToken(draft[fed])) ++fed;
    drafts_left_grammar += fed < static_cast<int>(draft.size());
    ASSERT_TRUE(matcher.Rollback(fed).ok());
    EXPECT_EQ(matcher.num_accepted_tokens(), static_cast<int>(committed.size()));
    std::vector<int32_t> mask(matcher.bitmask_words());
    ASSERT_TRUE(matcher.FillNextTokenBitmask(absl::MakeSpan(mask)).ok());
    EXPECT_EQ(mask, MaskAfter(grammar, committed)) << "trial " << trial;

    // The block's masks: row i equals a fresh matcher fed committed + draft[0..i); the draft is
    // cut at the first token the grammar refuses; the state is left as it was.
    std::vector<int32_t> rows((draft.size() + 1) * matcher.bitmask_words(), -1);
    absl::StatusOr<int> valid = matcher.FillDraftBitmasks(draft, absl::MakeSpan(rows));
    ASSERT_TRUE(valid.ok()) << valid.status();
    EXPECT_EQ(*valid, fed) << "trial " << trial;
    for (int i = 0; i <= *valid; ++i) {
      std::vector<TokenId> fed_tokens = committed;
      fed_tokens.insert(fed_tokens.end(), draft.begin(), draft.begin() + i);
      std::vector<int32_t> row(rows.begin() + i * matcher.bitmask_words(),
                               rows.begin() + (i + 1) * matcher.bitmask_words());
      EXPECT_EQ(row, MaskAfter(grammar, fed_tokens)) << "trial " << trial << " row " << i;
    }
    EXPECT_EQ(matcher.num_accepted_tokens(), static_cast<int>(committed.size()));
    ASSERT_TRUE(matcher.FillNextTokenBitmask(absl::MakeSpan(mask)).ok());
    EXPECT_EQ(mask, MaskAfter(grammar, committed)) << "trial " << trial;
  }
  EXPECT_GT(drafts_left_grammar, 0) << "no draft left the grammar: the cut was not exercised";
}

TEST_F(GrammarTest, RollbackBeyondTheAcceptedTokensIsRefused) {
  GrammarMatcher matcher(Compile(GrammarSpec::Regex("[a-z]+")));
  EXPECT_TRUE(matcher.AcceptToken('a'));
  absl::Status status = matcher.Rollback(2);
  EXPECT_EQ(status.code(), absl::StatusCode::kOutOfRange);
  EXPECT_THAT(status.message(), HasSubstr("rollback of 2 tokens; 1 accepted"));
  EXPECT_EQ(matcher.num_accepted_tokens(), 1);
  EXPECT_FALSE(matcher.AcceptToken('1'));  // refused, state unchanged
  EXPECT_EQ(matcher.num_accepted_tokens(), 1);
}

TEST_F(GrammarTest, WrongSizedBuffersAreRefused) {
  GrammarMatcher matcher(Compile(GrammarSpec::JsonObject()));
  std::vector<float> logits(matcher.vocab_size() - 5);
  EXPECT_THAT(matcher.MaskLogits(absl::MakeSpan(logits)).message(),
              HasSubstr(absl::StrFormat("logits row has %d entries, expected %d", logits.size(),
                                        matcher.vocab_size())));
  std::vector<int32_t> rows(matcher.bitmask_words());
  const std::vector<TokenId> draft = {'{'};
  EXPECT_EQ(matcher.FillDraftBitmasks(draft, absl::MakeSpan(rows)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(GrammarTest, InvalidSpecsAreRefusedByName) {
  absl::Status status = compiler_->Compile(GrammarSpec::JsonSchema("{\"type\": ", true)).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("json_schema '{\"type\": '"));

  status = compiler_->Compile(GrammarSpec::JsonSchema(R"({"type": "no-such-type"})", true))
               .status();
  EXPECT_THAT(status.message(), HasSubstr("json_schema '{\"type\": \"no-such-type\"}'"));

  status = compiler_->Compile(GrammarSpec::Regex("a(b")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("regex 'a(b'"));

  status = compiler_->Compile(GrammarSpec::Ebnf("root ::= undefined_rule")).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("grammar 'root ::= undefined_rule'"));

  status = compiler_->Compile(GrammarSpec::Choice({})).status();
  EXPECT_THAT(status.message(), HasSubstr("choice: the list of choices is empty"));

  // A long schema is quoted by its start.
  const std::string long_schema = "{\"description\": \"" + std::string(300, 'x') + "\", ";
  status = compiler_->Compile(GrammarSpec::JsonSchema(long_schema, true)).status();
  EXPECT_THAT(status.message(), HasSubstr(absl::StrFormat("...' (%d bytes)", long_schema.size())));
}

TEST_F(GrammarTest, RepeatedSpecsHitTheCacheAndGetTheSameGrammar) {
  const std::string schema = R"({"type": "object", "properties": {"x": {"type": "integer"}}})";
  std::shared_ptr<const CompiledGrammar> first = Compile(GrammarSpec::JsonSchema(schema, true));
  std::shared_ptr<const CompiledGrammar> again = Compile(GrammarSpec::JsonSchema(schema, true));
  EXPECT_EQ(first.get(), again.get());
  GrammarCacheStats stats = compiler_->cache_stats();
  EXPECT_EQ(stats.misses, 1);
  EXPECT_EQ(stats.hits, 1);
  EXPECT_EQ(stats.entries, 1);
  EXPECT_GT(stats.bytes, 0u);

  // strict is part of the key: a lax schema admits unlisted properties.
  std::shared_ptr<const CompiledGrammar> lax = Compile(GrammarSpec::JsonSchema(schema, false));
  EXPECT_NE(lax.get(), first.get());
  GrammarMatcher strict_matcher(first);
  GrammarMatcher lax_matcher(lax);
  for (char c : std::string("{\"y\"")) {
    lax_matcher.AcceptToken(static_cast<unsigned char>(c));
    strict_matcher.AcceptToken(static_cast<unsigned char>(c));
  }
  EXPECT_EQ(lax_matcher.num_accepted_tokens(), 4);
  EXPECT_LT(strict_matcher.num_accepted_tokens(), 4);

  // The same text as another kind is another grammar.
  const std::string text = R"(root ::= "a")";
  EXPECT_NE(Compile(GrammarSpec::Regex(text)).get(), Compile(GrammarSpec::Ebnf(text)).get());
  EXPECT_EQ(compiler_->cache_stats().misses, 4);
}

TEST(GrammarCacheTest, TheCacheStaysWithinItsBoundLeastRecentlyUsedFirst) {
  Tokenizer tokenizer = ByteLevelTokenizer();
  absl::StatusOr<std::unique_ptr<GrammarCompiler>> compiler =
      GrammarCompiler::Create(tokenizer, {.cache_bytes = 1});
  ASSERT_TRUE(compiler.ok()) << compiler.status();
  auto a = (*compiler)->Compile(GrammarSpec::Regex("a+"));
  auto b = (*compiler)->Compile(GrammarSpec::Regex("b+"));
  ASSERT_TRUE(a.ok() && b.ok());
  // Over the bound, only the newest stays; the evicted grammar lives on in its holders.
  EXPECT_EQ((*compiler)->cache_stats().entries, 1);
  auto b_again = (*compiler)->Compile(GrammarSpec::Regex("b+"));
  ASSERT_TRUE(b_again.ok());
  EXPECT_EQ(b_again->get(), b->get());
  auto a_again = (*compiler)->Compile(GrammarSpec::Regex("a+"));
  ASSERT_TRUE(a_again.ok());
  EXPECT_NE(a_again->get(), a->get());
  EXPECT_EQ((*compiler)->cache_stats().misses, 3);
}

TEST(GrammarCompilerTest, AVocabularySizeBelowTheTokenizersIsRefused) {
  Tokenizer tokenizer = ByteLevelTokenizer();
  absl::Status status = GrammarCompiler::Create(tokenizer, {.vocab_size = 10}).status();
  EXPECT_THAT(status.message(),
              HasSubstr(absl::StrFormat("vocab_size 10 is below the tokenizer's vocabulary size %d",
                                        tokenizer.vocab_size())));
}

TEST(ChoiceEbnfTest, EscapesQuotesBackslashesAndControlCharacters) {
  const std::vector<std::string> choices = {"a\"b", "c\\d", "e\nf"};
  EXPECT_EQ(ChoiceEbnf(choices), R"(root ::= "a\"b" | "c\\d" | "e\x0af")");
}

}  // namespace
}  // namespace splitspec::grammar

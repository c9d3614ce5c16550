// Byte-level BPE through the Tokenizer facade, on small in-memory vocabularies.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/unit/tokenizer/tokenizer_test_util.h"

namespace splitspec::model {
namespace {

using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using testing::IdOf;
using testing::MakeByteLevelVocab;
using ::testing::Not;

// Token ids: bytes 0..255, then he=256 ll=257 hell=258 hello=259 " w"=260
// or=261 " wor"=262 ld=263 " world"=264, then specials from 265.
TokenizerVocab HelloWorldVocab(const std::string& pre,
                               const std::vector<std::string>& specials = {}) {
  return MakeByteLevelVocab({{"h", "e"},
                             {"l", "l"},
                             {"he", "ll"},
                             {"hell", "o"},
                             {" ", "w"},
                             {"o", "r"},
                             {" w", "or"},
                             {"l", "d"},
                             {" wor", "ld"}},
                            pre, specials);
}

Tokenizer Make(TokenizerVocab vocab) {
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(std::move(vocab));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::move(tok).value();
}

TEST(BpeTokenizerTest, AppliesMergesByRank) {
  Tokenizer tok = Make(HelloWorldVocab("gpt2"));
  EXPECT_THAT(tok.Encode("hello world"), ElementsAre(259, 264));
  EXPECT_THAT(tok.Encode("xyz"), ElementsAre('x', 'y', 'z'));
}

TEST(BpeTokenizerTest, EqualRanksMergeLeftmostFirst) {
  Tokenizer tok = Make(HelloWorldVocab("gpt2"));
  // h e l l l l -> he l l l l -> he ll l l -> he ll ll -> hell ll
  EXPECT_THAT(tok.Encode("hellll"), ElementsAre(258, 257));
}

TEST(BpeTokenizerTest, MergesNeverCrossWords) {
  Tokenizer tok = Make(HelloWorldVocab("smollm"));
  // "he" and "llo" are separate words because of the space.
  EXPECT_THAT(tok.Encode("he llo"), ElementsAre(256, ' ', 257, 'o'));
}

TEST(BpeTokenizerTest, Llama3EmitsAWordThatIsATokenWhole) {
  TokenizerVocab vocab = MakeByteLevelVocab({{"a", "b"}}, "llama3");
  vocab.tokens.push_back("abc");  // reachable by no merge
  vocab.token_types.push_back(TokenType::kNormal);
  vocab.bos_id = IdOf(vocab, "!");
  const TokenId abc = IdOf(vocab, "abc");
  Tokenizer llama3 = Make(vocab);
  EXPECT_THAT(llama3.Encode("abc", {.add_special = false}), ElementsAre(abc));
  vocab.pre = "gpt2";
  Tokenizer gpt2 = Make(vocab);
  EXPECT_THAT(gpt2.Encode("abc", {.add_special = false}), ElementsAre(256, 'c'));
}

TEST(BpeTokenizerTest, ControlTokensAreParsedOnlyWhenAsked) {
  Tokenizer tok = Make(HelloWorldVocab("smollm", {"<|im_start|>", "<|im_end|>"}));
  EXPECT_THAT(tok.Encode("<|im_start|>hello<|im_end|>", {.parse_special = true}),
              ElementsAre(265, 259, 266));
  const std::vector<TokenId> plain = tok.Encode("<|im_start|>hello");
  EXPECT_THAT(plain, Not(Contains(265)));
  EXPECT_EQ(plain.front(), '<');
  EXPECT_EQ(*tok.Decode(plain), "<|im_start|>hello");
}

TEST(BpeTokenizerTest, UserDefinedTokensAreAlwaysParsed) {
  TokenizerVocab vocab = HelloWorldVocab("gpt2");
  vocab.tokens.push_back("<tool>");
  vocab.token_types.push_back(TokenType::kUserDefined);
  Tokenizer tok = Make(std::move(vocab));
  EXPECT_THAT(tok.Encode("hello<tool>", {.parse_special = false}), ElementsAre(259, 265));
  EXPECT_EQ(*tok.Decode({259, 265}), "hello<tool>");  // user-defined text is always shown
}

TEST(BpeTokenizerTest, LongerSpecialTokensAreCutFirst) {
  TokenizerVocab vocab = HelloWorldVocab("gpt2", {"ab", "bcd"});  // ab=265, bcd=266
  Tokenizer tok = Make(std::move(vocab));
  // As llama.cpp: "bcd" (longer) is taken first, although "ab" starts earlier.
  EXPECT_THAT(tok.Encode("abcd", {.parse_special = true}), ElementsAre('a', 266));
}

TEST(BpeTokenizerTest, ControlTokensDecodeToNothingUnlessRendered) {
  Tokenizer tok = Make(HelloWorldVocab("smollm", {"<|im_start|>"}));
  EXPECT_EQ(*tok.Decode({265, 259}), "hello");
  EXPECT_EQ(*tok.Decode({265, 259}, {.render_special = true}), "<|im_start|>hello");
}

TEST(BpeTokenizerTest, AddsBosAndEosAsConfigured) {
  TokenizerVocab vocab = HelloWorldVocab("smollm", {"<s>", "</s>"});
  vocab.bos_id = 265;
  vocab.eos_id = 266;
  vocab.add_bos = true;
  vocab.add_eos = true;
  Tokenizer tok = Make(std::move(vocab));
  EXPECT_THAT(tok.Encode("hello"), ElementsAre(265, 259, 266));
  EXPECT_THAT(tok.Encode("hello", {.add_special = false}), ElementsAre(259));
  EXPECT_TRUE(tok.IsEndOfGeneration(266));
  EXPECT_FALSE(tok.IsEndOfGeneration(265));
}

TEST(BpeTokenizerTest, Llama3AddsBosByDefault) {
  TokenizerVocab vocab = HelloWorldVocab("llama-bpe", {"<|begin_of_text|>"});
  vocab.bos_id = 265;
  Tokenizer tok = Make(std::move(vocab));
  EXPECT_TRUE(tok.adds_bos());
  EXPECT_THAT(tok.Encode("hello"), ElementsAre(265, 259));
}

TEST(BpeTokenizerTest, RoundTripsVariedText) {
  const std::vector<std::string> texts = {
      "hello world",
      "  leading and trailing  ",
      "tabs\tand\nnewlines\r\n\n",
      "naïve café, Straße, Ελληνικά, русский",
      "你好，世界！こんにちは 안녕하세요",
      "emoji 👋🌍 family 👨‍👩‍👧‍👦 flag 🇺🇸",
      "int main() { return 0; }  // code",
      "1234567890 3.14159 1,000,000 ٣٤٥",
      "I'm they'll We'VE don't",
      "\u00A0nbsp\u3000ideographic\u200Bzero-width e\u0301",
      "",
  };
  for (std::string_view pre : {"gpt2", "llama3", "qwen2", "smollm"}) {
    TokenizerVocab vocab = HelloWorldVocab(std::string(pre));
    vocab.bos_id = 'B';  // llama3 adds BOS by default
    Tokenizer tok = Make(std::move(vocab));
    for (const std::string& text : texts) {
      absl::StatusOr<std::string> back = tok.Decode(tok.Encode(text, {.add_special = false}));
      ASSERT_TRUE(back.ok()) << back.status();
      EXPECT_EQ(*back, text) << "pre=" << pre;
    }
  }
}

TEST(BpeTokenizerTest, RepeatedEncodingIsStable) {
  Tokenizer tok = Make(HelloWorldVocab("smollm"));
  const std::vector<TokenId> first = tok.Encode("hello world hello world");
  EXPECT_EQ(tok.Encode("hello world hello world"), first);  // second time from the cache
  EXPECT_THAT(first, ElementsAre(259, 264, ' ', 259, 264));
}

TEST(BpeTokenizerTest, DecodeRefusesOutOfRangeIds) {
  Tokenizer tok = Make(HelloWorldVocab("gpt2"));
  absl::StatusOr<std::string> text = tok.Decode({259, 99999});
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(text.status().message(), HasSubstr("token id 99999 out of range [0, 265)"));
  EXPECT_FALSE(tok.Decode({-1}).ok());
}

TEST(BpeTokenizerTest, CreateRefusesBadVocabularies) {
  TokenizerVocab bad_merge = HelloWorldVocab("gpt2");
  bad_merge.merges[3] = "hello";
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(bad_merge);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("BPE merge 3 ('hello')"));

  TokenizerVocab bad_pre = HelloWorldVocab("falcon");
  tok = Tokenizer::Create(bad_pre);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("unsupported pre-tokenizer 'falcon'"));

  TokenizerVocab bad_model = HelloWorldVocab("gpt2");
  bad_model.model = "bert";
  tok = Tokenizer::Create(bad_model);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("unsupported tokenizer model 'bert'"));

  TokenizerVocab bad_bos = HelloWorldVocab("gpt2");
  bad_bos.bos_id = 70000;
  tok = Tokenizer::Create(bad_bos);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("bos_id 70000 out of range [0, 265)"));
}

}  // namespace
}  // namespace splitspec::model

// SentencePiece ("llama") vocabularies through the Tokenizer facade.
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr TokenId kUnk = 0, kBos = 1, kSpace = 3, kA = 4, kB = 5, kC = 6, kAB = 7, kBC = 8,
                  kSpaceA = 9, kFirstByte = 10;

// 0 <unk>, 1 <s>, 2 </s>, 3 "▁", 4 a, 5 b, 6 c, 7 ab (-2), 8 bc (-1), 9 ▁a (-3),
// then, with byte fallback, <0x00>..<0xFF> at 10..265.
TokenizerVocab SpmVocab(bool byte_fallback) {
  TokenizerVocab v;
  v.model = "llama";
  v.tokens = {"<unk>",
              "<s>",
              "</s>",
              "\xE2\x96\x81",
              "a",
              "b",
              "c",
              "ab",
              "bc",
              "\xE2\x96\x81"
              "a"};
  v.scores = {0, 0, 0, -10, -10, -10, -10, -2, -1, -3};
  v.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl};
  v.token_types.resize(v.tokens.size(), TokenType::kNormal);
  if (byte_fallback) {
    for (int b = 0; b < 256; ++b) {
      v.tokens.push_back(absl::StrFormat("<0x%02X>", b));
      v.scores.push_back(0);
      v.token_types.push_back(TokenType::kByte);
    }
  }
  v.unk_id = kUnk;
  v.bos_id = kBos;
  v.eos_id = 2;
  return v;
}

Tokenizer Make(TokenizerVocab vocab) {
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(std::move(vocab));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::move(tok).value();
}

TEST(SentencePieceTokenizerTest, MergesHighestScoreFirstWithSpacePrefixAndBos) {
  Tokenizer tok = Make(SpmVocab(/*byte_fallback=*/true));
  EXPECT_TRUE(tok.is_sentencepiece());
  // "▁abc": bc (-1) beats ab (-2); then ▁a (-3); "abc" is no token.
  EXPECT_THAT(tok.Encode("abc"), ElementsAre(kBos, kSpaceA, kBC));
  EXPECT_THAT(tok.Encode("abc", {.add_special = false}), ElementsAre(kSpaceA, kBC));
}

TEST(SentencePieceTokenizerTest, ScoresDecideBetweenCompetingMerges) {
  TokenizerVocab vocab = SpmVocab(/*byte_fallback=*/true);
  vocab.scores[kAB] = -1;
  vocab.scores[kBC] = -2;
  vocab.add_space_prefix = false;
  Tokenizer tok = Make(std::move(vocab));
  EXPECT_THAT(tok.Encode("abc", {.add_special = false}), ElementsAre(kAB, kC));
}

TEST(SentencePieceTokenizerTest, SpacesBecomeMetaSpaceAndDecodeBack) {
  Tokenizer tok = Make(SpmVocab(/*byte_fallback=*/true));
  const std::vector<TokenId> ids = tok.Encode("a b");
  EXPECT_THAT(ids, ElementsAre(kBos, kSpaceA, kSpace, kB));
  EXPECT_EQ(*tok.Decode(ids), "a b");
  EXPECT_EQ(*tok.Decode(ids, {.strip_space_prefix = false}), " a b");
}

TEST(SentencePieceTokenizerTest, ByteFallbackCoversUnknownCharacters) {
  Tokenizer tok = Make(SpmVocab(/*byte_fallback=*/true));
  const std::vector<TokenId> ids = tok.Encode("a€", {.add_special = false});
  EXPECT_THAT(ids, ElementsAre(kSpaceA, kFirstByte + 0xE2, kFirstByte + 0x82, kFirstByte + 0xAC));
  EXPECT_EQ(*tok.Decode(ids), "a€");
  for (const std::string text : {"a b c", "ba ab", "€ 😀 你好", "  two  spaces "}) {
    EXPECT_EQ(*tok.Decode(tok.Encode(text)), text);
  }
}

TEST(SentencePieceTokenizerTest, WithoutByteFallbackUnknownCharactersBecomeUnk) {
  Tokenizer tok = Make(SpmVocab(/*byte_fallback=*/false));
  EXPECT_THAT(tok.Encode("a€b", {.add_special = false}), ElementsAre(kSpaceA, kUnk, kB));
  EXPECT_EQ(*tok.Decode({kSpaceA, kUnk, kB}), "ab");  // <unk> renders as nothing
}

TEST(SentencePieceTokenizerTest, TextAfterASpecialTokenGetsASpacePrefix) {
  Tokenizer tok = Make(SpmVocab(/*byte_fallback=*/true));
  EXPECT_THAT(tok.Encode("<s>a", {.add_special = false, .parse_special = true}),
              ElementsAre(kBos, kSpaceA));
}

// Re-tokenizing text that continues earlier text (a draft of another vocabulary):
// no space is prepended, so the pieces spell exactly the given bytes.
TEST(SentencePieceTokenizerTest, ContinuationTextGetsNoSpacePrefix) {
  Tokenizer tok = Make(SpmVocab(/*byte_fallback=*/true));
  const std::vector<TokenId> ids =
      tok.Encode("abc", {.add_special = false, .parse_special = false, .space_prefix = false});
  EXPECT_THAT(ids, ElementsAre(kA, kBC));
  EXPECT_EQ(*tok.Decode(ids, {.strip_space_prefix = false}), "abc");
}

TEST(SentencePieceTokenizerTest, RefusesVocabularyWithoutBytesOrUnk) {
  TokenizerVocab vocab = SpmVocab(/*byte_fallback=*/false);
  vocab.unk_id = kNoToken;
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(std::move(vocab));
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("neither byte tokens"));
}

TEST(SentencePieceTokenizerTest, RefusesScoresOfWrongLength) {
  TokenizerVocab vocab = SpmVocab(/*byte_fallback=*/false);
  vocab.scores.pop_back();
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(std::move(vocab));
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("scores has 9 entries but there are 10 tokens"));
}

}  // namespace
}  // namespace splitspec::model

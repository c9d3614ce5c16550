#include "runtime/tokenizer/detokenizer.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tokenizer/unicode.h"
#include "tests/unit/tokenizer/tokenizer_test_util.h"

namespace splitspec::model {
namespace {

using ::testing::HasSubstr;

// Byte-level vocabulary without merges: token id == byte value, so every
// multi-byte character is split across tokens.
Tokenizer ByteTokenizer() {
  absl::StatusOr<Tokenizer> tok =
      Tokenizer::Create(testing::MakeByteLevelVocab({}, "smollm", {"<|im_end|>"}));
  EXPECT_TRUE(tok.ok()) << tok.status();
  return std::move(tok).value();
}

std::vector<TokenId> ByteIds(std::string_view bytes) {
  std::vector<TokenId> ids;
  for (char c : bytes) ids.push_back(static_cast<uint8_t>(c));
  return ids;
}

TEST(StreamingDetokenizerTest, HoldsBackPartialCharacters) {
  Tokenizer tok = ByteTokenizer();
  StreamingDetokenizer detok(&tok);
  const std::vector<TokenId> wave = ByteIds("👋");  // F0 9F 91 8B
  for (size_t i = 0; i + 1 < wave.size(); ++i) {
    EXPECT_EQ(*detok.Push(wave[i]), "");
    EXPECT_EQ(detok.pending_bytes(), i + 1);
  }
  EXPECT_EQ(*detok.Push(wave.back()), "👋");
  EXPECT_EQ(detok.pending_bytes(), 0u);
}

TEST(StreamingDetokenizerTest, EveryChunkIsValidUtf8AndTheWholeEqualsDecode) {
  Tokenizer tok = ByteTokenizer();
  const std::string text = "héllo 世界 👨‍👩‍👧 ok\n€";
  const std::vector<TokenId> ids = ByteIds(text);
  StreamingDetokenizer detok(&tok);
  std::string streamed;
  for (TokenId id : ids) {
    absl::StatusOr<std::string> chunk = detok.Push(id);
    ASSERT_TRUE(chunk.ok()) << chunk.status();
    EXPECT_TRUE(unicode::IsValidUtf8(*chunk)) << "after id " << id;
    streamed += *chunk;
  }
  streamed += detok.Finish();
  EXPECT_EQ(streamed, text);
  EXPECT_EQ(streamed, *tok.Decode(ids));
}

TEST(StreamingDetokenizerTest, ImpossibleBytesBecomeReplacementCharacters) {
  Tokenizer tok = ByteTokenizer();
  StreamingDetokenizer detok(&tok);
  EXPECT_EQ(*detok.Push(0x80), "\uFFFD");  // stray continuation byte
  EXPECT_EQ(*detok.Push(0xF0), "");        // could still start a character
  EXPECT_EQ(*detok.Push('a'), "\uFFFDa");  // ...but did not
  EXPECT_EQ(*detok.Push(0xE2), "");
  EXPECT_EQ(*detok.Push(0x82), "");
  EXPECT_EQ(detok.Finish(), "\uFFFD\uFFFD");  // cut off at the end of the stream
  EXPECT_EQ(detok.pending_bytes(), 0u);
}

TEST(StreamingDetokenizerTest, ControlTokensFollowTheDecodeOptions) {
  Tokenizer tok = ByteTokenizer();
  StreamingDetokenizer hidden(&tok);
  EXPECT_EQ(*hidden.Push(256), "");
  StreamingDetokenizer shown(&tok, {.render_special = true});
  EXPECT_EQ(*shown.Push(256), "<|im_end|>");
}

TEST(StreamingDetokenizerTest, OutOfRangeIdLeavesStateUnchanged) {
  Tokenizer tok = ByteTokenizer();
  StreamingDetokenizer detok(&tok);
  EXPECT_EQ(*detok.Push(0xC3), "");
  absl::StatusOr<std::string> bad = detok.Push(5000);
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("token id 5000"));
  EXPECT_EQ(*detok.Push(0xA9), "é");
}

TEST(StreamingDetokenizerTest, SentencePieceSpacePrefixIsStrippedOnce) {
  TokenizerVocab v;
  v.model = "llama";
  v.tokens = {"<unk>", "<s>", "</s>",
              "\xE2\x96\x81"
              "a",
              "\xE2\x96\x81"
              "b"};
  v.token_types = {TokenType::kUnknown, TokenType::kControl, TokenType::kControl,
                   TokenType::kNormal, TokenType::kNormal};
  v.unk_id = 0;
  v.bos_id = 1;
  absl::StatusOr<Tokenizer> tok = Tokenizer::Create(std::move(v));
  ASSERT_TRUE(tok.ok()) << tok.status();
  StreamingDetokenizer detok(&*tok);
  std::string out;
  for (TokenId id : {1, 3, 4}) out += *detok.Push(id);
  EXPECT_EQ(out, "a b");
  EXPECT_EQ(out, *tok->Decode({1, 3, 4}));
}

}  // namespace
}  // namespace splitspec::model

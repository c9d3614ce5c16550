// CompletionText: streaming detokenization with stop strings, on the tiny
// model's byte-level BPE vocabulary.
#include <unistd.h>

#include "coordinator/http/completion_text.h"

#include "gtest/gtest.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::coordinator::http {
namespace {

class CompletionTextTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const std::string path =
        ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-completion-text-tiny.gguf";
    ASSERT_TRUE(model::WriteTinyModel({}, path).ok());
    auto file = model::GgufFile::Open(path);
    ASSERT_TRUE(file.ok()) << file.status();
    auto tokenizer = model::LoadTokenizerFromGguf(**file);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = new model::Tokenizer(*std::move(tokenizer));
  }
  static void TearDownTestSuite() { delete tokenizer_; }

  // One token per byte of `bytes` (the vocabulary's GPT-2 byte tokens).
  static std::vector<int32_t> ByteTokens(const std::string& bytes) {
    std::vector<int32_t> ids;
    for (char c : bytes) {
      const std::string piece = model::Gpt2ByteToken(static_cast<uint8_t>(c));
      for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
        if (tokenizer_->TokenText(id) == piece) {
          ids.push_back(id);
          break;
        }
      }
    }
    EXPECT_EQ(ids.size(), bytes.size());
    return ids;
  }

  static std::vector<int32_t> Encode(const std::string& text) {
    return tokenizer_->Encode(text, {.add_special = false, .parse_special = false});
  }

  // Pushes every token, one at a time; returns the concatenated output.
  static std::string PushAll(CompletionText& text, const std::vector<int32_t>& ids,
                             std::vector<std::string>* pieces) {
    std::string out;
    for (int32_t id : ids) {
      absl::StatusOr<std::string> piece = text.Push(id);
      EXPECT_TRUE(piece.ok()) << piece.status();
      if (pieces) pieces->push_back(*piece);
      out += *piece;
    }
    return out;
  }

  static model::Tokenizer* tokenizer_;
};

model::Tokenizer* CompletionTextTest::tokenizer_ = nullptr;

TEST_F(CompletionTextTest, WithoutStopsOutputEqualsDecode) {
  const std::string input = "Hello world, the quick fox.";
  CompletionText text(tokenizer_, {});
  std::string out = PushAll(text, Encode(input), nullptr);
  out += text.Finish();
  EXPECT_EQ(out, input);
  EXPECT_EQ(text.emitted(), input);
  EXPECT_FALSE(text.stopped());
}

TEST_F(CompletionTextTest, CutsAtTheFirstStopStringAndCountsTokensUpToIt) {
  // One byte per token, so the stop string is split across tokens.
  const std::vector<int32_t> ids = ByteTokens("abc END def");
  CompletionText text(tokenizer_, {"XYZ", "END"});
  std::vector<std::string> pieces;
  const std::string out = PushAll(text, ids, &pieces);
  EXPECT_EQ(out, "abc ");
  EXPECT_TRUE(text.stopped());
  EXPECT_EQ(text.tokens(), 7);  // "abc END": the token completing "END" counts
  EXPECT_EQ(text.Finish(), "");
  EXPECT_EQ(text.emitted(), "abc ");
  // "E" and "N" were held back while they could still start "END".
  EXPECT_EQ(pieces[4], "");
  EXPECT_EQ(pieces[5], "");
}

TEST_F(CompletionTextTest, HeldBackPrefixIsReleasedWhenItDoesNotComplete) {
  const std::vector<int32_t> ids = ByteTokens("xEN");
  CompletionText text(tokenizer_, {"END"});
  EXPECT_EQ(PushAll(text, ids, nullptr), "x");
  EXPECT_EQ(text.Finish(), "EN");
  EXPECT_FALSE(text.stopped());
  EXPECT_EQ(text.emitted(), "xEN");
}

TEST_F(CompletionTextTest, NeverEmitsHalfAUtf8Character) {
  const std::string input = "caf\xc3\xa9 \xf0\x9f\x98\x80";  // "café 😀"
  const std::vector<int32_t> ids = ByteTokens(input);
  CompletionText text(tokenizer_, {});
  std::vector<std::string> pieces;
  PushAll(text, ids, &pieces);
  EXPECT_EQ(pieces[3], "");          // first byte of é held back
  EXPECT_EQ(pieces[4], "\xc3\xa9");  // é complete
  EXPECT_EQ(pieces[8], "");
  EXPECT_EQ(pieces[9], "\xf0\x9f\x98\x80");
  EXPECT_EQ(text.emitted(), input);
}

TEST_F(CompletionTextTest, OutOfVocabularyTokenIsAnError) {
  CompletionText text(tokenizer_, {});
  absl::StatusOr<std::string> piece = text.Push(tokenizer_->vocab_size() + 5);
  ASSERT_FALSE(piece.ok());
  EXPECT_EQ(piece.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(text.tokens(), 0);
}

}  // namespace
}  // namespace splitspec::coordinator::http

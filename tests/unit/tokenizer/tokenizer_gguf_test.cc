#include "runtime/tokenizer/tokenizer_gguf.h"

#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/gguf_writer.h"
#include "tests/unit/tokenizer/tokenizer_test_util.h"

namespace splitspec::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A GGUF holding the tokenizer of MakeByteLevelVocab({h e}, smollm, {<|im_end|>}).
GgufWriter TokenizerWriter() {
  const TokenizerVocab v = testing::MakeByteLevelVocab({{"h", "e"}}, "smollm", {"<|im_end|>"});
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  w.SetString("tokenizer.ggml.model", v.model);
  w.SetString("tokenizer.ggml.pre", v.pre);
  w.SetStringArray("tokenizer.ggml.tokens", v.tokens);
  std::vector<int32_t> types;
  for (TokenType t : v.token_types) types.push_back(static_cast<int32_t>(t));
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  w.SetStringArray("tokenizer.ggml.merges", v.merges);
  w.SetUint32("tokenizer.ggml.eos_token_id", 257);
  w.SetBool("tokenizer.ggml.add_bos_token", false);
  w.SetString("tokenizer.chat_template", "{{ 'x' }}");
  return w;
}

absl::StatusOr<Tokenizer> Load(const GgufWriter& w) {
  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::FromBuffer(w.Serialize());
  if (!file.ok()) return file.status();
  return LoadTokenizerFromGguf(**file);
}

TEST(TokenizerGgufTest, LoadsVocabularyMergesAndSpecialTokens) {
  absl::StatusOr<Tokenizer> tok = Load(TokenizerWriter());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->vocab_size(), 258);
  EXPECT_EQ(tok->eos_id(), 257);
  EXPECT_TRUE(tok->IsEndOfGeneration(257));
  EXPECT_EQ(tok->chat_template(), "{{ 'x' }}");
  EXPECT_THAT(tok->Encode("he<|im_end|>", {.parse_special = true}), ElementsAre(256, 257));
}

TEST(TokenizerGgufTest, MissingPreTokenizerIsNamed) {
  GgufWriter without;  // same keys minus tokenizer.ggml.pre
  const TokenizerVocab v = testing::MakeByteLevelVocab({{"h", "e"}}, "smollm");
  without.SetString("tokenizer.ggml.model", "gpt2");
  without.SetStringArray("tokenizer.ggml.tokens", v.tokens);
  without.SetStringArray("tokenizer.ggml.merges", v.merges);
  absl::StatusOr<Tokenizer> tok = Load(without);
  ASSERT_FALSE(tok.ok());
  EXPECT_EQ(tok.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.pre"));
}

TEST(TokenizerGgufTest, UnsupportedPreTokenizerIsNamed) {
  GgufWriter w = TokenizerWriter();
  w.SetString("tokenizer.ggml.pre", "deepseek-llm");
  absl::StatusOr<Tokenizer> tok = Load(w);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("unsupported pre-tokenizer 'deepseek-llm'"));
}

TEST(TokenizerGgufTest, BadTokenTypeIsNamed) {
  GgufWriter w = TokenizerWriter();
  std::vector<int32_t> types(258, 1);
  types[7] = 9;
  w.SetInt32Array("tokenizer.ggml.token_type", types);
  absl::StatusOr<Tokenizer> tok = Load(w);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("'tokenizer.ggml.token_type'[7] = 9"));
}

TEST(TokenizerGgufTest, FileWithoutTokenizerIsRefused) {
  GgufWriter w;
  w.SetString("general.architecture", "llama");
  absl::StatusOr<Tokenizer> tok = Load(w);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.model"));
}

TEST(TokenizerGgufTest, WrongValueTypeIsRefused) {
  GgufWriter w = TokenizerWriter();
  w.SetString("tokenizer.ggml.add_bos_token", "yes");
  absl::StatusOr<Tokenizer> tok = Load(w);
  ASSERT_FALSE(tok.ok());
  EXPECT_THAT(tok.status().message(), HasSubstr("tokenizer.ggml.add_bos_token"));
}

}  // namespace
}  // namespace splitspec::model

// The benchmark models (tests/testing/bench_model.h): every shape and type writes a file that
// splitspec loads, whose per-layer sizes are the real model's and whose tokenizer has exactly
// as many tokens as the embedding has rows (llama.cpp refuses fewer). Files are shrunk to one
// layer and a small vocabulary here; the full sizes are written by the GPU routine.
#include "tests/testing/bench_model.h"

#include <unistd.h>

#include <string>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/model/transformer.h"
#include "runtime/tokenizer/tokenizer_gguf.h"

namespace splitspec::model {
namespace {

using ::testing::HasSubstr;

struct Expected {
  int n_layers, n_embd, n_ff, n_heads, n_kv_heads, head_dim, vocab_rows;
  bool tied_output;
};

Expected ExpectedShape(const std::string& shape) {
  if (shape == "smollm2") return {30, 576, 1536, 9, 3, 64, 49152, true};
  if (shape == "llama3-1b") return {16, 2048, 8192, 32, 8, 64, 128256, true};
  return {32, 4096, 14336, 32, 8, 128, 128256, false};  // llama3-8b
}

class BenchModelTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(BenchModelTest, WritesAFileSplitspecLoadsWithOneTokenPerEmbeddingRow) {
  const auto& [shape, type] = GetParam();
  absl::StatusOr<TinyModelOptions> options = BenchModelOptions(shape, type);
  if (shape == "smollm2" && type == "q4_K") {
    ASSERT_FALSE(options.ok());
    EXPECT_THAT(options.status().message(), HasSubstr("multiple of 256"));
    EXPECT_THAT(options.status().message(), HasSubstr("n_embd 576"));
    return;
  }
  ASSERT_TRUE(options.ok()) << options.status();
  const Expected want = ExpectedShape(shape);
  EXPECT_EQ(options->n_layers, want.n_layers);
  EXPECT_EQ(options->vocab_rows, want.vocab_rows);
  EXPECT_EQ(options->tied_output, want.tied_output);

  options->n_layers = 1;
  options->vocab_rows = TinyModelVocabSize() + 211;  // padded with 211 unused tokens
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/", getpid(), "-bench-", shape, "-", type, ".gguf");
  ASSERT_TRUE(WriteTinyModel(*options, path).ok());

  absl::StatusOr<std::unique_ptr<GgufFile>> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<uint64_t> tokens = (*file)->GetArrayLength("tokenizer.ggml.tokens");
  ASSERT_TRUE(tokens.ok()) << tokens.status();
  EXPECT_EQ(*tokens, static_cast<uint64_t>(options->vocab_rows));
  absl::StatusOr<Tokenizer> tokenizer = LoadTokenizerFromGguf(**file);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ(tokenizer->vocab_size(), options->vocab_rows);
  EXPECT_EQ(tokenizer->token_type(options->vocab_rows - 1), TokenType::kUnused);
  EXPECT_EQ(tokenizer->token_type(TinyModelVocabSize() - 1), TokenType::kNormal);
  // The padding is unreachable from text: the tiny tokenizer encodes as before.
  const std::vector<TokenId> ids = tokenizer->Encode("the cat is in the hall");
  for (TokenId id : ids) EXPECT_LT(id, TinyModelVocabSize());
  absl::StatusOr<std::string> text = tokenizer->Decode(ids);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "the cat is in the hall");

  absl::StatusOr<std::unique_ptr<Transformer>> model = Transformer::Load(path, {.threads = 1});
  ASSERT_TRUE(model.ok()) << model.status();
  const ModelConfig& config = (*model)->config();
  EXPECT_EQ(config.n_layers, 1);
  EXPECT_EQ(config.n_embd, want.n_embd);
  EXPECT_EQ(config.n_ff, want.n_ff);
  EXPECT_EQ(config.n_heads, want.n_heads);
  EXPECT_EQ(config.n_kv_heads, want.n_kv_heads);
  EXPECT_EQ(config.head_dim, want.head_dim);
  EXPECT_EQ(config.vocab_size, options->vocab_rows);
  ::unlink(path.c_str());
}

std::string ParamName(const ::testing::TestParamInfo<BenchModelTest::ParamType>& info) {
  std::string name = absl::StrCat(std::get<0>(info.param), "_", std::get<1>(info.param));
  for (char& c : name) c = c == '-' ? '_' : c;
  return name;
}

// Every type at the two smaller shapes; the 8B shape (one layer is 218M weights) at the
// routine's type only.
INSTANTIATE_TEST_SUITE_P(ShapesAndTypes, BenchModelTest,
                         ::testing::Combine(::testing::Values("smollm2", "llama3-1b"),
                                            ::testing::Values("q4_0", "q4_1", "q8_0", "q4_K")),
                         ParamName);
INSTANTIATE_TEST_SUITE_P(Llama3_8b, BenchModelTest,
                         ::testing::Combine(::testing::Values("llama3-8b"),
                                            ::testing::Values("q4_0")),
                         ParamName);

TEST(BenchModelOptionsTest, RefusesAnUnknownShapeOrTypeListingTheKnownOnes) {
  absl::StatusOr<TinyModelOptions> shape = BenchModelOptions("llama3-70b", "q4_0");
  ASSERT_FALSE(shape.ok());
  EXPECT_THAT(shape.status().message(), HasSubstr("unknown shape 'llama3-70b'"));
  EXPECT_THAT(shape.status().message(), HasSubstr("smollm2, llama3-1b, llama3-8b"));
  absl::StatusOr<TinyModelOptions> type = BenchModelOptions("smollm2", "q5_K");
  ASSERT_FALSE(type.ok());
  EXPECT_THAT(type.status().message(), HasSubstr("unknown type 'q5_K'"));
  EXPECT_THAT(type.status().message(), HasSubstr("q4_0, q4_1, q8_0, q4_K"));
}

}  // namespace
}  // namespace splitspec::model

// JsonTokenizer: a SentencePiece vocabulary of exactly FakeLanguageModel's 32
// tokens (0 <unk>, 1 <s>, 2 </s> = end of generation, then pieces of JSON text),
// for the engine tests of structured outputs: a grammar compiled over it masks
// the fake model's rows (tests only).
//
//   auto compiler = grammar::GrammarCompiler::Create(testing::JsonTokenizer());
#ifndef SPLITSPEC_TESTS_UNIT_TARGET_WORKER_JSON_TOKENIZER_H_
#define SPLITSPEC_TESTS_UNIT_TARGET_WORKER_JSON_TOKENIZER_H_

#include <utility>

#include "absl/status/statusor.h"
#include "gtest/gtest.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::testing {

inline constexpr int kJsonTokenizerEos = 2;

inline model::Tokenizer JsonTokenizer() {
  model::TokenizerVocab vocab;
  vocab.model = "llama";
  vocab.tokens = {"<unk>", "<s>", "</s>", "{",  "}",  "[",    "]",     "\"",
                  ":",     ",",   "a",    "b",  "c",  "0",    "1",     "2",
                  "3",     "t",   "r",    "u",  "e",  "f",    "l",     "s",
                  "n",     "\xE2\x96\x81", "\"a", "ab", "12", "true", "false", "null"};
  vocab.scores.assign(vocab.tokens.size(), -1.0f);
  vocab.token_types = {model::TokenType::kUnknown, model::TokenType::kControl,
                       model::TokenType::kControl};
  vocab.token_types.resize(vocab.tokens.size(), model::TokenType::kNormal);
  vocab.unk_id = 0;
  vocab.bos_id = 1;
  vocab.eos_id = kJsonTokenizerEos;
  absl::StatusOr<model::Tokenizer> tokenizer = model::Tokenizer::Create(std::move(vocab));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return std::move(tokenizer).value();
}

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_UNIT_TARGET_WORKER_JSON_TOKENIZER_H_

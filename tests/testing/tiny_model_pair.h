// Tests only: the tiny target and draft models the in-process pipeline tests
// share (Q8_0 weights, seeds 1 and 7, written to the test's temp dir), the
// target loaded with its tokenizer, and the target's last-position logits.
//
//   struct Fixture : model::TinyModelPair { ... };
//   Fixture f;
//   ASSERT_NO_FATAL_FAILURE(f.Load("guided"));   // guided-target.gguf, guided-draft.gguf
//   std::vector<float> logits = model::LastLogits(*f.target, prompt);
#ifndef SPLITSPEC_TESTS_TESTING_TINY_MODEL_PAIR_H_
#define SPLITSPEC_TESTS_TESTING_TINY_MODEL_PAIR_H_

#include <unistd.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::model {

// A tiny Q8_0 model with weights from `seed`, at TempDir()/PID-NAME.gguf.
inline std::string WriteTinyQ8Model(const std::string& name, uint32_t seed) {
  TinyModelOptions options;
  options.weight_type = kernels::GgmlType::kQ8_0;
  options.seed = seed;
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-" + name + ".gguf";
  EXPECT_TRUE(WriteTinyModel(options, path).ok());
  return path;
}

// The logits after `tokens` (a fresh cache).
inline std::vector<float> LastLogits(Transformer& model, const std::vector<int32_t>& tokens) {
  auto cache = model.NewCache();
  ForwardOutput out;
  EXPECT_TRUE(model.Forward({{cache.get(), tokens, LogitsMode::kLast}}, &out).ok());
  return std::vector<float>(out.Row(0, 0), out.Row(0, 0) + out.vocab_size);
}

struct TinyModelPair {
  std::string target_path, draft_path;
  std::unique_ptr<Transformer> target;
  std::unique_ptr<Tokenizer> tokenizer;

  // Writes PREFIX-target (seed 1) and PREFIX-draft (seed 7); loads the target.
  void Load(const std::string& prefix) {
    target_path = WriteTinyQ8Model(prefix + "-target", 1);
    draft_path = WriteTinyQ8Model(prefix + "-draft", 7);
    auto loaded = Transformer::Load(target_path, {.threads = 1});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    target = *std::move(loaded);
    auto file = GgufFile::Open(target_path);
    ASSERT_TRUE(file.ok());
    auto tok = LoadTokenizerFromGguf(**file);
    ASSERT_TRUE(tok.ok()) << tok.status();
    tokenizer = std::make_unique<Tokenizer>(*std::move(tok));
  }
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_TESTS_TESTING_TINY_MODEL_PAIR_H_

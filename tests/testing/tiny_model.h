// Tiny random-weight Llama-family GGUF models for tests (library
// splitspec_testing; link it from any test that needs a model).
//
//   TinyModelOptions options;                    // llama, 2 layers, hidden 64, f32
//   options.weight_type = GgmlType::kQ8_0;
//   std::string path = ::testing::TempDir() + "/tiny.gguf";
//   ASSERT_TRUE(WriteTinyModel(options, path).ok());
//   auto model = Transformer::Load(path, {.threads = 2});
//
// The model carries a valid byte-level BPE tokenizer section ("gpt2" model,
// "smollm" pre-tokenizer): token 0 "<|endoftext|>" (also BOS and EOS by default),
// 1 "<|im_start|>", 2 "<|im_end|>", then the 256 GPT-2 byte tokens, then one
// token per merge (ids 259 ...), so vocab_size() == 259 + number of merges; with
// vocab_rows set, unused tokens "[PAD<id>]" (type 5) follow up to the embedding's rows.
// Weights are drawn from a seeded generator: the same options give the same bytes.
#ifndef SPLITSPEC_TESTS_TESTING_TINY_MODEL_H_
#define SPLITSPEC_TESTS_TESTING_TINY_MODEL_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "kernels/cpu/ggml_types.h"
#include "tests/testing/gguf_writer.h"

namespace splitspec::model {

struct TinyModelOptions {
  // "llama", "qwen2" (adds QKV biases) or "gemma3" (adds the Q/K norms and post-norms,
  // writes key_length / value_length and sliding_window; model_config.h says how they run).
  std::string architecture = "llama";
  std::string name;                    // general.name; empty: "tiny-<architecture>"
  kernels::GgmlType weight_type = kernels::GgmlType::kF32;  // layer matrices and output
  kernels::GgmlType embedding_type = kernels::GgmlType::kF32;
  // attn_v.weight's type when set (mixed-type files: llama.cpp's Q4_K_M keeps attn_v in
  // another type than attn_q / attn_k, which one matmul call reads from the same input).
  std::optional<kernels::GgmlType> attn_v_type;
  int n_layers = 2;
  int n_embd = 64;
  int n_ff = 128;
  int n_heads = 4;
  int n_kv_heads = 2;
  int context_length = 512;
  bool tied_output = true;  // false: write a separate output.weight
  float rope_freq_base = 10000.f;
  float rope_linear_factor = 0.f;  // > 0: rope.scaling.type "linear" with this factor
  float rms_norm_eps = 1e-5f;
  uint32_t seed = 1;
  // gemma3: the sliding window and the per-head size (0: n_embd / n_heads), which Gemma
  // sets apart from the width (Gemma 3 270M: 640 wide, 4 heads of 256).
  int sliding_window = 8;
  int head_dim = 0;
  // > 0: rows of token_embd (and output) instead of TinyModelVocabSize(), for
  // benchmark models with a real model's vocabulary size (tests/testing/bench_model.h).
  // The tokenizer is padded with unused tokens (type 5, no merge reaches them) to as
  // many tokens as rows, as llama.cpp requires. REQUIRES: 0 or >= TinyModelVocabSize().
  int vocab_rows = 0;
};

// The merges of the tiny vocabulary, in rank order ("Ġ t", "h e", ...).
const std::vector<std::string>& TinyModelMerges();
// 259 + TinyModelMerges().size().
int TinyModelVocabSize();

// A writer holding the complete model (tests may add or override keys / tensors).
GgufWriter MakeTinyModel(const TinyModelOptions& options);

// Gemma 3's shape in small: six layers (five sliding, one global, as Gemma 3 repeats
// them), heads of 64 (the vector attention paths' size) narrower than the width, the
// given sliding window, weights (and a matching embedding type) of `type`.
TinyModelOptions TinyGemma3Options(kernels::GgmlType type, int window);

// A ChatML chat template (the roles between <|im_start|> and <|im_end|>, then the assistant's
// turn when asked), as SmolLM2 and Qwen2 ship it.
extern const char kTinyChatMlTemplate[];

// The tiny model with Q8_0 weights and kTinyChatMlTemplate as tokenizer.chat_template: the model
// the HTTP front door tests serve.
GgufWriter MakeTinyChatModel();

// MakeTinyModel(options).WriteFile(path).
absl::Status WriteTinyModel(const TinyModelOptions& options, const std::string& path);

// The GPT-2 byte-level encoding of a byte (e.g. ' ' -> "Ġ"), as UTF-8.
std::string Gpt2ByteToken(uint8_t byte);

}  // namespace splitspec::model

#endif  // SPLITSPEC_TESTS_TESTING_TINY_MODEL_H_

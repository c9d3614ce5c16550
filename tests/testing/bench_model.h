// Random-weight GGUFs with real models' shapes, for benchmarks on machines the real files
// cannot reach (the GPU routine, tools/gpu/device_session.sh). A forward over such a file
// costs what the real model's costs; its outputs mean nothing, so figures from it must say
// "random weights".
//
//   ASSIGN_OR_RETURN(TinyModelOptions o, BenchModelOptions("llama3-8b", "q4_0"));
//   RETURN_IF_ERROR(WriteTinyModel(o, "/tmp/bench-llama3-8b-q4_0.gguf"));   // 4.8 GB
//
// Shapes (layers, n_embd, n_ff, heads / KV heads, vocabulary, RoPE base, output head):
//   smollm2    SmolLM2-135M   30,  576, 1536,  9 / 3,  49152, 1e5, tied
//   llama3-1b  Llama-3.2-1B   16, 2048, 8192, 32 / 8, 128256, 5e5, tied
//   llama3-8b  Llama-3-8B     32, 4096, 14336, 32 / 8, 128256, 5e5, its own
// Types: the layer matrices (and an untied output head) in q4_0, q4_1, q8_0 or q4_K; the
// embedding is always q8_0. The tokenizer is the tiny test tokenizer padded with unused
// tokens (type 5) up to the embedding's rows (tests/testing/tiny_model.h), so llama.cpp,
// which refuses fewer tokens than rows, loads the same file.
#ifndef SPLITSPEC_TESTS_TESTING_BENCH_MODEL_H_
#define SPLITSPEC_TESTS_TESTING_BENCH_MODEL_H_

#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/statusor.h"
#include "tests/testing/tiny_model.h"

namespace splitspec::model {

// The shape names, in the order above.
const std::vector<std::string>& BenchModelShapes();
// The layer-matrix type names accepted by BenchModelOptions: q4_0, q4_1, q8_0, q4_K.
const std::vector<std::string>& BenchModelTypes();

// The options that write `shape` with layer matrices of `type`. Errors: InvalidArgument
// naming an unknown shape or type (and listing the known ones), or a K-quant type whose
// 256-element blocks do not divide the shape's n_embd (smollm2's 576).
absl::StatusOr<TinyModelOptions> BenchModelOptions(absl::string_view shape, absl::string_view type);

}  // namespace splitspec::model

#endif  // SPLITSPEC_TESTS_TESTING_BENCH_MODEL_H_

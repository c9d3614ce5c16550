// splitspec_write_bench_model PATH: writes a GGUF with SmolLM2-135M-Instruct.Q4_1's
// exact shapes and tensor types (30 llama layers, n_embd 576, n_ff 1536, 9 heads /
// 3 KV heads of 64, vocabulary 49152, Q4_1 layer matrices, a Q8_0 embedding tied to
// the output head, RoPE base 1e5, context 8192) but seeded random weights and the
// tiny test tokenizer. It costs a forward pass what the real model costs, so the
// GPU benchmarks run on machines the 98 MB real file cannot travel to
// (tools/gpu/device_session.sh); figures from it must say "random weights".
#include <cstdio>
#include <string>

#include "kernels/cpu/ggml_types.h"
#include "tests/testing/tiny_model.h"

int main(int argc, char** argv) {
  if (argc != 2 || std::string(argv[1]) == "--help") {
    std::fprintf(stderr, "usage: splitspec_write_bench_model PATH\n");
    return argc == 2 ? 0 : 2;
  }
  splitspec::model::TinyModelOptions shape;
  shape.n_layers = 30;
  shape.n_embd = 576;
  shape.n_ff = 1536;
  shape.n_heads = 9;
  shape.n_kv_heads = 3;
  shape.context_length = 8192;
  shape.rope_freq_base = 100000.f;
  shape.vocab_rows = 49152;
  shape.weight_type = splitspec::kernels::GgmlType::kQ4_1;
  shape.embedding_type = splitspec::kernels::GgmlType::kQ8_0;
  shape.tied_output = true;
  const absl::Status written = splitspec::model::WriteTinyModel(shape, argv[1]);
  if (!written.ok()) {
    std::fprintf(stderr, "splitspec_write_bench_model: %s\n",
                 std::string(written.message()).c_str());
    return 1;
  }
  std::printf("wrote %s (SmolLM2-135M Q4_1 shapes and types, random weights)\n", argv[1]);
  return 0;
}

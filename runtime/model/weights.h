// The tensors of a Llama-family model, located in a memory-mapped GGUF file and
// checked against the config (names, shapes, types) once at load.
//
//   ASSIGN_OR_RETURN(ModelWeights w, LoadModelWeights(*file, config));
//   MatMulRows(w.layers[0].wq.type, w.layers[0].wq.data, w.layers[0].wq.cols, ...);
//
// Matrices stay in the file mapping (zero copy) and are borrowed: the GgufFile
// must outlive the ModelWeights. Norm weights and biases (small vectors) are
// dequantized to owned floats. Immutable after load; safe to share across threads.
#ifndef SPLITSPEC_RUNTIME_MODEL_WEIGHTS_H_
#define SPLITSPEC_RUNTIME_MODEL_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "kernels/cpu/ggml_types.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/model/model_config.h"

namespace splitspec::model {

// A row-major matrix in a ggml type: `rows` rows of `cols` elements, each row
// RowBytes(type, cols) bytes, contiguous. `data` points into the file mapping.
struct WeightMatrix {
  kernels::GgmlType type = kernels::GgmlType::kF32;
  const uint8_t* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  // The same rows interleaved for the CPU matmul (kernels::InterleaveRows), 64-byte
  // aligned, made by InterleaveForCpu (tp_shard.h) for the types that have that layout
  // (all of a model's in one huge-page allocation, which this shares ownership of); else
  // null. Copies of the matrix share it.
  std::shared_ptr<const uint8_t> interleaved;
  // Owns `data` when the rows were converted at load (a Q5_0 tensor widened to Q8_0,
  // kernels::WidenQ5_0ToQ8_0); null when `data` is the file's. Copies share it.
  std::shared_ptr<const uint8_t> converted;

  // Row r, RowBytes(type, cols) bytes. REQUIRES: 0 <= r < rows.
  const uint8_t* row(int64_t r) const;
};

struct LayerWeights {
  std::vector<float> attn_norm;   // [n_embd]
  WeightMatrix wq;                // [q_dim rows, n_embd cols]
  WeightMatrix wk;                // [kv_dim, n_embd]
  WeightMatrix wv;                // [kv_dim, n_embd]
  std::vector<float> bq, bk, bv;  // [q_dim], [kv_dim], [kv_dim]; empty without qkv_bias
  WeightMatrix wo;                // [n_embd, q_dim]
  std::vector<float> ffn_norm;    // [n_embd]
  WeightMatrix gate;              // [n_ff, n_embd]
  WeightMatrix up;                // [n_ff, n_embd]
  WeightMatrix down;              // [n_embd, n_ff]
  // config.qk_norm: attn_q_norm / attn_k_norm, one head's [head_dim] applied to every head.
  std::vector<float> q_norm, k_norm;
  // config.post_norms: post_attention_norm / post_ffw_norm [n_embd]. Empty otherwise.
  std::vector<float> attn_post_norm, ffn_post_norm;
};

struct ModelWeights {
  WeightMatrix token_embd;  // [vocab, n_embd]
  std::vector<LayerWeights> layers;
  std::vector<float> output_norm;  // [n_embd]
  WeightMatrix output;             // [vocab, n_embd]; == token_embd when tied
  bool tied_output = false;        // no output.weight in the file
  // Per-pair RoPE frequency divisors from rope_freqs.weight [rope_dim / 2]; empty if absent.
  std::vector<float> rope_freq_factors;

  // Bytes of matrix data read by one decode step (every layer matrix, the output
  // head, one embedding row): the memory-traffic floor of a token.
  uint64_t DecodeBytesPerToken() const;
};

// Locates and checks every tensor. Errors (nothing is returned on failure):
// NotFound naming a missing tensor ("blk.3.ffn_up.weight"); InvalidArgument naming
// a tensor whose shape differs from the config (expected and actual dims);
// Unimplemented naming a tensor whose type the matmul kernels do not support.
absl::StatusOr<ModelWeights> LoadModelWeights(const GgufFile& file, const ModelConfig& config);

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_WEIGHTS_H_

// Hyper-parameters of a Llama-family model, read from GGUF metadata.
//
//   ASSIGN_OR_RETURN(ModelConfig config, ReadModelConfig(*file));
//   int q_dim = config.n_heads * config.head_dim;
//
// Supported architectures (`general.architecture`): "llama" (Llama 2/3, SmolLM2,
// Mistral; RoPE on adjacent pairs, because GGUF llama files store Q/K rows
// permuted for that layout) and "qwen2" (QKV bias, RoPE on the half-split
// "NeoX" layout). Any other architecture is refused by name.
#ifndef SPLITSPEC_RUNTIME_MODEL_MODEL_CONFIG_H_
#define SPLITSPEC_RUNTIME_MODEL_MODEL_CONFIG_H_

#include <string>

#include "absl/status/statusor.h"
#include "runtime/model/gguf_reader.h"

namespace splitspec::model {

enum class RopeLayout {
  kAdjacentPairs,  // rotates (x[2i], x[2i+1])            llama in GGUF
  kHalfSplit,      // rotates (x[i], x[i + rope_dim/2])   qwen2 ("NeoX")
};

struct ModelConfig {
  std::string architecture;    // "llama" or "qwen2"
  int n_layers = 0;            // {arch}.block_count
  int n_embd = 0;              // {arch}.embedding_length
  int n_ff = 0;                // {arch}.feed_forward_length
  int n_heads = 0;             // {arch}.attention.head_count
  int n_kv_heads = 0;          // {arch}.attention.head_count_kv (default n_heads); divides n_heads
  int head_dim = 0;            // {arch}.attention.key_length (default n_embd / n_heads)
  int vocab_size = 0;          // rows of token_embd.weight
  int context_length = 0;      // {arch}.context_length (default 2048)
  float rms_norm_eps = 1e-5f;  // {arch}.attention.layer_norm_rms_epsilon (required)
  float rope_freq_base = 10000.f;  // {arch}.rope.freq_base (default 10000)
  // Positions are multiplied by this before RoPE: 1 / {arch}.rope.scaling.factor when
  // {arch}.rope.scaling.type is "linear" (or 1 / {arch}.rope.scale_linear); 1 otherwise.
  float rope_freq_scale = 1.f;
  int rope_dim = 0;  // {arch}.rope.dimension_count (default head_dim), even, <= head_dim
  RopeLayout rope_layout = RopeLayout::kAdjacentPairs;
  bool qkv_bias = false;  // qwen2: attn_{q,k,v}.bias present

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
};

// Reads and validates the config. Errors: Unimplemented naming an unsupported
// architecture or RoPE scaling type; NotFound / InvalidArgument naming a missing
// or malformed key (e.g. "llama.block_count"), or a value out of range.
absl::StatusOr<ModelConfig> ReadModelConfig(const GgufFile& file);

// Checks the relations between fields (positive sizes, head counts dividing,
// even rope_dim <= head_dim). InvalidArgument naming the field at fault.
absl::Status ValidateModelConfig(const ModelConfig& config);

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_MODEL_CONFIG_H_

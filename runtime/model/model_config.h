// Hyper-parameters of a Llama-family model, read from GGUF metadata.
//
//   ASSIGN_OR_RETURN(ModelConfig config, ReadModelConfig(*file));
//   int q_dim = config.n_heads * config.head_dim;
//
// Supported architectures (`general.architecture`): "llama" (Llama 2/3, SmolLM2,
// Mistral; RoPE on adjacent pairs, because GGUF llama files store Q/K rows
// permuted for that layout), "qwen2" (QKV bias, RoPE on the half-split
// "NeoX" layout) and "gemma3" (below). Any other architecture is refused by name.
//
// Gemma 3, as llama.cpp reads and runs a GGUF "gemma3" file (its llama-model.cpp and
// models/gemma3.cpp): the embedding row is multiplied by sqrtf(n_embd); Q and K are
// RMS-normed per head (attn_q_norm / attn_k_norm, [head_dim]) before RoPE; the
// attention and feed-forward outputs are RMS-normed (post_attention_norm /
// post_ffw_norm) before they join the residual; the feed-forward is GeGLU
// (gelu_tanh(gate) * up); RoPE is "NeoX" (half split). Layer l attends through a
// sliding window of {arch}.attention.sliding_window positions (itself and the window - 1
// before it) unless l % 6 == 5, and its RoPE then uses base 10000 and scale 1 (the
// global layers use {arch}.rope.freq_base and the file's scaling). The attention scale is
// 1/sqrt(head_dim) (1/sqrt(n_embd / n_heads) for the 62-layer 27B, as llama.cpp). The
// converter stores Gemma's RMSNorm weights as (1 + w), so every norm is the plain
// x * rms^-1 * weight. No final logit soft-capping (llama.cpp applies none for gemma3
// files with a sliding window).
#ifndef SPLITSPEC_RUNTIME_MODEL_MODEL_CONFIG_H_
#define SPLITSPEC_RUNTIME_MODEL_MODEL_CONFIG_H_

#include <cmath>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/model/gguf_reader.h"

namespace splitspec::model {

enum class FeedForwardActivation {
  kSilu,      // silu(gate) * up              llama, qwen2
  kGeluTanh,  // gelu_tanh(gate) * up (GeGLU) gemma3
};

enum class RopeLayout {
  kAdjacentPairs,  // rotates (x[2i], x[2i+1])            llama in GGUF
  kHalfSplit,      // rotates (x[i], x[i + rope_dim/2])   qwen2 ("NeoX")
};

struct ModelConfig {
  std::string architecture;    // "llama", "qwen2" or "gemma3"
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
  // The softmax scale of the attention scores when the family sets one; 0: the usual
  // 1/sqrt(head_dim). Read it through AttentionScale().
  float attention_scale = 0.f;
  // Gemma 3's extras (header comment); the defaults are the Llama shape.
  float embedding_scale = 1.f;  // the embedding row is multiplied by this
  bool qk_norm = false;         // attn_q_norm / attn_k_norm per head before RoPE
  bool post_norms = false;      // post_attention_norm / post_ffw_norm on the sublayer outputs
  FeedForwardActivation activation = FeedForwardActivation::kSilu;
  // > 0: the layers IsSlidingLayer names attend to the last `sliding_window` positions
  // (their own included), with RoPE base / scale swa_rope_freq_base / swa_rope_freq_scale.
  int sliding_window = 0;          // {arch}.attention.sliding_window
  int sliding_window_pattern = 0;  // layer l slides when l % pattern < pattern - 1
  float swa_rope_freq_base = 10000.f;
  float swa_rope_freq_scale = 1.f;

  int q_dim() const { return n_heads * head_dim; }
  int kv_dim() const { return n_kv_heads * head_dim; }
  float AttentionScale() const {
    return attention_scale > 0.f ? attention_scale : 1.0f / std::sqrt(static_cast<float>(head_dim));
  }
  bool IsSlidingLayer(int layer) const {
    return sliding_window > 0 && layer % sliding_window_pattern < sliding_window_pattern - 1;
  }
  // The first position a query at `pos` attends to in `layer`.
  int WindowStart(int layer, int pos) const {
    return IsSlidingLayer(layer) && pos >= sliding_window ? pos - sliding_window + 1 : 0;
  }
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

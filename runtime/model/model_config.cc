#include "runtime/model/model_config.h"

#include <cmath>
#include <limits>
#include <string>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"

namespace splitspec::model {
namespace {

// Reads an integer key that must lie in [1, 2^30].
absl::StatusOr<int> ReadSize(const GgufFile& file, const std::string& key) {
  ASSIGN_OR_RETURN(int64_t value, file.GetInteger(key));
  if (value < 1 || value > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key '", key, "' = ", value, " is out of range [1, 2^30]"));
  }
  return static_cast<int>(value);
}

absl::StatusOr<int> ReadSizeOr(const GgufFile& file, const std::string& key, int fallback) {
  if (!file.HasKey(key)) return fallback;
  return ReadSize(file, key);
}

absl::StatusOr<float> ReadPositiveFloat(const GgufFile& file, const std::string& key) {
  ASSIGN_OR_RETURN(double value, file.GetNumber(key));
  if (!(value > 0.0) || value > std::numeric_limits<float>::max()) {
    return absl::InvalidArgumentError(
        absl::StrCat("GGUF key '", key, "' = ", value, " must be a positive finite number"));
  }
  return static_cast<float>(value);
}

// 1 / factor for linear RoPE scaling; 1 when the file asks for none.
absl::StatusOr<float> ReadRopeFreqScale(const GgufFile& file, const std::string& arch) {
  const std::string type_key = arch + ".rope.scaling.type";
  const std::string factor_key = arch + ".rope.scaling.factor";
  const std::string legacy_key = arch + ".rope.scale_linear";
  if (file.HasKey(type_key)) {
    ASSIGN_OR_RETURN(std::string_view type, file.GetString(type_key));
    if (type == "none") return 1.f;
    if (type != "linear") {
      return absl::UnimplementedError(absl::StrCat("RoPE scaling type '", std::string(type),
                                                   "' (key '", type_key, "') is not supported"));
    }
    if (!file.HasKey(factor_key)) return 1.f;
    ASSIGN_OR_RETURN(float factor, ReadPositiveFloat(file, factor_key));
    return 1.f / factor;
  }
  if (file.HasKey(legacy_key)) {
    ASSIGN_OR_RETURN(float factor, ReadPositiveFloat(file, legacy_key));
    return 1.f / factor;
  }
  return 1.f;
}

// Gemma 3's fields (model_config.h), as llama.cpp's llama-model.cpp sets them.
absl::Status ReadGemma3(const GgufFile& file, ModelConfig* c) {
  c->embedding_scale = std::sqrt(static_cast<float>(c->n_embd));
  c->qk_norm = true;
  c->post_norms = true;
  c->activation = FeedForwardActivation::kGeluTanh;
  ASSIGN_OR_RETURN(c->sliding_window, ReadSize(file, "gemma3.attention.sliding_window"));
  c->sliding_window_pattern = 6;
  c->swa_rope_freq_base = 10000.f;
  c->swa_rope_freq_scale = 1.f;
  // Gemma 3 27B (62 layers) scales by the model width per head (gemma_pytorch's config).
  if (c->n_layers == 62) {
    c->attention_scale = 1.0f / std::sqrt(static_cast<float>(c->n_embd / c->n_heads));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateModelConfig(const ModelConfig& c) {
  auto bad = [](const std::string& what) { return absl::InvalidArgumentError(what); };
  if (c.n_layers < 1 || c.n_embd < 1 || c.n_ff < 1 || c.vocab_size < 1 || c.context_length < 1) {
    return bad(absl::StrCat("model sizes must be positive: layers=", c.n_layers, " embd=", c.n_embd,
                            " ff=", c.n_ff, " vocab=", c.vocab_size,
                            " context=", c.context_length));
  }
  if (c.n_heads < 1 || c.n_kv_heads < 1 || c.n_heads % c.n_kv_heads != 0) {
    return bad(absl::StrCat("head_count ", c.n_heads,
                            " must be a positive multiple of head_count_kv ", c.n_kv_heads));
  }
  if (c.head_dim < 2 || c.head_dim % 2 != 0) {
    return bad(absl::StrCat("head dimension ", c.head_dim, " must be even and >= 2"));
  }
  if (c.rope_dim < 2 || c.rope_dim % 2 != 0 || c.rope_dim > c.head_dim) {
    return bad(absl::StrCat("rope.dimension_count ", c.rope_dim,
                            " must be even and at most the head dimension ", c.head_dim));
  }
  if (!(c.rms_norm_eps > 0.f) || !(c.rope_freq_base > 0.f) || !(c.rope_freq_scale > 0.f)) {
    return bad("rms epsilon, rope freq_base and rope scale must be positive");
  }
  if (c.sliding_window < 0 || (c.sliding_window > 0 && c.sliding_window_pattern < 1)) {
    return bad(absl::StrCat("sliding window ", c.sliding_window, " needs a layer pattern >= 1, got ",
                            c.sliding_window_pattern));
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelConfig> ReadModelConfig(const GgufFile& file) {
  ModelConfig c;
  ASSIGN_OR_RETURN(std::string_view arch, file.GetString("general.architecture"));
  c.architecture = std::string(arch);
  if (c.architecture == "llama") {
    c.rope_layout = RopeLayout::kAdjacentPairs;
  } else if (c.architecture == "qwen2" || c.architecture == "gemma3") {
    c.rope_layout = RopeLayout::kHalfSplit;
  } else {
    return absl::UnimplementedError(absl::StrCat("model architecture '", c.architecture,
                                                 "' is not supported (llama, qwen2, gemma3 are)"));
  }
  const std::string& a = c.architecture;
  ASSIGN_OR_RETURN(c.n_layers, ReadSize(file, a + ".block_count"));
  ASSIGN_OR_RETURN(c.n_embd, ReadSize(file, a + ".embedding_length"));
  ASSIGN_OR_RETURN(c.n_ff, ReadSize(file, a + ".feed_forward_length"));
  ASSIGN_OR_RETURN(c.n_heads, ReadSize(file, a + ".attention.head_count"));
  ASSIGN_OR_RETURN(c.n_kv_heads, ReadSizeOr(file, a + ".attention.head_count_kv", c.n_heads));
  if (c.n_embd % c.n_heads != 0 && !file.HasKey(a + ".attention.key_length")) {
    return absl::InvalidArgumentError(absl::StrCat(a, ".embedding_length ", c.n_embd,
                                                   " is not a multiple of head_count ", c.n_heads));
  }
  ASSIGN_OR_RETURN(c.head_dim, ReadSizeOr(file, a + ".attention.key_length", c.n_embd / c.n_heads));
  ASSIGN_OR_RETURN(int value_length, ReadSizeOr(file, a + ".attention.value_length", c.head_dim));
  if (value_length != c.head_dim) {
    return absl::UnimplementedError(absl::StrCat(a, ".attention.value_length ", value_length,
                                                 " differs from key_length ", c.head_dim));
  }
  ASSIGN_OR_RETURN(c.context_length, ReadSizeOr(file, a + ".context_length", 2048));
  ASSIGN_OR_RETURN(c.rms_norm_eps,
                   ReadPositiveFloat(file, a + ".attention.layer_norm_rms_epsilon"));
  if (file.HasKey(a + ".rope.freq_base")) {
    ASSIGN_OR_RETURN(c.rope_freq_base, ReadPositiveFloat(file, a + ".rope.freq_base"));
  }
  ASSIGN_OR_RETURN(c.rope_freq_scale, ReadRopeFreqScale(file, a));
  ASSIGN_OR_RETURN(c.rope_dim, ReadSizeOr(file, a + ".rope.dimension_count", c.head_dim));
  ASSIGN_OR_RETURN(const GgufTensorInfo* embd, file.GetTensor("token_embd.weight"));
  if (embd->dims.size() != 2 || embd->dims[1] > (int64_t{1} << 30)) {
    return absl::InvalidArgumentError("tensor 'token_embd.weight' must be 2-D [n_embd, vocab]");
  }
  c.vocab_size = static_cast<int>(embd->dims[1]);
  c.qkv_bias = file.FindTensor("blk.0.attn_q.bias") != nullptr;
  if (c.architecture == "gemma3") RETURN_IF_ERROR(ReadGemma3(file, &c));
  RETURN_IF_ERROR(ValidateModelConfig(c));
  return c;
}

}  // namespace splitspec::model

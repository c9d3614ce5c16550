#include "runtime/model/transformer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequantize.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/matmul_jobs.h"
#include "runtime/model/transformer_ops.h"

namespace splitspec::model {
namespace {

void AddRows(float* x, const float* delta, int64_t n) {
  for (int64_t i = 0; i < n; ++i) x[i] += delta[i];
}

void AddBias(float* y, const std::vector<float>& bias, int64_t tokens) {
  const int64_t n = static_cast<int64_t>(bias.size());
  for (int64_t t = 0; t < tokens; ++t) AddRows(y + t * n, bias.data(), n);
}

}  // namespace

Transformer::Transformer(std::unique_ptr<GgufFile> file, ModelConfig config, ModelWeights weights,
                         int threads)
    : file_(std::move(file)),
      config_(std::move(config)),
      weights_(std::move(weights)),
      pool_(threads > 0 ? threads : ThreadPool::DefaultThreads()) {
  thread_scores_.resize(pool_.num_threads());
  packed_.resize(4);
}

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::Load(const std::string& path,
                                                               const TransformerOptions& options) {
  ASSIGN_OR_RETURN(std::unique_ptr<GgufFile> file, GgufFile::Open(path));
  return FromFile(std::move(file), options);
}

absl::StatusOr<std::unique_ptr<Transformer>> Transformer::FromFile(
    std::unique_ptr<GgufFile> file, const TransformerOptions& options) {
  ASSIGN_OR_RETURN(ModelConfig config, ReadModelConfig(*file));
  if (options.layers < 0 || options.layers > config.n_layers) {
    return absl::InvalidArgumentError(absl::StrCat("layers = ", options.layers,
                                                   " outside [0, ", config.n_layers, "] for ",
                                                   file->path()));
  }
  if (options.layers > 0) config.n_layers = options.layers;
  ASSIGN_OR_RETURN(ModelWeights weights, LoadModelWeights(*file, config));
  return std::unique_ptr<Transformer>(
      new Transformer(std::move(file), std::move(config), std::move(weights), options.threads));
}

std::unique_ptr<KvCache> Transformer::NewCache(int max_tokens) const {
  return std::make_unique<KvCache>(config_.n_layers, config_.kv_dim(),
                                   max_tokens > 0 ? max_tokens : config_.context_length);
}

absl::Status Transformer::Validate(absl::Span<const SequenceInput> batch) const {
  if (batch.empty()) return absl::InvalidArgumentError("forward needs at least one sequence");
  absl::flat_hash_set<const KvCache*> seen;
  for (size_t s = 0; s < batch.size(); ++s) {
    const SequenceInput& in = batch[s];
    if (in.cache == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": no KV cache"));
    }
    if (in.cache->n_layers() != config_.n_layers || in.cache->kv_dim() != config_.kv_dim()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sequence ", s, ": KV cache shaped for ", in.cache->n_layers(), " layers x ",
          in.cache->kv_dim(), ", model needs ", config_.n_layers, " x ", config_.kv_dim()));
    }
    if (!seen.insert(in.cache).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("sequence ", s, ": KV cache also used by an earlier sequence"));
    }
    if (in.tokens.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": no tokens"));
    }
    for (size_t i = 0; i < in.tokens.size(); ++i) {
      if (in.tokens[i] < 0 || in.tokens[i] >= config_.vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("sequence ", s, ": token ", i, " = ",
                                                       in.tokens[i], " outside the vocabulary [0, ",
                                                       config_.vocab_size, ")"));
      }
    }
    const int64_t new_length = static_cast<int64_t>(in.cache->length()) + in.tokens.size();
    if (new_length > in.cache->max_tokens()) {
      return absl::OutOfRangeError(absl::StrCat("sequence ", s, ": ", new_length,
                                                " tokens exceed the KV cache limit of ",
                                                in.cache->max_tokens()));
    }
  }
  return absl::OkStatus();
}

absl::Status Transformer::Forward(absl::Span<const SequenceInput> batch, ForwardOutput* out) {
  RETURN_IF_ERROR(Validate(batch));
  // Reserving only grows capacity; lengths stay as they were until the commit below.
  for (const SequenceInput& in : batch) {
    RETURN_IF_ERROR(in.cache->Reserve(in.cache->length() + static_cast<int>(in.tokens.size())));
  }
  PlanTokens(batch);
  Embed(batch);
  for (int layer = 0; layer < config_.n_layers; ++layer) RunLayer(layer, batch);
  ComputeLogits(batch, out);
  for (const SequenceInput& in : batch) {
    in.cache->Commit(in.cache->length() + static_cast<int>(in.tokens.size()));
  }
  return absl::OkStatus();
}

void Transformer::PlanTokens(absl::Span<const SequenceInput> batch) {
  token_seq_.clear();
  token_pos_.clear();
  for (size_t s = 0; s < batch.size(); ++s) {
    for (size_t i = 0; i < batch[s].tokens.size(); ++i) {
      token_seq_.push_back(static_cast<int>(s));
      token_pos_.push_back(batch[s].cache->length() + static_cast<int>(i));
    }
  }
  const int64_t tokens = static_cast<int64_t>(token_seq_.size());
  const int pairs = config_.rope_dim / 2;
  rope_cos_.resize(tokens * pairs);
  rope_sin_.resize(tokens * pairs);
  for (int64_t t = 0; t < tokens; ++t) {
    internal::RopeAngles(config_, weights_.rope_freq_factors, token_pos_[t],
                         &rope_cos_[t * pairs], &rope_sin_[t * pairs]);
  }
  x_.resize(tokens * config_.n_embd);
  xn_.resize(tokens * config_.n_embd);
  q_.resize(tokens * config_.q_dim());
  k_.resize(tokens * config_.kv_dim());
  v_.resize(tokens * config_.kv_dim());
  attn_.resize(tokens * config_.q_dim());
  proj_.resize(tokens * config_.n_embd);
  gate_.resize(tokens * config_.n_ff);
  up_.resize(tokens * config_.n_ff);
  const int max_positions = *std::max_element(token_pos_.begin(), token_pos_.end()) + 1;
  for (std::vector<float>& scores : thread_scores_) {
    if (static_cast<int>(scores.size()) < max_positions) scores.resize(max_positions);
  }
}

void Transformer::Embed(absl::Span<const SequenceInput> batch) {
  const int d = config_.n_embd;
  int64_t t = 0;
  for (const SequenceInput& in : batch) {
    for (int32_t id : in.tokens) {
      kernels::DequantizeRow(weights_.token_embd.type, weights_.token_embd.row(id), &x_[t * d], d);
      ++t;
    }
  }
}

void Transformer::MatMul(std::initializer_list<MatMulJob> jobs, int64_t tokens) {
  RunMatMulJobs(pool_, jobs, tokens, &packed_);
}

void Transformer::RunLayer(int layer, absl::Span<const SequenceInput> batch) {
  const LayerWeights& lw = weights_.layers[layer];
  const int64_t tokens = static_cast<int64_t>(token_seq_.size());
  const int d = config_.n_embd;
  const int q_dim = config_.q_dim();
  const int kv_dim = config_.kv_dim();
  const int pairs = config_.rope_dim / 2;

  for (int64_t t = 0; t < tokens; ++t) {
    internal::RmsNormRow(&x_[t * d], lw.attn_norm.data(), config_.rms_norm_eps, d, &xn_[t * d]);
  }
  MatMul({{&lw.wq, xn_.data(), q_.data()},
          {&lw.wk, xn_.data(), k_.data()},
          {&lw.wv, xn_.data(), v_.data()}},
         tokens);
  if (config_.qkv_bias) {
    AddBias(q_.data(), lw.bq, tokens);
    AddBias(k_.data(), lw.bk, tokens);
    AddBias(v_.data(), lw.bv, tokens);
  }
  for (int64_t t = 0; t < tokens; ++t) {
    const float* cos_t = &rope_cos_[t * pairs];
    const float* sin_t = &rope_sin_[t * pairs];
    internal::PrepareAttentionInputs(config_, cos_t, sin_t, config_.n_heads, config_.n_kv_heads,
                                     &q_[t * q_dim], &k_[t * kv_dim], &v_[t * kv_dim]);
    KvCache* cache = batch[token_seq_[t]].cache;
    std::memcpy(cache->key(layer, token_pos_[t]), &k_[t * kv_dim], kv_dim * sizeof(float));
    std::memcpy(cache->value(layer, token_pos_[t]), &v_[t * kv_dim], kv_dim * sizeof(float));
  }
  Attention(layer, batch);
  MatMul({{&lw.wo, attn_.data(), proj_.data()}}, tokens);
  AddRows(x_.data(), proj_.data(), tokens * d);

  for (int64_t t = 0; t < tokens; ++t) {
    internal::RmsNormRow(&x_[t * d], lw.ffn_norm.data(), config_.rms_norm_eps, d, &xn_[t * d]);
  }
  MatMul({{&lw.gate, xn_.data(), gate_.data()}, {&lw.up, xn_.data(), up_.data()}}, tokens);
  internal::SiluMul(kernels::NativeGgmlOrder(), gate_.data(), up_.data(), tokens * config_.n_ff);
  MatMul({{&lw.down, gate_.data(), proj_.data()}}, tokens);
  AddRows(x_.data(), proj_.data(), tokens * d);
}

void Transformer::Attention(int layer, absl::Span<const SequenceInput> batch) {
  const int64_t tokens = static_cast<int64_t>(token_seq_.size());
  const int heads = config_.n_heads;
  const int group = config_.n_heads / config_.n_kv_heads;
  const int head_dim = config_.head_dim;
  const int q_dim = config_.q_dim();
  const int kv_dim = config_.kv_dim();
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  const kernels::GgmlOrder order = kernels::NativeGgmlOrder();
  pool_.ParallelFor(tokens * heads, [&](int64_t task, int thread) {
    const int64_t t = task / heads;
    const int h = static_cast<int>(task % heads);
    const KvCache* cache = batch[token_seq_[t]].cache;
    const int64_t kv_offset = static_cast<int64_t>(h / group) * head_dim;
    internal::AttendOneHead(order, &q_[t * q_dim + h * head_dim],
                            cache->key(layer, 0) + kv_offset, cache->value(layer, 0) + kv_offset,
                            kv_dim, token_pos_[t], head_dim, scale, thread_scores_[thread].data(),
                            &attn_[t * q_dim + h * head_dim]);
  });
}

void Transformer::ComputeLogits(absl::Span<const SequenceInput> batch, ForwardOutput* out) {
  const int d = config_.n_embd;
  out->vocab_size = config_.vocab_size;
  out->first_row.assign(batch.size(), 0);
  out->num_rows.assign(batch.size(), 0);
  // Normalized final states of the requested positions, packed into xn_ rows.
  int64_t rows = 0;
  int64_t t = 0;
  for (size_t s = 0; s < batch.size(); ++s) {
    const int64_t n = static_cast<int64_t>(batch[s].tokens.size());
    const int64_t first = batch[s].logits == LogitsMode::kAll ? 0 : n - 1;
    out->first_row[s] = static_cast<int>(rows);
    if (batch[s].logits != LogitsMode::kNone) {
      for (int64_t i = first; i < n; ++i) {
        internal::RmsNormRow(&x_[(t + i) * d], weights_.output_norm.data(), config_.rms_norm_eps,
                             d, &xn_[rows * d]);
        ++rows;
      }
      out->num_rows[s] = static_cast<int>(n - first);
    }
    t += n;
  }
  out->logits.resize(rows * config_.vocab_size);
  if (rows > 0) MatMul({{&weights_.output, xn_.data(), out->logits.data()}}, rows);
}

}  // namespace splitspec::model

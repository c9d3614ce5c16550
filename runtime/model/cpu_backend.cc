#include "runtime/model/cpu_backend.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/cpu_features.h"
#include "kernels/cpu/dequantize.h"
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

CpuBackend::CpuBackend(const ModelConfig& config, const TensorParallelShard& shard,
                       const ShardedWeights& weights, int threads, KvCacheType kv_cache_type)
    : config_(config),
      shard_(shard),
      weights_(weights),
      pool_(threads),
      q_dim_(shard.q_dim(config)),
      kv_dim_(shard.kv_dim(config)),
      ff_(shard.ff.size()),
      kv_cache_type_(kv_cache_type) {
  thread_scores_.resize(pool_.num_threads());
  thread_queries_.resize(pool_.num_threads());
  thread_block_queries_.resize(pool_.num_threads());
  thread_block_queries_q8_.resize(pool_.num_threads());
  thread_rows_.resize(pool_.num_threads());
  thread_path_.resize(pool_.num_threads());
  thread_tree_rows_.resize(pool_.num_threads());
  packed_.resize(kMaxMatMulJobs);
}

std::unique_ptr<KvCache> CpuBackend::NewCache(int max_tokens) const {
  return std::make_unique<KvCache>(config_.n_layers, static_cast<int>(kv_dim_), max_tokens,
                                   kv_cache_type_);
}

void CpuBackend::Begin(const ForwardPlan& plan) {
  plan_ = &plan;
  const int64_t t_count = tokens();
  const int pairs = config_.rope_dim / 2;
  rope_cos_.resize(t_count * pairs);
  rope_sin_.resize(t_count * pairs);
  for (int64_t t = 0; t < t_count; ++t) {
    internal::RopeAngles(config_, weights_.full->rope_freq_factors, plan.token_pos[t],
                         &rope_cos_[t * pairs], &rope_sin_[t * pairs]);
  }
  if (config_.sliding_window > 0) {  // the sliding layers' own base and scale
    swa_rope_cos_.resize(t_count * pairs);
    swa_rope_sin_.resize(t_count * pairs);
    for (int64_t t = 0; t < t_count; ++t) {
      internal::RopeAngles(config_, config_.swa_rope_freq_base, config_.swa_rope_freq_scale,
                           weights_.full->rope_freq_factors, plan.token_pos[t],
                           &swa_rope_cos_[t * pairs], &swa_rope_sin_[t * pairs]);
    }
  }
  x_.resize(t_count * config_.n_embd);
  xn_.resize(t_count * config_.n_embd);
  q_.resize(t_count * q_dim_);
  k_.resize(t_count * kv_dim_);
  v_.resize(t_count * kv_dim_);
  attn_.resize(t_count * q_dim_);
  partial_.resize(t_count * config_.n_embd);
  gate_.resize(t_count * ff_);
  up_.resize(t_count * ff_);
  PlanAttentionTasks();
  Embed();
}

void CpuBackend::Embed() {
  const int d = config_.n_embd;
  const WeightMatrix& embd = weights_.full->token_embd;
  int64_t t = 0;
  for (const SequenceInput& in : plan_->batch) {
    for (int32_t id : in.tokens) {
      float* row = &x_[t * d];
      kernels::DequantizeRow(embd.type, embd.row(id), row, d);
      if (config_.embedding_scale != 1.f) {
        for (int i = 0; i < d; ++i) row[i] *= config_.embedding_scale;
      }
      ++t;
    }
  }
}

void CpuBackend::MatMul(std::initializer_list<MatMulJob> jobs, int64_t rows) {
  RunMatMulJobs(pool_, jobs, rows, &packed_);
}

void CpuBackend::NormRows(const float* weight) {
  const int d = config_.n_embd;
  ForTokenRanges([&](int64_t first, int64_t end) {
    for (int64_t t = first; t < end; ++t) {
      internal::RmsNormRow(&x_[t * d], weight, config_.rms_norm_eps, d, &xn_[t * d]);
    }
  });
}

void CpuBackend::NormInPlace(const std::vector<float>& weight, int64_t rows, int n, float* x) {
  for (int64_t r = 0; r < rows; ++r) {
    internal::RmsNormRow(x + r * n, weight.data(), config_.rms_norm_eps, n, x + r * n);
  }
}

float* CpuBackend::Attention(int layer) {
  const ShardedLayerWeights& lw = weights_.layers[layer];
  NormRows(lw.attn_norm->data());
  MatMul({{&lw.wq, xn_.data(), q_.data()},
          {&lw.wk, xn_.data(), k_.data()},
          {&lw.wv, xn_.data(), v_.data()}},
         tokens());
  if (config_.qkv_bias) {
    AddBias(q_.data(), lw.bq, tokens());
    AddBias(k_.data(), lw.bk, tokens());
    AddBias(v_.data(), lw.bv, tokens());
  }
  const LayerWeights& full = weights_.full->layers[layer];
  if (config_.qk_norm) {  // every head of every token, before RoPE
    NormInPlace(full.q_norm, tokens() * (q_dim_ / config_.head_dim), config_.head_dim, q_.data());
    NormInPlace(full.k_norm, tokens() * (kv_dim_ / config_.head_dim), config_.head_dim,
                k_.data());
  }
  RopeAndStore(layer);
  AttendAllHeads(layer);
  MatMul({{&lw.wo, attn_.data(), partial_.data()}}, tokens());
  // One rank only (PlanTensorParallelShard): the whole output is here to normalize.
  if (config_.post_norms) NormInPlace(full.attn_post_norm, tokens(), config_.n_embd, partial_.data());
  return partial_.data();
}

float* CpuBackend::FeedForward(int layer) {
  const ShardedLayerWeights& lw = weights_.layers[layer];
  NormRows(lw.ffn_norm->data());
  MatMul({{&lw.gate, xn_.data(), gate_.data()}, {&lw.up, xn_.data(), up_.data()}}, tokens());
  ForTokenRanges([&](int64_t first, int64_t end) {  // elementwise: any split, the same bits
    float* gate = gate_.data() + first * ff_;
    const float* up = up_.data() + first * ff_;
    switch (config_.activation) {
      case FeedForwardActivation::kSilu:
        internal::SiluMul(kernels::NativeGgmlOrder(), gate, up, (end - first) * ff_);
        break;
      case FeedForwardActivation::kGeluTanh:
        internal::GeluMul(gate, up, (end - first) * ff_);
        break;
    }
  });
  MatMul({{&lw.down, gate_.data(), partial_.data()}}, tokens());
  if (config_.post_norms) {
    NormInPlace(weights_.full->layers[layer].ffn_post_norm, tokens(), config_.n_embd,
                partial_.data());
  }
  return partial_.data();
}

void CpuBackend::AddToResidual() { AddRows(x_.data(), partial_.data(), tokens() * config_.n_embd); }

const float* CpuBackend::OutputHead() {
  const int d = config_.n_embd;
  const int64_t rows = logit_rows();
  for (int64_t r = 0; r < rows; ++r) {
    internal::RmsNormRow(&x_[plan_->logit_tokens[r] * d], weights_.full->output_norm.data(),
                         config_.rms_norm_eps, d, &xn_[r * d]);
  }
  const int64_t local = shard_.vocab.size();
  const int64_t per_rank = shard_.vocab_per_rank;
  logits_.resize(rows * per_rank);
  if (local == per_rank) {  // no padding: the matmul writes the rows in place
    MatMul({{&weights_.output, xn_.data(), logits_.data()}}, rows);
    return logits_.data();
  }
  head_out_.resize(rows * local);
  MatMul({{&weights_.output, xn_.data(), head_out_.data()}}, rows);
  std::fill(logits_.begin(), logits_.end(), 0.f);
  for (int64_t r = 0; r < rows; ++r) {
    std::memcpy(&logits_[r * per_rank], &head_out_[r * local], local * sizeof(float));
  }
  return logits_.data();
}

float* CpuBackend::GatherBuffer() {
  gathered_.resize(static_cast<size_t>(shard_.size) * logit_rows() * shard_.vocab_per_rank);
  return gathered_.data();
}

void CpuBackend::CopyLogitsToHost(const float* parts, float* host_logits) {
  const int64_t rows = logit_rows();
  const int64_t vocab = config_.vocab_size;
  const int64_t per_rank = shard_.vocab_per_rank;
  for (int rank = 0; rank < shard_.size; ++rank) {
    const int64_t begin = std::min(vocab, per_rank * rank);
    const int64_t width = std::min(vocab, per_rank * (rank + 1)) - begin;
    const float* part = parts + static_cast<size_t>(rank) * rows * per_rank;
    for (int64_t r = 0; r < rows; ++r) {
      std::memcpy(&host_logits[r * vocab + begin], part + r * per_rank, width * sizeof(float));
    }
  }
}

}  // namespace splitspec::model

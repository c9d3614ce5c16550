#include "runtime/model/device_memory.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "kernels/cpu/ggml_types.h"

namespace splitspec::model {
namespace {

class WeightPlanner {
 public:
  explicit WeightPlanner(DeviceWeightLayout* layout) : layout_(layout) {}

  void Add(const void* host, uint64_t bytes) {
    if (host == nullptr || bytes == 0 || seen_.contains(host)) return;
    seen_[host] = layout_->entries.size();
    layout_->entries.push_back({host, bytes, layout_->total_bytes});
    layout_->total_bytes += AlignDeviceBytes(bytes);
  }
  void Add(const WeightMatrix& m) {
    Add(m.data, static_cast<uint64_t>(m.rows) * kernels::RowBytes(m.type, m.cols));
  }
  void Add(const std::vector<float>& v) { Add(v.data(), v.size() * sizeof(float)); }

 private:
  DeviceWeightLayout* layout_;
  absl::flat_hash_map<const void*, size_t> seen_;
};

// Appends a buffer of `bytes` to the workspace and returns its offset.
uint64_t Take(uint64_t bytes, uint64_t* total) {
  const uint64_t offset = *total;
  *total += AlignDeviceBytes(std::max<uint64_t>(bytes, 1));
  return offset;
}

}  // namespace

int64_t DeviceWeightLayout::OffsetOf(const void* host) const {
  for (const Entry& e : entries) {
    if (e.host == host) return static_cast<int64_t>(e.offset);
  }
  return -1;
}

DeviceWeightLayout PlanDeviceWeights(const ModelConfig& config, const ShardedWeights& weights) {
  DeviceWeightLayout layout;
  WeightPlanner plan(&layout);
  for (int l = 0; l < config.n_layers; ++l) {
    const ShardedLayerWeights& lw = weights.layers[l];
    plan.Add(*lw.attn_norm);
    plan.Add(lw.wq);
    plan.Add(lw.wk);
    plan.Add(lw.wv);
    plan.Add(lw.bq);
    plan.Add(lw.bk);
    plan.Add(lw.bv);
    plan.Add(lw.wo);
    plan.Add(*lw.ffn_norm);
    plan.Add(lw.gate);
    plan.Add(lw.up);
    plan.Add(lw.down);
  }
  plan.Add(weights.full->token_embd);
  plan.Add(weights.full->output_norm);
  plan.Add(weights.output);
  plan.Add(weights.full->rope_freq_factors);
  return layout;
}

DeviceWorkspaceLayout PlanDeviceWorkspace(const ModelConfig& config,
                                          const TensorParallelShard& shard, int64_t tokens,
                                          int64_t logit_rows) {
  DeviceWorkspaceLayout w;
  w.tokens = tokens;
  w.logit_rows = logit_rows;
  const int64_t d = config.n_embd;
  const int64_t q_dim = shard.q_dim(config);
  const int64_t kv_dim = shard.kv_dim(config);
  const int64_t ff = shard.ff.size();
  w.act_cols = std::max({d, q_dim, ff});
  const uint64_t f = sizeof(float);
  const uint64_t t = static_cast<uint64_t>(tokens);
  const uint64_t r = static_cast<uint64_t>(logit_rows);
  uint64_t total = 0;
  w.x = Take(t * d * f, &total);
  w.xn = Take(t * d * f, &total);
  w.partial = Take(t * d * f, &total);
  w.q = Take(t * q_dim * f, &total);
  w.attn = Take(t * q_dim * f, &total);
  w.k = Take(t * kv_dim * f, &total);
  w.v = Take(t * kv_dim * f, &total);
  w.gate = Take(t * ff * f, &total);
  w.up = Take(t * ff * f, &total);
  w.act_qs = Take(t * w.act_cols, &total);
  const uint64_t blocks = t * ((w.act_cols + 31) / 32);
  w.act_d = Take(blocks * f, &total);
  w.act_dsum = Take(blocks * f, &total);
  w.act_sum = Take(blocks * f, &total);
  w.head_x = Take(r * d * f, &total);
  w.logits = Take(r * shard.vocab_per_rank * f, &total);
  w.gathered = Take(static_cast<uint64_t>(shard.size) * r * shard.vocab_per_rank * f, &total);
  w.token_ids = Take(t * sizeof(int32_t), &total);
  w.token_pos = Take(t * sizeof(int32_t), &total);
  w.token_cache = Take(t * kDeviceCacheRefBytes, &total);
  const uint64_t pairs = static_cast<uint64_t>(config.rope_dim / 2);
  w.rope_cos = Take(t * pairs * f, &total);
  w.rope_sin = Take(t * pairs * f, &total);
  w.logit_tokens = Take(r * sizeof(int32_t), &total);
  w.total_bytes = total;
  return w;
}

uint64_t DeviceKvCacheBytes(int n_layers, int64_t kv_dim, int64_t positions) {
  const uint64_t half = 2;
  return AlignDeviceBytes(static_cast<uint64_t>(n_layers) * 2 * kv_dim * half * positions);
}

DeviceMemoryNeed EstimateDeviceMemory(const ModelConfig& config, const TensorParallelShard& shard,
                                      const ShardedWeights& weights,
                                      const DeviceMemoryBudget& budget) {
  DeviceMemoryNeed need;
  need.weights = PlanDeviceWeights(config, weights).total_bytes;
  const int context = budget.context_tokens > 0 ? budget.context_tokens : config.context_length;
  need.kv_cache = static_cast<uint64_t>(std::max(budget.sequences, 1)) *
                  DeviceKvCacheBytes(config.n_layers, shard.kv_dim(config), context);
  const int64_t step = std::max(budget.step_tokens, 1);
  need.workspace = PlanDeviceWorkspace(config, shard, step, step).total_bytes;
  return need;
}

}  // namespace splitspec::model

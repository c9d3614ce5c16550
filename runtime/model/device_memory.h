// Device memory accounting: what a model needs on a device, computed on the
// host from the config and the weights' types (no device needed), and the
// layouts the CUDA backend (cuda_backend.h) allocates by, so that the start-up
// check (device.h, CheckDeviceFits) counts exactly the bytes the backend asks for.
//
//   DeviceMemoryNeed need = EstimateDeviceMemory(config, shard, weights,
//                                                {.sequences = 8, .step_tokens = 512});
//
// weights    every tensor as stored in the file (Q4_0 blocks stay Q4_0 blocks; a
//            tied output head is stored once), norms and biases as float32, each
//            at a kDeviceAlignment-aligned offset of one allocation.
// KV cache   per sequence and position: n_layers x (K and V) x this rank's kv_dim,
//            in half precision (the values are half-rounded before they are stored,
//            backend.h), for context_tokens positions of `sequences` sequences.
// workspace  the activation buffers of one forward call of step_tokens tokens with
//            as many logit rows, and its per-token metadata (DeviceWorkspaceLayout).
#ifndef SPLITSPEC_RUNTIME_MODEL_DEVICE_MEMORY_H_
#define SPLITSPEC_RUNTIME_MODEL_DEVICE_MEMORY_H_

#include <cstdint>
#include <vector>

#include "runtime/model/device.h"
#include "runtime/model/model_config.h"
#include "runtime/model/tp_shard.h"
#include "runtime/model/weights.h"

namespace splitspec::model {

// Every device allocation and every tensor inside one starts at a multiple of this.
inline constexpr uint64_t kDeviceAlignment = 256;
inline uint64_t AlignDeviceBytes(uint64_t bytes) {
  return (bytes + kDeviceAlignment - 1) / kDeviceAlignment * kDeviceAlignment;
}

// What the start-up check reserves room for.
struct DeviceMemoryBudget {
  int context_tokens = 0;  // positions per sequence; 0 = the model's context length
  int sequences = 1;       // sequences whose KV caches are resident at once
  int step_tokens = 512;   // the most tokens of one forward call
};

// One rank's weights in one device allocation.
struct DeviceWeightLayout {
  struct Entry {
    const void* host = nullptr;  // the bytes to copy (file mapping or owned vector)
    uint64_t bytes = 0;
    uint64_t offset = 0;  // in the allocation, aligned
  };
  std::vector<Entry> entries;  // one per distinct host tensor, in upload order
  uint64_t total_bytes = 0;

  // The offset of the tensor whose host bytes start at `host`, or -1 if absent.
  int64_t OffsetOf(const void* host) const;
};

// Layer by layer (attn_norm, wq, wk, wv, biases, wo, ffn_norm, gate, up, down), then
// token_embd, output_norm, the output head (skipped when it is token_embd's bytes) and
// the RoPE frequency factors when present.
DeviceWeightLayout PlanDeviceWeights(const ModelConfig& config, const ShardedWeights& weights);

// The buffers of one forward call, as byte offsets into one allocation. Sized for
// `tokens` tokens and `logit_rows` rows of logits; every field is aligned.
struct DeviceWorkspaceLayout {
  int64_t tokens = 0;
  int64_t logit_rows = 0;
  int64_t act_cols = 0;                 // the widest matmul input: max(n_embd, q_dim, n_ff / N)
  uint64_t x = 0, xn = 0, partial = 0;  // [T, n_embd] float
  uint64_t q = 0, attn = 0;             // [T, q_dim] float
  uint64_t k = 0, v = 0;                // [T, kv_dim] float
  uint64_t gate = 0, up = 0;            // [T, ff] float
  uint64_t act_qs = 0;  // [T, act_cols] int8: activations quantized per 32 or per 256
  uint64_t act_d = 0, act_dsum = 0, act_sum = 0;  // [T, act_cols / 32] float each
                                                  // (per 256: act_d's first cols / 256)
  uint64_t head_x = 0;                            // [R, n_embd] float
  uint64_t logits = 0;                            // [R, V'] float
  uint64_t gathered = 0;                          // [N, R, V'] float
  uint64_t token_ids = 0, token_pos = 0;          // [T] int32 each
  uint64_t token_cache = 0;                       // [T] 16-byte cache references
  uint64_t rope_cos = 0, rope_sin = 0;            // [T, rope_dim / 2] float each
  uint64_t logit_tokens = 0;                      // [R] int32
  uint64_t total_bytes = 0;
};

// Bytes of one per-token cache reference (a device pointer and the capacity).
inline constexpr uint64_t kDeviceCacheRefBytes = 16;

DeviceWorkspaceLayout PlanDeviceWorkspace(const ModelConfig& config,
                                          const TensorParallelShard& shard, int64_t tokens,
                                          int64_t logit_rows);

// Bytes of one sequence's device KV cache holding `positions` positions.
uint64_t DeviceKvCacheBytes(int n_layers, int64_t kv_dim, int64_t positions);

DeviceMemoryNeed EstimateDeviceMemory(const ModelConfig& config, const TensorParallelShard& shard,
                                      const ShardedWeights& weights,
                                      const DeviceMemoryBudget& budget);

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_DEVICE_MEMORY_H_

// One rank's shard of a Llama-family model under Megatron-style tensor
// parallelism of size N: which heads, feed-forward columns and vocabulary rows
// the rank owns, and its slices of the weights.
//
//   ASSIGN_OR_RETURN(TensorParallelShard shard, PlanTensorParallelShard(config, weights, 2, 1));
//   ASSIGN_OR_RETURN(ShardedWeights w, ShardWeights(weights, shard));
//
// The split (rank r of N; ranges are contiguous and in rank order):
//   attention   query heads split as evenly as possible (the first H mod N ranks
//               get one more): [r H/N, (r+1) H/N) when N divides H. A rank holds the
//               KV heads its query heads read (GQA groups of H/K query heads per KV
//               head): when N divides K that is [r K/N, (r+1) K/N); otherwise a group
//               cut by a rank boundary has its KV head on both ranks (replicated:
//               computed and cached twice), e.g. SmolLM2-135M's 9 heads / 3 KV heads
//               at N=2: rank 0 heads 0-4 with KV heads 0-1, rank 1 heads 5-8 with KV
//               heads 1-2. N > H is refused. wq, wk, wv (and their biases) are row
//               slices; wo is a column slice (its input is the rank's heads), and
//               its partial output is summed over ranks (all-reduce).
//   MLP         gate and up are row slices [r F/N, (r+1) F/N); down is the matching
//               column slice, its partial output all-reduced.
//   output head vocabulary rows [r V', min(V, (r+1) V')), V' = ceil(V / N); the
//               logits are all-gathered (padded to V' per rank).
//   norms, embedding: every rank keeps all of them (the residual stream is
//               replicated).
//
// Row slices are contiguous byte ranges of the memory-mapped file (zero copy;
// a rank reads only its rows). Column slices of a quantized matrix are not
// contiguous: wo and down are copied, row by row, from the rank's blocks into
// owned memory at load (with one rank, N = 1, nothing is copied: every slice
// is the whole matrix, borrowed). That requires each rank's column range to start and end
// on a quantization block: every rank's head boundary (heads x head_dim) and
// n_ff / N must be multiples of the type's block size (32 for Q4_0, Q4_1, Q8_0; 256 for Q4_K, Q5_K,
// Q6_K; 1 for float types). Other splits are refused at load with the numbers in the message.
#ifndef SPLITSPEC_RUNTIME_MODEL_TP_SHARD_H_
#define SPLITSPEC_RUNTIME_MODEL_TP_SHARD_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/model/model_config.h"
#include "runtime/model/weights.h"

namespace splitspec::model {

// Half-open range [begin, end).
struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;
  int64_t size() const { return end - begin; }
};

struct TensorParallelShard {
  int size = 1;                // N
  int rank = 0;                // r
  IndexRange heads;            // query heads
  IndexRange kv_heads;         // KV heads
  IndexRange ff;               // feed-forward columns (rows of gate/up, columns of down)
  IndexRange vocab;            // output rows; may be shorter than vocab_per_rank for the last rank
  int64_t vocab_per_rank = 0;  // V' = ceil(V / N): the all-gather's count per row

  // Dimensions of this rank's tensors.
  int64_t q_dim(const ModelConfig& c) const { return heads.size() * c.head_dim; }
  int64_t kv_dim(const ModelConfig& c) const { return kv_heads.size() * c.head_dim; }
};

// Plans rank `rank` of `size`. Errors (InvalidArgument, naming both numbers):
// size < 1 or rank outside [0, size); size > n_heads ("tensor-parallel size 8
// exceeds the 4 attention heads"); size does not divide n_ff; a column split of wo or down
// that is not block-aligned for its type (names the tensor, the type and sizes);
// size > vocab.
absl::StatusOr<TensorParallelShard> PlanTensorParallelShard(const ModelConfig& config,
                                                            const ModelWeights& weights, int size,
                                                            int rank);

// A layer's slices. Row slices borrow the file mapping; for N > 1, wo and down
// own their repacked bytes (the *_bytes vectors; the matrices point into them).
struct ShardedLayerWeights {
  const std::vector<float>* attn_norm = nullptr;  // [n_embd], the full model's
  WeightMatrix wq;                                // [q_dim/N, n_embd]
  WeightMatrix wk;                                // [kv_dim/N, n_embd]
  WeightMatrix wv;                                // [kv_dim/N, n_embd]
  std::vector<float> bq, bk, bv;                  // slices; empty without qkv_bias
  WeightMatrix wo;                                // [n_embd, q_dim/N], owned by wo_bytes if N > 1
  const std::vector<float>* ffn_norm = nullptr;   // [n_embd]
  WeightMatrix gate;                              // [n_ff/N, n_embd]
  WeightMatrix up;                                // [n_ff/N, n_embd]
  WeightMatrix down;                              // [n_embd, n_ff/N], owned by down_bytes if N > 1
  std::vector<uint8_t> wo_bytes, down_bytes;
};

struct ShardedWeights {
  const ModelWeights* full = nullptr;  // embedding, norms, rope factors (borrowed)
  std::vector<ShardedLayerWeights> layers;
  WeightMatrix output;  // [vocab.size(), n_embd] rows of the output head
  // Bytes of matrix data one decode step reads on this rank.
  uint64_t DecodeBytesPerToken() const;
};

// Slices `weights` for `shard` (which PlanTensorParallelShard made for them).
// Copies only wo's and down's column blocks. `weights` (and its file) must
// outlive the result. Never fails for a valid plan.
std::unique_ptr<ShardedWeights> ShardWeights(const ModelWeights& weights,
                                             const TensorParallelShard& shard,
                                             const ModelConfig& config);

// Gives each matrix of `weights` that runs on interleaved rows (kernels::
// RunsOnInterleavedRows: Q4_1 unless SPLITSPEC_MATMUL_ORDER=llama.cpp, Q8_0) its
// interleaved copy (WeightMatrix::interleaved), which the CPU backend's matmuls then read
// instead of the file rows: same outputs, bitwise (kernels/cpu/matmul.h). Costs as many
// bytes as those matrices, in one allocation on transparent huge pages where the kernel
// allows (runtime/base/huge_page_memory.h); the CUDA backend does not need it.
void InterleaveForCpu(ShardedWeights* weights);

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_TP_SHARD_H_

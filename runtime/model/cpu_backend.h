// CpuBackend: TransformerBackend (backend.h) on the host, with a thread pool.
// Matmuls go through the CPU kernels (kernels/cpu/matmul.h) with the rows of
// each weight split across threads; the row ops are the llama.cpp-order
// functions of transformer_ops.h (kernels::NativeGgmlOrder()). Attention reads the half-precision caches in splitspec's block order
// (kernels/cpu/attention.h; cpu_backend_attention.cc splits it across threads), or in
// llama.cpp's order under SPLITSPEC_ATTENTION_ORDER=llama.cpp.
// Results are bitwise independent of the thread count.
//
//   CpuBackend backend(config, shard, *sharded_weights, /*threads=*/2);
//
// Memory: activations and KV caches in host memory (std::vector), grown on
// demand and kept; weights are borrowed from `weights` (and through it the
// file mapping), which must outlive the backend.
#ifndef SPLITSPEC_RUNTIME_MODEL_CPU_BACKEND_H_
#define SPLITSPEC_RUNTIME_MODEL_CPU_BACKEND_H_

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <utility>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/matmul.h"
#include "runtime/base/thread_pool.h"
#include "runtime/model/backend.h"
#include "runtime/model/matmul_jobs.h"
#include "runtime/model/model_config.h"
#include "runtime/model/tp_shard.h"
#include "runtime/model/transformer_ops.h"

namespace splitspec::model {

// The order of float operations of the CPU attention. kBlocks (default): online softmax
// over blocks of 64 positions (kernels/cpu/attention.h), the fast one. kLlamaCpp:
// llama.cpp's non-flash order bit for bit (transformer_ops.h AttendOneHead), slower:
// the reference of the llama.cpp agreement check (tools/reference/check_vs_llamacpp.py),
// as SPLITSPEC_MATMUL_ORDER=llama.cpp is for the matmuls. Chosen once per process by
// SPLITSPEC_ATTENTION_ORDER=blocks|llama.cpp.
enum class CpuAttentionOrder { kBlocks, kLlamaCpp };
CpuAttentionOrder ActiveCpuAttentionOrder();
const char* CpuAttentionOrderName(CpuAttentionOrder order);

class CpuBackend final : public TransformerBackend {
 public:
  // `config` is the whole model's; `shard` and `weights` this rank's (for a
  // one-rank group, the whole model). threads >= 1, including the caller.
  // kv_cache_type: how NewCache's caches store K and V (q8_0: the head dimension a
  // multiple of 32, at most 256).
  CpuBackend(const ModelConfig& config, const TensorParallelShard& shard,
             const ShardedWeights& weights, int threads,
             KvCacheType kv_cache_type = KvCacheType::kF16);

  int num_threads() const { return pool_.num_threads(); }

  MemorySpace memory_space() const override { return MemorySpace::kHost; }
  std::unique_ptr<KvCache> NewCache(int max_tokens) const override;
  void Begin(const ForwardPlan& plan) override;
  float* Attention(int layer) override;
  float* FeedForward(int layer) override;
  void AddToResidual() override;
  const float* OutputHead() override;
  float* GatherBuffer() override;
  void CopyLogitsToHost(const float* parts, float* host_logits) override;

 private:
  int64_t tokens() const { return static_cast<int64_t>(plan_->token_seq.size()); }
  int64_t logit_rows() const { return static_cast<int64_t>(plan_->logit_tokens.size()); }
  void Embed();
  void NormRows(const float* weight);  // xn_ = RMSNorm(x_) row by row
  // fn(first, end) over [0, tokens) in parts on the pool's threads for a step of at
  // least kParallelTokenWork tokens (matmul_jobs.h), else once on this thread; for the
  // per-token work between matmuls, which would leave the other threads idle.
  template <class Fn>
  void ForTokenRanges(Fn&& fn) {
    const int64_t n = tokens();
    if (n < kParallelTokenWork || pool_.num_threads() == 1) {
      fn(int64_t{0}, n);
      return;
    }
    const int64_t parts = 2 * pool_.num_threads();
    pool_.ParallelFor(parts,
                      [&](int64_t part, int) { fn(n * part / parts, n * (part + 1) / parts); });
  }
  // x[rows][n] <- RMSNorm(x) row by row, in place (per-head Q/K norms, post-norms).
  void NormInPlace(const std::vector<float>& weight, int64_t rows, int n, float* x);
  void RopeAndStore(int layer);        // RoPE, half rounding, K and V rows to the caches
  void PlanAttentionTasks();           // attention_tasks_ for the current plan
  void AttendAllHeads(int layer);      // attn_ from q_ and the caches
  struct AttentionTask;
  // The tasks of one tree sequence's tokens [begin, end) (SequenceInput::tree_parents);
  // *partials: floats of partials_ planned so far, advanced past the tree's.
  void PlanTreeTasks(int64_t begin, int64_t end, int64_t* partials);
  void GroupQueries(int kv_head, int64_t begin, int64_t end,
                    std::vector<internal::AttentionQuery>* queries);
  // One block's rows as AttendKvBlock reads them: the block's keys for every KV
  // dimension ([kv_dim][kKvBlockPositions] halves, the cache's layout) and its first
  // value row (kv_dim halves per row). keys == nullptr: no block.
  // A block's rows: f16 (keys, values) or, from a q8_0 cache, q8 (per KV head: the
  // cache and the block, read by q8_block).
  struct KvBlockRows {
    const uint16_t* keys = nullptr;
    const uint16_t* values = nullptr;
    const KvCache* q8_cache = nullptr;
    int q8_layer = 0;
    int q8_block = 0;
  };
  static KvBlockRows CacheBlockRows(const KvCache& cache, int layer, int block);
  std::pair<int, int> AttendBlock(int layer, int kv_head, int block, KvBlockRows rows,
                                  KvBlockRows next,
                                  const std::vector<internal::AttentionQuery>& queries, int thread,
                                  float* out);
  // The cache slots holding the K and V of plan token t's virtual positions: those of
  // its chain [0, token_pos[t]]. Empty for a chain token (slot == position); for a tree
  // node, slots[k] for position L + k (its ancestor at depth k), L the cache's length.
  void TreePathSlots(int64_t t, std::vector<int>* slots) const;
  // A tree node's blocks [task.block_begin, task.block_end) as its chain lays them out
  // (gathered into scratch unless its path is slots L, L + 1, ...): partials to partials_.
  void AttendTreeTail(int layer, const AttentionTask& task, int thread);
  void AttendLlamaCppOrder(int layer, const AttentionTask& task,
                           const std::vector<internal::AttentionQuery>& queries, int thread);
  // y = x W^T for each job, all jobs over the same `rows`, rows split across threads.
  void MatMul(std::initializer_list<MatMulJob> jobs, int64_t rows);

  const ModelConfig& config_;
  const TensorParallelShard shard_;
  const ShardedWeights& weights_;
  ThreadPool pool_;
  const int64_t q_dim_, kv_dim_, ff_;  // this rank's sizes
  const KvCacheType kv_cache_type_;
  const ForwardPlan* plan_ = nullptr;  // the current call's

  // Scratch, sized per call (T tokens, R logit rows, N ranks).
  std::vector<float> rope_cos_, rope_sin_;  // [T, rope_dim / 2]
  std::vector<float> swa_rope_cos_, swa_rope_sin_;  // the sliding layers' (config.sliding_window)
  std::vector<float> x_;                    // [T, n_embd] residual stream (replicated)
  std::vector<float> xn_;                   // [T, n_embd] normalized
  std::vector<float> q_, k_, v_;            // [T, q_dim_], [T, kv_dim_], [T, kv_dim_]
  // q8_0 caches: q_ quantized per head (kernels::QuantizeQueryQ8_0), element i of q_ at
  // q8_quants_[i], its block's scale at q8_scales_[i / 32]; filled by RopeAndStore.
  std::vector<int8_t> q8_quants_;
  std::vector<float> q8_scales_;
  std::vector<float> attn_;                 // [T, q_dim_]
  std::vector<float> partial_;              // [T, n_embd] this rank's share of a sublayer's output
  std::vector<float> gate_, up_;            // [T, ff_]
  std::vector<float> head_out_;             // [R, vocab.size()] when padding is needed
  std::vector<float> logits_;               // [R, vocab_per_rank]
  std::vector<float> gathered_;             // [N, R, vocab_per_rank]
  // Per-thread attention scratch: merge states or llama.cpp-order scores, the queries
  // of a task, the queries of one block, float copies of rows (llama.cpp order).
  std::vector<std::vector<float>> thread_scores_;
  std::vector<std::vector<internal::AttentionQuery>> thread_queries_;
  std::vector<std::vector<kernels::KvBlockQuery>> thread_block_queries_;
  std::vector<std::vector<kernels::KvBlockQueryQ8>> thread_block_queries_q8_;
  std::vector<std::vector<float>> thread_rows_;
  // Per-thread tree scratch: a node's path slots, its gathered blocks (keys then values).
  std::vector<std::vector<int>> thread_path_;
  std::vector<std::vector<uint16_t>> thread_tree_rows_;
  // [T] the plan token whose queries come k-th in GroupQueries: k itself, except in a
  // tree sequence, whose tokens go by position (stable), as AttendBlock's ranges need.
  std::vector<int64_t> query_token_;
  // The attention tasks of the current call (cpu_backend_attention.cc): tokens
  // [token_begin, token_end) of one sequence against one of this rank's KV heads.
  struct AttentionTask {
    enum Kind {
      kBlocks,    // partials of blocks [block_begin, block_end) to partials_
      kMerge,     // merge blocks [0, block_end) of partials_ into attn_ (after kBlocks)
      kPrefill,   // all blocks the tokens reach, merged as they go, into attn_
      kLlamaCpp,  // llama.cpp's order into attn_
      kTreeTail,  // one tree node (every KV head): its blocks from the tree's first, partials_
    } kind;
    // Tokens in GroupQueries' order (query_token_), of the run [run_begin, run_end).
    int64_t token_begin, token_end;
    int kv_head;
    int block_begin, block_end;
    int64_t partials;  // offset in partials_ of the run's [block][kv head][token][head]
    int64_t run_begin = 0, run_end = 0;  // kBlocks, kMerge, kTreeTail: the partials' run
  };
  std::vector<AttentionTask> attention_tasks_, merge_tasks_;
  std::vector<float> partials_;
  std::vector<kernels::PackedActivations> packed_;  // one per weight type in a MatMul
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_CPU_BACKEND_H_

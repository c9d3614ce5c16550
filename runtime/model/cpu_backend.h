// CpuBackend: TransformerBackend (backend.h) on the host, with a thread pool.
// Matmuls go through the CPU kernels (kernels/cpu/matmul.h) with the rows of
// each weight split across threads; the row ops and attention are the
// llama.cpp-order functions of transformer_ops.h (kernels::NativeGgmlOrder()).
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
#include <vector>

#include "kernels/cpu/matmul.h"
#include "runtime/base/thread_pool.h"
#include "runtime/model/backend.h"
#include "runtime/model/matmul_jobs.h"
#include "runtime/model/model_config.h"
#include "runtime/model/tp_shard.h"
#include "runtime/model/transformer_ops.h"

namespace splitspec::model {

class CpuBackend final : public TransformerBackend {
 public:
  // `config` is the whole model's; `shard` and `weights` this rank's (for a
  // one-rank group, the whole model). threads >= 1, including the caller.
  CpuBackend(const ModelConfig& config, const TensorParallelShard& shard,
             const ShardedWeights& weights, int threads);

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
  void RopeAndStore(int layer);        // RoPE, half rounding, K and V rows to the caches
  void PlanAttentionTasks();           // attention_tasks_ for the current plan
  void AttendAllHeads(int layer);      // attn_ from q_ and the caches
  // y = x W^T for each job, all jobs over the same `rows`, rows split across threads.
  void MatMul(std::initializer_list<MatMulJob> jobs, int64_t rows);

  const ModelConfig& config_;
  const TensorParallelShard shard_;
  const ShardedWeights& weights_;
  ThreadPool pool_;
  const int64_t q_dim_, kv_dim_, ff_;  // this rank's sizes
  const ForwardPlan* plan_ = nullptr;  // the current call's

  // Scratch, sized per call (T tokens, R logit rows, N ranks).
  std::vector<float> rope_cos_, rope_sin_;  // [T, rope_dim / 2]
  std::vector<float> x_;                    // [T, n_embd] residual stream (replicated)
  std::vector<float> xn_;                   // [T, n_embd] normalized
  std::vector<float> q_, k_, v_;            // [T, q_dim_], [T, kv_dim_], [T, kv_dim_]
  std::vector<float> attn_;                 // [T, q_dim_]
  std::vector<float> partial_;              // [T, n_embd] this rank's share of a sublayer's output
  std::vector<float> gate_, up_;            // [T, ff_]
  std::vector<float> head_out_;             // [R, vocab.size()] when padding is needed
  std::vector<float> logits_;               // [R, vocab_per_rank]
  std::vector<float> gathered_;             // [N, R, vocab_per_rank]
  std::vector<std::vector<float>> thread_scores_;   // [threads] AttendHeadGroup scratch
  std::vector<std::vector<internal::AttentionQuery>> thread_queries_;  // [threads]
  // The attention tasks of the current call: tokens [token_begin, token_end) of one
  // sequence (at most kAttentionChunk) against one of this rank's KV heads.
  struct AttentionTask {
    int64_t token_begin, token_end;
    int kv_head;
  };
  std::vector<AttentionTask> attention_tasks_;
  std::vector<kernels::PackedActivations> packed_;  // one per weight type in a MatMul
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_CPU_BACKEND_H_

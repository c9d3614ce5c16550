// TensorParallelTransformer: one rank's part of the Llama-family forward under
// tensor parallelism (the split is in tp_shard.h). Every rank of the group runs
// the same Forward call with the same batch (the leader broadcasts the step
// plan, see below); between them the ranks compute what model::Transformer
// computes alone, and every rank receives the full logits.
//
//   // rank r of N, after the group's communicator is up:
//   ASSIGN_OR_RETURN(auto model, TensorParallelTransformer::Load(path, comm.get(), {.threads = 2}));
//   std::unique_ptr<KvCache> cache = model->NewCache();     // this rank's KV heads only
//   ForwardOutput out;
//   RETURN_IF_ERROR(model->Forward({{cache.get(), prompt, LogitsMode::kLast}}, &out));
//   const float* next = out.Row(0, 0);                       // [vocab], on every rank
//
// Same Forward contract as Transformer (batch of sequences, per-sequence KV
// caches with Truncate, LogitsMode, logits layout): both implement
// LanguageModel, so a target leader can use either. Per layer a rank does:
// RMSNorm (replicated), its heads' Q/K/V, RoPE, attention over its KV heads,
// its columns of wo -> all-reduce; RMSNorm,
// its gate/up rows, SiLU, its columns of down -> all-reduce; and at the end its
// vocabulary rows of the head -> all-gather. That is 2 * n_layers + 1
// collectives per Forward, each of [tokens, n_embd] (or [rows, V/N]) floats.
//
// Numerics: the arithmetic differs from Transformer's only in float summation
// order (each wo/down output is the sum of N partial dot products instead of
// one). With float weights that stays at float rounding (measured: 6e-7 of the
// largest logit on a 30-layer random model at SmolLM2-135M's shapes). With
// quantized weights the activations are quantized too (Q8, per 32-element
// block), and a last-bit difference can flip one activation's rounding; over
// many layers the flips add up: 1.7e-2 relative on that random Q4_1 model, and
// up to 0.93 on logits of magnitude 27.5 on SmolLM2-135M Q4_1 at TP=3, so
// greedy decoding can pick a different token where the top two are close (the
// benchmark prints where). TP=N is therefore a different (equally valid)
// rounding of the model, not bitwise TP=1; every rank of one group holds the
// same logits, and they are batch-invariant like Transformer's (the all-reduce
// adds in rank order per element, GlooCommunicator).
//
// The step-plan contract a leader must keep: all ranks call Forward with the
// same sequences in the same order, the same tokens, and caches of the same
// lengths; and call KvCache::Truncate identically. A rank that diverges makes
// the collectives disagree in size (an error) or silently mix sequences.
//
// Thread safety: like Transformer, one Forward at a time (it also owns the
// communicator's call order).
#ifndef SPLITSPEC_RUNTIME_MODEL_TP_TRANSFORMER_H_
#define SPLITSPEC_RUNTIME_MODEL_TP_TRANSFORMER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "kernels/cpu/matmul.h"
#include "runtime/base/thread_pool.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/language_model.h"
#include "runtime/model/model_config.h"
#include "runtime/model/tp_shard.h"
#include "runtime/model/transformer.h"
#include "runtime/model/matmul_jobs.h"
#include "runtime/model/weights.h"
#include "runtime/dist/communicator.h"

namespace splitspec::model {

class TensorParallelTransformer : public LanguageModel {
 public:
  // Opens and validates the model like Transformer::Load, then plans and slices
  // this rank's shard (comm->rank() of comm->size()). `comm` must be a host-memory
  // communicator that outlives the model. Errors: those of Transformer::Load;
  // InvalidArgument from PlanTensorParallelShard (a split the model does not
  // allow, naming the numbers); FailedPrecondition for a device communicator.
  // options.layers is honoured as in Transformer.
  static absl::StatusOr<std::unique_ptr<TensorParallelTransformer>> Load(
      const std::string& path, net::Communicator* comm, const TransformerOptions& options);
  static absl::StatusOr<std::unique_ptr<TensorParallelTransformer>> FromFile(
      std::unique_ptr<GgufFile> file, net::Communicator* comm, const TransformerOptions& options);

  // The full model's config (n_heads etc. are the model's, not the shard's).
  const ModelConfig& config() const override { return config_; }
  const TensorParallelShard& shard() const { return shard_; }
  const ShardedWeights& weights() const { return *sharded_; }
  int num_threads() const { return pool_.num_threads(); }

  // A cache for this rank's KV heads (tp_shard.h: some may be replicated on a
  // neighbour rank): n_layers x (its KV heads x head_dim) per position.
  std::unique_ptr<KvCache> NewCache(int max_tokens = 0) const override;

  // Transformer::Forward's contract (REQUIRES, errors, state after failure). In
  // addition: a failed collective returns its error (DeadlineExceeded /
  // Unavailable / FailedPrecondition, see net/communicator.h) with every cache
  // at its previous length; the group is then broken. On success every rank's
  // `out` holds the same full-vocabulary logits.
  absl::Status Forward(absl::Span<const SequenceInput> batch, ForwardOutput* out) override;

 private:
  TensorParallelTransformer(std::unique_ptr<GgufFile> file, ModelConfig config,
                            std::unique_ptr<ModelWeights> weights, TensorParallelShard shard,
                            net::Communicator* comm, int threads);

  absl::Status Validate(absl::Span<const SequenceInput> batch) const;
  void PlanTokens(absl::Span<const SequenceInput> batch);
  void Embed(absl::Span<const SequenceInput> batch);
  absl::Status RunLayer(int layer, absl::Span<const SequenceInput> batch);
  void Attention(int layer, absl::Span<const SequenceInput> batch);
  absl::Status ComputeLogits(absl::Span<const SequenceInput> batch, ForwardOutput* out);
  // y = x W^T for each job (at most 3), rows split across threads.
  void MatMul(std::initializer_list<MatMulJob> jobs, int64_t tokens);

  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  std::unique_ptr<ModelWeights> full_weights_;  // located in file_; sliced by sharded_
  TensorParallelShard shard_;
  std::unique_ptr<ShardedWeights> sharded_;
  net::Communicator* comm_;
  ThreadPool pool_;
  int64_t q_dim_, kv_dim_, ff_;  // this rank's sizes

  // Scratch, sized per call; T = total new tokens of the call.
  std::vector<int> token_seq_;    // [T] index of the token's sequence in the batch
  std::vector<int> token_pos_;    // [T] position of the token in its sequence
  std::vector<float> rope_cos_, rope_sin_;  // [T, rope_dim / 2]
  std::vector<float> x_;          // [T, n_embd] residual stream (replicated)
  std::vector<float> xn_;         // [T, n_embd] normalized
  std::vector<float> q_, k_, v_;  // [T, q_dim_], [T, kv_dim_], [T, kv_dim_]
  std::vector<float> attn_;       // [T, q_dim_]
  std::vector<float> proj_;       // [T, n_embd] this rank's partial, then the sum
  std::vector<float> gate_, up_;  // [T, ff_]
  std::vector<float> local_logits_;     // [rows, vocab_per_rank], zero-padded
  std::vector<float> gathered_logits_;  // [N, rows, vocab_per_rank]
  std::vector<std::vector<float>> thread_scores_;  // [threads][max positions]
  std::vector<kernels::PackedActivations> packed_;  // one per weight type in a MatMul
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_TP_TRANSFORMER_H_

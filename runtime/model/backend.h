// TransformerBackend: the device seam of model::Transformer. The transformer
// (transformer.h) owns everything that is the same on every device: input
// checks, the token plan, the KV caches' lengths, and the collectives of a
// tensor-parallel group. A backend owns the math of one rank and the memory
// it runs in: the CPU backend (cpu_backend.h) and the CUDA backend (cuda_backend.h).
//
// One forward call, as the transformer drives it (N = ranks in the group):
//
//   backend->Begin(plan);                                    // embed, RoPE angles
//   for (int layer = 0; layer < n_layers; ++layer) {
//     float* partial = backend->Attention(layer);           // writes K, V to the caches
//     if (N > 1) backend->CompleteBuffers(), comm->AllReduceSum(partial, T * n_embd);
//     backend->AddToResidual();
//     partial = backend->FeedForward(layer);
//     if (N > 1) backend->CompleteBuffers(), comm->AllReduceSum(partial, T * n_embd);
//     backend->AddToResidual();
//   }
//   const float* parts = backend->OutputHead();              // [R, V'] this rank's vocabulary
//   if (N > 1) {
//     backend->CompleteBuffers();
//     comm->AllGather(parts, R * V', gathered = backend->GatherBuffer());
//   }
//   backend->CopyLogitsToHost(N > 1 ? gathered : parts, out->logits.data());
//   RETURN_IF_ERROR(backend->Finish());                      // errors of the whole call
//
// Shapes. T = plan.token_seq.size() new tokens over all sequences of the call,
// R = plan.logit_tokens.size() rows of logits asked for, d = config.n_embd,
// V = config.vocab_size, V' = shard.vocab_per_rank (V when N = 1). Per rank:
// q_dim = shard.q_dim, kv_dim = shard.kv_dim, n_ff / N feed-forward columns.
// Every buffer is row-major float32, one row per token (or per logit row).
//
// Memory: the backend allocates and owns every activation buffer, in the
// memory_space() it reports (host for the CPU backend, the device for CUDA).
// Buffers grow in Begin to fit the call and are reused by later calls; they
// live as long as the backend. A pointer a call returns stays valid, and its
// contents unchanged by the backend, until the next backend call; the
// transformer passes it only to the communicator, whose buffer_space() must
// equal memory_space() (the transformer refuses other pairs at load with
// FailedPrecondition). Weights: the backend borrows the host view it is built
// from (ShardedWeights over the file mapping, which outlive it); a device
// backend copies them to its memory once, at construction. The only transfer
// to the host in a forward is CopyLogitsToHost, into memory the caller owns.
//
// KV cache: the backend creates the caches (NewCache) in its memory space,
// shaped [n_layers][max_tokens, kv_dim] for this rank's KV heads; the caller
// owns each cache object and destroys it before the backend. Lengths are host
// metadata kept by KvCache: the transformer Reserves room for the call's
// tokens before Begin, the backend writes the K and V rows of every token at
// plan.token_slot (rows past the cache's length) in Attention, and the
// transformer Commits the new lengths only after the whole call succeeded.
// KvCache::Truncate is O(1): it moves the length back and touches no memory;
// rows past the length are dead and the next forward overwrites them, so a
// rejected draft costs nothing to roll back. Keys are stored after RoPE; K and
// V are rounded to half precision (llama.cpp's F16 cache) before they are
// stored, and Q before the K*Q product. The CPU backend's KvCache keeps its
// rows in host vectors; a device backend returns a KvCache subclass whose rows
// live in device memory (memory_space() kDevice, storage grown through
// KvCache::GrowStorage) with the same length, Reserve, Commit and Truncate
// semantics; the transformer refuses a cache from another memory space.
//
// Batch invariance (what makes a position's logits bitwise identical alone, in
// a multi-token block, or batched with other sequences; greedy speculative
// decoding equals plain greedy decoding because of it): every output element
// is computed by a fixed sequence of float operations that depends only on
// its own row's inputs and on the model's shapes, never on T, R, the batch's
// composition or the number of threads. Concretely: a matmul reduces each dot
// product over the columns in one order fixed per weight type (the same tile
// and split for any number of rows, no split-K chosen by T, no atomics);
// RMSNorm sums a row sequentially; attention for (token, head) reduces over
// positions 0..pos (WindowStart..pos in a sliding layer, model_config.h) in
// increasing order in fixed lanes (transformer_ops.h,
// AttendOneHead); the group's all-reduce adds the ranks' partials in rank order
// per element (GlooCommunicator). A tree node (SequenceInput::tree_parents)
// attends its context and ancestors laid out at its chain's positions, so it
// gets its chain's bits (cpu_backend_attention.cc, PlanTreeTasks). A backend
// must keep this within itself; it need not reproduce another backend's bits.
//
// Communication: no backend call communicates or blocks on another rank. The
// transformer issues every collective, between backend calls and only when
// the group has more than one rank: 2 all-reduces per layer and 1 all-gather
// per forward. A one-rank group (TP=1) runs the same calls with none.
//
// Thread safety: one call at a time; the transformer serializes them.
#ifndef SPLITSPEC_RUNTIME_MODEL_BACKEND_H_
#define SPLITSPEC_RUNTIME_MODEL_BACKEND_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/language_model.h"

namespace splitspec::model {

// The tokens of one forward call, planned by the transformer on the host
// after the inputs were checked (every cache has room for its tokens).
struct ForwardPlan {
  absl::Span<const SequenceInput> batch;
  std::vector<int> token_seq;         // [T] the token's sequence (index in batch)
  std::vector<int> token_pos;         // [T] its position in that sequence (RoPE, attention)
  // [T] the cache row its K and V go to: token_pos, except in a tree sequence
  // (SequenceInput::tree_parents), where node i sits at position L + depth(i)
  // and its row is slot L + i (L: the cache's length). Only the CPU backend runs
  // trees (the transformer refuses them on others, which may use token_pos).
  std::vector<int> token_slot;
  std::vector<int64_t> logit_tokens;  // [R] tokens whose logits are asked, increasing
  int max_positions = 0;              // 1 + the largest token_pos
};

class TransformerBackend {
 public:
  virtual ~TransformerBackend() = default;

  virtual MemorySpace memory_space() const = 0;

  // A cache for one sequence of up to max_tokens (>= 1) positions, for this
  // rank's KV heads. Allocation may be lazy (KvCache::Reserve).
  virtual std::unique_ptr<KvCache> NewCache(int max_tokens) const = 0;

  // Sizes the buffers for the plan (which must stay alive until the call's
  // last backend call), computes each token's RoPE angles and embeds the tokens
  // into the residual stream x [T, d] (replicated on every rank).
  virtual void Begin(const ForwardPlan& plan) = 0;

  // The attention sublayer of `layer` on this rank's heads: RMSNorm(x), Q, K,
  // V (+ bias), Q/K norms (config.qk_norm), RoPE (the layer kind's base), the K
  // and V rows stored in each token's cache, attention over positions 0..pos
  // (config.WindowStart(layer, pos)..pos), and this rank's columns of wo, then
  // config.post_norms' post-attention norm (one rank only). Returns its partial
  // output [T, d]; the group's sum of the partials is the sublayer's output.
  virtual float* Attention(int layer) = 0;

  // The feed-forward sublayer of `layer` on this rank's columns: RMSNorm(x),
  // gate and up, SiLU(gate) * up (GeGLU for config.activation kGeluTanh), this
  // rank's columns of down, then config.post_norms' post-FFN norm. Returns its
  // partial output [T, d], as Attention.
  virtual float* FeedForward(int layer) = 0;

  // x += the buffer the last Attention or FeedForward returned (by then the
  // group's sum).
  virtual void AddToResidual() = 0;

  // RMSNorm of x's rows plan.logit_tokens, times this rank's rows of the output
  // head: [R, V'], the columns past this rank's vocabulary (the last rank's
  // padding) zero. REQUIRES: R >= 1.
  virtual const float* OutputHead() = 0;

  // Room for every rank's OutputHead: [N, R, V'], for the all-gather.
  virtual float* GatherBuffer() = 0;

  // Called by the transformer before each collective on a buffer this backend
  // returned: the buffer's contents must be complete when this returns, for a
  // communicator that reads it on its own stream (NCCL). A device backend waits
  // for its stream; the CPU backend's buffers are complete when a call returns.
  virtual void CompleteBuffers() {}

  // Copies the ranks' logits [N, R, V'] (`parts`, in memory_space()) to
  // host_logits [R, V] (host memory the caller owns), vocabulary in order.
  virtual void CopyLogitsToHost(const float* parts, float* host_logits) = 0;

  // The end of a call: waits until its work is done and returns the first
  // failure of any backend call since Begin (a device backend runs
  // asynchronously and keeps a failure, e.g. an allocation in Begin, until
  // here; after one, its later calls do nothing). The CPU backend cannot fail.
  // The transformer commits the caches' lengths only after an OK Finish.
  virtual absl::Status Finish() { return absl::OkStatus(); }

  // True right after a Finish that failed only because the call was being
  // captured into a CUDA graph and the capture failed: none of the call's
  // kernels ran, and the next Begin runs eagerly. The transformer then runs the
  // same plan again (BackendCounters::graph_capture_fallbacks counts these), so
  // a failed capture never fails a request.
  virtual bool RetryEagerly() const { return false; }

  // Makes the next graph capture fail as a real one does (an operation CUDA
  // forbids during a capture), to test the fallback. Backends without graphs
  // ignore it.
  virtual void FailNextGraphCaptureForTesting() {}

  // Counts since construction (the CPU backend counts nothing).
  virtual BackendCounters counters() const { return {}; }
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_BACKEND_H_

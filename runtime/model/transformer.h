// The Llama-family transformer: one forward call runs a batch of sequences,
// each with any number of new tokens (a prompt prefill, a 1-token decode step,
// a k+1-token verification block), and returns the logits of the positions
// asked for. The same class runs one rank of a tensor-parallel group; a single
// process is a one-rank group.
//
//   ASSIGN_OR_RETURN(auto model, Transformer::Load(path, {.threads = 2}));
//   std::unique_ptr<KvCache> cache = model->NewCache();
//   std::vector<int32_t> prompt = {1, 2, 3};
//   ForwardOutput out;
//   RETURN_IF_ERROR(model->Forward({{cache.get(), prompt, LogitsMode::kLast}}, &out));
//   const float* next = out.Row(0, 0);      // [vocab] logits after token 3
//
//   // rank r of N, after the group's communicator is up:
//   ASSIGN_OR_RETURN(auto rank_model, Transformer::Load(path, comm.get(), {.threads = 2}));
//   // NewCache holds this rank's KV heads; Forward gives the full logits on every rank.
//
// Structure: this class checks the inputs, plans the tokens, keeps the KV
// caches' lengths and runs the group's collectives; the math of each layer is
// a TransformerBackend's (backend.h states buffers, shapes, memory ownership
// and which calls communicate; the CPU backend is cpu_backend.h).
//
// Tensor parallelism (the split is in tp_shard.h): per layer a rank computes
// RMSNorm (replicated), its heads' Q/K/V, RoPE, attention over its KV heads,
// its columns of wo -> all-reduce; RMSNorm, its gate/up rows, SiLU, its columns
// of down -> all-reduce; and at the end its vocabulary rows of the head ->
// all-gather. That is 2 * n_layers + 1 collectives per Forward, each of
// [tokens, n_embd] (or [rows, V/N]) floats; with one rank there are none, and
// the forward is the single-process model's.
//
// Numerics are batch-invariant: the logits of a position are bitwise identical
// whether it is computed alone, inside a multi-token block, or batched with
// other sequences (backend.h, "Batch invariance"). The thread count does not
// change results either. TP=N differs from TP=1 only in float summation order
// (each wo/down output is the sum of N partial dot products instead of one).
// With float weights that stays at float rounding (measured: 6e-7 of the
// largest logit on a 30-layer random model at SmolLM2-135M's shapes). With
// quantized weights the activations are quantized too (Q8, per 32-element
// block), and a last-bit difference can flip one activation's rounding; over
// many layers the flips add up: 1.7e-2 relative on that random Q4_1 model, and
// up to 0.93 on logits of magnitude 27.5 on SmolLM2-135M Q4_1 at TP=3, so
// greedy decoding can pick a different token where the top two are close. TP=N
// is therefore a different (equally valid) rounding of the model, not bitwise
// TP=1; every rank of one group holds the same logits, batch-invariant too (the
// all-reduce adds in rank order per element, GlooCommunicator).
//
// The step-plan contract a group's leader must keep: all ranks call Forward
// with the same sequences in the same order, the same tokens, and caches of
// the same lengths; and call KvCache::Truncate identically. A rank that
// diverges makes the collectives disagree in size (an error) or silently mix
// sequences.
//
// Thread safety: Forward uses internal scratch buffers and the thread pool
// (and owns the communicator's call order): call it from one thread at a time.
// config(), weights() are immutable.
#ifndef SPLITSPEC_RUNTIME_MODEL_TRANSFORMER_H_
#define SPLITSPEC_RUNTIME_MODEL_TRANSFORMER_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/dist/communicator.h"
#include "runtime/model/backend.h"
#include "runtime/model/device.h"
#include "runtime/model/device_memory.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/language_model.h"
#include "runtime/model/model_config.h"
#include "runtime/model/tp_shard.h"
#include "runtime/model/weights.h"

namespace splitspec::model {

struct TransformerOptions {
  int threads = 0;  // worker threads including the caller; 0 = ThreadPool::DefaultThreads()
  // 0: every layer. L > 0: only the first L layers, then the final norm and output
  // head (a layer-skip self-draft of the same file); config().n_layers becomes L and
  // caches are shaped for L layers. L above the file's layer count is refused.
  int layers = 0;
  // Where the forward runs (device.h): the CPU backend, or the CUDA backend on
  // device.ordinal. A CUDA device is checked at load: it must exist and have room
  // for the weights, `memory`'s KV caches and workspace (EstimateDeviceMemory), else
  // the load fails naming the device and the bytes needed vs free.
  DeviceSpec device = {};
  DeviceMemoryBudget memory = {};
  // CUDA only: decode and verify steps of a one-rank model run as replayed CUDA
  // graphs, padded to a bucketed shape (cuda_graph_plan.h), with bitwise the
  // logits of launching the kernels one by one. false: always launch eagerly.
  bool cuda_graphs = true;
  // How KV caches store K and V (kv_cache.h). kQ8_0 changes the numerics; CPU only
  // (the load refuses it on a CUDA device, InvalidArgument naming --kv-cache-type).
  KvCacheType kv_cache_type = KvCacheType::kF16;
};

class Transformer : public LanguageModel {
 public:
  // Opens, maps and validates a GGUF model. Errors: those of GgufFile::Open,
  // ReadModelConfig and LoadModelWeights (each names the file, key or tensor);
  // InvalidArgument for options.layers out of range; for a CUDA device those of
  // CheckDeviceFits (FailedPrecondition: no CUDA in the build, no such device;
  // ResourceExhausted: the model does not fit) and Unimplemented for a CUDA
  // device in a group of more than one rank, a weight type the CUDA kernels
  // lack (naming the tensor), or an architecture beyond the Llama shape (gemma3,
  // named; it runs on the CPU).
  static absl::StatusOr<std::unique_ptr<Transformer>> Load(const std::string& path,
                                                           const TransformerOptions& options);
  // Same, from an already opened file (takes ownership).
  static absl::StatusOr<std::unique_ptr<Transformer>> FromFile(std::unique_ptr<GgufFile> file,
                                                               const TransformerOptions& options);

  // Rank group->rank() of a tensor-parallel group of group->size() ranks; a
  // null `group` is a one-rank group. `group` must outlive the model, and its
  // buffers live where the backend's do (host memory for the CPU backend:
  // FailedPrecondition otherwise). Errors, in addition to Load's:
  // InvalidArgument from PlanTensorParallelShard (a split the model does not
  // allow, naming the numbers).
  static absl::StatusOr<std::unique_ptr<Transformer>> Load(const std::string& path,
                                                           net::Communicator* group,
                                                           const TransformerOptions& options);
  static absl::StatusOr<std::unique_ptr<Transformer>> FromFile(std::unique_ptr<GgufFile> file,
                                                               net::Communicator* group,
                                                               const TransformerOptions& options);

  ~Transformer() override;

  // The whole model's config (n_heads etc. are the model's, not the shard's).
  const ModelConfig& config() const override { return config_; }
  // The whole model's weights, as located in the file.
  const ModelWeights& weights() const { return *weights_; }
  // This rank's part of the model (the whole model in a one-rank group).
  const TensorParallelShard& shard() const { return shard_; }
  const GgufFile& file() const { return *file_; }
  int num_threads() const { return threads_; }
  const DeviceSpec& device() const { return device_; }

  // A cache for one sequence of up to `max_tokens` (0: the model's context
  // length), holding this rank's KV heads (tp_shard.h: some may be replicated
  // on a neighbour rank): n_layers x (its KV heads x head_dim) per position.
  std::unique_ptr<KvCache> NewCache(int max_tokens = 0) const override;

  // Appends every sequence's tokens to its cache and fills `out` with the logits
  // asked for. REQUIRES (checked, InvalidArgument naming the sequence): at least one
  // sequence; each has a non-null cache shaped for this model (and rank), distinct
  // from the others, and at least one token; every token id in [0, vocab); tree_parents
  // empty or a valid tree (language_model.h; Unimplemented, by name, on the CUDA
  // backend and in a group of several ranks). A cache
  // that would grow past its max_tokens gives OutOfRange. These checks come before
  // any collective (PrepareForward). A rank can refuse alone (its cache in the wrong
  // memory, its device out of memory), so a group's ranks agree on
  // PrepareForward's results before the forward (target_worker/group_step_vote.h).
  // A failed collective returns its error (DeadlineExceeded / Unavailable /
  // FailedPrecondition, see dist/communicator.h); the group is then broken.
  // State after a failure: every cache has its previous length (nothing appended)
  // and `out` is unspecified. After success each cache grew by its tokens.size(),
  // and every rank's `out` holds the same full-vocabulary logits.
  absl::Status Forward(absl::Span<const SequenceInput> batch, ForwardOutput* out) override;

  // Forward's checks and cache reservations alone, no collective: every error Forward
  // finds before its first collective (InvalidArgument and OutOfRange as above,
  // ResourceExhausted when a cache cannot grow). Caches keep their lengths (a
  // reservation only grows capacity); Forward repeats these checks.
  absl::Status PrepareForward(absl::Span<const SequenceInput> batch);

  // Keeping the logits on the device needs a CUDA device and, in a group of
  // several ranks, a communicator on device buffers (NCCL, or Gloo staged through
  // the host); FailedPrecondition naming the device or the communicator otherwise.
  // With it set, Forward skips the copy to the host: device_logits points into the
  // backend's workspace, one block per rank as gathered (ForwardOutput's layout).
  absl::Status KeepLogitsOnDevice(bool keep) override;
  int logits_device() const override { return keep_logits_on_device_ ? device_.ordinal : -1; }

  // The CPU backend of a one-rank group (ValidateTree refuses the others).
  bool RunsTrees() const override { return !device_.is_cuda() && shard_.size == 1; }

  // How the backend ran the forward calls so far (eager, graph captures, replays).
  BackendCounters backend_counters() const override { return backend_->counters(); }
  // The next CUDA graph capture fails as a real one does; the call must still succeed
  // (run eagerly, counted in graph_capture_fallbacks). For tests.
  void FailNextGraphCaptureForTesting() { backend_->FailNextGraphCaptureForTesting(); }

 private:
  Transformer(std::unique_ptr<GgufFile> file, ModelConfig config,
              std::unique_ptr<ModelWeights> weights, TensorParallelShard shard,
              net::Communicator* group, int threads);

  // Creates backend_ for options.device (the memory check first for CUDA).
  absl::Status AttachBackend(const TransformerOptions& options);

  absl::Status Validate(absl::Span<const SequenceInput> batch) const;
  // The tree_parents of sequence s (language_model.h): refusals by backend, then the list.
  absl::Status ValidateTree(size_t s, const SequenceInput& in) const;
  absl::Status CheckCacheShape(size_t s, const KvCache& cache) const;
  void PlanTokens(absl::Span<const SequenceInput> batch);
  // One pass of the backend over plan_: Begin, the layers, the logits, Finish.
  absl::Status RunPlan(ForwardOutput* out);
  absl::Status RunLayer(int layer);
  absl::Status ComputeLogits(ForwardOutput* out);
  // Sums `data` [count] over the group in place; nothing with one rank.
  absl::Status SumOverGroup(float* data, int64_t count);

  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  std::unique_ptr<ModelWeights> weights_;  // located in file_
  TensorParallelShard shard_;
  std::unique_ptr<ShardedWeights> shard_weights_;  // slices of weights_
  net::Communicator* group_;                       // null or size 1: a one-rank group
  int threads_;
  DeviceSpec device_;
  std::unique_ptr<TransformerBackend> backend_;  // borrows shard_weights_, config_
  ForwardPlan plan_;                             // the current call's
  bool keep_logits_on_device_ = false;
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_TRANSFORMER_H_

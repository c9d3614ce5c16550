// The Llama-family transformer on the CPU: one forward call runs a batch of
// sequences, each with any number of new tokens (a prompt prefill, a 1-token
// decode step, a k+1-token verification block), and returns the logits of the
// positions asked for.
//
//   ASSIGN_OR_RETURN(auto model, Transformer::Load(path, {.threads = 2}));
//   std::unique_ptr<KvCache> cache = model->NewCache();
//   std::vector<int32_t> prompt = {1, 2, 3};
//   ForwardOutput out;
//   RETURN_IF_ERROR(model->Forward({{cache.get(), prompt, LogitsMode::kLast}}, &out));
//   const float* next = out.Row(0, 0);      // [vocab] logits after token 3
//
// Numerics are batch-invariant: the logits of a position are bitwise identical
// whether it is computed alone, inside a multi-token block, or batched with other
// sequences (the matmul kernels and the row ops fix one reduction order per output
// element; attention for (sequence, position, head) always reduces over positions
// 0..pos in increasing order). The thread count does not change results either.
//
// Thread safety: Forward uses internal scratch buffers and the thread pool: call
// it from one thread at a time. config(), weights() are immutable.
#ifndef SPLITSPEC_RUNTIME_MODEL_TRANSFORMER_H_
#define SPLITSPEC_RUNTIME_MODEL_TRANSFORMER_H_

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
#include "runtime/model/matmul_jobs.h"
#include "runtime/model/weights.h"

namespace splitspec::model {

struct TransformerOptions {
  int threads = 0;  // worker threads including the caller; 0 = ThreadPool::DefaultThreads()
  // 0: every layer. L > 0: only the first L layers, then the final norm and output
  // head (a layer-skip self-draft of the same file); config().n_layers becomes L and
  // caches are shaped for L layers. L above the file's layer count is refused.
  int layers = 0;
};

class Transformer : public LanguageModel {
 public:
  // Opens, maps and validates a GGUF model. Errors: those of GgufFile::Open,
  // ReadModelConfig and LoadModelWeights (each names the file, key or tensor).
  static absl::StatusOr<std::unique_ptr<Transformer>> Load(const std::string& path,
                                                           const TransformerOptions& options);
  // Same, from an already opened file (takes ownership).
  static absl::StatusOr<std::unique_ptr<Transformer>> FromFile(std::unique_ptr<GgufFile> file,
                                                               const TransformerOptions& options);

  const ModelConfig& config() const override { return config_; }
  const ModelWeights& weights() const { return weights_; }
  const GgufFile& file() const { return *file_; }
  int num_threads() const { return pool_.num_threads(); }

  // A cache for one sequence of up to `max_tokens` (0: the model's context length).
  std::unique_ptr<KvCache> NewCache(int max_tokens = 0) const override;

  // Appends every sequence's tokens to its cache and fills `out` with the logits
  // asked for. REQUIRES (checked, InvalidArgument naming the sequence): at least one
  // sequence; each has a non-null cache shaped for this model, distinct from the
  // others, and at least one token; every token id in [0, vocab). A cache that would
  // grow past its max_tokens gives OutOfRange.
  // State after a failure: every cache has its previous length (nothing appended)
  // and `out` is unspecified. After success each cache grew by its tokens.size().
  absl::Status Forward(absl::Span<const SequenceInput> batch, ForwardOutput* out) override;

 private:
  Transformer(std::unique_ptr<GgufFile> file, ModelConfig config, ModelWeights weights,
              int threads);

  absl::Status Validate(absl::Span<const SequenceInput> batch) const;
  void PlanTokens(absl::Span<const SequenceInput> batch);
  void Embed(absl::Span<const SequenceInput> batch);
  void RunLayer(int layer, absl::Span<const SequenceInput> batch);
  void Attention(int layer, absl::Span<const SequenceInput> batch);
  void ComputeLogits(absl::Span<const SequenceInput> batch, ForwardOutput* out);
  // y = x W^T for each job, all jobs over the same `tokens`, rows split across threads.
  void MatMul(std::initializer_list<MatMulJob> jobs, int64_t tokens);

  std::unique_ptr<GgufFile> file_;
  ModelConfig config_;
  ModelWeights weights_;
  ThreadPool pool_;

  // Scratch, sized per call; T = total new tokens of the call.
  std::vector<int> token_seq_;    // [T] index of the token's sequence in the batch
  std::vector<int> token_pos_;    // [T] position of the token in its sequence
  std::vector<float> rope_cos_, rope_sin_;  // [T, rope_dim / 2]
  std::vector<float> x_;          // [T, n_embd] residual stream
  std::vector<float> xn_;         // [T, n_embd] normalized
  std::vector<float> q_, k_, v_;  // [T, q_dim], [T, kv_dim], [T, kv_dim]
  std::vector<float> attn_;       // [T, q_dim]
  std::vector<float> proj_;       // [T, n_embd]
  std::vector<float> gate_, up_;  // [T, n_ff]
  std::vector<std::vector<float>> thread_scores_;  // [threads][max positions]
  std::vector<kernels::PackedActivations> packed_;  // one per weight type in a MatMul
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_TRANSFORMER_H_

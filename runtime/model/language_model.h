// LanguageModel: the forward contract a target or draft engine relies on,
// whatever computes it: model::Transformer (one process, or one rank of a
// tensor-parallel group) or a wrapper (target_worker's GroupLeaderModel).
//
//   std::unique_ptr<LanguageModel> model = ...;     // either implementation
//   std::unique_ptr<KvCache> cache = model->NewCache();
//   ForwardOutput out;
//   RETURN_IF_ERROR(model->Forward({{cache.get(), prompt, LogitsMode::kLast}}, &out));
//   const float* next = out.Row(0, 0);              // [vocab] logits after the prompt
//
// The batch types below were first defined in transformer.h, which includes
// this header, so existing code keeps compiling unchanged.
#ifndef SPLITSPEC_RUNTIME_MODEL_LANGUAGE_MODEL_H_
#define SPLITSPEC_RUNTIME_MODEL_LANGUAGE_MODEL_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/model_config.h"

namespace splitspec::model {

enum class LogitsMode {
  kNone,  // no logits (e.g. a prefill whose last token is decoded later)
  kLast,  // the last new position only
  kAll,   // every new position, in order
};

struct SequenceInput {
  KvCache* cache = nullptr;          // appended with tokens.size() positions
  absl::Span<const int32_t> tokens;  // new tokens, at positions cache->length() ...
  LogitsMode logits = LogitsMode::kLast;
  // Empty: the tokens are a chain (each follows the one before). Otherwise a token
  // tree (a tree draft verified in one forward), one parent per token:
  // tree_parents[0] == -1 (token 0 is the root: the last committed token or the
  // correction, at position L = cache->length()) and 0 <= tree_parents[i] < i for
  // i > 0 (parents before children; drafters send depth-first order, the forward
  // needs only this). Token i sits at position L + depth(i) (depth(0) = 0; RoPE
  // uses it) and attends to the committed context [0, L), its ancestors and
  // itself; with LogitsMode::kAll row i is token i's, bitwise the logits of the
  // chain root..i fed as ordinary tokens on a cache holding the same context.
  // Token i's K and V go to cache slot L + i (the cache grows by tokens.size());
  // KvCache::KeepPath then keeps the accepted path. Refused (Unimplemented, by
  // name) by the CUDA backend and by a tensor-parallel group of several ranks;
  // a bad parent list is InvalidArgument naming the sequence and the index.
  absl::Span<const int32_t> tree_parents = {};
};

struct ForwardOutput {
  int vocab_size = 0;
  std::vector<float> logits;   // [total rows, vocab_size], sequences in batch order
  std::vector<int> first_row;  // per sequence: its first row in `logits`
  std::vector<int> num_rows;   // per sequence: 0, 1 or tokens.size()
  // Set instead of `logits` (which is then empty) by a model told to
  // KeepLogitsOnDevice: the same rows, in the device memory of logits_device(),
  // valid until the model's next Forward, as device_logit_parts blocks of
  // [total rows, device_part_vocab] floats one after another; block p holds the
  // vocabulary columns [p * device_part_vocab, min(vocab_size, (p + 1) *
  // device_part_vocab)), the rest of its columns padding. One rank: one block
  // of vocab_size columns (plain row-major rows); a tensor-parallel group's
  // leader: one block per rank, as the all-gather of the ranks' shards left them.
  const float* device_logits = nullptr;
  int device_logit_parts = 1;
  int64_t device_part_vocab = 0;

  // Row j of sequence s: vocab_size floats. REQUIRES: j < num_rows[s].
  const float* Row(int s, int j) const {
    return logits.data() + static_cast<size_t>(first_row[s] + j) * vocab_size;
  }
};

// How a backend ran its forward calls (CUDA graphs: cuda_graph_plan.h).
struct BackendCounters {
  int64_t eager_calls = 0;     // kernels launched one by one
  int64_t graph_captures = 0;  // calls captured into a CUDA graph (then replayed once)
  int64_t graph_replays = 0;   // calls that replayed a captured graph
  // Captures that failed (nothing of the call ran): the call ran again eagerly.
  int64_t graph_capture_fallbacks = 0;
};

class LanguageModel {
 public:
  virtual ~LanguageModel() = default;

  // The model's hyper-parameters (of the whole model, also on a tensor-parallel rank).
  virtual const ModelConfig& config() const = 0;

  // A cache for one sequence of up to `max_tokens` (0: the model's context
  // length), shaped for this implementation (a rank's cache holds its KV heads).
  virtual std::unique_ptr<KvCache> NewCache(int max_tokens = 0) const = 0;

  // Appends every sequence's tokens to its cache and fills `out` with the logits
  // asked for. Contract (REQUIRES, errors, state after failure): Transformer::Forward.
  virtual absl::Status Forward(absl::Span<const SequenceInput> batch, ForwardOutput* out) = 0;

  // Where later Forward calls leave the logits: false (the default) in
  // ForwardOutput::logits on the host; true in ForwardOutput::device_logits, on
  // the CUDA device logits_device(), for a caller that samples and verifies there
  // (the target's probabilities then never cross to the host). Errors:
  // FailedPrecondition naming why the model cannot (it runs on the host, or its
  // group's collectives are not on device buffers); the setting is then unchanged.
  virtual absl::Status KeepLogitsOnDevice(bool keep) {
    if (!keep) return absl::OkStatus();
    return absl::FailedPreconditionError("this model computes its logits on the host");
  }
  // The CUDA ordinal that device_logits live on; -1 while they are on the host.
  virtual int logits_device() const { return -1; }

  // Whether Forward takes token trees (SequenceInput::tree_parents): false where
  // they are refused (the CUDA backend, a tensor-parallel group of several ranks,
  // a wrapper that does not pass them on), so a caller verifies chains there.
  virtual bool RunsTrees() const { return false; }

  // How the forward calls ran so far (this rank's backend); zeros where nothing is
  // counted (the CPU backend).
  virtual BackendCounters backend_counters() const { return {}; }
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_LANGUAGE_MODEL_H_

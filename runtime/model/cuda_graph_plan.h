// Which forward calls of the CUDA backend run as a replayed CUDA graph, padded
// to which shape: the host-side policy of issue 19 item 5, plain C++ so that it
// is tested without a GPU.
//
//   ASSIGN_OR_RETURN(GraphBucketer bucketer, GraphBucketer::Create(GraphBucketOptions{}));
//   const GraphDecision d = bucketer.Decide({tokens, logit_rows, max_tokens_per_sequence});
//   for (int64_t id : d.evicted) DestroyGraph(id);
//   switch (d.action) { case kEager: ...; case kCapture: ...; case kReplay: ...; }
//
// Rules.
//  - Only decode and verify steps get graphs: every sequence feeds at most
//    max_block_tokens tokens (1 for decode, k + 1 for a verify block). A call
//    with a longer chunk (prefill) or more tokens than the largest bucket runs
//    eagerly: its launches are few compared with its math.
//  - Shapes are bucketed by the call's token count T: the smallest bucket B >= T.
//    The call is padded to B tokens and B logit rows (a decode or verify step
//    asks logits of most of its tokens, and a graph has fixed shapes).
//  - And by the longest context: the attention kernel sizes its shared memory by
//    the launch's max_positions (kernels/cuda/transformer_kernels.h), which a
//    graph freezes, so a graph serves calls whose max_positions is at most its
//    position bucket P (the smallest bucket >= max_positions) and is captured
//    with max_positions = P; that value is only a bound (each token reads
//    positions 0..pos[t] from device memory), so the results do not change. A
//    call past the largest position bucket runs eagerly. One graph per (B, P).
//  - Padding: the B - T padded tokens are token 0 at position 0 of a one-row
//    padding KV cache the backend owns; their logit rows are computed and never
//    copied. Because every kernel computes a token's row from that row's inputs
//    alone (batch invariance, cuda_backend.h), padding leaves the real rows' bits
//    unchanged: a padded replay equals the eager call bit for bit.
//  - A bucket runs eagerly warmup_calls times first (the workspace grows to fit
//    it then, outside any capture), is captured on the next call, and replayed
//    after that. At most max_graphs graphs live; capturing one more evicts the
//    least recently used (its id is returned for the caller to destroy).
//  - Invalidate() (the workspace moved, so the captured pointers are stale)
//    evicts every graph; warm buckets are captured again on their next call.
// Thread-compatible.
//
// Used by the CUDA backend (cuda_backend.h: a stream capture from Begin to
// OutputHead of a one-rank group, the per-call uploads kept outside the graph at
// fixed workspace offsets, and the padding cache). Not yet run on a GPU.
#ifndef SPLITSPEC_RUNTIME_MODEL_CUDA_GRAPH_PLAN_H_
#define SPLITSPEC_RUNTIME_MODEL_CUDA_GRAPH_PLAN_H_

#include <cstdint>
#include <map>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace splitspec::model {

struct GraphBucketOptions {
  std::vector<int> token_buckets = {1, 2, 4, 8, 16, 32, 64, 128, 256};  // increasing, >= 1
  // Increasing, >= 1; the last at most kCudaMaxAttentionPositions (49152).
  std::vector<int> position_buckets = {512, 1024, 2048, 4096, 8192, 16384, 32768, 49152};
  int max_block_tokens = 17;  // a sequence feeding more tokens runs eagerly (>= 1)
  int max_graphs = 16;        // live graphs at most (>= 1)
  int warmup_calls = 1;       // eager calls of a bucket before its capture (>= 0)

  // InvalidArgument naming the first field out of range and its value.
  absl::Status Validate() const;
};

// The shape of one forward call.
struct GraphStepShape {
  int tokens = 0;                   // T, over all sequences
  int logit_rows = 0;               // R <= T
  int max_tokens_per_sequence = 0;  // the longest sequence's new tokens
  int max_positions = 0;            // 1 + the largest position of any token
};

enum class GraphAction {
  kEager,    // launch the kernels as today
  kCapture,  // launch them under a stream capture, padded to bucket_tokens, then replay
  kReplay,   // replay graph_id, padded to bucket_tokens
};

struct GraphDecision {
  GraphAction action = GraphAction::kEager;
  int bucket_tokens = 0;         // B (0 when eager)
  int bucket_positions = 0;      // P: the attention's max_positions in the graph (0 when eager)
  int padding_tokens = 0;        // B - T
  int64_t graph_id = -1;         // the graph to capture into or replay
  std::vector<int64_t> evicted;  // graphs the caller must destroy now
};

class GraphBucketer {
 public:
  static absl::StatusOr<GraphBucketer> Create(GraphBucketOptions options);

  // The decision for one call; records the call (warm-up counts, recency).
  // REQUIRES 0 <= logit_rows <= tokens.
  GraphDecision Decide(const GraphStepShape& shape);

  // Every live graph is stale (the workspace moved): the next Decide reports
  // them evicted, and warm buckets are captured again.
  void Invalidate();

  int live_graphs() const { return static_cast<int>(live_.size()); }

 private:
  explicit GraphBucketer(GraphBucketOptions options) : options_(std::move(options)) {}
  struct Bucket {
    int eager_calls = 0;
    int64_t graph_id = -1;  // -1: none live
    int64_t last_used = 0;
  };
  using Key = std::pair<int, int>;  // (B, P)
  // The smallest bucket >= value, or 0 if none fits.
  static int BucketFor(const std::vector<int>& buckets, int value);
  void EvictLeastRecent(std::vector<int64_t>* evicted);

  GraphBucketOptions options_;
  std::map<Key, Bucket> buckets_;
  std::map<int64_t, Key> live_;  // graph id -> its bucket
  std::vector<int64_t> pending_evicted_;
  int64_t next_graph_id_ = 0;
  int64_t clock_ = 0;
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_MODEL_CUDA_GRAPH_PLAN_H_

// The drafter interface: what a draft worker calls to propose draft blocks for
// all its requests in one batched step.
//
//   std::unique_ptr<Drafter> drafter = ...;           // NgramDrafter, or a model drafter
//   RETURN_IF_ERROR(drafter->Start("req-1", prompt_tokens));
//   std::vector<DraftRequest> batch(1);
//   batch[0].request_id = "req-1";
//   batch[0].context = sequence;                      // committed + already drafted
//   batch[0].k = 4;
//   RETURN_IF_ERROR(drafter->Propose(absl::MakeSpan(batch)));
//   if (batch[0].status.ok()) ship(batch[0].tokens, batch[0].q);
//   ... on a VerifyResult with a new epoch:
//   RETURN_IF_ERROR(drafter->Truncate("req-1", frontier));   // then re-Propose with the correction
//   ... when the request ends, on every path:
//   drafter->Release("req-1");
//
// Per-request state: a drafter holds, per started request, the sequence it has
// consumed (a model drafter: its KV cache), of length `held`. Start sets it to the
// given tokens; Propose requires context to extend it (context.size() >= held; the
// first `held` tokens are the caller's promise, not re-checked) and afterwards holds
// context + the proposed tokens (of a tree: the tokens of its first path, nodes
// 0, 1, ... while each is the child of the one before, the chain it would have
// proposed); Truncate(length) rolls it back to its first
// `length` tokens; Release forgets it. k = 0 proposes nothing but takes in the
// context: a model drafter feeds it to its cache now (a draft worker catching
// up while speculation is off), so the Propose that drafts next costs no prefill.
//
// Thread model: a drafter is used by one thread (the draft worker's loop); it is
// thread-compatible, not thread-safe.
#ifndef SPLITSPEC_RUNTIME_SPEC_DRAFTER_H_
#define SPLITSPEC_RUNTIME_SPEC_DRAFTER_H_

#include <cstdint>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/model/kv_budget.h"
#include "runtime/spec/sampling.h"
#include "runtime/spec/sampling_params.h"
#include "runtime/spec/sparse_distribution.h"
#include "runtime/spec/verify_mode.h"

namespace splitspec::spec {

// One request's part of a batched Propose call.
struct DraftRequest {
  // Inputs.
  std::string request_id;
  absl::Span<const int32_t> context;  // [n] committed + already drafted tokens; borrowed
  int k = 0;                          // draft tokens wanted; >= 0
  VerifyMode mode = VerifyMode::kRejection;
  SamplingParams params;        // shapes q exactly as the target shapes p; seed keys the noise
  int prompt_length = 0;        // context[0, prompt_length) is the prompt (logits_pipeline.h)
  int q_top_k = kDefaultQTopK;  // support of each shipped q row; >= 1
  // > 0: also report, per drafted position, the draft's `alternatives` most likely
  // tokens (the speculation cache's guesses at a correction or bonus token). A
  // drafter without a distribution (ngram, lookup) leaves `top` empty.
  int alternatives = 0;
  // > 0: a draft tree of at most tree_nodes nodes and depth at most k may be
  // proposed (runtime/spec/draft_tree.h). The lookup and n-gram drafters merge
  // several earlier continuations into a trie; a model drafter on the CPU grows
  // one level per draft forward by path value (model_drafter.h). 0 (the default):
  // a chain.
  int tree_nodes = 0;

  // Outputs, written by Propose.
  absl::Status status;                // this request's error; others are unaffected
  // A chain: [<= k] drafts for positions n, n + 1, ...; a tree: its nodes'
  // tokens [<= tree_nodes] in depth-first order, node i drafting position
  // n + depth(i) - 1.
  std::vector<int32_t> tokens;
  // The tree's parent of each token (draft_tree.h; -1 for the root's children);
  // empty when the proposal is a chain (always when tree_nodes == 0).
  std::vector<int32_t> parents;
  std::vector<SparseDistribution> q;  // [tokens.size()] in rejection mode, else empty
  // [tokens.size()] when alternatives > 0 and the drafter has a distribution, else
  // empty: the most likely tokens at each drafted position, by decreasing
  // probability, renormalized over themselves. Under greedy parameters (a one-hot
  // q) they come from the unshaped softmax of the draft's logits. Only a guess:
  // never shipped, never used to verify.
  std::vector<SparseDistribution> top;
  // [tokens.size()], or empty (a drafter that reports none; a tree's only from the
  // lookup drafter, per node as if its path were a chain):
  // the drafter's confidence class of each drafted position, in
  // [0, kConfidenceClasses) (spec_policy.h), a position's class being what the
  // drafter knows of it once every draft before it is accepted. The speculation
  // policy keeps acceptance evidence per class and cuts the block where the next
  // positions no longer pay; verification never reads it.
  std::vector<int8_t> confidence;
};

class Drafter {
 public:
  virtual ~Drafter() = default;

  // Short name for logs and capabilities: "ngram", "model", "layerskip:L".
  virtual absl::string_view name() const = 0;

  // Begins `request_id` holding `tokens` (the prompt, or the committed sequence
  // on reassignment). AlreadyExists if started and not released; on error
  // nothing changes.
  virtual absl::Status Start(const std::string& request_id, absl::Span<const int32_t> tokens) = 0;

  // Rolls the request back to its first `length` tokens. NotFound for an
  // unknown request; OutOfRange if length > held (naming both); on error the
  // state is unchanged.
  virtual absl::Status Truncate(const std::string& request_id, int64_t length) = 0;

  // Forgets the request and frees its state. Unknown ids are ignored.
  virtual void Release(const std::string& request_id) = 0;

  // Proposes up to k tokens for each request of the batch (one batched forward
  // per draft step for model drafters). A request's own problems (not started,
  // context shorter than held, bad k / q_top_k / params) go to its `status`, and
  // leave its state unchanged. A non-OK return means the whole step failed (e.g.
  // the forward); then no request's state changed.
  virtual absl::Status Propose(absl::Span<DraftRequest> batch) = 0;

  // The KV accounting of a drafter that keeps KV caches (a model drafter:
  // runtime/model/kv_budget.h); null for one that keeps none.
  virtual const model::KvBudget* kv_budget() const { return nullptr; }

  // True if Propose may return a tree for a request with tree_nodes > 0 (lookup,
  // ngram, a model drafter whose draft runs token trees); false: it always
  // proposes chains, so asking it for trees gains nothing.
  virtual bool ProposesTrees() const { return false; }

  // The bytes of weights one draft decode step reads over those one step of the
  // target reads: what a draft token costs in target steps where both are
  // memory-bound (the speculation policy's prior for the draft's cost, until a
  // block times it). 0: negligible (a model-free drafter) or unknown. Set by
  // whoever knows both models (drafter_factory.h: MakeDrafter).
  double decode_bytes_ratio() const { return decode_bytes_ratio_; }
  void set_decode_bytes_ratio(double ratio) { decode_bytes_ratio_ = ratio; }

 private:
  double decode_bytes_ratio_ = 0.0;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_DRAFTER_H_

// Drafting with a second, smaller GGUF model that shares the target's
// vocabulary (drafter "model"; a draft of another vocabulary runs inside a
// CrossVocabDrafter, runtime/spec/cross_vocab_drafter.h). Implements the Drafter protocol of
// runtime/spec/drafter.h with one KV cache per request and one batched forward
// of the draft model per draft step, for every request of the batch.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<ModelDrafter> drafter,
//                    ModelDrafter::Load(draft_path, target_tokenizer, target_vocab_size, {}));
//   RETURN_IF_ERROR(drafter->Start("req-1", prompt));
//   ... drafter->Propose(batch) ... drafter->Truncate("req-1", frontier) ...
//   drafter->Release("req-1");
//
// Each drafted token at position n is chosen from q = ProcessRow(params, the
// tokens before n, draft logits at n) (runtime/spec/logits_pipeline.h) by ChooseDraftToken(mode, q, q_top_k, params.seed, n): the
// request's sampling parameters shape q exactly as they shape the target's p;
// rejection mode ships the top-q_top_k renormalized q the token was sampled from.
// With alternatives > 0 a request also gets, per drafted position, the draft's
// most likely tokens (`top`; from the unshaped softmax when the parameters are
// greedy, whose q is one-hot). Requests draft min(k, max_tokens - held) tokens,
// where max_tokens is the per-request cache size (the draft's context length by
// default).
// KV budget (options.kv_cache_bytes or SetKvBudget): before each forward, the
// caches of the newest requests not in it are evicted until its growth fits
// (an evicted request keeps its held tokens and re-feeds them when next
// proposed: its cache is recomputed, bitwise the same, so are its drafts); a
// request whose growth still does not fit fails that Propose with
// ResourceExhausted naming the budget (its cache evicted too): the draft worker
// then sends an empty block (the target decides that token alone) and restarts
// the request from the committed tokens, its resync path.
// Trees (DraftRequest.tree_nodes >= 2, issue 30): on a draft model that runs
// token trees (model::LanguageModel::RunsTrees: the CPU backend; a CUDA draft
// keeps proposing chains, and ProposesTrees() says so) a request gets a tree of
// at most tree_nodes nodes and depth at most k, grown level by level as
// runtime/spec/tree_expansion.h describes: one batched draft forward per depth
// level (every request's level in the same forward), over the nodes being
// expanded and their ancestors (the draft's tree forward takes a whole tree
// rooted at the cache's end, so a level re-feeds the ancestors of its frontier:
// its cost is the draft's T(fed nodes), not T(1)). A node's candidates come
// from its processed row along its path (bitwise the chain's row there):
//   greedy mode: the chain's argmax first, then the next most likely tokens of
//     the unshaped softmax (of q itself when the temperature is > 0);
//   rejection mode: SampleSiblings of the node's top-q_top_k q (without
//     replacement; the first draw is the chain's), each child shipping that q;
//   coupled mode: the chain's Gumbel-argmax first, then the next highest
//     log q + Gumbel noise of the position (tree_verify.h: coupled trees are
//     exact whatever their tokens; a target equal to the draft takes the first).
// The tree's first path is the chain this drafter proposes for the same request
// (down to depth k), and afterwards the request holds context + that path
// (KvCache::KeepPath keeps its rows). Requests keep chains when they ask for
// `alternatives` (the speculation cache's guesses are per chain position), or
// have context processors (penalties), guidance or a grammar (the target
// verifies only a tree's first path for those).
// Thread model: one thread (see Drafter); Propose runs the draft model's forward.
#ifndef SPLITSPEC_RUNTIME_SPEC_MODEL_DRAFTER_H_
#define SPLITSPEC_RUNTIME_SPEC_MODEL_DRAFTER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/model/kv_cache.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/drafter.h"
#include "runtime/spec/logits_pipeline.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::spec {

struct ModelDrafterOptions {
  int threads = 0;           // draft forward threads; 0 = the thread pool's default
  int max_tokens = 0;        // per-request cache size; 0 = the draft's context length
  model::DeviceSpec device = {};  // where Load puts the draft model
  // The KV-cache budget of all requests' caches together, in bytes; 0:
  // unlimited. See "KV budget" above.
  uint64_t kv_cache_bytes = 0;
};

class ModelDrafter : public Drafter {
 public:
  // Wraps a loaded draft model. Errors: FailedPrecondition from
  // CheckSameVocabulary(target_tokenizer, draft_tokenizer), or if the draft's
  // logits width (config().vocab_size) differs from target_vocab_size (named);
  // InvalidArgument for a negative max_tokens.
  static absl::StatusOr<std::unique_ptr<ModelDrafter>> Create(
      std::unique_ptr<model::Transformer> draft, const model::Tokenizer& draft_tokenizer,
      const model::Tokenizer& target_tokenizer, int target_vocab_size,
      const ModelDrafterOptions& options);

  // Loads the draft GGUF at `path` and its tokenizer, then Create. Errors: those
  // of Transformer::Load and LoadTokenizerFromGguf (naming the file), and Create's.
  static absl::StatusOr<std::unique_ptr<ModelDrafter>> Load(
      const std::string& path, const model::Tokenizer& target_tokenizer, int target_vocab_size,
      const ModelDrafterOptions& options);

  absl::string_view name() const override { return "model"; }
  // Also InvalidArgument for an empty `tokens` (a draft needs a token to condition on)
  // or a token outside the vocabulary.
  absl::Status Start(const std::string& request_id, absl::Span<const int32_t> tokens) override;
  absl::Status Truncate(const std::string& request_id, int64_t length) override;
  void Release(const std::string& request_id) override;
  // Per-request errors (besides Drafter's): a context token outside the vocabulary,
  // the same request twice in the batch, invalid params, non-finite draft logits.
  // A failed forward returns its error with every request rolled back.
  absl::Status Propose(absl::Span<DraftRequest> batch) override;
  // True where the draft model runs token trees (the CPU backend, one rank).
  bool ProposesTrees() const override { return model_->RunsTrees(); }
  // Restricts the tokens `request_id` may draft to those whose bit is set in
  // `allowed` (logits_pipeline.h's mask layout over this model's logits; borrowed,
  // it must outlive the request or the next call; empty: no restriction), applied
  // to q before it is sampled or shipped, so q is renormalized over them: how a
  // draft with another vocabulary drafts only the tokens both share
  // (cross_vocab_drafter.h). NotFound for an unknown request; InvalidArgument for
  // a mask of the wrong size (naming both).
  absl::Status RestrictTokens(const std::string& request_id, absl::Span<const uint32_t> allowed);
  // Positions of `request_id` in its draft cache (-1 if not started): how much
  // of the held sequence has been fed to the model (it feeds lazily).
  const model::KvBudget* kv_budget() const override { return &kv_budget_; }
  // Sets the budget (bytes; 0 unlimited). REQUIRES: no request started.
  void SetKvBudget(uint64_t bytes) { kv_budget_ = model::KvBudget(bytes); }
  // The draft model (for the start-up budget: model::StartKvBudget).
  const model::Transformer& draft_model() const { return *model_; }
  int CachedTokens(const std::string& request_id) const {
    auto it = requests_.find(request_id);
    return it == requests_.end() ? -1 : it->second.cache->length();
  }

 private:
  struct RequestState {
    std::unique_ptr<model::KvCache> cache;  // positions [0, cache->length()) of `tokens`
    std::vector<int32_t> tokens;            // the held sequence
    uint64_t started = 0;                   // Start order: the newest is evicted first
    absl::Span<const uint32_t> allowed;     // RestrictTokens' mask; empty: none
  };
  struct TreeGrowth;  // a tree being grown (model_drafter.cc)
  // One request of a Propose call.
  struct Work {
    DraftRequest* request;
    RequestState* state;
    size_t held_before;  // tokens.size() before the call, for rollback
    int k;               // tokens to draft (a tree: its depth limit)
    std::shared_ptr<TreeGrowth> tree = nullptr;  // set when the request drafts a tree
  };

  ModelDrafter(std::unique_ptr<model::Transformer> draft, int max_tokens);

  // Checks one request and appends its new context tokens; errors go to request.status.
  void Admit(DraftRequest& request, absl::flat_hash_map<std::string, bool>& seen,
             std::vector<Work>& work);
  // Chooses the next token of `w` from its logits row; false (and status set) on error.
  bool Choose(Work& w, const float* logits);
  // The request's `alternatives` most likely tokens from this logits row (after Choose's probs_).
  absl::StatusOr<SparseDistribution> TopAlternatives(const DraftRequest& r, const float* logits);
  // k = 0 requests (a draft worker catching up while speculation is off): feeds
  // their pending context, all but its last token, in one forward without logits,
  // so the Propose that drafts next starts from a warm cache.
  absl::Status CatchUp(std::vector<Work>& work, model::ForwardOutput* out);
  static void Rollback(Work& w);
  // Trees. The forward input of the tree's next level.
  model::SequenceInput TreeInput(Work& w);
  // A node's candidates for its children: their probabilities (the plan's
  // ranking, decreasing up to ties) and either the tokens (greedy, coupled) or
  // the row of tree.q_rows they will be drawn from (rejection).
  struct NodeCandidates {
    std::vector<int32_t> tokens;
    std::vector<double> probs;
    int32_t q_row = -1;
  };
  // Up to `count` candidates of the node whose draft logits are `logits`, its
  // children at `position`, `row` its context (held tokens + its path).
  absl::Status RankCandidates(const DraftRequest& r, const RowContext& row, const float* logits,
                              int64_t position, int count, TreeGrowth& tree, NodeCandidates& out);
  // The level's children from that forward's rows (sequence `s` of `out`), then
  // the next level's frontier (none: the tree is grown). False (the request
  // rolled back, its status set) on a row error.
  bool GrowTree(Work& w, const model::ForwardOutput& out, int s);
  // The request's outputs in depth-first order; it then holds context + the first path.
  absl::Status FinishTree(Work& w);
  // Keeps the forward of `inputs` (fed[i] feeds inputs[i]) within the KV budget,
  // as the header says; drops the inputs of requests that failed.
  void FitKvBudget(std::vector<Work*>& fed, std::vector<model::SequenceInput>& inputs);
  // Frees the cache of `state` (it re-feeds its held tokens later).
  void EvictCache(RequestState& state);

  std::unique_ptr<model::Transformer> model_;
  int vocab_;
  int max_tokens_;
  absl::flat_hash_map<std::string, RequestState> requests_;
  model::KvBudget kv_budget_;
  uint64_t next_start_ = 0;
  std::vector<float> probs_;  // [vocab] scratch
  std::vector<float> plain_;  // [vocab] scratch: unshaped softmax for greedy alternatives
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_MODEL_DRAFTER_H_

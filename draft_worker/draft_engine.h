// DraftEngine: the draft worker's loop without sockets (docs/architecture.md, docs/protocol.md).
//
//   DraftEngine engine(drafter, options);
//   RETURN_IF_ERROR(engine.AddRequest(assignment));
//   std::vector<OutgoingBlock> blocks;
//   RETURN_IF_ERROR(engine.Step(&blocks));        // one batched Propose over all requests
//   ... send each block to its target; on a VerifyResult:
//   if (engine.OnResult(result) == ResultAction::kNeedSync) send a SyncRequest;
//
// Per request it keeps the sequence it drafts from (committed tokens + its own
// drafts ahead of the frontier) and the number of blocks in flight. It drafts
// ahead until `lookahead_blocks` blocks are unresolved (overlap); with
// lookahead 1 it waits for each verification (the classic sequential loop).
// On a result with a new epoch it truncates to the frontier, appends the
// correction, forgets what it had in flight and drafts again. A request whose
// assignment has draft_k 0 follows the speculation policy
// (runtime/spec/spec_policy.h) per block: its acceptance is the request's, every
// cost (draft seconds per token, the target's T(fed) line, block overhead, the
// interference of drafting beside a verification, the cache's hit rate) is
// this worker's, measured on every block; before the draft's cost is measured
// the policy takes the drafter's decode_bytes_ratio() for it. The policy chooses the mode
// (sequential, overlapped, cached, each where the options allow it) and k; off,
// the engine sends an empty block with alone_tokens = the policy's off_tokens
// (an off window: the target decodes that many tokens alone, each at the cost
// of a plain decode step, and no block is sent until they are committed; the
// window opens when the target resolves that block). Off, a drafter cheap
// enough (the policy's shadow) proposes anyway and the target's own tokens
// score it (a shadow block, never sent); a model drafter instead catches up on
// the target's tokens near the window's end (options.catch_up_tokens), so the
// next block drafts at once. Fixed-k requests run the configured schedule, or,
// with options.adaptive_window (or the cache guard, between sequential and the
// cache), the policy's mode at their k, never off.
//
// Speculation cache (options.spec_cache; runtime/spec/speculation_cache.h): the
// window is one block, and while that block is verified the engine pre-drafts,
// one draft forward per Step so results are read between forwards, the next
// block for the block's likeliest outcomes (all accepted with the draft's bonus
// picks; the first rejection at each position with the draft's likeliest
// correction), up to the draft tokens that fit in one verification (measured
// cost ratio x verify-cost curve). A result whose outcome (accepted count and
// correction/bonus token) was pre-drafted sends that block on the next Step
// without drafting (a partial branch drafts only its rest); a miss drafts as
// without the cache. Exactness is untouched: a cached block is the block the
// drafter proposes from exactly the context it is sent at, with the q it was
// drafted from, and the target verifies it like any other.
// Trees (issue 30; options.trees): a block may be a draft tree
// (runtime/spec/draft_tree.h, DraftBlock.parents) when the drafter proposes trees
// (Drafter::ProposesTrees: lookup, ngram, a CPU model drafter), the request's target runs trees
// (Assignment.target_runs_trees) and its rows read nothing before them (no
// penalties, grammar or guidance: the target would verify the first path only),
// and the cache is off. The policy's tree rule
// (spec::ChooseTreeShape) picks the node budget and depth from the request's
// per-rank acceptance (spec::RankAcceptance of its verified trees; rank 1 is the
// chain's acceptance) against the same costs; the block is a tree only when that
// predicts more than the chain action (which stays the choice on a tie; a tree
// block leaves the chain rule's previous mode alone, so the chain it is compared
// with is the one the chain rule would run). Where chains may overlap
// (lookahead_blocks > 1 or adaptive_window) a tree may be pipelined: the next block
// is drafted past the tree along its first path (nodes 0, 1, ... each the child of
// the one before, which the context and the drafter hold after the tree is
// proposed). The rule prices both ways (spec::TreeShapeChoices::pipelined) and the
// tree runs overlapped (window 2) where pipelining predicts more, else sequential.
// The target keeps a block queued right after the first path only when it accepts
// that whole path (then without the bonus, like a chain accepted in full: the
// result keeps the epoch and the engine goes on as after a chain); any other path
// takes the bonus or a correction in a new epoch, and the block behind is stale. A
// drafter that finds no alternatives returns a chain, sent as one. A tree's result
// in a new epoch rolls the drafter back to the accepted path (the committed
// tokens). Its chain acceptance counts the first path only (the chain the drafter would have sent):
// accepted while its nodes are the accepted ones, then one rejection; the other
// nodes feed the per-rank evidence, where a reached node with fewer than two
// children counts the missing alternative as offered and not accepted (a drafter
// that rarely branches stops being asked for trees).
// A drafter that reports a confidence class per node (lookup): an adaptive request
// that would speculate asks it for a tree of the full budget (max_tree_nodes nodes,
// depth max_k), and the policy cuts the proposal by its classes
// (spec::CutTreeProposal): the sub-tree runs if it predicts more than the chain of its
// first path priced by the chain rule with the same classes, else that chain goes as
// a chain (cut, or withheld, by the chain rule). So depth follows confidence, and a
// tree never runs where the chain it could have been predicts as much.
// KV state: the drafter holds one sequence per request; the engine remembers
// which (`held`) and, before each Propose, truncates it to the common prefix with
// the context it drafts from; Propose re-feeds the rest. Switching branches costs
// one extra draft forward over the few diverging tokens (<= k + 1): no KV copies.
//
// Thread safety: thread-compatible; the draft worker's loop owns it.
#ifndef SPLITSPEC_DRAFT_WORKER_DRAFT_ENGINE_H_
#define SPLITSPEC_DRAFT_WORKER_DRAFT_ENGINE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/spec/drafter.h"
#include "runtime/spec/sampling_params.h"
#include "runtime/spec/spec_policy.h"
#include "runtime/spec/speculation_cache.h"
#include "runtime/spec/verify_cost_curve.h"
#include "runtime/spec/verify_mode.h"

namespace splitspec::draft {

struct DraftEngineOptions {
  int lookahead_blocks = 2;  // unresolved blocks per request; 1 = sequential
  // An assignment with draft_k 0 follows the speculation policy with k in [min_k, max_k].
  int min_k = 1;
  int max_k = 8;  // <= spec::kPlanMaxK
  // The verify-cost slope assumed before the target reports its T(fed) line (a
  // block of 5 cost ~2x one token on a CPU before multi-token kernels).
  double prior_verify_slope = 0.25;
  int default_k = 4;  // k of requests whose assignment names none, when `adaptive_default` is false
  bool adaptive_default = true;
  int q_top_k = 64;  // support of each q row shipped in rejection mode
  int max_requests = 256;
  // The speculation cache (see above).
  bool spec_cache = false;
  spec::SpeculationCacheConfig cache;
  int cache_alternatives = 3;        // guesses the drafter reports per drafted position
  double cache_budget_factor = 1.0;  // x the draft tokens that fit in one verification
  // Fixed-k requests with the cache: the policy may run them sequentially when
  // pre-drafting does not pay (its hits against its interference). False: always cached.
  bool cache_guard = true;
  // Fixed-k requests: the policy chooses their mode (sequential, overlapped with
  // window max(2, lookahead_blocks), cached if spec_cache). Adaptive requests
  // may always run overlapped when this is on (else only with lookahead_blocks > 1).
  bool adaptive_window = false;
  // Trees (see above): false sends chains only, the default (`--tree off`): measured
  // on the CPU, trees chosen by the rule ran 0.90-0.95x of the chains (README, "Tree
  // drafts"), so they are opt-in (`--tree auto`).
  bool trees = false;
  int max_tree_nodes = 16;  // the tree rule's node budget, >= 1
  // Shadow blocks while the policy is off (see above); false: never.
  bool shadow_drafts = true;
  // Catch-up chunk: while off and a probe is due within this many tokens, a model
  // drafter takes the target's tokens once this many are pending, so the block
  // that ends the window does not prefill the whole window while the target
  // waits (measured before: ~50 ms per probe after a 32-token window with the
  // target as its own draft). Only near the end: on a CPU each caught-up token is
  // a draft forward beside the target on the memory bus. 0 turns it off.
  int catch_up_tokens = 8;
  // In an off window with no shadow blocks to score (a model drafter), the target
  // need send its tokens only every this many steps (DraftBlock.window_result_tokens;
  // per step again in the window's last ones, where catch-up and the window's end
  // need them): each result wakes this worker's thread, which on a CPU shares the
  // cores the target decodes on, and on a network is a message per token for nothing.
  // The block asks for max(this, catch_up_tokens), so the window's last catch_up_tokens
  // steps still come one by one. 0 or 1: a result per step.
  int window_result_tokens = 8;
  // The time source of every measurement above (block round trips, draft time
  // per token); tests inject a fake one.
  std::function<absl::Time()> clock = absl::Now;
};

struct OutgoingBlock {
  std::string target_endpoint;  // where the block goes
  proto::DraftBlock block;
};

enum class ResultAction {
  kApplied,   // state updated
  kIgnored,   // unknown request, or an old/duplicate result
  kNeedSync,  // a result was lost: ask the target for the full sequence
  kFinished,  // the request finished; its state was released
};

struct DraftCounters {
  uint64_t blocks_sent = 0;
  uint64_t tokens_drafted = 0;
  uint64_t epochs_seen = 0;  // results that started a new epoch
  uint64_t syncs = 0;        // full-sequence resyncs applied
  uint64_t propose_calls = 0;
  uint64_t draft_failures = 0;     // per-request proposal errors (an empty block was sent instead)
  uint64_t cache_blocks_sent = 0;  // blocks sent from the speculation cache (full or partial hit)
  uint64_t catch_up_calls = 0;     // off-window catch-up Propose calls (options.catch_up_tokens)
  uint64_t catch_up_tokens = 0;    // tokens those calls fed the drafter
  // Requests forgotten (finished, released, or restarted by a new assignment):
  // once a request is counted here the drafter holds nothing of it.
  uint64_t requests_released = 0;
  uint64_t tree_blocks_sent = 0;   // blocks sent as trees (DraftBlock.parents)
  uint64_t tree_nodes_sent = 0;    // their nodes (also counted in tokens_drafted)
  uint64_t blocks_past_trees = 0;  // blocks drafted past a tree in flight (pipelined trees)
  // Proposals the policy priced by their confidence classes and did not send
  // (an empty block went instead), and draft tokens it cut off the ones it sent.
  uint64_t proposals_withheld = 0;
  uint64_t draft_tokens_cut = 0;
};

class DraftEngine {
 public:
  // `drafter` must outlive the engine.
  DraftEngine(spec::Drafter* drafter, DraftEngineOptions options);

  // Starts drafting for a request, or (a known id) restarts it from the
  // assignment's committed tokens, e.g. after its target changed.
  // Errors: InvalidArgument naming the field; ResourceExhausted when full.
  absl::Status AddRequest(const proto::Assignment& assignment);
  void Release(const std::string& request_id);

  ResultAction OnResult(const proto::VerifyResult& result);

  // True if some request has room in its lookahead window.
  bool HasWork() const;
  // Drafts one block for every request with room (one Propose call).
  // Errors: only a failed Propose (the whole step); request-level problems
  // finish nothing but are logged and retried on the next step.
  absl::Status Step(std::vector<OutgoingBlock>* out);

  int active_requests() const { return static_cast<int>(requests_.size()); }
  const DraftCounters& counters() const { return counters_; }
  // The speculation cache's counters over every request, released ones included.
  spec::SpeculationCacheCounters cache_counters() const;
  // The frontier this worker knows for a request (-1 if unknown).
  int KnownFrontier(const std::string& request_id) const;

 private:
  struct RequestState {
    std::string target_endpoint;
    spec::SamplingParams params;
    spec::VerifyMode mode = spec::VerifyMode::kGreedy;
    int k = 4;
    bool target_runs_trees = false;  // Assignment.target_runs_trees
    int max_length = 0;            // prompt + max new tokens: never draft past it
    int prompt_length = 0;         // the context's first prompt_length tokens are the prompt
    std::vector<int32_t> context;  // committed + drafted ahead
    std::vector<int32_t> held;     // the sequence the drafter holds (a prefix of some branch)
    bool drafter_warm = false;     // false until its first Propose, which prefills the prompt
    int committed_length = 0;
    uint64_t epoch = 0;
    int blocks_in_flight = 0;
    uint64_t next_block_sequence = 1;
    // Positions below it are decided by the target alone (an off window sent as
    // an empty block with alone_tokens); no block is sent until they commit. Set
    // when the window's block is resolved: a block the target dropped as stale
    // (sent behind one that was then rejected) opens no window.
    int alone_until = 0;
    // A shadow block (options.shadow_drafts): proposed at shadow_start, never sent.
    std::vector<int32_t> shadow;
    int shadow_start = 0;
    // The position the last shadow Propose ran at: one that proposed nothing is
    // not retried there (HasWork would stay true and the loop would spin).
    int shadow_tried_at = -1;
    // The request's acceptance (the policy's other inputs are the worker's), and
    // whether the policy chooses k and may turn speculation off (draft_k 0).
    spec::SpecEstimates acceptance;
    spec::RankAcceptance ranks;  // per-rank acceptance of its verified trees
    bool adaptive_k = false;
    spec::SpecMode spec_mode = spec::SpecMode::kSequential;  // of the last block sent
    // NextAction's answer, valid while `action_generation` is the engine's generation_.
    mutable spec::SpecAction action;
    // > 0: the action's block is a tree of at most this many nodes (ChooseTree).
    mutable int action_tree_nodes = 0;
    mutable uint64_t action_generation = 0;
    // The speculation cache (options.spec_cache): branches for the block in flight,
    // which starts at `cache_base`, and a hit waiting to be sent.
    std::optional<spec::SpeculationCache> cache;
    int cache_base = 0;
    std::optional<spec::CacheBranch> cache_hit;
    struct SentBlock {
      int drafted = 0;
      int requested = 0;  // the k asked of the drafter (it may propose fewer)
      spec::SpecMode mode = spec::SpecMode::kOff;  // the action it carried out
      absl::Time sent;
      int alone_until = 0;        // an off window's end, 0 if none
      bool beside_draft = false;  // a draft forward ran while it was in flight
      bool tree_asked = false;    // the drafter was asked for a tree
      std::vector<int32_t> parents;  // a tree block's DraftBlock.parents; empty: a chain
      std::vector<int8_t> confidence;  // [drafted] the drafter's classes, or empty
    };
    std::map<uint64_t, SentBlock> sent;             // block_sequence -> block
    absl::Time last_result = absl::InfinitePast();  // when the previous result arrived
  };
  // The policy's inputs for a request, and its next action (fixed k: its k in
  // the configured or chosen mode).
  spec::SpecEstimates Estimates(const RequestState& state) const;
  spec::SpecAction NextAction(const RequestState& state) const;  // ChooseAction, memoized
  spec::SpecAction ChooseAction(const RequestState& state) const;
  // What an adaptive request's block may be (the policy's choices).
  spec::SpecChoices AdaptiveChoices() const;
  // The tree rule over `action` (see "Trees" above): the node budget of the tree
  // that beats it, with `action` made sequential at the tree's depth; 0 (and
  // `action` unchanged) when a chain predicts at least as well or trees are not allowed.
  // A drafter that reports classes, for an adaptive request that would speculate: the
  // whole budget at depth max_k (CutTreeByClasses prices the proposal).
  int ChooseTree(const RequestState& state, spec::SpecAction& action) const;
  // After the drafter proposed a tree with a class per node (an adaptive request):
  // cuts `proposal` to the sub-tree the classes pay for (spec::CutTreeProposal) and
  // sets `action` to run it, returning true; or, where the chain its first path gives
  // predicts at least as much (priced by the chain rule with the same classes), leaves
  // `proposal` that chain (no parents) and returns false.
  bool CutTreeByClasses(const RequestState& state, spec::DraftRequest& proposal,
                        spec::SpecAction& action) const;
  // The evidence of a verified tree block (see "Trees" above).
  void LearnFromTree(RequestState& state, const RequestState::SentBlock& block,
                     const proto::VerifyResult& result);
  int NextK(const RequestState& state) const { return NextAction(state).k; }
  // True if the request may send another block now.
  bool HasRoom(const RequestState& state) const;
  // The tokens of `context` the drafter must take in before it drafts past them:
  // past its common prefix with what it holds, or all of them before its first
  // Propose (a model drafter starts lazily).
  static size_t TokensToTakeIn(const RequestState& state, absl::Span<const int32_t> context);
  // Whether a shadow block is due now (off, shadow affordable, none pending), and
  // scoring one against the tokens committed at [base, base + tokens.size()).
  bool ShadowDue(const RequestState& state) const;
  // Catch-up: whether the request's drafter should take the committed tokens now.
  bool CatchUpDue(const RequestState& state) const;
  // One Propose with k = 0 for every request whose catch-up is due (not timed:
  // it is prefill, not drafting). False if there was none.
  absl::StatusOr<bool> StepCatchUp();
  void ScoreShadow(RequestState& state, int base, const std::vector<int32_t>& tokens);
  int Window(const RequestState& state) const;
  bool CacheActive(const RequestState& state) const;
  // The draft request for `context`; truncates the drafter to its common prefix
  // with what it holds, so Propose re-feeds only the difference.
  spec::DraftRequest MakeDraftRequest(const std::string& id, RequestState& state,
                                      std::vector<int32_t>* context_store, int k,
                                      int tree_nodes = 0);
  // Runs one Propose over `batch`, measuring the draft's time per token, and
  // marks every block in flight as verified beside a draft forward.
  // Not timed if some entry's context runs more than 2 tokens past what the
  // drafter holds: that Propose also prefilled, and its time per drafted token
  // would make the draft look many times slower than it is.
  absl::Status ProposeMeasured(absl::Span<spec::DraftRequest> batch);
  // Sends `tokens` (with q, alternatives) as the request's next block; an empty
  // block with `alone_tokens` > 1 asks the target for an off window that long.
  // `mode`: the action it carries out (kept for the policy's hysteresis), unset
  // for an empty block sent after a failed proposal.
  void EmitBlock(const std::string& id, RequestState& state, std::vector<int32_t> tokens,
                 std::vector<spec::SparseDistribution> q, std::vector<spec::SparseDistribution> top,
                 std::vector<OutgoingBlock>* out, int alone_tokens = 0,
                 std::optional<spec::SpecMode> mode = std::nullopt, int requested = 0,
                 std::vector<int32_t> parents = {}, bool tree_asked = false,
                 std::vector<int8_t> confidence = {});
  void MarkBesideDraft();
  // The cache: plans branches for a block just sent, pre-drafts one forward.
  void PlanCache(RequestState& state, const proto::DraftBlock& block,
                 const std::vector<spec::SparseDistribution>& top);
  bool HasCacheWork(const RequestState& state) const;
  absl::Status StepCache();
  void LookUpCache(RequestState& state, const proto::VerifyResult& result, int base);
  // Feeds a resolved block to the estimates.
  void LearnFromResult(RequestState& state, const proto::VerifyResult& result, bool new_epoch);
  // Tokens the target decided alone inside an off window: they age the
  // acceptance evidence, and the time since the previous result samples T(0).
  void LearnFromOffWindow(RequestState& state, const proto::VerifyResult& result);
  void Resync(const std::string& id, RequestState& state, std::vector<int32_t> committed,
              uint64_t epoch);
  // After a failed proposal: restarts the drafter's state for `id` from the
  // committed tokens, so the next step starts clean.
  void RestartDrafter(const std::string& id, RequestState& state);

  spec::Drafter* drafter_;
  DraftEngineOptions options_;
  std::map<std::string, RequestState> requests_;
  DraftCounters counters_;
  spec::SpeculationCacheCounters released_cache_;  // of released requests
  // The worker's costs (the policy's inputs but acceptance): they are the
  // drafter's and the hardware's, not a request's, so new requests start from them.
  // The worker's costs, and the acceptance evidence of the drafter's confidence
  // classes (a property of the drafter, not of one request).
  spec::SpecEstimates costs_;
  // The drafter has reported confidence classes (DraftRequest.confidence): trees
  // are then asked at full budget and cut by their nodes' classes (see "Trees").
  bool drafter_reports_classes_ = false;
  // Blocks verified beside a draft forward: EWMAs of their committed tokens, of
  // their seconds since the previous result, and of the rate the model (without
  // interference) predicted for them. Interference is what makes them slower.
  double beside_tokens_ = 0.0;
  double beside_seconds_ = 0.0;
  double beside_predicted_ = 0.0;
  // Bumped whenever an input of NextAction changes (an estimate, the request set,
  // a request's last mode): the policy runs once per change, not per HasWork.
  uint64_t generation_ = 1;
  // T_verify(k) from round trips, for targets that do not report their T(fed)
  // line: it depends on the target, not on the request.
  std::shared_ptr<spec::VerifyCostCurve> verify_cost_;
};

}  // namespace splitspec::draft

#endif  // SPLITSPEC_DRAFT_WORKER_DRAFT_ENGINE_H_

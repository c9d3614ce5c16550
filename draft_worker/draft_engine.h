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
// assignment has draft_k 0 picks k per block from measured acceptance and costs
// (k = 0: it sends an empty block with alone_tokens = the controller's steps
// before its next probe, an off window: the target decodes that many tokens
// alone, each at the cost of a plain decode step, and no block is sent until
// they are committed; the window opens when the target resolves that block).
// Its measured guard sees what a request's blocks cost: each resolved block's
// committed tokens over the wall time since the request's previous result
// (drafting, both trips and the verification), against the plain step time the
// off windows' tokens measure (the verify-cost curve's T(0): the time between
// two results the target committed alone, back to back). With
// options.adaptive_window it decides with the model of the request's schedule.
//
// Model drafters while speculation is off: the draft catches its model up on the
// target's tokens in chunks (options.catch_up_tokens) when idle, so a probe costs
// no window-long prefill; a drafter found hopeless (spec::AdaptiveDraftLength::
// Hopeless: its cost loses at any acceptance) starts the next requests off, with
// a probe every options.reprobe_every_requests-th start.
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
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/spec/adaptive_draft_length.h"
#include "runtime/spec/adaptive_window.h"
#include "runtime/spec/cache_worth.h"
#include "runtime/spec/drafter.h"
#include "runtime/spec/sampling_params.h"
#include "runtime/spec/speculation_cache.h"
#include "runtime/spec/verify_mode.h"

namespace splitspec::draft {

struct DraftEngineOptions {
  int lookahead_blocks = 2;  // unresolved blocks per request; 1 = sequential
  // An assignment with draft_k 0 chooses k per block with an AdaptiveDraftLength
  // controller (runtime/spec/adaptive_draft_length.h); these are its settings
  // (schedule is set from lookahead_blocks).
  spec::AdaptiveDraftLengthConfig adaptive;
  int default_k = 4;  // k of requests whose assignment names none, when `adaptive_default` is false
  bool adaptive_default = true;
  int q_top_k = 64;  // support of each q row shipped in rejection mode
  int max_requests = 256;
  // The speculation cache (see above): on, the window is one block per request.
  bool spec_cache = false;
  spec::SpeculationCacheConfig cache;
  int cache_alternatives = 3;        // guesses the drafter reports per drafted position
  double cache_budget_factor = 1.0;  // x the draft tokens that fit in one verification
  // Per request, pre-draft only while it measurably pays (runtime/spec/cache_worth.h;
  // a new request starts from the last released request's measurements):
  // where draft and target share cores or a memory bus, pre-drafting slows the
  // verification it overlaps, and a draft whose pre-drafts seldom hit loses more
  // there than its hits save. False: pre-draft for every block.
  bool cache_guard = true;
  spec::CacheWorthConfig cache_worth;
  // Per request, choose the schedule (sequential: window 1; overlapped: window
  // max(2, lookahead_blocks); cached: window 1 + the cache, if spec_cache) and,
  // for draft_k 0, k, from measured acceptance, cost ratio, verify-cost slope and
  // cache hit rate (runtime/spec/adaptive_window.h), after every result.
  bool adaptive_window = false;
  // Shadow blocks (adaptive k, speculation off): a drafter whose block of the
  // controller's k costs at most shadow_max_cost x a plain target step (model-free
  // drafters) still proposes at each position, sends nothing, and scores the
  // proposal against the tokens the target commits alone: acceptance is learned
  // without verifying anything, and a window ends early when it predicts a win.
  bool shadow_drafts = true;
  double shadow_max_cost = 0.05;
  // Catch-up (adaptive k, speculation off, a drafter too costly for shadow
  // blocks: a model): while the target decodes alone, the draft feeds its model
  // the committed tokens whenever catch_up_tokens of them are pending and it has
  // nothing else to do, so the probe that ends an off window drafts at once
  // instead of first prefilling the whole window while the target waits for it
  // (measured before: ~50 ms per probe after a 32-token window with the target
  // as its own draft, 9-15% of the request's time). 0 turns it off.
  int catch_up_tokens = 8;
  // Catch-up runs only in the last catch_up_horizon target-only steps before the
  // probe, and never for a Hopeless drafter (no probe comes): each caught-up token
  // is a forward of the draft model beside the target, and on a CPU the two share
  // the memory bus (measured with the target as its own draft: catching up through
  // whole 32-token windows slowed the target's plain steps by a fifth). 0: no limit.
  int catch_up_horizon = 16;
  // A drafter whose last finished request ended Hopeless (its cost loses at any
  // acceptance: spec::AdaptiveDraftLength::Hopeless) starts new adaptive requests
  // off, with no probe-first block; every reprobe_every_requests-th such start
  // probes as usual, so a change of load is noticed. 0: no carry-over.
  int reprobe_every_requests = 8;
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
  uint64_t hopeless_starts = 0;    // requests started off (options.reprobe_every_requests)
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
    // Acceptance and cost estimates (always); with assignment draft_k 0 (and
    // adaptive_default) it also chooses k per block.
    std::optional<spec::AdaptiveDraftLength> adaptive;
    bool adaptive_k = false;
    // The speculation cache (options.spec_cache): branches for the block in flight,
    // which starts at `cache_base`, and a hit waiting to be sent.
    std::optional<spec::SpeculationCache> cache;
    int cache_base = 0;
    std::optional<spec::CacheBranch> cache_hit;
    std::optional<spec::CacheWorth> cache_worth;  // options.cache_guard
    double cache_hit_rate = 0.5;  // EWMA of hits per lookup (prior 0.5), for the schedule choice
    // The schedule (options.adaptive_window) and its k (used when adaptive_k).
    spec::DraftSchedule schedule = spec::DraftSchedule::kSequential;
    int schedule_k = 0;
    struct SentBlock {
      int drafted = 0;
      absl::Time sent;
      int alone_until = 0;       // an off window's end, 0 if none
      bool pre_drafted = false;  // the cache pre-drafted while it was verified
    };
    std::map<uint64_t, SentBlock> sent;             // block_sequence -> block
    absl::Time last_result = absl::InfinitePast();  // when the previous result arrived
  };
  // True if the request may send another block now.
  bool HasRoom(const RequestState& state) const;
  // Shadow blocks: whether one is cheap enough for the request, whether one is
  // due now (speculation off, no shadow pending), and scoring one against the
  // tokens committed at [base, base + tokens.size()).
  bool ShadowAffordable(const RequestState& state) const;
  bool ShadowDue(const RequestState& state) const;
  // Catch-up: whether the request's drafter should take the committed tokens now.
  bool CatchUpDue(const RequestState& state) const;
  // One Propose with k = 0 for every request whose catch-up is due (not timed:
  // it is prefill, not drafting). False if there was none.
  absl::StatusOr<bool> StepCatchUp();
  void ScoreShadow(RequestState& state, int base, const std::vector<int32_t>& tokens);
  int Window(const RequestState& state) const;
  bool CacheActive(const RequestState& state) const;
  // options.adaptive_window: re-chooses the request's schedule and k.
  void ChooseSchedule(RequestState& state);
  int NextK(const RequestState& state) const;
  // The draft request for `context`; truncates the drafter to its common prefix
  // with what it holds, so Propose re-feeds only the difference.
  spec::DraftRequest MakeDraftRequest(const std::string& id, RequestState& state,
                                      std::vector<int32_t>* context_store, int k);
  // Runs one Propose over `batch`, measuring the draft's time per token.
  // Not timed if some entry's context runs more than 2 tokens past what the
  // drafter holds: that Propose also prefilled, and its time per drafted token
  // would make the draft look many times slower than it is.
  absl::Status ProposeMeasured(absl::Span<spec::DraftRequest> batch);
  // Sends `tokens` (with q, alternatives) as the request's next block; an empty
  // block with `alone_tokens` > 1 asks the target for an off window that long.
  void EmitBlock(const std::string& id, RequestState& state, std::vector<int32_t> tokens,
                 std::vector<spec::SparseDistribution> q, std::vector<spec::SparseDistribution> top,
                 std::vector<OutgoingBlock>* out, int alone_tokens = 0);
  // The off window an empty block sent now asks for (0: none).
  int OffWindowTokens(const RequestState& state, int k, int room) const;
  // The cache: plans branches for a block just sent, pre-drafts one forward.
  void PlanCache(RequestState& state, const proto::DraftBlock& block,
                 const std::vector<spec::SparseDistribution>& top);
  bool HasCacheWork(const RequestState& state) const;
  absl::Status StepCache();
  void LookUpCache(RequestState& state, const proto::VerifyResult& result, int base);
  // Feeds a resolved block back to the request's controller.
  void LearnFromResult(RequestState& state, const proto::VerifyResult& result, bool new_epoch);
  // A token the target decided alone inside an off window: a target-only step
  // for the controller, and the time since the previous result samples T(0).
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
  bool drafter_hopeless_ = false;  // the verdict of the last finished adaptive request
  // The cache guard's estimates of the last released request that measured them:
  // new requests start from them (options.cache_guard).
  std::optional<spec::CacheWorth> learned_cache_worth_;
  uint64_t hopeless_candidates_ = 0;      // adaptive starts while drafter_hopeless_
  double draft_seconds_per_token_ = 0.0;  // measured over the last Propose call
  // T_verify(k) of this worker's target(s), shared by the adaptive controllers:
  // it depends on the target, not on the request.
  std::shared_ptr<spec::VerifyCostCurve> verify_cost_;
};

}  // namespace splitspec::draft

#endif  // SPLITSPEC_DRAFT_WORKER_DRAFT_ENGINE_H_

// TargetEngine: the target leader's verification loop without sockets.
//
//   TargetEngine engine(model, options);
//   RETURN_IF_ERROR(engine.AddRequest(assignment));
//   engine.AddBlock(block, "draft-peer");            // as blocks arrive
//   std::vector<TargetEvent> events;
//   RETURN_IF_ERROR(engine.Step(absl::Now(), &events));   // one batched forward
//
// Each Step reads as the algorithm (docs/architecture.md):
//   Plan    -> each request's share within the token budget: a prompt chunk,
//              the unfed token and/or a ready draft block to feed, or a
//              decision that needs no forward (p at the frontier is pending);
//   Forward -> one batched forward of everything fed; a guided request feeds its
//              conditional and unconditional sequences together (never one
//              without the other after the prompts; the budget counts both) and
//              its rows are the guided distribution (spec::GuidedLogitsToProbs);
//   Verify  -> one spec::VerifyBatch over every request that decides this step:
//              a block (empty or not), or the target's own token (k = 0);
//   Resolve -> apply each outcome (commit, truncate the KV cache, bump the
//              epoch), keep p pending for requests still waiting, and report.
// A token committed in Resolve is fed at the next step (with the next block if
// one is ready; after a draft block's correction or bonus it waits up to
// feed_wait for that block). Every choice is a function of (p, seed, position),
// so how decisions fall into steps never changes what is committed.
// A tree block (DraftBlock.parents that branch) is fed as one tree forward: the
// last committed token as its root (fed again when p was pending: the cache drops
// it first) and every node (SequenceInput::tree_parents); spec::VerifyTree picks the
// path, which KvCache::KeepPath keeps, and the result names it in accepted_nodes. A
// tree ends with a correction or the bonus, except when the accepted path is its
// whole first path and a block is queued right after it (the draft drafted it past
// that path): then, as after a chain accepted in full, that block verifies the
// next position. Where rows depend on the tokens before them or the verifier is the GPU's
// (penalties, a grammar, guidance, device rows) or the model refuses trees
// (LanguageModel::RunsTrees: CUDA, a tensor-parallel group), a tree is verified as
// its first path (TargetRequest::FlattenReadyTree). Chain-shaped parents are a chain.
// A request with p for the frontier and no block decides alone when it has no
// draft worker, inside an off window (after an empty block with alone_tokens N,
// verified at position s: positions s + 1 .. s + N - 1 cost a plain decode step
// each, with no wait for the draft; a draft block verified inside the window
// ends it), or when it has waited `block_wait` (a lost block must not hang a
// request). In a window whose block set window_result_tokens M > 1 (a draft
// that scores no shadow blocks), the draft gets one result per M of the target's
// own tokens, and one per token in the window's last M positions; the
// coordinator still gets every token as it is decided.
//
// Where p lives. By default the forward's logits come to the host and Verify
// runs spec::VerifyBatch over host probabilities; a plain greedy request's (no
// processors, grammar, guidance, logprobs or tree) rows are kept as their argmax
// tokens, p being their one-hot, and verified by spec::VerifyGreedyTokens: no [vocab]
// row is written, copied or scanned again (measured, bench spec --workload on the
// grounded lines: lookup auto 8-11% more tok/s, target-only 3-5%). After UseDeviceRows (a target
// on a CUDA device, TP=1), the logits stay on the GPU: the guided combination,
// the probabilities and the verification run there (device_rows.h), a pending p
// is kept in the request's device slot, and per step only the draft's tokens and
// sparse q go up and accept counts and committed ids come down. Both paths make
// the same choices from the same logits (greedy: token for token; sampling: up
// to the round-off stated in kernels/cuda/sampling.h). One path per request,
// chosen at admission: a request with context processors, a grammar or logprobs
// (what the CUDA verifier does not do) has its rows copied to the host each step
// and takes the host path above, while the step's other requests stay on the
// device (device_rows.h: the cost; counters().host_rows_copied).
//
// KV memory. With options.kv_cache_bytes > 0 the caches of all requests
// together stay within that budget, counted from the caches themselves
// (model::KvBudget: bytes per position x positions reserved, the doubling
// growth included; kv_budget().counters().peak_used_bytes never exceeds it):
//   Admission -> a request starts (is made resident and its prefill planned)
//                only while its committed tokens plus kv_reserve_tokens fit;
//                those positions are reserved at once. Otherwise it waits, in
//                arrival order, behind the requests waiting before it.
//   Growth    -> before each forward, a request whose cache would grow past the
//                budget makes room by evicting the newest resident requests
//                (requests are planned oldest first, so the oldest always runs).
//   Eviction  -> the evicted request's KV is freed and it waits at the head of
//                the queue; re-admitted, it recomputes its caches from its
//                committed tokens (TargetRequest::ReplaceCaches), bitwise the
//                same KV and p (batch invariance), so what it commits is unchanged
//                and its draft worker sees no difference but time.
// A request whose caches could not fit even alone (its longest length, in
// bytes) is refused at AddRequest, naming the budget. Without a budget every
// request is resident at once and its caches grow as the forward needs.
//
// Thread safety: thread-compatible; the target leader's loop owns it.
#ifndef SPLITSPEC_TARGET_WORKER_TARGET_ENGINE_H_
#define SPLITSPEC_TARGET_WORKER_TARGET_ENGINE_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/model/kv_budget.h"
#include "runtime/model/language_model.h"
#include "runtime/spec/verify_cost_curve.h"
#include "runtime/grammar/grammar_compiler.h"
#include "target_worker/device_rows.h"
#include "target_worker/target_request.h"

namespace splitspec::target {

struct TargetEngineOptions {
  int step_token_budget = 512;  // new tokens fed per forward, all requests together
  int prefill_chunk = 256;      // prompt tokens of one request per step
  int max_requests = 64;        // concurrent requests; more are refused
  absl::Duration block_wait = absl::Milliseconds(200);  // then decode without the draft
  // After a draft block's correction or bonus, wait this long for the draft's
  // next block before feeding the new token alone: fed together they cost one
  // forward, apart two. After a wait that runs out the request's next
  // corrections are fed at once (a slow draft is not waited for); zero: never wait.
  absl::Duration feed_wait = absl::Milliseconds(1);
  // Once forwards are timed (options.clock around each forward that feeds no
  // prompt), wait instead as long as waiting pays: a block arriving after d,
  // fed with the token, costs d + T(n + 1); the token fed alone costs T(1) and
  // then T(n) (the draft's block arrives during it), so waiting wins while
  // d < T(1) - (T(n + 1) - T(n)) = T(1) (1 - slope), T(fed) from the measured
  // forward-cost line (spec::VerifyCostCurve over tokens fed - 1). At 1 ms, a
  // draft taking 0.4 of a 6 ms step missed every wait: each block then cost a
  // lone forward more (measured, `bench spec --sim-grid`). feed_wait stays the
  // floor. False: feed_wait only.
  bool feed_wait_from_forwards = true;
  // The time of a commit (after the step's forward); null: the step's start.
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  RequestLimits default_limits;
  // The KV-cache budget of this rank in bytes (runtime/model/kv_budget.h); 0:
  // unlimited. See "KV memory" above.
  uint64_t kv_cache_bytes = 0;
  // Positions reserved past a request's committed tokens when it starts (at
  // most up to its longest length): a request starts only while its prompt plus
  // these fit the budget, so it can decode for a while before it grows.
  int kv_reserve_tokens = 256;
  // Compiles the grammars of structured-output requests (params.grammar) against
  // the model's vocabulary; shared, its cache makes a repeated schema free. Null:
  // such requests are refused, by name.
  std::shared_ptr<grammar::GrammarCompiler> grammar_compiler;
  // Verify only the draft positions that pay for what they add to the step
  // (spec::ChooseVerifiedDrafts over the ready blocks the draft's policy sized,
  // DraftBlock.policy_sized, once forwards are timed): at high concurrency such
  // blocks are cut toward plain decoding; a block of a fixed k is verified
  // whole. Positions are priced by the block's own DraftBlock.acceptance when it
  // has one per token. A policy-sized block ready before its request's last prompt
  // chunk is cut to nothing (its drafts could only be verified a step later), so
  // the first token comes from the prefill's step. False: verify every drafted token.
  bool cut_blocks_to_budget = true;
};

// Something to send after a step: a result for the coordinator and for the
// request's draft worker, whose data-channel identity is net::DraftPeerName(id)
// (draft_peer empty: the request has no draft worker).
struct TargetEvent {
  proto::VerifyResult result;  // new tokens; full sequence when full_sequence is set
  std::string draft_peer;      // data-channel identity of the draft worker, or ""
  bool to_coordinator = true;
};

struct TargetCounters {
  uint64_t steps = 0;
  uint64_t forward_tokens = 0;
  uint64_t stale_blocks = 0;      // wrong epoch or start
  uint64_t malformed_blocks = 0;  // refused by admission or by verification
  uint64_t own_tokens = 0;        // tokens the target chose without a draft
  uint64_t cut_draft_tokens = 0;  // drafted tokens not verified (cut_blocks_to_budget)
  uint64_t guided_requests = 0;   // requests added with classifier-free guidance
  // Tokens fed to guided requests' unconditional companions (also in forward_tokens).
  uint64_t companion_forward_tokens = 0;
  // Logits rows copied from a DeviceRows store to the host, for requests that
  // take the host path on a target verifying on the device.
  uint64_t host_rows_copied = 0;
};

class TargetEngine {
 public:
  // `model` must outlive the engine.
  TargetEngine(model::LanguageModel* model, TargetEngineOptions options);

  // Verifies on the device from now on: tells the model to KeepLogitsOnDevice
  // and keeps p in `rows`. REQUIRES: no request added yet. Errors: the model's
  // (FailedPrecondition: it cannot keep its logits on a device), InvalidArgument
  // if `rows` has fewer slots than options.max_requests; the engine then keeps
  // verifying on the host.
  absl::Status UseDeviceRows(std::unique_ptr<DeviceRows> rows);
  bool verifies_on_device() const { return device_rows_ != nullptr; }

  // A new request, or a reassignment of a known one (only its draft worker
  // changes then). Errors: InvalidArgument naming the field (empty prompt,
  // token out of range, bad sampling parameters) or, with a KV budget, naming
  // the budget when the request's caches could not fit in it even alone;
  // ResourceExhausted when full.
  absl::Status AddRequest(const proto::Assignment& assignment);

  // Queues a draft block; stale and malformed blocks are counted and dropped.
  BlockAdmission AddBlock(const proto::DraftBlock& block, const std::string& peer);

  // OK if `peer` (a data-channel identity) is the draft worker the request is
  // assigned to now and `peer_key` (its CURVE key; "" in-process or plaintext)
  // is the key the assignment named for it (Assignment.draft_worker_key, when
  // set). NotFound for an unknown request; PermissionDenied, naming the peer,
  // for any other sender (forged or late traffic).
  absl::Status CheckDraftPeer(const std::string& request_id, const std::string& peer,
                              const std::string& peer_key = "") const;

  // The whole committed sequence of a request, for a peer that saw a gap.
  // NotFound for an unknown (or already released) request.
  absl::StatusOr<proto::VerifyResult> SyncResult(const std::string& request_id) const;

  // Forgets a request and frees its KV cache. Unknown ids are ignored.
  void Release(const std::string& request_id);

  // True if Step would do something at `now`.
  bool HasWork(absl::Time now) const;
  // When a waiting request times out into decoding alone (InfiniteFuture if none).
  absl::Time NextDeadline() const;
  // How long an unfed token waits for the draft's next block now (see feed_wait).
  absl::Duration FeedWait() const;

  // Runs one step. Finished requests are reported and removed. Errors: only a
  // failed forward (the step's requests are then finished with an error and
  // reported in `events`). `after_forward`, if set, runs between the forward and
  // the decisions and may call AddBlock: the service drains its data channel
  // there, so a block that arrived during the forward is queued when the block
  // before it is decided (which then keeps no bonus, and the queued block is fed
  // at once) instead of arriving stale just after a bonus was taken.
  absl::Status Step(absl::Time now, std::vector<TargetEvent>* events,
                    const std::function<void()>& after_forward = nullptr);

  int active_requests() const { return static_cast<int>(requests_.size()); }
  const TargetCounters& counters() const { return counters_; }
  // The KV accounting: bytes used now, the budget, waits, evictions, the peak.
  const model::KvBudget& kv_budget() const { return kv_budget_; }
  // Requests waiting for KV room (not started, or evicted).
  int kv_waiting_requests() const { return static_cast<int>(waiting_.size()); }
  const TargetRequest* Find(const std::string& id) const;

 private:
  struct WorkItem;
  std::vector<WorkItem> Plan(absl::Time now);
  // Cuts the ready blocks of the decoding requests to the draft positions the
  // step's verification budget pays for (options.cut_blocks_to_budget).
  void CutBlocksToBudget();
  // What `request` does this step (nullopt: it waits for a block); `budget` caps a prompt chunk.
  std::optional<WorkItem> PlanRequest(TargetRequest& request, absl::Time now, int budget);
  // Whether a tree block of `request` is verified as a tree (else as its first path).
  bool RunsTree(const TargetRequest& request) const;
  // A ready tree block: one forward over the last committed token and the tree.
  std::optional<WorkItem> PlanTree(TargetRequest& request, const proto::DraftBlock& block);
  // spec::VerifyTree over a tree item's rows (then reordered along the accepted path).
  void VerifyTreeItem(WorkItem& item);
  // The unfed token of `request` is fed now: counts whether its wait for a block
  // hit or ran out; the second wait in a row that runs out stops the waiting for
  // a while (TargetRequest::FeedWaitMissed). One miss alone does not: a single
  // late wake-up on a loaded machine made every later block pay a lone forward.
  void CountFeedWait(TargetRequest& request, bool block_ready);
  // Feeds the planned tokens and reads each fed item's rows as probabilities.
  // On failure the fed requests are finished with an error and reported.
  absl::Status Forward(std::vector<WorkItem>& items, std::vector<TargetEvent>* events);
  // A guided request's prompts: chunks of both sequences, within one step's budget.
  void PlanGuidedPrefill(WorkItem& item, int budget) const;
  void ReadRows(WorkItem& item, const model::ForwardOutput& out, std::vector<TargetEvent>* events);
  // Device verification: the forward's rows into device_rows_, guided pairs combined.
  absl::Status LoadDeviceRows(const std::vector<WorkItem>& items, const model::ForwardOutput& out);
  // Finishes every request fed to a failed forward with an error, and reports it.
  void FailFed(std::vector<WorkItem>& items, std::vector<TargetEvent>* events);
  // Chooses what `item` decides this step and fills its VerifyRequest; false if nothing.
  bool Decide(WorkItem& item, absl::Time now);
  // The VerifyRequest of a deciding item (k = 0 for the target's own token).
  void FillVerifyRequest(WorkItem& item) const;
  void Verify(std::vector<WorkItem>& items, absl::Time now);
  absl::StatusOr<std::vector<absl::StatusOr<spec::VerifyOutcome>>> VerifyOnDevice(
      const std::vector<WorkItem*>& deciding);
  // True if `request`'s p lives in device_rows_ (chosen at admission: a device
  // store, and nothing in the request that only the host pipeline applies).
  bool VerifiesOnDevice(const TargetRequest& request) const;
  // `row` as the request's pending p: itself on the host; on the device, copied
  // into the request's slot (the step's rows are overwritten by the next forward).
  TargetRow KeepRow(const TargetRequest& request, TargetRow row);
  // Forgets a request: its slot in device_rows_ (if any) becomes free.
  void FreeSlot(const std::string& id);
  void Resolve(std::vector<WorkItem>& items, absl::Time now, std::vector<TargetEvent>* events);
  void ResolveBlock(WorkItem& item, absl::Time now, std::vector<TargetEvent>* events);
  void ResolveOwnToken(WorkItem& item, absl::Time now, std::vector<TargetEvent>* events);
  // The logprobs of item's committed tokens (spec::TokenLogprobAt of each
  // token's row); empty when the request did not ask for them.
  std::vector<spec::TokenLogprob> CommittedLogprobs(const WorkItem& item) const;
  bool DecidesAlone(const TargetRequest& request, absl::Time now) const;
  // True if the unfed token waits (feed_wait) for the draft's next block.
  bool WaitsToFeed(const TargetRequest& request, absl::Time now) const;
  // own_token: the target's own token (no block): in an off window that asked for it
  // (DraftBlock.window_result_tokens) the draft's copy may be held and sent merged.
  void Report(TargetRequest& request, proto::VerifyResult result, std::vector<TargetEvent>* events,
              bool own_token = false);
  void ReapFinished();
  // Forgets a request's place in the KV schedule and its caches' accounting
  // (before the request is destroyed).
  void ForgetKv(TargetRequest& request);

  // --- KV memory ---
  // Bytes `request` will hold once its reservation (committed + kv_reserve_tokens
  // positions, at most its caches' max_tokens) is made.
  uint64_t ReservationBytes(const TargetRequest& request) const;
  // Makes the head of the waiting queue resident if its reservation fits on top
  // of *kv_used (then adds it there). False if none waits or it does not fit.
  bool AdmitNext(uint64_t* kv_used);
  // Room for what `item` feeds: evicts the newest resident requests until the
  // growth fits on top of *kv_used (then adds it). False if `item`'s own request
  // was evicted (it is then not fed this step).
  bool MakeKvRoom(const WorkItem& item, uint64_t* kv_used);
  // Frees the KV of the newest resident request and puts it at the head of the queue.
  void EvictNewest();

  // Times a forward of `items` for the feed wait (prompt chunks excluded).
  void RecordForwardCost(const std::vector<WorkItem>& items, absl::Time start, absl::Time end);

  model::LanguageModel* model_;
  TargetEngineOptions options_;
  // Forward seconds against tokens fed - 1, all requests of a step together.
  spec::VerifyCostCurve forward_cost_;
  std::map<std::string, int> feed_waits_missed_;  // request -> waits run out in a row
  std::map<std::string, std::unique_ptr<TargetRequest>> requests_;
  // The requests holding KV, oldest admission first (eviction takes the last),
  // and those waiting for room, in order (an evicted one goes first).
  std::vector<TargetRequest*> resident_;
  std::deque<TargetRequest*> waiting_;
  model::KvBudget kv_budget_;
  TargetCounters counters_;
  std::unique_ptr<DeviceRows> device_rows_;  // null: verification on the host
  // request -> its slot in device_rows_; only the requests verified on the device.
  std::map<std::string, int> device_slots_;
  std::vector<int> free_device_slots_;
};

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_TARGET_ENGINE_H_

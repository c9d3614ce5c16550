// TargetRequest: the target leader's authoritative state of one request
// (docs/protocol.md) — committed tokens, epoch, the draft blocks queued for it, and
// how its KV cache relates to the committed sequence.
//
// Invariant between steps, with n = committed().size():
//   - prefill:  cache length < n - 1 ... the prompt is still being fed;
//   - unfed:    cache length == n - 1: the last committed token (a correction, a
//               bonus or the target's own token) has not been fed yet;
//   - pending:  cache length == n and pending() holds p for position n
//               (after prefill, or after a full acceptance without bonus).
// Classifier-free guidance (params().guided()): the request owns a companion, the
// unconditional sequence companion_prompt + committed()[prompt_length():], with its
// own KV cache. The pair lives and dies together: it is created, fed, truncated and
// freed only through this object. A guided request's prefill stops one token short
// in BOTH sequences, so that every feed after the prompts carries the same tokens
// to both caches (the "unfed" step feeds the last token of each plus the block),
// and both caches then hold the same number of generated tokens between steps.
// A block is usable iff its epoch is the current epoch and its start is n. An
// empty block is the draft saying "nothing to propose here": the target then
// chooses the token at n itself, without waiting.
//
// Pure policy plus the KV cache memory: no sockets, no model. Thread-compatible
// (owned by the target leader's loop).
#ifndef SPLITSPEC_TARGET_WORKER_TARGET_REQUEST_H_
#define SPLITSPEC_TARGET_WORKER_TARGET_REQUEST_H_

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/model/kv_cache.h"
#include "runtime/spec/sampling_params.h"
#include "runtime/spec/spec_metrics.h"
#include "runtime/spec/token_logprobs.h"
#include "runtime/spec/verify.h"
#include "runtime/spec/verify_mode.h"

namespace splitspec::target {

// Why a block was not queued.
enum class BlockAdmission { kQueued, kStaleEpoch, kStaleStart, kDuplicate, kMalformed, kFinished };

// p for one position, where the engine keeps it: the probabilities on the host
// (host verification), or a row of the engine's DeviceRows (device_rows.h:
// verification on the GPU; the row holds logits made into p there).
struct TargetRow {
  std::vector<float> probs;  // [vocab] on the host; empty for a device row or a greedy token
  int64_t device_row = -1;   // DeviceRows index, or -1 for a host row
  // A greedy row kept as its token (p is the one-hot of it, spec::GreedyToken), or -1:
  // a plain greedy request needs no [vocab] row (TargetEngine::ReadRows).
  int32_t greedy_token = -1;
  // [vocab] the request's row of log probabilities at this position
  // (spec::LogprobRow) when it asked for logprobs; else empty.
  std::vector<float> logprobs = {};
};

struct RequestLimits {
  int max_new_tokens = 256;             // generated tokens, then FINISH_REASON_LENGTH
  int context_length = 8192;            // committed tokens, then FINISH_REASON_LENGTH
  std::vector<int32_t> stop_token_ids;  // committed and then FINISH_REASON_STOP
};

class TargetRequest {
 public:
  // `assignment` carries the committed tokens (prompt + generated so far), the
  // sampling parameters and the epoch to start from.
  TargetRequest(const proto::Assignment& assignment, RequestLimits limits,
                std::unique_ptr<model::KvCache> cache, spec::SamplingParams params,
                spec::VerifyMode mode);

  const std::string& id() const { return id_; }
  const std::vector<int32_t>& committed() const { return committed_; }
  int prompt_length() const { return prompt_length_; }
  uint64_t epoch() const { return epoch_; }
  int frontier() const { return static_cast<int>(committed_.size()); }
  model::KvCache& cache() { return *cache_; }
  const model::KvCache& cache() const { return *cache_; }
  const spec::SamplingParams& params() const { return params_; }
  spec::VerifyMode mode() const { return mode_; }
  bool finished() const { return finish_reason_ != proto::FINISH_REASON_UNSPECIFIED; }
  proto::FinishReason finish_reason() const { return finish_reason_; }
  const spec::SpecMetrics& metrics() const { return metrics_; }
  uint64_t draft_worker_id() const { return draft_worker_id_; }
  // The CURVE key of that draft worker (Assignment.draft_worker_key; "" unknown).
  const std::string& draft_worker_key() const { return draft_worker_key_; }
  // The longest the committed sequence may grow: min(prompt + max_new_tokens,
  // the context length), when it finishes with FINISH_REASON_LENGTH.
  int max_length() const {
    return std::min(prompt_length_ + limits_.max_new_tokens, limits_.context_length);
  }

  // --- classifier-free guidance ---
  // Gives the request its unconditional companion. REQUIRES params().guided(),
  // `prompt` non-empty, called once before the first step.
  void AttachCompanion(std::vector<int32_t> prompt, std::unique_ptr<model::KvCache> cache);
  bool guided() const { return companion_cache_ != nullptr; }
  model::KvCache& companion_cache() { return *companion_cache_; }
  const model::KvCache& companion_cache() const { return *companion_cache_; }
  const std::vector<int32_t>& companion_prompt() const { return companion_prompt_; }
  // Length of the companion sequence (its counterpart of frontier()).
  int companion_frontier() const {
    return static_cast<int>(companion_prompt_.size()) + frontier() - prompt_length_;
  }
  // Token `index` of the companion sequence. REQUIRES 0 <= index < companion_frontier().
  int32_t CompanionToken(int index) const;
  // Counts tokens fed to the companion (reported in SpecStats).
  void AddCompanionForwardTokens(int tokens) { companion_forward_tokens_ += tokens; }
  // Truncates the KV cache to `length` tokens and the companion's (if any) by the
  // same number of tokens, so both keep the same generated tokens.
  // REQUIRES: the caches aligned (not prefilling), 0 <= length <= cache().length().
  void TruncateCaches(int length);

  // --- structured outputs (params().grammar) ---
  // Gives the request its grammar matcher and feeds it the generated tokens
  // committed so far (a reassigned request). From then on ApplyOutcome feeds it
  // every committed token, and the request finishes with FINISH_REASON_STOP
  // when the matcher terminates (an end-of-generation token it allowed).
  // Errors: InvalidArgument naming the first committed token the grammar refuses.
  absl::Status AttachGrammar(grammar::GrammarMatcher matcher);
  // The matcher, in the state after every committed token; null: no grammar.
  grammar::GrammarMatcher* grammar() { return grammar_ ? &*grammar_ : nullptr; }

  // --- blocks ---
  // Queues `block` if it can ever be used; stale ones are refused, and a tree
  // whose parents are not one per token in depth-first order
  // (spec::ValidateTreeParents) is malformed.
  BlockAdmission AdmitBlock(const proto::DraftBlock& block);
  // The queued block starting at the frontier with the current epoch, if any.
  const proto::DraftBlock* ReadyBlock() const;
  // True if a block starting at `start` (current epoch) is queued.
  bool HasBlockAt(int start) const;
  // Keeps only the first `keep` draft tokens (and their q, and parents: a prefix
  // of a depth-first tree is a tree) of the ready block:
  // the step's verification budget does not pay for the rest (spec_policy.h,
  // ChooseVerifiedDrafts). Its result then says how many were cut
  // (VerifyResult.cut_drafts), so the draft does not count them as rejected.
  // REQUIRES: ReadyBlock() != nullptr, 0 <= keep <= its tokens.
  void CutReadyBlock(int keep);
  // A tree block (DraftBlock.parents) becomes the chain of its first path (the
  // nodes 0, 1, ... while each is the child of the one before, tokens and q; its
  // parents stay, those of a chain), for a request or target that verifies chains
  // only: a prefix of the draft is a draft, so this stays exact. The other nodes
  // count as cut (VerifyResult.cut_drafts). REQUIRES: ReadyBlock() != nullptr.
  void FlattenReadyTree();
  // Drops every queued block (e.g. one that failed verification).
  void DropBlocks() { blocks_.clear(); }
  // When the request started waiting for a block (reset by every commit).
  absl::Time waiting_since() const { return waiting_since_; }
  // True after a non-empty block's correction or bonus: the unfed token's next
  // block is being drafted right now (the draft redrafts on seeing the result),
  // unless a recent wait for such a block ran out (then false for a while).
  bool expects_block_to_feed() const { return expects_block_to_feed_; }
  // The wait for that block ran out: the next kFeedWaitsSkippedAfterMiss
  // corrections are fed at once (a draft that slow is not waited for).
  void FeedWaitMissed();
  static constexpr int kFeedWaitsSkippedAfterMiss = 16;
  // The draft asked the target to decide the positions below `end` alone (an
  // empty block's alone_tokens: an off window); reset when the draft worker changes.
  // result_tokens: the block's window_result_tokens (the draft's results in the window
  // may be held and sent together, HoldsForDraft below).
  void DecideAloneUntil(int end, int result_tokens = 1) {
    alone_until_ = std::max(alone_until_, end);
    window_result_tokens_ = std::max(1, result_tokens);
  }
  // The draft sent a block again (it ended the window early): wait for its blocks.
  void EndAloneWindow() {
    alone_until_ = 0;
    window_result_tokens_ = 1;
  }
  bool in_alone_window() const { return frontier() < alone_until_; }

  // The draft's results in an off window whose block asked for them every
  // window_result_tokens steps: a result of the target's own token is held (merged
  // with those before it: tokens appended, the newest frontier, epoch, stats and
  // cost line) while more than window_result_tokens positions of the window remain.
  // The caller sends TakeHeldForDraft() once held_for_draft_tokens() reaches
  // window_result_tokens(), and before any other result to the draft.
  bool HoldsForDraft() const {
    return window_result_tokens_ > 1 && alone_until_ - frontier() > window_result_tokens_;
  }
  void HoldForDraft(const proto::VerifyResult& result);
  int held_for_draft_tokens() const {
    return held_for_draft_.has_value() ? held_for_draft_->committed_tokens_size() : 0;
  }
  int window_result_tokens() const { return window_result_tokens_; }
  std::optional<proto::VerifyResult> TakeHeldForDraft() {
    std::optional<proto::VerifyResult> held = std::move(held_for_draft_);
    held_for_draft_.reset();
    return held;
  }

  // --- feeding ---
  bool prefilling() const {
    return cache_->length() + 1 < frontier() ||
           (guided() && companion_cache_->length() + 1 < companion_frontier());
  }
  bool has_pending() const { return pending_.has_value(); }
  const TargetRow& pending() const { return *pending_; }
  // Sets p for position frontier() after the cache caught up with every committed token.
  void SetPending(TargetRow row);

  // --- outcomes ---
  // Applies a verification outcome for `block` (nullptr: the target's own token,
  // no draft). `pending_next` is p_k for a full acceptance without a committed
  // bonus (the cache then holds every committed token). Truncates the cache to
  // the tokens that stay valid, bumps the epoch after a correction or a target
  // token, drops the used block, checks stop conditions.
  // `logprobs`: for a request that asked for them (params().logprobs), one
  // entry per outcome.committed token, kept with the tokens that stay committed.
  // Returns the VerifyResult to send (new tokens only, and their logprobs).
  proto::VerifyResult ApplyOutcome(const proto::DraftBlock* block,
                                   const spec::VerifyOutcome& outcome,
                                   std::optional<TargetRow> pending_next, absl::Time now,
                                   std::vector<spec::TokenLogprob> logprobs = {});

  // Finishes with `reason` (cancellation, error) if not finished yet.
  void Finish(proto::FinishReason reason);

  // A result that carries the whole committed sequence (resync / final report),
  // with the logprobs of every token this target committed.
  proto::VerifyResult FullSequenceResult() const;

  // The coordinator moved the request to another draft worker (0 = none),
  // which holds `draft_worker_key` ("" unknown).
  void SetDraftWorker(uint64_t draft_worker_id, const std::string& draft_worker_key);

  // --- KV memory (the engine's KV budget, target_engine.h) ---
  // True while the request holds KV memory and is scheduled; false while it
  // waits for room (before it starts, or after an eviction).
  bool resident() const { return resident_; }
  void set_resident(bool resident) { resident_ = resident; }
  // Whether it has been counted as waiting for KV room (once per request).
  bool kv_waited() const { return kv_waited_; }
  void set_kv_waited(bool waited) { kv_waited_ = waited; }
  // Bytes its caches (both sequences of a guided request) hold now.
  uint64_t kv_bytes() const;
  // Bytes its caches would hold at their largest (max_tokens positions each).
  uint64_t max_kv_bytes() const;
  // Evicts the request's KV: `cache` (and `companion_cache` for a guided
  // request) replace the old caches, which are freed; the request then
  // recomputes them from its committed tokens (prefilling() is true unless it
  // has a single token), exactly as a reassigned request is rebuilt. p at the
  // frontier is dropped (the prefill computes it again, bitwise the same: batch
  // invariance); epoch, committed tokens and queued blocks are unchanged, so the
  // draft worker sees nothing. REQUIRES: fresh caches (length 0) of the same
  // max_tokens.
  void ReplaceCaches(std::unique_ptr<model::KvCache> cache,
                     std::unique_ptr<model::KvCache> companion_cache);

 private:
  void CheckStop(int first_new_index);
  // Feeds committed_[first_new_index, frontier()) to the grammar matcher.
  void AcceptGrammar(int first_new_index);
  proto::VerifyResult MakeResult(int first_new_index, int accepted, uint64_t block_sequence,
                                 int cut_drafts = 0) const;

  std::string id_;
  std::vector<int32_t> committed_;
  int prompt_length_;
  uint64_t epoch_;
  RequestLimits limits_;
  std::unique_ptr<model::KvCache> cache_;
  std::vector<int32_t> companion_prompt_;                // guided only
  std::unique_ptr<model::KvCache> companion_cache_;      // guided only
  uint64_t companion_forward_tokens_ = 0;
  uint64_t tree_steps_ = 0;  // blocks verified as trees (SpecStats.tree_steps)
  spec::SamplingParams params_;
  spec::VerifyMode mode_;
  std::optional<TargetRow> pending_;
  std::optional<grammar::GrammarMatcher> grammar_;
  // params().logprobs: the entries of committed_[logprobs_start_, ...): the
  // tokens committed here (those before were committed by an earlier target).
  int logprobs_start_;
  std::vector<spec::TokenLogprob> logprobs_;
  std::map<int, proto::DraftBlock> blocks_;  // start -> block
  std::map<int, int> cut_drafts_;             // start -> draft tokens CutReadyBlock removed
  proto::FinishReason finish_reason_ = proto::FINISH_REASON_UNSPECIFIED;
  spec::SpecMetrics metrics_;
  uint64_t draft_worker_id_;
  std::string draft_worker_key_;
  absl::Time waiting_since_ = absl::Now();
  bool expects_block_to_feed_ = false;
  int feed_waits_to_skip_ = 0;
  int alone_until_ = 0;  // positions below it are decided without waiting for blocks
  int window_result_tokens_ = 1;  // the off window's DraftBlock.window_result_tokens (>= 1)
  std::optional<proto::VerifyResult> held_for_draft_;  // HoldForDraft's merged result
  bool resident_ = true;
  bool kv_waited_ = false;
};

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_TARGET_REQUEST_H_

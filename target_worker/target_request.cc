#include "target_worker/target_request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/net/spec_proto.h"
#include "runtime/spec/draft_tree.h"

namespace splitspec::target {
namespace {

// A block may be queued at most this far ahead of the frontier (guards memory
// against a confused or hostile sender).
constexpr int kMaxLookaheadTokens = 1024;

}  // namespace

TargetRequest::TargetRequest(const proto::Assignment& assignment, RequestLimits limits,
                             std::unique_ptr<model::KvCache> cache, spec::SamplingParams params,
                             spec::VerifyMode mode)
    : id_(assignment.request_id()),
      committed_(assignment.committed_tokens().begin(), assignment.committed_tokens().end()),
      prompt_length_(static_cast<int>(assignment.prompt_length())),
      epoch_(assignment.epoch()),
      limits_(std::move(limits)),
      cache_(std::move(cache)),
      params_(params),
      mode_(mode),
      logprobs_start_(static_cast<int>(committed_.size())),
      draft_worker_id_(assignment.draft_worker_id()),
      draft_worker_key_(assignment.draft_worker_key()) {}

void TargetRequest::AttachCompanion(std::vector<int32_t> prompt,
                                    std::unique_ptr<model::KvCache> cache) {
  companion_prompt_ = std::move(prompt);
  companion_cache_ = std::move(cache);
}

int32_t TargetRequest::CompanionToken(int index) const {
  const int own = static_cast<int>(companion_prompt_.size());
  return index < own ? companion_prompt_[index] : committed_[prompt_length_ + index - own];
}

void TargetRequest::TruncateCaches(int length) {
  const int removed = cache_->length() - length;
  (void)cache_->Truncate(length);  // cannot fail: 0 <= length <= cache length
  if (guided()) (void)companion_cache_->Truncate(companion_cache_->length() - removed);
}

BlockAdmission TargetRequest::AdmitBlock(const proto::DraftBlock& block) {
  if (finished()) return BlockAdmission::kFinished;
  if (mode_ == spec::VerifyMode::kRejection && block.q_size() != block.tokens_size()) {
    return BlockAdmission::kMalformed;
  }
  if (block.parents_size() > 0 && (block.parents_size() != block.tokens_size() ||
                                   !spec::ValidateTreeParents(block.parents()).ok())) {
    return BlockAdmission::kMalformed;
  }
  if (block.epoch() != epoch_) return BlockAdmission::kStaleEpoch;
  const int start = static_cast<int>(block.start());
  if (start < frontier() || start > frontier() + kMaxLookaheadTokens)
    return BlockAdmission::kStaleStart;
  // A block past the longest the request may run would push its cache past the
  // positions it was sized (and its KV budgeted) for.
  if (int64_t{start} + block.tokens_size() > cache_->max_tokens())
    return BlockAdmission::kMalformed;
  if (blocks_.contains(start)) return BlockAdmission::kDuplicate;
  blocks_.emplace(start, block);
  cut_drafts_.erase(start);  // a cut of an earlier block at this start
  return BlockAdmission::kQueued;
}

const proto::DraftBlock* TargetRequest::ReadyBlock() const {
  auto it = blocks_.find(frontier());
  return it == blocks_.end() ? nullptr : &it->second;
}

bool TargetRequest::HasBlockAt(int start) const { return blocks_.contains(start); }

void TargetRequest::CutReadyBlock(int keep) {
  auto it = blocks_.find(frontier());
  SPLITSPEC_CHECK(it != blocks_.end() && keep >= 0 && keep <= it->second.tokens_size())
      << "request " << id_ << ": cut to " << keep;
  proto::DraftBlock& block = it->second;
  const int cut = block.tokens_size() - keep;
  if (cut == 0) return;
  block.mutable_tokens()->Truncate(keep);
  if (block.q_size() > keep) {
    block.mutable_q()->DeleteSubrange(keep, block.q_size() - keep);
  }
  if (block.parents_size() > keep) block.mutable_parents()->Truncate(keep);
  if (block.acceptance_size() > keep) block.mutable_acceptance()->Truncate(keep);
  cut_drafts_[it->first] += cut;
}

void TargetRequest::FlattenReadyTree() {
  const proto::DraftBlock* ready = ReadyBlock();
  SPLITSPEC_CHECK(ready != nullptr) << "request " << id_ << ": no ready block to flatten";
  spec::DraftTree tree;
  tree.tokens.assign(ready->tokens().begin(), ready->tokens().end());
  tree.parents.assign(ready->parents().begin(), ready->parents().end());
  CutReadyBlock(tree.FirstPathLength());  // the first path is a prefix in depth-first order
}

void TargetRequest::SetPending(TargetRow row) { pending_ = std::move(row); }

uint64_t TargetRequest::kv_bytes() const {
  return cache_->memory_bytes() + (guided() ? companion_cache_->memory_bytes() : 0);
}

uint64_t TargetRequest::max_kv_bytes() const {
  uint64_t bytes = cache_->StorageBytes(cache_->max_tokens());
  if (guided()) bytes += companion_cache_->StorageBytes(companion_cache_->max_tokens());
  return bytes;
}

void TargetRequest::ReplaceCaches(std::unique_ptr<model::KvCache> cache,
                                  std::unique_ptr<model::KvCache> companion_cache) {
  cache_ = std::move(cache);
  if (guided()) companion_cache_ = std::move(companion_cache);
  pending_.reset();
  // The unfed token, if any, is now part of the prefill: no wait for a block to feed it with.
  expects_block_to_feed_ = false;
}

void TargetRequest::SetDraftWorker(uint64_t draft_worker_id, const std::string& draft_worker_key) {
  draft_worker_key_ = draft_worker_key;
  if (draft_worker_id != draft_worker_id_) {
    draft_worker_id_ = draft_worker_id;
    blocks_.clear();
    alone_until_ = 0;  // the new draft worker decides when to speculate
    window_result_tokens_ = 1;
    held_for_draft_.reset();  // the new one starts from the Assignment's tokens
  }
}

void TargetRequest::HoldForDraft(const proto::VerifyResult& result) {
  if (!held_for_draft_.has_value()) {
    held_for_draft_ = result;
    held_for_draft_->clear_logprobs();  // the draft reads no log-probabilities
    held_for_draft_->clear_logprobs_start();
    return;
  }
  proto::VerifyResult& held = *held_for_draft_;
  held.mutable_committed_tokens()->Add(result.committed_tokens().begin(),
                                       result.committed_tokens().end());
  held.set_frontier(result.frontier());
  held.set_epoch(result.epoch());
  *held.mutable_stats() = result.stats();
  held.set_target_step_seconds(result.target_step_seconds());
  held.set_target_verify_slope(result.target_verify_slope());
}

proto::VerifyResult TargetRequest::ApplyOutcome(const proto::DraftBlock* block,
                                                const spec::VerifyOutcome& outcome,
                                                std::optional<TargetRow> pending_next,
                                                absl::Time now,
                                                std::vector<spec::TokenLogprob> logprobs) {
  const int old_frontier = frontier();
  uint64_t block_sequence = 0;
  int used_start = -1;
  int cut_drafts = 0;
  // `block` points into blocks_, which is erased below: read what is needed now.
  const bool block_had_tokens = block != nullptr && block->tokens_size() > 0;
  if (block != nullptr) {
    block_sequence = block->block_sequence();
    used_start = static_cast<int>(block->start());
    if (auto cut = cut_drafts_.find(used_start); cut != cut_drafts_.end()) {
      cut_drafts = cut->second;
      cut_drafts_.erase(cut);
    }
    // A tree block counts the path positions its verification walked (the accepted
    // nodes, and the rejected position if any), not its nodes: its acceptance rate
    // is then the chain's along the accepted path (spec_metrics.h).
    const int drafted = block->parents_size() > 0 ? outcome.accepted + (outcome.rejected ? 1 : 0)
                                                  : block->tokens_size();
    if (block->parents_size() > 0) ++tree_steps_;
    metrics_.RecordBlock(drafted, outcome.accepted, outcome.rejected,
                         static_cast<int>(outcome.committed.size()));
  } else {
    metrics_.RecordBlock(0, 0, false, static_cast<int>(outcome.committed.size()));
  }
  committed_.insert(committed_.end(), outcome.committed.begin(), outcome.committed.end());
  // Only a contiguous run is kept: a gap would misplace every later entry.
  if (static_cast<int>(logprobs_.size()) == old_frontier - logprobs_start_) {
    logprobs_.insert(logprobs_.end(), std::make_move_iterator(logprobs.begin()),
                     std::make_move_iterator(logprobs.end()));
  }

  if (pending_next.has_value()) {
    // Full acceptance, no bonus: the cache holds every committed token and p for
    // the next position is known; the draft's later blocks stay valid.
    pending_ = std::move(pending_next);
  } else {
    // The last committed token did not come from the draft's assumed future (a
    // correction, a bonus, or the target's own token): its input is not in the
    // cache yet and every block drafted beyond it is stale.
    pending_.reset();
    TruncateCaches(std::min(cache_->length(), frontier() - 1));
    ++epoch_;
  }
  blocks_.erase(used_start);  // `block` points into blocks_: not used below
  cut_drafts_.erase(cut_drafts_.begin(), cut_drafts_.lower_bound(frontier()));
  for (auto it = blocks_.begin(); it != blocks_.end();) {
    const bool stale = pending_next.has_value() ? it->first < frontier() : true;
    it = stale ? blocks_.erase(it) : std::next(it);
  }
  waiting_since_ = now;
  const bool redrafting = block_had_tokens && !pending_next.has_value();
  expects_block_to_feed_ = redrafting && feed_waits_to_skip_ == 0;
  if (redrafting && feed_waits_to_skip_ > 0) --feed_waits_to_skip_;
  AcceptGrammar(old_frontier);
  CheckStop(old_frontier);
  // A stop or the grammar's end may have cut the tokens just committed.
  if (static_cast<int>(logprobs_.size()) > frontier() - logprobs_start_)
    logprobs_.resize(frontier() - logprobs_start_);
  return MakeResult(old_frontier, outcome.accepted, block_sequence, cut_drafts);
}

void TargetRequest::FeedWaitMissed() {
  expects_block_to_feed_ = false;
  feed_waits_to_skip_ = kFeedWaitsSkippedAfterMiss;
}

absl::Status TargetRequest::AttachGrammar(grammar::GrammarMatcher matcher) {
  for (int i = prompt_length_; i < frontier(); ++i) {
    if (!matcher.AcceptToken(committed_[i])) {
      return absl::InvalidArgumentError(absl::StrCat(
          "request ", id_, ": committed token ", committed_[i], " at position ", i,
          " does not match the request's ", grammar::GrammarKindName(params_.grammar->kind),
          " grammar"));
    }
  }
  grammar_ = std::move(matcher);
  return absl::OkStatus();
}

void TargetRequest::AcceptGrammar(int first_new_index) {
  if (!grammar_.has_value()) return;
  for (int i = std::max(first_new_index, prompt_length_); i < frontier(); ++i) {
    // Every committed token was sampled or verified from a masked row, so the
    // matcher allows it; one it refuses (a bug) ends the request rather than
    // letting output leave the grammar.
    if (!grammar_->AcceptToken(committed_[i])) {
      committed_.resize(i);
      finish_reason_ = proto::FINISH_REASON_ERROR;
      return;
    }
    if (grammar_->IsTerminated()) {
      committed_.resize(i + 1);
      finish_reason_ = proto::FINISH_REASON_STOP;
      return;
    }
  }
}

void TargetRequest::CheckStop(int first_new_index) {
  for (int i = std::max(first_new_index, prompt_length_); i < frontier(); ++i) {
    const int32_t token = committed_[i];
    if (std::find(limits_.stop_token_ids.begin(), limits_.stop_token_ids.end(), token) !=
        limits_.stop_token_ids.end()) {
      committed_.resize(i + 1);
      finish_reason_ = proto::FINISH_REASON_STOP;
      break;
    }
  }
  const int max_total = max_length();
  if (frontier() >= max_total) {
    if (frontier() > max_total) committed_.resize(max_total);
    if (!finished()) finish_reason_ = proto::FINISH_REASON_LENGTH;
  }
  if (finished()) blocks_.clear();
}

void TargetRequest::Finish(proto::FinishReason reason) {
  if (!finished()) finish_reason_ = reason;
  blocks_.clear();
}

proto::VerifyResult TargetRequest::MakeResult(int first_new_index, int accepted,
                                              uint64_t block_sequence, int cut_drafts) const {
  proto::VerifyResult result;
  result.set_request_id(id_);
  result.set_epoch(epoch_);
  result.set_accepted(static_cast<uint32_t>(accepted));
  for (int i = std::min(first_new_index, frontier()); i < frontier(); ++i)
    result.add_committed_tokens(committed_[i]);
  result.set_frontier(static_cast<uint32_t>(frontier()));
  result.set_block_sequence(block_sequence);
  result.set_cut_drafts(static_cast<uint32_t>(cut_drafts));
  result.set_finished(finished());
  result.set_finish_reason(finish_reason_);
  result.set_prompt_length(static_cast<uint32_t>(prompt_length_));
  proto::SpecStats* stats = result.mutable_stats();
  stats->set_drafted(metrics_.drafted);
  stats->set_verified(metrics_.verified);
  stats->set_accepted(metrics_.accepted);
  stats->set_steps(metrics_.steps);
  stats->set_companion_forward_tokens(companion_forward_tokens_);
  stats->set_tree_steps(tree_steps_);
  stats->mutable_verified_at()->Add(metrics_.verified_at.begin(), metrics_.verified_at.end());
  stats->mutable_accepted_at()->Add(metrics_.accepted_at.begin(), metrics_.accepted_at.end());
  if (!logprobs_.empty()) {
    const int start = std::max(first_new_index, logprobs_start_);
    const int end = std::min(frontier(), logprobs_start_ + static_cast<int>(logprobs_.size()));
    result.set_logprobs_start(static_cast<uint32_t>(start));
    for (int i = start; i < end; ++i)
      net::TokenLogprobToProto(logprobs_[i - logprobs_start_], result.add_logprobs());
  }
  return result;
}

proto::VerifyResult TargetRequest::FullSequenceResult() const {
  proto::VerifyResult result = MakeResult(0, 0, 0);
  result.set_full_sequence(true);
  return result;
}

}  // namespace splitspec::target

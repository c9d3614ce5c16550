#include "draft_worker/draft_engine.h"

#include <algorithm>
#include <cmath>
#include <deque>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/spec_proto.h"
#include "runtime/spec/draft_tree.h"

namespace splitspec::draft {
namespace {

size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

// Whether `tokens` committed at `base` are the context's own drafts there.
bool ContinuesContext(const std::vector<int32_t>& context, int base,
                      const std::vector<int32_t>& tokens) {
  return base >= 0 && base + tokens.size() <= context.size() &&
         std::equal(tokens.begin(), tokens.end(), context.begin() + base);
}

}  // namespace

DraftEngine::DraftEngine(spec::Drafter* drafter, DraftEngineOptions options)
    : drafter_(drafter),
      options_(options),
      verify_cost_(std::make_shared<spec::VerifyCostCurve>(options.prior_verify_slope,
                                                           1.0 - spec::kCostWeight)) {
  // Until a block times the draft, the policy prices it by its weights.
  costs_.draft_cost_prior = drafter->decode_bytes_ratio();
}

absl::Status DraftEngine::AddRequest(const proto::Assignment& assignment) {
  const std::string& id = assignment.request_id();
  if (id.empty()) return absl::InvalidArgumentError("Assignment.request_id is empty");
  if (assignment.committed_tokens_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("request ", id, ": no committed tokens"));
  }
  if (assignment.target_endpoint().empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("request ", id, ": Assignment.target_endpoint is empty"));
  }
  if (options_.min_k < 1 || options_.max_k < options_.min_k || options_.max_k > spec::kPlanMaxK) {
    return absl::InvalidArgumentError(absl::StrCat("draft engine: k range [", options_.min_k, ", ",
                                                   options_.max_k, "] must lie in [1, ",
                                                   spec::kPlanMaxK, "]"));
  }
  if (options_.max_tree_nodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft engine: max_tree_nodes ", options_.max_tree_nodes, " must be >= 1"));
  }
  if (!requests_.contains(id) && static_cast<int>(requests_.size()) >= options_.max_requests) {
    return absl::ResourceExhaustedError(
        absl::StrCat("draft worker is full (", options_.max_requests, " requests)"));
  }
  ASSIGN_OR_RETURN(spec::SamplingParams params, net::SamplingParamsFromProto(assignment.params()));
  Release(id);
  std::vector<int32_t> committed(assignment.committed_tokens().begin(),
                                 assignment.committed_tokens().end());
  RETURN_IF_ERROR(drafter_->Start(id, committed));
  RequestState state;
  state.target_endpoint = assignment.target_endpoint();
  state.target_runs_trees = assignment.target_runs_trees();
  state.params = params;
  state.mode = net::VerifyModeFromProto(assignment.verify_mode(), params);
  state.k = assignment.draft_k() > 0 ? static_cast<int>(assignment.draft_k()) : options_.default_k;
  state.adaptive_k = assignment.draft_k() == 0 && options_.adaptive_default;
  if (options_.spec_cache) {
    RETURN_IF_ERROR(options_.cache.Validate());
    state.cache.emplace(options_.cache);
  }
  const int max_new = assignment.params().max_tokens() > 0
                          ? static_cast<int>(assignment.params().max_tokens())
                          : 1 << 20;
  state.prompt_length = static_cast<int>(assignment.prompt_length());
  state.max_length = state.prompt_length + max_new;
  state.committed_length = static_cast<int>(committed.size());
  state.held = committed;
  state.context = std::move(committed);
  state.epoch = assignment.epoch();
  state.spec_mode = options_.spec_cache             ? spec::SpecMode::kCached
               : options_.lookahead_blocks > 1 ? spec::SpecMode::kOverlapped
                                               : spec::SpecMode::kSequential;
  requests_[id] = std::move(state);
  ++generation_;  // the target's batch changed
  return absl::OkStatus();
}

void DraftEngine::Release(const std::string& request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  if (it->second.cache.has_value()) released_cache_.Merge(it->second.cache->counters());
  requests_.erase(it);
  ++counters_.requests_released;
  ++generation_;
  drafter_->Release(request_id);
}

spec::SpeculationCacheCounters DraftEngine::cache_counters() const {
  spec::SpeculationCacheCounters total = released_cache_;
  for (const auto& [id, state] : requests_) {
    if (state.cache.has_value()) total.Merge(state.cache->counters());
  }
  return total;
}

int DraftEngine::KnownFrontier(const std::string& request_id) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? -1 : it->second.committed_length;
}

void DraftEngine::Resync(const std::string& id, RequestState& state, std::vector<int32_t> committed,
                         uint64_t epoch) {
  const size_t keep = CommonPrefix(state.held, committed);
  absl::Status truncated = drafter_->Truncate(id, static_cast<int64_t>(keep));
  if (truncated.ok()) {
    state.held.resize(keep);
  } else {
    SPLITSPEC_LOG(ERROR) << "request " << id << ": " << truncated;
  }
  if (state.cache.has_value()) state.cache->Clear();
  state.cache_hit.reset();
  state.context = std::move(committed);
  state.committed_length = static_cast<int>(state.context.size());
  state.epoch = epoch;
  state.blocks_in_flight = 0;
  state.sent.clear();  // blocks of the old epoch are dropped by the target: no result comes back
}

void DraftEngine::LearnFromResult(RequestState& state, const proto::VerifyResult& result,
                                  bool new_epoch) {
  costs_.RecordTargetLine(result.target_step_seconds(), result.target_verify_slope());
  auto sent = state.sent.find(result.block_sequence());
  if (sent == state.sent.end()) {
    LearnFromOffWindow(state, result);
    return;
  }
  const RequestState::SentBlock block = sent->second;
  state.sent.erase(sent);
  state.alone_until = std::max(state.alone_until, block.alone_until);
  // The target's time on this block: from when it could start on it (sent, or
  // the previous result if it was still busy with that block) to its result.
  // With lookahead > 1 the block waited behind its predecessor; the round trip
  // alone would count that wait twice.
  // The first result of a request also paid for the prompt's prefill: no sample.
  const absl::Time now = options_.clock();
  const bool first = state.last_result == absl::InfinitePast();
  const double step_seconds = absl::ToDoubleSeconds(now - std::max(block.sent, state.last_result));
  // What the block cost the request: the time since its previous result (the
  // drafting, both trips, the verification and any turnaround).
  const double since_last_result = absl::ToDoubleSeconds(now - state.last_result);
  state.last_result = now;
  // An empty block that opens an off window may be decided in the step of the
  // block before it, with no forward of its own (p was already known): its time
  // is no plain step. The window's own results, one forward apart, sample T(0).
  const bool opens_window = block.drafted == 0 && block.alone_until > 0;
  // Drafts the target cut unverified (its step's budget, VerifyResult.cut_drafts)
  // cost it nothing and count neither accepted nor rejected.
  const int cut = std::min<int>(static_cast<int>(result.cut_drafts()), block.drafted);
  const int verified_drafts = block.drafted - cut;
  if (!first && !opens_window) verify_cost_->Record(verified_drafts, step_seconds);
  if (block.requested == 0) {
    state.acceptance.RecordPlainTokens(result.committed_tokens_size());
    costs_.RecordPlainTokens(result.committed_tokens_size());  // the block costs fade too
    return;
  }
  if (block.tree_asked) LearnFromTree(state, block, result);
  if (block.parents.empty() && block.drafted == 0) {
    // Asked, the drafter found nothing (a model-free drafter where the text has no
    // match): no drafted position was rejected; the policy prices such asks by
    // their chance (spec_policy.h, p+), and the target's token ages the evidence.
    state.acceptance.RecordAsk(false);
    state.acceptance.RecordPlainTokens(result.committed_tokens_size());
  } else if (block.parents.empty()) {
    state.acceptance.RecordAsk(true);
    // The policy's model counts k drafts per block: a position the drafter left
    // empty past a shorter proposal is a rejection there, like a wrong draft.
    const int accepted = std::min<int>(static_cast<int>(result.accepted()), verified_drafts);
    const bool rejected =
        cut > 0 ? accepted < verified_drafts
                : (new_epoch && accepted < block.drafted) || accepted < block.requested;
    state.acceptance.RecordBlock(accepted, rejected);
    // The drafter's classes measure the drafter, not the request: the worker's evidence.
    if (!block.confidence.empty()) costs_.RecordBlock(accepted, rejected, block.confidence);
  }
  if (first || block.drafted == 0) return;
  const spec::SpecEstimates estimates = Estimates(state);
  // The step that verified it was the batch's: every request of the batch fed
  // its token there (without this the others' share would read as overhead, and
  // speculation would look dearer the more requests share the target).
  const double verify_seconds =
      estimates.target_step_seconds *
      (1.0 + estimates.target_slope * (estimates.target_batch - 1 + verified_drafts));
  if (!(verify_seconds > 0.0)) return;
  // The rest of the block's time beyond what a plain step pays too: trips and
  // turnaround, or, while a draft forward ran beside it, that forward's slowdown
  // of the verification.
  if (!block.beside_draft) {
    costs_.RecordBlockOverhead(std::max(0.0, since_last_result -
                                                 block.drafted * costs_.draft_seconds_per_token -
                                                 verify_seconds - estimates.step_overhead_seconds));
    return;
  }
  // The comparison below predicts a chain's rate: a tree's tells nothing about it.
  if (!block.parents.empty()) return;
  // Beside a draft forward (overlapped, cached, or another request's drafting):
  // the model counts that forward as free, so the rate it predicts there is
  // compared with the rate realized, over plain steps timed while the target
  // decoded alone (an off window) if any, else the target's own report.
  const double plain = verify_cost_->MeanSeconds(0) > 0.0 ? verify_cost_->MeanSeconds(0)
                                                           : estimates.target_step_seconds;
  spec::SpecEstimates alone = estimates;
  alone.interference = 0.0;
  const double predicted =
      spec::PredictedRate(alone, block.mode, std::max(1, block.requested), alone.AlphaMean());
  if (!(since_last_result > 0.0) || !(plain > 0.0) || !std::isfinite(predicted)) return;
  const double w = beside_seconds_ > 0.0 ? spec::kCostWeight : 1.0;
  beside_tokens_ = (1.0 - w) * beside_tokens_ + w * result.committed_tokens_size();
  beside_seconds_ = (1.0 - w) * beside_seconds_ + w * since_last_result;
  beside_predicted_ = (1.0 - w) * beside_predicted_ + w * predicted;
  const double realized = plain * beside_tokens_ / beside_seconds_;
  if (realized > 0.0) costs_.interference = std::max(0.0, beside_predicted_ / realized - 1.0);
}

void DraftEngine::LearnFromTree(RequestState& state, const RequestState::SentBlock& block,
                                const proto::VerifyResult& result) {
  // The accepted path: a tree's accepted_nodes, a chain's first `accepted` nodes.
  const int n = block.drafted;
  std::vector<int32_t> path;
  if (block.parents.empty()) {
    for (int i = 0; i < std::min<int>(static_cast<int>(result.accepted()), n); ++i)
      path.push_back(i);
  } else {
    path.assign(result.accepted_nodes().begin(), result.accepted_nodes().end());
  }
  std::vector<std::vector<int32_t>> children(n + 1);  // entry v + 1: node v's, in rank order
  for (int i = 0; i < n; ++i) {
    const int32_t parent = block.parents.empty() ? i - 1 : block.parents[i];
    if (parent >= -1 && parent < i) children[parent + 1].push_back(i);
  }
  // Per reached node: its ranks offered, the accepted one's rank (0: none). A node
  // with one child was asked for two: the missing alternative was not accepted.
  int32_t node = -1;
  for (size_t d = 0;; ++d) {
    const std::vector<int32_t>& group = children[node + 1];
    if (group.empty()) break;  // a leaf: nothing was offered
    const int32_t next = d < path.size() ? path[d] : -1;
    const auto it = std::find(group.begin(), group.end(), next);
    const int rank = it == group.end() ? 0 : static_cast<int>(it - group.begin()) + 1;
    state.ranks.Record(std::max<int>(2, static_cast<int>(group.size())), rank);
    if (rank == 0) break;
    node = next;
  }
  if (block.parents.empty()) return;  // a chain's acceptance is recorded as a chain's
  // The chain's acceptance: its first path (nodes 0, 1, ... each the child of the
  // one before), accepted while they are the accepted nodes.
  int first_path = 0;
  while (first_path < n && block.parents[first_path] == first_path - 1) ++first_path;
  int accepted = 0;
  while (accepted < static_cast<int>(path.size()) && accepted < first_path &&
         path[accepted] == accepted) {
    ++accepted;
  }
  state.acceptance.RecordBlock(accepted, accepted < block.requested);
  // The first path's classes measure the drafter as a chain's do (the worker's evidence).
  if (block.confidence.size() == block.parents.size()) {
    costs_.RecordBlock(accepted, accepted < first_path,
                       absl::MakeConstSpan(block.confidence).subspan(0, first_path));
  }
}

void DraftEngine::LearnFromOffWindow(RequestState& state, const proto::VerifyResult& result) {
  const int base = static_cast<int>(result.frontier()) - result.committed_tokens_size();
  if (!state.adaptive_k || result.accepted() != 0 || base != state.committed_length ||
      base >= state.alone_until) {
    return;
  }
  // The target commits one token per plain step in the window, back to back:
  // the time between two results is T(0) per token they carry (several when the
  // window's block asked for its tokens every window_result_tokens steps), with no
  // wait for the draft.
  const absl::Time now = options_.clock();
  const int tokens = result.committed_tokens_size();
  state.acceptance.RecordPlainTokens(tokens);
  costs_.RecordPlainTokens(tokens);  // the block costs fade too
  if (state.last_result != absl::InfinitePast() && tokens >= 1) {
    verify_cost_->Record(0, absl::ToDoubleSeconds(now - state.last_result) / tokens);
  }
  state.last_result = now;
}

ResultAction DraftEngine::OnResult(const proto::VerifyResult& result) {
  auto it = requests_.find(result.request_id());
  if (it == requests_.end()) return ResultAction::kIgnored;
  ++generation_;  // estimates, alone_until and the cache's hits may all change
  RequestState& state = it->second;
  if (!result.full_sequence()) LearnFromResult(state, result, result.epoch() > state.epoch);
  if (state.adaptive_k && LogEnabled(LogLevel::kDebug)) {
    const spec::SpecAction next = NextAction(state);
    SPLITSPEC_LOG(DEBUG) << "policy " << result.request_id() << " frontier " << result.frontier()
                         << " accepted " << result.accepted() << "/" << result.block_sequence()
                         << ": " << Estimates(state).DebugString() << " -> "
                         << spec::SpecModeName(next.mode) << " k=" << next.k
                         << " rate=" << next.rate << " off_tokens=" << next.off_tokens;
  }
  if (result.finished()) {
    Release(result.request_id());
    return ResultAction::kFinished;
  }
  std::vector<int32_t> tokens(result.committed_tokens().begin(), result.committed_tokens().end());
  if (result.full_sequence()) {
    if (result.epoch() < state.epoch) return ResultAction::kIgnored;
    ++counters_.syncs;
    state.shadow.clear();
    Resync(result.request_id(), state, std::move(tokens), result.epoch());
    return ResultAction::kApplied;
  }
  const int frontier = static_cast<int>(result.frontier());
  const int base = frontier - static_cast<int>(tokens.size());
  if (result.epoch() < state.epoch || frontier <= state.committed_length)
    return ResultAction::kIgnored;
  if (base != state.committed_length) return ResultAction::kNeedSync;  // a result went missing
  ScoreShadow(state, base, tokens);
  if (result.epoch() == state.epoch && ContinuesContext(state.context, base, tokens)) {
    // Full acceptance without bonus (a chain's every draft, or a tree's whole first
    // path, with the next block queued): the tokens are our own draft.
    state.committed_length = frontier;
    state.blocks_in_flight = std::max(0, state.blocks_in_flight - 1);
    if (state.cache.has_value()) state.cache->Clear();
    return ResultAction::kApplied;
  }
  // A new epoch, or a tree's accepted path (which need not be the first path the
  // context holds): roll back to the committed tokens.
  if (result.epoch() != state.epoch) ++counters_.epochs_seen;
  std::optional<spec::CacheBranch> hit;
  // Only a result of the block the cache planned for is looked up; any other (the
  // target decided a position alone after block_wait: block_sequence 0) drops it.
  if (state.cache.has_value() && state.cache->planned() &&
      result.block_sequence() == state.cache->block_sequence() && base == state.cache_base &&
      static_cast<int>(tokens.size()) == static_cast<int>(result.accepted()) + 1) {
    hit = state.cache->Take(state.epoch, result.block_sequence(),
                            {static_cast<int>(result.accepted()), tokens.back()});
    costs_.RecordCacheLookup(hit.has_value());
    ++generation_;
  }
  std::vector<int32_t> committed(state.context.begin(), state.context.begin() + base);
  committed.insert(committed.end(), tokens.begin(), tokens.end());
  Resync(result.request_id(), state, std::move(committed), result.epoch());
  state.cache_hit = std::move(hit);
  return ResultAction::kApplied;
}

void DraftEngine::RestartDrafter(const std::string& id, RequestState& state) {
  drafter_->Release(id);
  const std::vector<int32_t> committed(state.context.begin(),
                                       state.context.begin() + state.committed_length);
  absl::Status started = drafter_->Start(id, committed);
  state.drafter_warm = false;
  state.held = started.ok() ? committed : std::vector<int32_t>();
  if (!started.ok())
    SPLITSPEC_LOG(ERROR) << "request " << id << ": drafter restart failed: " << started;
}

bool DraftEngine::CatchUpDue(const RequestState& state) const {
  if (options_.catch_up_tokens <= 0 || !state.adaptive_k) return false;
  if (static_cast<int>(state.context.size()) != state.committed_length) return false;
  const spec::SpecAction action = NextAction(state);
  if (action.mode != spec::SpecMode::kOff || !action.probe) return false;  // no block will need it
  if (options_.shadow_drafts && action.shadow) return false;                // shadows feed it
  if (state.alone_until - state.committed_length > options_.catch_up_tokens) {
    return false;  // far from the window's end: the target runs alone on the memory bus
  }
  return static_cast<int>(TokensToTakeIn(state, state.context)) >= options_.catch_up_tokens;
}

absl::StatusOr<bool> DraftEngine::StepCatchUp() {
  std::vector<spec::DraftRequest> batch;
  std::deque<std::vector<int32_t>> contexts;
  std::vector<size_t> pending;  // per entry: tokens the drafter takes in
  for (auto& [id, state] : requests_) {
    if (!CatchUpDue(state)) continue;
    pending.push_back(TokensToTakeIn(state, state.context));
    batch.push_back(MakeDraftRequest(id, state, &contexts.emplace_back(state.context), 0));
  }
  if (batch.empty()) return false;
  const absl::Time start = options_.clock();
  RETURN_IF_ERROR(drafter_->Propose(absl::MakeSpan(batch)));
  const size_t taken_in = std::accumulate(pending.begin(), pending.end(), size_t{0});
  if (taken_in > 0) {
    costs_.RecordCatchUpSeconds(absl::ToDoubleSeconds(options_.clock() - start) / taken_in);
    ++generation_;
  }
  MarkBesideDraft();
  ++counters_.catch_up_calls;
  for (size_t i = 0; i < batch.size(); ++i) {
    const spec::DraftRequest& proposal = batch[i];
    RequestState& state = requests_[proposal.request_id];
    if (!proposal.status.ok()) {
      SPLITSPEC_LOG(WARNING) << "request " << proposal.request_id
                             << ": catch-up failed: " << proposal.status;
      RestartDrafter(proposal.request_id, state);
      continue;
    }
    state.held.assign(proposal.context.begin(), proposal.context.end());
    state.drafter_warm = true;
    counters_.catch_up_tokens += pending[i];
    SPLITSPEC_LOG(DEBUG) << "catch-up " << proposal.request_id << ": " << pending[i]
                         << " tokens, holds " << state.held.size();
  }
  return true;
}

bool DraftEngine::HasWork() const {
  for (const auto& [id, state] : requests_) {
    if (HasRoom(state) || HasCacheWork(state)) return true;
    if (ShadowDue(state) || CatchUpDue(state)) return true;
  }
  return false;
}

spec::DraftRequest DraftEngine::MakeDraftRequest(const std::string& id, RequestState& state,
                                                 std::vector<int32_t>* context_store, int k,
                                                 int tree_nodes) {
  const size_t keep = CommonPrefix(state.held, *context_store);
  if (keep < state.held.size()) {
    absl::Status truncated = drafter_->Truncate(id, static_cast<int64_t>(keep));
    if (truncated.ok()) {
      state.held.resize(keep);
    } else {
      SPLITSPEC_LOG(ERROR) << "request " << id << ": " << truncated;
    }
  }
  spec::DraftRequest request;
  request.request_id = id;
  request.context = *context_store;
  request.k = k;
  request.tree_nodes = tree_nodes;
  request.mode = state.mode;
  request.params = state.params;
  request.prompt_length = state.prompt_length;
  request.q_top_k = options_.q_top_k;
  request.alternatives = CacheActive(state) ? options_.cache_alternatives : 0;
  return request;
}

absl::Status DraftEngine::ProposeMeasured(absl::Span<spec::DraftRequest> batch) {
  ++counters_.propose_calls;
  bool prefills = false;
  size_t taken_in = 0;  // context tokens the drafter did not hold
  for (const spec::DraftRequest& r : batch) {
    auto it = requests_.find(r.request_id);
    const size_t held = it == requests_.end() ? 0 : it->second.held.size();
    const bool warm = it != requests_.end() && it->second.drafter_warm;
    prefills = prefills || !warm || r.context.size() > held + 2;
    taken_in += it == requests_.end() ? r.context.size() : TokensToTakeIn(it->second, r.context);
  }
  const absl::Time propose_start = options_.clock();
  RETURN_IF_ERROR(drafter_->Propose(batch));
  MarkBesideDraft();
  for (const spec::DraftRequest& r : batch) {
    auto it = requests_.find(r.request_id);
    if (it != requests_.end() && r.status.ok()) it->second.drafter_warm = true;
  }
  // Draft steps: a chain's tokens; a tree's depth, since a model drafter batches a
  // level into one forward (the tree rule charges one draft step per level).
  size_t proposed = 0;
  for (const spec::DraftRequest& r : batch) {
    proposed += r.parents.empty() ? r.tokens.size() : spec::TreeDepth(r.parents);
  }
  if (LogEnabled(LogLevel::kDebug)) {
    SPLITSPEC_LOG(DEBUG) << "propose: " << batch.size() << " requests, " << proposed << " tokens"
                         << (prefills ? " (with prefill)" : "") << ", "
                         << absl::ToDoubleMilliseconds(options_.clock() - propose_start) << " ms";
  }
  const double seconds = absl::ToDoubleSeconds(options_.clock() - propose_start);
  if (proposed > 0 && !prefills) {
    costs_.RecordDraftSeconds(seconds / proposed);
    ++generation_;
  } else if (prefills && taken_in > 2) {
    // A catch-up sample (rule 2 of the policy), less the drafting it did.
    costs_.RecordCatchUpSeconds(
        std::max(0.0, seconds - proposed * costs_.draft_seconds_per_token) / taken_in);
    ++generation_;
  }
  return absl::OkStatus();
}

void DraftEngine::MarkBesideDraft() {
  for (auto& [id, state] : requests_) {
    for (auto& [sequence, block] : state.sent) block.beside_draft = true;
  }
}

void DraftEngine::EmitBlock(const std::string& id, RequestState& state, std::vector<int32_t> tokens,
                            std::vector<spec::SparseDistribution> q,
                            std::vector<spec::SparseDistribution> top,
                            std::vector<OutgoingBlock>* out, int alone_tokens,
                            std::optional<spec::SpecMode> mode, int requested,
                            std::vector<int32_t> parents, bool tree_asked,
                            std::vector<int8_t> confidence) {
  // The chain rule's hysteresis favours the mode of the last chain: a tree's mode
  // is the tree rule's and must not tilt the chain alternative it is compared with.
  if (mode.has_value() && *mode != state.spec_mode && parents.empty()) {
    state.spec_mode = *mode;
    ++generation_;
  }
  const spec::SpecMode block_mode =
      mode.has_value() && !parents.empty() ? *mode : state.spec_mode;
  OutgoingBlock outgoing;
  outgoing.target_endpoint = state.target_endpoint;
  proto::DraftBlock& block = outgoing.block;
  block.set_request_id(id);
  block.set_epoch(state.epoch);
  block.set_start(static_cast<uint32_t>(state.context.size()));
  block.set_block_sequence(state.next_block_sequence++);
  // An empty block tells the target "nothing to propose here; choose yourself".
  block.mutable_tokens()->Assign(tokens.begin(), tokens.end());
  // A tree was sized by the tree rule: the target verifies it whole.
  block.set_policy_sized(state.adaptive_k && parents.empty());
  block.mutable_parents()->Assign(parents.begin(), parents.end());
  // What the policy priced each position at (its class's a_c+): the target's
  // step budget verifies the likeliest positions first (spec::ChooseVerifiedDrafts).
  if (block.policy_sized() && !confidence.empty() && confidence.size() == tokens.size()) {
    const spec::SpecEstimates e = Estimates(state);
    for (int8_t c : confidence) block.add_acceptance(static_cast<float>(e.ClassUpper(c)));
  }
  if (!tokens.empty()) {
    state.shadow.clear();  // speculating again: the block itself measures acceptance
    state.alone_until = 0;
  }
  int alone_until = 0;
  if (tokens.empty() && alone_tokens > 1) {
    block.set_alone_tokens(static_cast<uint32_t>(alone_tokens));
    alone_until = static_cast<int>(state.context.size()) + alone_tokens;
    // Shadow blocks are scored against each token; without them the window's tokens
    // may come in bunches, and one by one again in its last window_result_tokens
    // positions: at least catch_up_tokens of them, where catch-up needs each token.
    const bool shadows = options_.shadow_drafts && NextAction(state).shadow;
    if (!shadows && options_.window_result_tokens > 1) {
      block.set_window_result_tokens(static_cast<uint32_t>(
          std::max(options_.window_result_tokens, options_.catch_up_tokens)));
    }
  }
  for (const spec::SparseDistribution& row : q) net::SparseToProto(row, block.add_q());
  state.cache_base = static_cast<int>(state.context.size());
  // A tree: the context (like the drafter) holds its first path until the result.
  int context_tokens = static_cast<int>(tokens.size());
  if (!parents.empty()) {
    context_tokens = 0;
    while (context_tokens < static_cast<int>(parents.size()) &&
           parents[context_tokens] == context_tokens - 1) {
      ++context_tokens;
    }
    ++counters_.tree_blocks_sent;
    counters_.tree_nodes_sent += tokens.size();
  }
  for (const auto& [sequence, sent] : state.sent) {
    if (!sent.parents.empty()) {
      ++counters_.blocks_past_trees;
      break;
    }
  }
  state.context.insert(state.context.end(), tokens.begin(), tokens.begin() + context_tokens);
  ++state.blocks_in_flight;
  state.sent[block.block_sequence()] = {.drafted = static_cast<int>(tokens.size()),
                                        .requested = requested,
                                        .mode = block_mode,
                                        .sent = options_.clock(),
                                        .alone_until = alone_until,
                                        .tree_asked = tree_asked,
                                        .parents = std::move(parents),
                                        .confidence = std::move(confidence)};
  ++counters_.blocks_sent;
  counters_.tokens_drafted += tokens.size();
  PlanCache(state, block, top);
  out->push_back(std::move(outgoing));
}

void DraftEngine::PlanCache(RequestState& state, const proto::DraftBlock& block,
                            const std::vector<spec::SparseDistribution>& top) {
  if (!CacheActive(state)) return;
  const int k = block.tokens_size();
  const int next_k = std::max(1, NextK(state));
  // The draft tokens that fit in one verification of this block: C * T_verify(k) / T_target
  // (one block's worth while either cost is unmeasured).
  const spec::SpecEstimates e = Estimates(state);
  const double fit = e.target_step_seconds > 0.0 && e.draft_seconds_per_token > 0.0
                         ? e.target_step_seconds / e.draft_seconds_per_token *
                               (1.0 + e.target_slope * k)
                         : next_k;
  const int budget = std::max(1, static_cast<int>(std::ceil(options_.cache_budget_factor * fit)));
  const std::vector<int32_t> tokens(block.tokens().begin(), block.tokens().end());
  state.cache->Plan(block.epoch(), block.block_sequence(), tokens,
                    top.size() == tokens.size() ? absl::MakeConstSpan(top)
                                                : absl::Span<const spec::SparseDistribution>(),
                    e.AlphaMean(), next_k, budget);
}

bool DraftEngine::HasCacheWork(const RequestState& state) const {
  return CacheActive(state) && state.blocks_in_flight > 0 && state.cache->Next().has_value();
}

namespace {

// What a Step's batch entry is for: a block to send, a shadow block (kept, not
// sent), or a shadow block drafted in place of an empty block, which is sent.
enum class EntryKind { kBlock, kShadow, kShadowAndEmptyBlock };

}  // namespace

absl::Status DraftEngine::Step(std::vector<OutgoingBlock>* out) {
  // Blocks first: a request with room sends its cached block, or drafts one.
  std::vector<spec::DraftRequest> batch;
  std::vector<std::string> ids;
  std::deque<std::vector<int32_t>> contexts;  // stable storage for the borrowed contexts
  std::vector<spec::CacheBranch> prefixes;    // per batch entry: a partial hit's drafted part
  std::vector<int> alone_tokens;              // per batch entry: its off window, 0 if none
  std::vector<EntryKind> kinds;               // per batch entry
  std::vector<spec::SpecAction> actions;      // per batch entry: what its block carries out
  std::vector<bool> tree_asked;               // per batch entry: the drafter was asked for a tree
  for (auto& [id, state] : requests_) {
    const int room = state.max_length - static_cast<int>(state.context.size());
    if (!HasRoom(state)) {
      if (!ShadowDue(state)) continue;
      std::vector<int32_t>& context = contexts.emplace_back(state.context);
      const spec::SpecAction action = NextAction(state);
      batch.push_back(MakeDraftRequest(id, state, &context, std::min(action.shadow_k, room)));
      prefixes.emplace_back();
      alone_tokens.push_back(0);
      kinds.push_back(EntryKind::kShadow);
      actions.push_back(action);
      tree_asked.push_back(false);
      ids.push_back(id);
      continue;
    }
    // k = 0 (the policy is off): the drafter proposes nothing and an empty
    // block lets the target decide this position (and, for adaptive k, the
    // positions up to the policy's off_tokens: an off window).
    const spec::SpecAction action = NextAction(state);
    const int k = std::min(action.k, room);
    std::optional<spec::CacheBranch> hit = std::move(state.cache_hit);
    state.cache_hit.reset();
    if (hit.has_value() && k > 0) {
      ++counters_.cache_blocks_sent;
      if (static_cast<int>(hit->tokens.size()) >= k) {
        hit->tokens.resize(k);
        if (!hit->q.empty()) hit->q.resize(k);
        if (hit->top.size() > static_cast<size_t>(k)) hit->top.resize(k);
        EmitBlock(id, state, std::move(hit->tokens), std::move(hit->q), std::move(hit->top), out,
                  0, action.mode, k);
        continue;
      }
    } else {
      hit.reset();
    }
    // Off: the empty block's proposal, if cheap, is a shadow block kept here.
    const bool shadow = k == 0 && ShadowDue(state);
    const bool off_window = k == 0 && state.adaptive_k && action.mode == spec::SpecMode::kOff;
    if (k == 0 && !shadow) {
      // Nothing to draft: the empty block goes without a Propose. One of k = 0 would
      // feed the drafter the whole context now (a model drafter: a prefill of the
      // prompt on the cores the target decodes on), which only a block that drafts
      // needs; before a probe, catch-up feeds it.
      EmitBlock(id, state, {}, {}, {}, out, off_window ? std::min(action.off_tokens, room) : 0,
                spec::SpecMode::kOff);
      continue;
    }
    std::vector<int32_t>& context = contexts.emplace_back(state.context);
    int want = k;
    if (hit.has_value()) {
      context.insert(context.end(), hit->tokens.begin(), hit->tokens.end());
      want -= static_cast<int>(hit->tokens.size());
    }
    if (shadow) want = std::min(action.shadow_k, room);
    // NextAction's tree budget (a partial cache hit never: trees run without the cache).
    const int tree_nodes = !shadow && !hit.has_value() && want > 0 ? state.action_tree_nodes : 0;
    batch.push_back(MakeDraftRequest(id, state, &context, want, tree_nodes));
    tree_asked.push_back(tree_nodes > 0);
    prefixes.push_back(hit.has_value() ? *std::move(hit) : spec::CacheBranch());
    alone_tokens.push_back(off_window ? std::min(action.off_tokens, room) : 0);
    kinds.push_back(shadow ? EntryKind::kShadowAndEmptyBlock : EntryKind::kBlock);
    actions.push_back(action);
    ids.push_back(id);
  }
  if (batch.empty()) {
    if (!out->empty()) return absl::OkStatus();
    // Idle: catch-up first (it shortens the target's wait at a probe), then the cache.
    ASSIGN_OR_RETURN(const bool caught_up, StepCatchUp());
    return caught_up ? absl::OkStatus() : StepCache();
  }
  RETURN_IF_ERROR(ProposeMeasured(absl::MakeSpan(batch)));
  for (size_t i = 0; i < batch.size(); ++i) {
    spec::DraftRequest& proposal = batch[i];
    RequestState& state = requests_[ids[i]];
    spec::CacheBranch& prefix = prefixes[i];
    if (kinds[i] == EntryKind::kShadow && !proposal.status.ok()) {
      SPLITSPEC_LOG(WARNING) << "request " << ids[i]
                             << ": shadow draft failed: " << proposal.status;
      RestartDrafter(ids[i], state);
      continue;
    }
    if (!proposal.status.ok()) {
      // Never spin on a failing request: restart its drafter state and send an
      // empty block, so the target chooses this position itself.
      ++counters_.draft_failures;
      SPLITSPEC_LOG(WARNING) << "request " << ids[i] << ": draft failed: " << proposal.status;
      RestartDrafter(ids[i], state);
      EmitBlock(ids[i], state, {}, {}, {}, out);
      continue;
    }
    state.held.assign(proposal.context.begin(), proposal.context.end());
    if (proposal.parents.empty()) {
      state.held.insert(state.held.end(), proposal.tokens.begin(), proposal.tokens.end());
    } else {  // the drafter holds the tree's first path (drafter.h)
      for (size_t j = 0;
           j < proposal.tokens.size() && proposal.parents[j] == static_cast<int32_t>(j) - 1; ++j) {
        state.held.push_back(proposal.tokens[j]);
      }
    }
    if (kinds[i] != EntryKind::kBlock) {
      state.shadow = std::move(proposal.tokens);
      state.shadow_start = static_cast<int>(state.context.size());
      state.shadow_tried_at = state.shadow_start;
      if (kinds[i] == EntryKind::kShadowAndEmptyBlock)
        EmitBlock(ids[i], state, {}, {}, {}, out, alone_tokens[i], spec::SpecMode::kOff);
      continue;
    }
    spec::SpecAction action = actions[i];
    if (!proposal.confidence.empty() && !drafter_reports_classes_) {
      drafter_reports_classes_ = true;
      ++generation_;  // trees are now asked whole and cut by their classes
    }
    if (tree_asked[i] && state.adaptive_k && prefix.tokens.empty() && !proposal.parents.empty() &&
        proposal.confidence.size() == proposal.tokens.size()) {
      const int proposed = static_cast<int>(proposal.tokens.size());
      // A tree cut to what its classes pay for, or its first path as a chain (then
      // priced by the chain rule below like any chain proposal).
      if (!CutTreeByClasses(state, proposal, action)) tree_asked[i] = false;
      counters_.draft_tokens_cut += proposed - static_cast<int>(proposal.tokens.size());
    }
    if (state.adaptive_k && prefix.tokens.empty() && proposal.parents.empty() &&
        !proposal.confidence.empty() && proposal.confidence.size() == proposal.tokens.size()) {
      // The policy prices the proposal itself (its classes): it keeps the prefix
      // that pays, or sends none (the target decides this position alone).
      spec::SpecChoices choices = AdaptiveChoices();
      choices.proposal = proposal.confidence;
      action = spec::ChooseSpecAction(Estimates(state), choices, state.spec_mode);
      const size_t keep = action.mode == spec::SpecMode::kOff
                              ? 0
                              : std::min<size_t>(std::max(0, action.k), proposal.tokens.size());
      counters_.draft_tokens_cut += proposal.tokens.size() - keep;
      proposal.tokens.resize(keep);
      proposal.confidence.resize(keep);
      if (proposal.q.size() > keep) proposal.q.resize(keep);
      if (proposal.top.size() > keep) proposal.top.resize(keep);
      action.k = static_cast<int>(keep);
      if (keep == 0) {
        ++counters_.proposals_withheld;
        EmitBlock(ids[i], state, {}, {}, {}, out, 0, spec::SpecMode::kOff);
        continue;
      }
    }
    // A partial hit: its pre-drafted tokens, then the rest drafted now.
    prefix.tokens.insert(prefix.tokens.end(), proposal.tokens.begin(), proposal.tokens.end());
    prefix.q.insert(prefix.q.end(), proposal.q.begin(), proposal.q.end());
    if (prefix.top.size() + proposal.top.size() == prefix.tokens.size()) {
      prefix.top.insert(prefix.top.end(), proposal.top.begin(), proposal.top.end());
    } else {
      prefix.top.clear();
    }
    // Classes describe the drafter's own proposal: none for a partial cache hit.
    std::vector<int8_t> confidence;
    if (prefix.tokens.size() == proposal.confidence.size())
      confidence = std::move(proposal.confidence);
    const int requested = std::min(action.k, state.max_length -
                                                 static_cast<int>(state.context.size()));
    EmitBlock(ids[i], state, std::move(prefix.tokens), std::move(prefix.q), std::move(prefix.top),
              out, alone_tokens[i], requested > 0 ? action.mode : spec::SpecMode::kOff,
              requested, std::move(proposal.parents), tree_asked[i], std::move(confidence));
  }
  return absl::OkStatus();
}

absl::Status DraftEngine::StepCache() {
  // One draft forward for every request's likeliest open branch, so that a
  // result is read (by the caller's loop) at most one forward after it arrives.
  std::vector<spec::DraftRequest> batch;
  std::vector<std::string> ids;
  std::vector<int> branches;
  std::deque<std::vector<int32_t>> contexts;
  for (auto& [id, state] : requests_) {
    if (!HasCacheWork(state)) continue;
    const spec::CacheWork work = *state.cache->Next();
    std::vector<int32_t>& context =
        contexts.emplace_back(state.context.begin(), state.context.begin() + state.cache_base);
    const std::vector<int32_t> prefix = state.cache->Prefix(work.branch);
    context.insert(context.end(), prefix.begin(), prefix.end());
    const spec::CacheBranch& branch = state.cache->branches()[work.branch];
    context.insert(context.end(), branch.tokens.begin(), branch.tokens.end());
    if (static_cast<int>(context.size()) >= state.max_length) {
      state.cache->Close(work.branch);  // past the request's end: nothing to pre-draft
      continue;
    }
    batch.push_back(MakeDraftRequest(id, state, &context, 1));
    ids.push_back(id);
    branches.push_back(work.branch);
  }
  if (batch.empty()) return absl::OkStatus();
  RETURN_IF_ERROR(ProposeMeasured(absl::MakeSpan(batch)));
  for (size_t i = 0; i < batch.size(); ++i) {
    spec::DraftRequest& proposal = batch[i];
    RequestState& state = requests_[ids[i]];
    if (!proposal.status.ok() || proposal.tokens.empty()) {
      // The branch stays as far as it got; the request's own blocks restart the
      // drafter if it keeps failing.
      SPLITSPEC_LOG(WARNING) << "request " << ids[i] << ": cache draft failed: " << proposal.status;
      state.cache->Close(branches[i]);
      if (!proposal.status.ok()) RestartDrafter(ids[i], state);
      continue;
    }
    state.held.assign(proposal.context.begin(), proposal.context.end());
    state.held.insert(state.held.end(), proposal.tokens.begin(), proposal.tokens.end());
    state.cache->Extend(branches[i], proposal.tokens, proposal.q, proposal.top);
  }
  return absl::OkStatus();
}

}  // namespace splitspec::draft

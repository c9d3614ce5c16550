#include "draft_worker/draft_engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/spec_proto.h"

namespace splitspec::draft {
namespace {

size_t CommonPrefix(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t n = 0;
  while (n < a.size() && n < b.size() && a[n] == b[n]) ++n;
  return n;
}

}  // namespace

DraftEngine::DraftEngine(spec::Drafter* drafter, DraftEngineOptions options)
    : drafter_(drafter),
      options_(options),
      verify_cost_(std::make_shared<spec::VerifyCostCurve>(options.adaptive.verify_cost_slope,
                                                           options.adaptive.decay)) {}

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
  state.params = params;
  state.mode = net::VerifyModeFromProto(assignment.verify_mode(), params);
  state.k = assignment.draft_k() > 0 ? static_cast<int>(assignment.draft_k()) : options_.default_k;
  if (assignment.draft_k() == 0 && options_.adaptive_default) {
    spec::AdaptiveDraftLengthConfig config = options_.adaptive;
    config.schedule =
        options_.lookahead_blocks > 1 ? spec::Schedule::kOverlapped : spec::Schedule::kSequential;
    RETURN_IF_ERROR(config.Validate());
    state.adaptive.emplace(config, verify_cost_);
  }
  const int max_new = assignment.params().max_tokens() > 0
                          ? static_cast<int>(assignment.params().max_tokens())
                          : 1 << 20;
  state.max_length = static_cast<int>(assignment.prompt_length()) + max_new;
  state.committed_length = static_cast<int>(committed.size());
  state.drafter_held = state.committed_length;
  state.context = std::move(committed);
  state.epoch = assignment.epoch();
  requests_[id] = std::move(state);
  return absl::OkStatus();
}

void DraftEngine::Release(const std::string& request_id) {
  if (requests_.erase(request_id) > 0) drafter_->Release(request_id);
}

int DraftEngine::KnownFrontier(const std::string& request_id) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? -1 : it->second.committed_length;
}

void DraftEngine::Resync(const std::string& id, RequestState& state, std::vector<int32_t> committed,
                         uint64_t epoch) {
  const size_t keep = std::min<size_t>(CommonPrefix(state.context, committed), state.drafter_held);
  absl::Status truncated = drafter_->Truncate(id, static_cast<int64_t>(keep));
  if (truncated.ok()) {
    state.drafter_held = static_cast<int>(keep);
  } else {
    SPLITSPEC_LOG(ERROR) << "request " << id << ": " << truncated;
  }
  state.context = std::move(committed);
  state.committed_length = static_cast<int>(state.context.size());
  state.epoch = epoch;
  state.blocks_in_flight = 0;
  state.sent.clear();  // blocks of the old epoch are dropped by the target: no result comes back
}

void DraftEngine::LearnFromResult(RequestState& state, const proto::VerifyResult& result,
                                  bool new_epoch) {
  auto sent = state.sent.find(result.block_sequence());
  if (sent == state.sent.end()) return;
  const RequestState::SentBlock block = sent->second;
  state.sent.erase(sent);
  // The target's time on this block: from when it could start on it (sent, or
  // the previous result if it was still busy with that block) to its result.
  // With lookahead > 1 the block waited behind its predecessor; the round trip
  // alone would count that wait twice.
  // The first result of a request also paid for the prompt's prefill: no sample.
  const absl::Time now = absl::Now();
  const bool first = state.last_result == absl::InfinitePast();
  const double step_seconds = absl::ToDoubleSeconds(now - std::max(block.sent, state.last_result));
  state.last_result = now;
  if (!state.adaptive.has_value()) return;
  if (!first) state.adaptive->RecordVerify(block.drafted, step_seconds);
  if (block.drafted == 0) {
    state.adaptive->RecordTargetOnlyStep();
    return;
  }
  const int accepted = std::min<int>(static_cast<int>(result.accepted()), block.drafted);
  state.adaptive->RecordBlock(block.drafted, accepted, new_epoch && accepted < block.drafted);
  if (!first) {
    state.adaptive->RecordCosts(step_seconds / state.adaptive->curve().Relative(block.drafted),
                                draft_seconds_per_token_);
  }
}

ResultAction DraftEngine::OnResult(const proto::VerifyResult& result) {
  auto it = requests_.find(result.request_id());
  if (it == requests_.end()) return ResultAction::kIgnored;
  RequestState& state = it->second;
  if (!result.full_sequence()) LearnFromResult(state, result, result.epoch() > state.epoch);
  if (result.finished()) {
    Release(result.request_id());
    return ResultAction::kFinished;
  }
  std::vector<int32_t> tokens(result.committed_tokens().begin(), result.committed_tokens().end());
  if (result.full_sequence()) {
    if (result.epoch() < state.epoch) return ResultAction::kIgnored;
    ++counters_.syncs;
    Resync(result.request_id(), state, std::move(tokens), result.epoch());
    return ResultAction::kApplied;
  }
  const int frontier = static_cast<int>(result.frontier());
  const int base = frontier - static_cast<int>(tokens.size());
  if (result.epoch() < state.epoch || frontier <= state.committed_length)
    return ResultAction::kIgnored;
  if (base != state.committed_length) return ResultAction::kNeedSync;  // a result went missing
  if (result.epoch() == state.epoch) {
    // Full acceptance without bonus: the tokens are our own draft.
    state.committed_length = frontier;
    state.blocks_in_flight = std::max(0, state.blocks_in_flight - 1);
    return ResultAction::kApplied;
  }
  ++counters_.epochs_seen;
  std::vector<int32_t> committed(state.context.begin(), state.context.begin() + base);
  committed.insert(committed.end(), tokens.begin(), tokens.end());
  Resync(result.request_id(), state, std::move(committed), result.epoch());
  return ResultAction::kApplied;
}

void DraftEngine::RestartDrafter(const std::string& id, RequestState& state) {
  drafter_->Release(id);
  const std::vector<int32_t> committed(state.context.begin(),
                                       state.context.begin() + state.committed_length);
  absl::Status started = drafter_->Start(id, committed);
  state.drafter_held = started.ok() ? state.committed_length : 0;
  if (!started.ok())
    SPLITSPEC_LOG(ERROR) << "request " << id << ": drafter restart failed: " << started;
}

bool DraftEngine::HasRoom(const RequestState& state) const {
  if (state.blocks_in_flight >= options_.lookahead_blocks) return false;
  if (static_cast<int>(state.context.size()) >= state.max_length) return false;
  // After an empty block the target decides that position itself and starts a
  // new epoch, so any block sent before its result would be stale: wait for it.
  return state.sent.empty() || state.sent.rbegin()->second.drafted > 0;
}

bool DraftEngine::HasWork() const {
  for (const auto& [id, state] : requests_) {
    if (HasRoom(state)) return true;
  }
  return false;
}

absl::Status DraftEngine::Step(std::vector<OutgoingBlock>* out) {
  std::vector<spec::DraftRequest> batch;
  std::vector<std::string> ids;
  for (auto& [id, state] : requests_) {
    const int room = state.max_length - static_cast<int>(state.context.size());
    if (!HasRoom(state)) continue;
    const int k = state.adaptive.has_value() ? state.adaptive->NextK() : state.k;
    spec::DraftRequest request;
    request.request_id = id;
    request.context = state.context;
    // k = 0 (speculation predicted to lose): the drafter proposes nothing and
    // an empty block lets the target decide this position.
    request.k = std::min(k, room);
    request.mode = state.mode;
    request.params = state.params;
    request.q_top_k = options_.q_top_k;
    batch.push_back(std::move(request));
    ids.push_back(id);
  }
  if (batch.empty()) return absl::OkStatus();
  ++counters_.propose_calls;
  const absl::Time propose_start = absl::Now();
  RETURN_IF_ERROR(drafter_->Propose(absl::MakeSpan(batch)));
  size_t proposed = 0;
  for (const spec::DraftRequest& r : batch) proposed += r.tokens.size();
  if (proposed > 0)
    draft_seconds_per_token_ = absl::ToDoubleSeconds(absl::Now() - propose_start) / proposed;
  for (size_t i = 0; i < batch.size(); ++i) {
    spec::DraftRequest& proposal = batch[i];
    RequestState& state = requests_[ids[i]];
    if (!proposal.status.ok()) {
      // Never spin on a failing request: restart its drafter state and send an
      // empty block, so the target chooses this position itself.
      ++counters_.draft_failures;
      SPLITSPEC_LOG(WARNING) << "request " << ids[i] << ": draft failed: " << proposal.status;
      RestartDrafter(ids[i], state);
      proposal.tokens.clear();
      proposal.q.clear();
    }
    OutgoingBlock outgoing;
    outgoing.target_endpoint = state.target_endpoint;
    proto::DraftBlock& block = outgoing.block;
    block.set_request_id(ids[i]);
    block.set_epoch(state.epoch);
    block.set_start(static_cast<uint32_t>(state.context.size()));
    block.set_block_sequence(state.next_block_sequence++);
    // An empty block tells the target "nothing to propose here; choose yourself".
    block.mutable_tokens()->Assign(proposal.tokens.begin(), proposal.tokens.end());
    for (const spec::SparseDistribution& q : proposal.q) net::SparseToProto(q, block.add_q());
    state.context.insert(state.context.end(), proposal.tokens.begin(), proposal.tokens.end());
    if (proposal.status.ok()) state.drafter_held = static_cast<int>(state.context.size());
    ++state.blocks_in_flight;
    state.sent[block.block_sequence()] = {static_cast<int>(proposal.tokens.size()), absl::Now()};
    ++counters_.blocks_sent;
    counters_.tokens_drafted += proposal.tokens.size();
    out->push_back(std::move(outgoing));
  }
  return absl::OkStatus();
}

}  // namespace splitspec::draft

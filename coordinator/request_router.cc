#include "coordinator/request_router.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/wire_format.h"

namespace splitspec::coordinator {

void RequestRouter::OnWorkerAlive(const proto::MemberStatus& member, const std::string& peer,
                                  std::vector<Outgoing>* out) {
  if (member.role() == proto::ROLE_TARGET_WORKER && member.tp_rank() > 0) {
    followers_[member.worker_id()] = {peer, member.tp_group()};
    return;
  }
  const bool usable =
      member.role() == proto::ROLE_DRAFT_WORKER || member.role() == proto::ROLE_TARGET_WORKER;
  if (!usable) return;
  Worker& worker = workers_[member.worker_id()];
  worker.role = member.role();
  worker.peer = peer;
  worker.data_endpoint = member.data_endpoint();
  worker.tp_group = member.tp_group();
  worker.runs_trees = member.capabilities().runs_trees();
  for (auto& [id, request] : requests_) {
    if (request.state == State::kQueued) {
      Place(id, request, out);
    } else if (request.state == State::kRunning && member.role() == proto::ROLE_DRAFT_WORKER &&
               request.draft_id == 0 && request.submit.drafter() != "none") {
      // A new draft worker takes over requests that were decoding alone.
      request.draft_id = member.worker_id();
      ++worker.load;
      ++counters_.reassigned_draft;
      proto::Envelope assignment = MakeAssignment(id, request);
      SendToWorker(request.target_id, assignment, out);
      SendToWorker(request.draft_id, std::move(assignment), out);
    }
  }
}

void RequestRouter::OnWorkerGone(uint64_t worker_id, std::vector<Outgoing>* out) {
  followers_.erase(worker_id);
  if (workers_.erase(worker_id) == 0) return;
  for (auto& [id, request] : requests_) {
    if (request.state != State::kRunning) continue;
    if (request.target_id == worker_id) {
      ReplaceTarget(id, request, "target worker lost", out);
    } else if (request.draft_id == worker_id) {
      ReplaceDraft(id, request, /*release_old=*/false, out);
    }
  }
}

void RequestRouter::OnWorkerLoad(uint64_t worker_id, const proto::LoadReport& load) {
  auto it = workers_.find(worker_id);
  if (it == workers_.end() || it->second.role != proto::ROLE_TARGET_WORKER) return;
  Worker& worker = it->second;
  if (load.kv_cache_budget_bytes() == 0 || load.kv_cache_bytes_per_position() == 0) {
    worker.kv_free_bytes.reset();
    return;
  }
  const uint64_t used = load.kv_cache_used_bytes();
  worker.kv_free_bytes =
      used >= load.kv_cache_budget_bytes() ? 0 : load.kv_cache_budget_bytes() - used;
  worker.kv_bytes_per_position = load.kv_cache_bytes_per_position();
}

uint64_t RequestRouter::ChooseTarget(const Request& request) const {
  uint64_t best = 0;
  int best_load = 0;
  for (const auto& [id, worker] : workers_) {
    if (worker.role != proto::ROLE_TARGET_WORKER || worker.draining) continue;
    const bool room =
        !worker.kv_free_bytes.has_value() ||
        *worker.kv_free_bytes / worker.kv_bytes_per_position >= request.committed.size();
    if (!room) continue;
    if (best == 0 || worker.load < best_load) {
      best = id;
      best_load = worker.load;
    }
  }
  return best != 0 ? best : LeastLoaded(proto::ROLE_TARGET_WORKER);
}

void RequestRouter::OnSubmit(const std::string& client_peer, const proto::SubmitRequest& submit,
                             std::vector<Outgoing>* out) {
  ++counters_.submitted;
  const std::string id = submit.request_id().empty() ? absl::StrCat("req-", net::RandomHexId128())
                                                     : submit.request_id();
  if (requests_.contains(id)) {
    return Refuse(client_peer, id, proto::ERROR_CODE_INVALID_ARGUMENT,
                  absl::StrCat("request_id '", id, "' is already in use"), out);
  }
  if (submit.prompt_tokens_size() == 0) {
    return Refuse(client_peer, id, proto::ERROR_CODE_INVALID_ARGUMENT, "prompt_tokens is empty",
                  out);
  }
  const int max_tokens = submit.params().max_tokens() > 0
                             ? static_cast<int>(submit.params().max_tokens())
                             : options_.default_max_new_tokens;
  if (max_tokens > options_.max_new_tokens) {
    return Refuse(
        client_peer, id, proto::ERROR_CODE_INVALID_ARGUMENT,
        absl::StrCat("max_tokens ", max_tokens, " exceeds the limit ", options_.max_new_tokens),
        out);
  }
  if (submit.prompt_tokens_size() + max_tokens > options_.context_length) {
    return Refuse(
        client_peer, id, proto::ERROR_CODE_INVALID_ARGUMENT,
        absl::StrCat("prompt of ", submit.prompt_tokens_size(), " tokens plus max_tokens ",
                     max_tokens, " exceeds the context length ", options_.context_length),
        out);
  }
  if (queued() >= options_.max_queued) {
    return Refuse(client_peer, id, proto::ERROR_CODE_RESOURCE_EXHAUSTED,
                  absl::StrCat("queue is full (", options_.max_queued, " requests waiting)"), out);
  }
  if (LeastLoaded(proto::ROLE_TARGET_WORKER) == 0) {
    return Refuse(
        client_peer, id, proto::ERROR_CODE_UNAVAILABLE,
        "no target group is serving (none registered, or all dead or draining); retry later", out);
  }
  Request& request = requests_[id];
  request.client_peer = client_peer;
  request.submit = submit;
  request.submit.set_request_id(id);
  request.submit.mutable_params()->set_max_tokens(static_cast<uint32_t>(max_tokens));
  request.committed.assign(submit.prompt_tokens().begin(), submit.prompt_tokens().end());
  request.prompt_length = submit.prompt_tokens_size();
  request.streamed = request.prompt_length;
  Place(id, request, out);
}

absl::Status RequestRouter::OnCancel(const std::string& client_peer, const proto::Cancel& cancel,
                                     std::vector<Outgoing>* out) {
  auto it = requests_.find(cancel.request_id());
  if (it == requests_.end()) return absl::OkStatus();
  if (it->second.client_peer != client_peer) {
    return absl::PermissionDeniedError(absl::StrCat("request '", cancel.request_id(),
                                                    "' was submitted by another client"));
  }
  Finish(it->first, it->second, proto::FINISH_REASON_CANCELLED, out);
  return absl::OkStatus();
}

void RequestRouter::OnResult(const std::string& peer, const proto::VerifyResult& result,
                             std::vector<Outgoing>* out) {
  auto it = requests_.find(result.request_id());
  if (it == requests_.end() || it->second.state != State::kRunning) return;
  Request& request = it->second;
  if (!ServedBy(request, peer)) {
    // A target the request was taken from (drain timeout) answering late.
    ++counters_.ignored_results;
    return;
  }
  const std::vector<int32_t> tokens(result.committed_tokens().begin(),
                                    result.committed_tokens().end());
  if (result.full_sequence()) {
    if (tokens.size() >= request.committed.size()) request.committed = tokens;
  } else if (static_cast<int64_t>(result.frontier()) - static_cast<int64_t>(tokens.size()) ==
             static_cast<int64_t>(request.committed.size())) {
    request.committed.insert(request.committed.end(), tokens.begin(), tokens.end());
  }  // else: an update was lost or reordered; the final full sequence closes the gap
  MergeLogprobs(result, request);
  request.epoch = std::max(request.epoch, result.epoch());
  request.stats = result.stats();
  if (result.finished()) {
    Finish(it->first, request, result.finish_reason(), out);
  } else {
    Stream(it->first, request, out);
  }
}

void RequestRouter::OnWorkerError(const std::string& peer, const proto::Error& error,
                                  std::vector<Outgoing>* out) {
  auto it = requests_.find(error.request_id());
  if (it == requests_.end()) return;
  if (!ServedBy(it->second, peer)) {
    ++counters_.ignored_results;
    return;
  }
  proto::Envelope envelope = net::NewEnvelope();
  *envelope.mutable_error() = error;
  out->push_back({it->second.client_peer, std::move(envelope)});
  Finish(it->first, it->second, proto::FINISH_REASON_ERROR, out);
}

int RequestRouter::queued() const {
  return static_cast<int>(std::count_if(requests_.begin(), requests_.end(), [](const auto& r) {
    return r.second.state == State::kQueued;
  }));
}

int RequestRouter::running() const {
  return static_cast<int>(std::count_if(requests_.begin(), requests_.end(), [](const auto& r) {
    return r.second.state == State::kRunning;
  }));
}

std::vector<int32_t> RequestRouter::Committed(const std::string& request_id) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() ? std::vector<int32_t>() : it->second.committed;
}

void RequestRouter::Place(const std::string& id, Request& request, std::vector<Outgoing>* out) {
  const uint64_t target = ChooseTarget(request);
  if (target == 0) return;  // stays queued until a target group registers
  request.state = State::kRunning;
  request.queued_since = absl::InfiniteFuture();
  request.target_id = target;
  Worker& chosen = workers_[target];
  ++chosen.load;
  if (chosen.kv_free_bytes.has_value()) {  // until its next heartbeat says otherwise
    const uint64_t prompt = chosen.kv_bytes_per_position * request.committed.size();
    chosen.kv_free_bytes = *chosen.kv_free_bytes > prompt ? *chosen.kv_free_bytes - prompt : 0;
  }
  request.draft_id = request.submit.drafter() == "none" ? 0 : LeastLoaded(proto::ROLE_DRAFT_WORKER);
  if (request.draft_id != 0) ++workers_[request.draft_id].load;
  proto::Envelope assignment = MakeAssignment(id, request);
  SendToWorker(request.target_id, assignment, out);
  if (request.draft_id != 0) SendToWorker(request.draft_id, std::move(assignment), out);
}

void RequestRouter::ReplaceDraft(const std::string& id, Request& request, bool release_old,
                                 std::vector<Outgoing>* out) {
  if (auto it = workers_.find(request.draft_id); it != workers_.end()) {
    if (release_old) {
      proto::Envelope release = net::NewEnvelope();
      release.mutable_release()->set_request_id(id);
      release.mutable_release()->set_reason("draft worker draining");
      SendToWorker(request.draft_id, std::move(release), out);
    }
    --it->second.load;
  }
  ++counters_.reassigned_draft;
  request.draft_id = request.submit.drafter() == "none" ? 0 : LeastLoaded(proto::ROLE_DRAFT_WORKER);
  if (request.draft_id != 0) ++workers_[request.draft_id].load;
  proto::Envelope assignment = MakeAssignment(id, request);
  SendToWorker(request.target_id, assignment, out);
  if (request.draft_id != 0) SendToWorker(request.draft_id, std::move(assignment), out);
}

void RequestRouter::ReplaceTarget(const std::string& id, Request& request,
                                  const std::string& reason, std::vector<Outgoing>* out) {
  // Re-prefill elsewhere from the committed tokens; the old draft restarts too.
  ++counters_.reassigned_target;
  for (uint64_t worker_id : {request.target_id, request.draft_id}) {
    auto it = workers_.find(worker_id);
    if (worker_id == 0 || it == workers_.end()) continue;  // gone: nothing to release
    proto::Envelope release = net::NewEnvelope();
    release.mutable_release()->set_request_id(id);
    release.mutable_release()->set_reason(reason);
    SendToWorker(worker_id, std::move(release), out);
    --it->second.load;
  }
  request.target_id = request.draft_id = 0;
  request.state = State::kQueued;
  ++request.epoch;
  Place(id, request, out);
}

bool RequestRouter::Holds(const std::string& request_id, const std::string& peer) const {
  auto it = requests_.find(request_id);
  return it == requests_.end() || it->second.state != State::kRunning ||
         ServedBy(it->second, peer);
}

bool RequestRouter::ServedBy(const Request& request, const std::string& peer) const {
  for (uint64_t worker_id : {request.target_id, request.draft_id}) {
    auto it = workers_.find(worker_id);
    if (worker_id != 0 && it != workers_.end() && it->second.peer == peer) return true;
  }
  // A worker the router does not know (any more) cannot be serving it; an
  // unknown sender of a known worker's request is someone it was taken from.
  return false;
}

uint64_t RequestRouter::LeastLoaded(proto::Role role) const {
  uint64_t best = 0;
  int best_load = 0;
  for (const auto& [id, worker] : workers_) {
    if (worker.role != role || worker.draining) continue;
    if (best == 0 || worker.load < best_load) {
      best = id;
      best_load = worker.load;
    }
  }
  return best;
}

proto::Envelope RequestRouter::MakeAssignment(const std::string& id, const Request& request) const {
  proto::Envelope envelope = net::NewEnvelope();
  proto::Assignment* a = envelope.mutable_assignment();
  a->set_request_id(id);
  a->set_target_worker_id(request.target_id);
  if (auto it = workers_.find(request.target_id); it != workers_.end()) {
    a->set_target_endpoint(it->second.data_endpoint);
    a->set_target_runs_trees(it->second.runs_trees);
  }
  a->set_draft_worker_id(request.draft_id);
  a->mutable_committed_tokens()->Assign(request.committed.begin(), request.committed.end());
  a->set_prompt_length(static_cast<uint32_t>(request.prompt_length));
  *a->mutable_params() = request.submit.params();
  a->set_verify_mode(request.submit.verify_mode());
  a->set_draft_k(request.submit.draft_k());
  a->set_drafter(request.submit.drafter());
  a->set_epoch(request.epoch);
  return envelope;
}

void RequestRouter::SendToWorker(uint64_t worker_id, proto::Envelope envelope,
                                 std::vector<Outgoing>* out) const {
  auto it = workers_.find(worker_id);
  if (it != workers_.end()) out->push_back({it->second.peer, std::move(envelope)});
}

void RequestRouter::MergeLogprobs(const proto::VerifyResult& result, Request& request) {
  int64_t next = request.prompt_length + static_cast<int64_t>(request.logprobs.size());
  for (int j = 0; j < result.logprobs_size(); ++j) {
    const int64_t position = int64_t{result.logprobs_start()} + j;
    if (position < next) continue;  // had it already
    if (position > next || position >= static_cast<int64_t>(request.committed.size())) break;
    request.logprobs.push_back(result.logprobs(j));
    ++next;
  }
}

void RequestRouter::Stream(const std::string& id, Request& request, std::vector<Outgoing>* out) {
  const bool finished = request.state == State::kFinished;
  const int from = std::max(request.streamed, request.prompt_length);
  int to = static_cast<int>(request.committed.size());
  // A request with logprobs streams a token with its entry (they come in the
  // same result); at the end whatever is left goes, and the client sees any
  // entry missing (the front door fails such a response rather than omit them).
  if (request.submit.params().has_logprobs() && !finished) {
    to = std::min(to, request.prompt_length + static_cast<int>(request.logprobs.size()));
  }
  if (!finished && from >= to) return;
  proto::Envelope envelope = net::NewEnvelope();
  proto::TokenStream* stream = envelope.mutable_token_stream();
  stream->set_request_id(id);
  for (int i = from; i < to; ++i) {
    stream->add_tokens(request.committed[i]);
    const int entry = i - request.prompt_length;
    if (entry < static_cast<int>(request.logprobs.size())) {
      *stream->add_logprobs() = request.logprobs[entry];
    }
  }
  stream->set_frontier(static_cast<uint32_t>(request.committed.size()));
  stream->set_finished(finished);
  *stream->mutable_stats() = request.stats;
  request.streamed = std::max(from, to);
  out->push_back({request.client_peer, std::move(envelope)});
}

void RequestRouter::Finish(const std::string& id_ref, Request& request, proto::FinishReason reason,
                           std::vector<Outgoing>* out) {
  if (request.state == State::kFinished) return;
  const std::string id = id_ref;  // id_ref may be the map key erased below
  for (uint64_t worker_id : {request.target_id, request.draft_id}) {
    if (worker_id == 0) continue;
    proto::Envelope release = net::NewEnvelope();
    release.mutable_release()->set_request_id(id);
    release.mutable_release()->set_reason(proto::FinishReason_Name(reason));
    SendToWorker(worker_id, std::move(release), out);
    if (auto it = workers_.find(worker_id); it != workers_.end()) --it->second.load;
  }
  request.state = State::kFinished;
  switch (reason) {
    case proto::FINISH_REASON_STOP:
      ++counters_.finished_stop;
      break;
    case proto::FINISH_REASON_LENGTH:
      ++counters_.finished_length;
      break;
    case proto::FINISH_REASON_CANCELLED:
      ++counters_.cancelled;
      break;
    default:
      ++counters_.failed;
      break;
  }
  Stream(id, request, out);
  out->back().envelope.mutable_token_stream()->set_finish_reason(reason);
  requests_.erase(id);
}

void RequestRouter::Refuse(const std::string& client_peer, const std::string& id,
                           proto::ErrorCode code, const std::string& message,
                           std::vector<Outgoing>* out) {
  ++counters_.refused;
  proto::Envelope error = net::NewEnvelope();
  error.mutable_error()->set_code(code);
  error.mutable_error()->set_message(message);
  error.mutable_error()->set_request_id(id);
  out->push_back({client_peer, std::move(error)});
  proto::Envelope done = net::NewEnvelope();
  done.mutable_token_stream()->set_request_id(id);
  done.mutable_token_stream()->set_finished(true);
  done.mutable_token_stream()->set_finish_reason(proto::FINISH_REASON_ERROR);
  out->push_back({client_peer, std::move(done)});
}

absl::StatusOr<std::vector<uint64_t>> RequestRouter::StartDrain(const proto::DrainRequest& request,
                                                                absl::Time now,
                                                                std::vector<Outgoing>* out) {
  const bool by_role =
      request.role() == proto::ROLE_DRAFT_WORKER || request.role() == proto::ROLE_TARGET_WORKER;
  if (request.count() > 0 && request.worker_ids_size() > 0) {
    return absl::InvalidArgumentError("DrainRequest: set count or worker_ids, not both");
  }
  if (request.count() == 0 && request.worker_ids_size() == 0) {
    return absl::InvalidArgumentError(
        "DrainRequest names no worker: set count (with role) or worker_ids");
  }
  std::vector<uint64_t> chosen;
  if (request.worker_ids_size() > 0) {
    for (uint64_t id : request.worker_ids()) {
      if (auto f = followers_.find(id); f != followers_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "DrainRequest.worker_ids: worker ", id, " is a tensor-parallel follower of group '",
            f->second.tp_group, "'; drain the group's leader (tp_rank 0)"));
      }
      auto it = workers_.find(id);
      if (it == workers_.end()) {
        return absl::NotFoundError(absl::StrCat(
            "DrainRequest.worker_ids: no live draft worker or target group leader has id ", id));
      }
      if (by_role && it->second.role != request.role()) {
        return absl::InvalidArgumentError(absl::StrCat(
            "DrainRequest.worker_ids: worker ", id, " is a ", proto::Role_Name(it->second.role),
            ", not a ", proto::Role_Name(request.role())));
      }
      if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) chosen.push_back(id);
    }
  } else {
    if (!by_role) {
      return absl::InvalidArgumentError(
          absl::StrCat("DrainRequest.role must be ROLE_DRAFT_WORKER or ",
                       "ROLE_TARGET_WORKER with count, got ", proto::Role_Name(request.role())));
    }
    // The least-loaded ones; among equals the newest (highest id) first.
    std::vector<std::pair<int, uint64_t>> candidates;
    for (const auto& [id, worker] : workers_) {
      if (worker.role == request.role() && !worker.draining)
        candidates.push_back({worker.load, id});
    }
    std::sort(candidates.begin(), candidates.end(), [](const auto& a, const auto& b) {
      return a.first != b.first ? a.first < b.first : a.second > b.second;
    });
    if (request.count() > candidates.size()) {
      return absl::UnavailableError(
          absl::StrCat("DrainRequest.count ", request.count(), " exceeds the ", candidates.size(),
                       " ", proto::Role_Name(request.role()), "(s) not already draining"));
    }
    for (uint32_t i = 0; i < request.count(); ++i) chosen.push_back(candidates[i].second);
  }
  // Never strand a request: keep one target group serving while any waits or runs.
  int targets_kept = 0;
  bool drains_a_target = false;
  for (const auto& [id, worker] : workers_) {
    if (worker.role != proto::ROLE_TARGET_WORKER || worker.draining) continue;
    if (std::find(chosen.begin(), chosen.end(), id) == chosen.end()) {
      ++targets_kept;
    } else {
      drains_a_target = true;
    }
  }
  const int waiting = queued() + running();
  if (drains_a_target && targets_kept == 0 && waiting > 0) {
    return absl::UnavailableError(
        absl::StrCat("DrainRequest would leave no target group serving while ", waiting,
                     " request(s) are queued or running; add a target group first"));
  }
  if (drains_a_target && targets_kept == 0 && !request.force()) {
    return absl::UnavailableError(
        "DrainRequest would remove the last target group serving (the cluster would refuse "
        "every request); add a target group first, or set force");
  }
  const absl::Duration timeout =
      request.timeout_ms() > 0 ? absl::Milliseconds(request.timeout_ms()) : options_.drain_timeout;
  const std::string reason = request.reason().empty() ? "drain requested" : request.reason();
  std::vector<uint64_t> draining = chosen;
  for (uint64_t worker_id : chosen) {
    Worker& worker = workers_[worker_id];
    for (const auto& [follower_id, follower] : followers_) {
      if (!worker.tp_group.empty() && follower.tp_group == worker.tp_group)
        draining.push_back(follower_id);
    }
    if (worker.draining) continue;
    worker.draining = true;
    worker.drain_reason = reason;
    worker.drain_deadline = now + timeout;
    if (worker.role != proto::ROLE_DRAFT_WORKER) continue;
    for (auto& [id, r] : requests_) {
      if (r.state == State::kRunning && r.draft_id == worker_id)
        ReplaceDraft(id, r, /*release_old=*/true, out);
    }
  }
  SendDrains(out);
  return draining;
}

void RequestRouter::Tick(absl::Time now, std::vector<Outgoing>* out) {
  // With no other target group left (it died meanwhile), re-placing would only
  // queue the requests: they finish where they are instead.
  const bool elsewhere = LeastLoaded(proto::ROLE_TARGET_WORKER) != 0;
  for (auto& [worker_id, worker] : workers_) {
    if (!elsewhere || !worker.draining || worker.drain_sent || now < worker.drain_deadline)
      continue;
    for (auto& [id, request] : requests_) {
      if (request.state == State::kRunning && request.target_id == worker_id) {
        ReplaceTarget(id, request, "target group draining: drain timeout", out);
      }
    }
  }
  FailStaleQueued(now, out);
  SendDrains(out);
}

void RequestRouter::FailStaleQueued(absl::Time now, std::vector<Outgoing>* out) {
  std::vector<std::string> stale;
  for (auto& [id, request] : requests_) {
    if (request.state != State::kQueued) continue;
    if (request.queued_since == absl::InfiniteFuture()) request.queued_since = now;
    if (now - request.queued_since >= options_.queue_timeout) stale.push_back(id);
  }
  for (const std::string& id : stale) {
    Request& request = requests_[id];
    ++counters_.timed_out;
    proto::Envelope error = net::NewEnvelope();
    error.mutable_error()->set_code(proto::ERROR_CODE_UNAVAILABLE);
    error.mutable_error()->set_request_id(id);
    error.mutable_error()->set_message(absl::StrCat("no target group became available within ",
                                                    absl::FormatDuration(options_.queue_timeout),
                                                    " (the request waited queued; retry later)"));
    out->push_back({request.client_peer, std::move(error)});
    Finish(id, request, proto::FINISH_REASON_ERROR, out);
  }
}

bool RequestRouter::IsDraining(uint64_t worker_id) const {
  auto it = workers_.find(worker_id);
  return it != workers_.end() && it->second.draining;
}

bool RequestRouter::HoldsRequests(uint64_t worker_id) const {
  return std::any_of(requests_.begin(), requests_.end(), [worker_id](const auto& r) {
    return r.second.state == State::kRunning &&
           (r.second.target_id == worker_id || r.second.draft_id == worker_id);
  });
}

void RequestRouter::SendDrains(std::vector<Outgoing>* out) {
  for (auto& [worker_id, worker] : workers_) {
    if (!worker.draining || worker.drain_sent || HoldsRequests(worker_id)) continue;
    worker.drain_sent = true;
    ++counters_.drained;
    // Only the leader: it disbands its group's followers when it leaves (they
    // must not exit while it still runs a collective with them).
    proto::Envelope envelope = net::NewEnvelope();
    envelope.mutable_drain()->set_worker_id(worker_id);
    envelope.mutable_drain()->set_reason(worker.drain_reason);
    out->push_back({worker.peer, std::move(envelope)});
  }
}

}  // namespace splitspec::coordinator

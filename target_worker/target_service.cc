#include "target_worker/target_service.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/trace.h"
#include "runtime/net/wire_format.h"

namespace splitspec::target {

absl::StatusOr<std::unique_ptr<TargetService>> TargetService::Create(model::LanguageModel* model,
                                                                     TargetServiceOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<net::Channel> data,
                   net::ListenChannel(options.data_endpoint, net::DefaultChannelSecurity()));
  if (options.data_faults.has_value()) {
    data = std::make_unique<net::FaultInjectingChannel>(std::move(data), *options.data_faults);
  }
  std::unique_ptr<DeviceRows> device_rows;
  if (options.verify_device >= 0) {
    ASSIGN_OR_RETURN(device_rows,
                     NewCudaDeviceRows(options.verify_device, model->config().vocab_size,
                                       options.engine.max_requests));
  }
  options.identity.role = proto::ROLE_TARGET_WORKER;
  options.identity.data_endpoint = data->endpoint();
  ASSIGN_OR_RETURN(proto::Register registration, net::BuildRegistration(options.identity));
  registration.mutable_capabilities()->set_max_sequences(options.engine.max_requests);
  registration.mutable_capabilities()->set_max_batch_tokens(options.engine.step_token_budget);
  // Tree blocks run as one tree forward only on a host verifier (TargetEngine::RunsTree).
  registration.mutable_capabilities()->set_runs_trees(model->RunsTrees() &&
                                                      options.verify_device < 0);
  registration.mutable_model()->set_vocab_size(model->config().vocab_size);
  ASSIGN_OR_RETURN(std::unique_ptr<worker::WorkerSkeleton> skeleton,
                   worker::WorkerSkeleton::Connect(options.coordinator_endpoint, registration));
  std::unique_ptr<TargetService> service(
      new TargetService(model, std::move(options), std::move(data), std::move(skeleton)));
  if (device_rows != nullptr)
    RETURN_IF_ERROR(service->engine_.UseDeviceRows(std::move(device_rows)));
  return service;
}

TargetService::TargetService(model::LanguageModel* model, TargetServiceOptions options,
                             std::unique_ptr<net::Channel> data,
                             std::unique_ptr<worker::WorkerSkeleton> skeleton)
    : options_(std::move(options)),
      data_(std::move(data)),
      data_endpoint_(data_->endpoint()),
      skeleton_(std::move(skeleton)),
      data_security_(net::DefaultChannelSecurity()),
      model_(model),
      engine_(model, options_.engine),
      kv_bytes_per_position_(model->NewCache()->bytes_per_position()) {
  if (options_.local_drafter != nullptr)
    local_.emplace(options_.local_drafter, options_.local_draft);
  PublishLoad();  // the budget shows from the first heartbeat on
}

absl::Status TargetService::Assign(const proto::Assignment& assignment) {
  proto::Assignment adopted = assignment;
  if (local_.has_value()) {
    if (absl::Status local = local_->Adopt(&adopted); !local.ok()) {
      // The request still decodes, alone: drafting is an optimization.
      SPLITSPEC_LOG(WARNING) << "request " << assignment.request_id()
                             << " decodes without the local drafter: " << local;
    }
  }
  absl::Status added = engine_.AddRequest(adopted);
  if (!added.ok()) {
    if (local_.has_value()) local_->Release(assignment.request_id());
    return added;
  }
  TakeEarlyBlocks(assignment.request_id());
  return added;
}

absl::Status TargetService::Run(const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed) && !skeleton_->drain_requested()) {
    const absl::Time now = absl::Now();
    if (key_refresher_.Poll(now)) data_security_ = net::DefaultChannelSecurity();  // rotated keys
    RETURN_IF_ERROR(skeleton_->Tick(now));
    skeleton_->DispatchControl(*this);
    DrainData();
    if (local_.has_value()) {
      // Blocks for every request the last step decided (or that just arrived),
      // queued before the step that feeds them.
      if (absl::Status drafted = local_->Draft(engine_); !drafted.ok())
        SPLITSPEC_LOG(ERROR) << "local drafter failed: " << drafted;
    }
    if (engine_.HasWork(absl::Now())) {
      std::vector<TargetEvent> events;
      absl::Status step;
      const absl::Time step_start = absl::Now();
      {
        ScopedTrace span("target", "verify step");
        step = engine_.Step(step_start, &events, [this] { DrainData(); });
      }
      const absl::Time step_end = absl::Now();
      ReportLoad(step_end - step_start);
      if (Tracer::Global().enabled()) TraceStep(events, step_start, step_end);
      if (!step.ok() && options_.group_leader != nullptr && !options_.group_leader->status().ok()) {
        return LeaveBrokenGroup(step);
      }
      if (!step.ok()) SPLITSPEC_LOG(ERROR) << "target step failed: " << step;
      if (local_.has_value()) local_->TakeResults(engine_, &events);
      SendEvents(events);
      continue;
    }
    if (options_.group_leader != nullptr) {
      absl::Status alive = options_.group_leader->KeepAliveIfIdle(absl::Now());
      if (!alive.ok()) return LeaveBrokenGroup(alive);
    }
    absl::Time wake = std::min(skeleton_->NextWake(now), engine_.NextDeadline());
    if (local_.has_value() && local_->HasWork()) wake = now;  // a block to draft at once
    const absl::Time idle_start = absl::Now();
    net::WaitAnyReadable({&skeleton_->control_channel(), data_.get()},
                         std::max(wake - idle_start, absl::ZeroDuration()));
    // The target idle while a request waits (for a block, or to feed with one).
    if (Tracer::Global().enabled() && engine_.active_requests() > 0)
      Tracer::Global().Record("target.idle", "wait", idle_start, absl::Now());
  }
  return skeleton_->Leave(absl::StrCat("target worker '", options_.identity.name, "'"));
}

void TargetService::Release(const std::string& request_id) {
  engine_.Release(request_id);
  if (local_.has_value()) local_->Release(request_id);
  PublishLoad();
}

void TargetService::ReportLoad(absl::Duration step_time) {
  // An exponential moving average over ~10 steps: recent enough to show a
  // slow worker, smooth enough not to jump with one long prefill.
  const double ms = absl::ToDoubleMilliseconds(step_time);
  mean_step_ms_ = mean_step_ms_ == 0 ? ms : 0.9 * mean_step_ms_ + 0.1 * ms;
  PublishLoad();
}

void TargetService::PublishLoad() {
  proto::LoadReport load;
  load.set_active_requests(static_cast<uint32_t>(engine_.active_requests()));
  load.set_mean_step_ms(mean_step_ms_);
  load.set_cuda_graph_capture_fallbacks(
      static_cast<uint64_t>(model_->backend_counters().graph_capture_fallbacks));
  const model::KvBudget& kv = engine_.kv_budget();
  load.set_kv_cache_used_bytes(kv.used_bytes());
  load.set_kv_cache_budget_bytes(kv.budget_bytes());
  load.set_kv_cache_bytes_per_position(kv_bytes_per_position_);
  load.set_kv_cache_waiting_requests(static_cast<uint32_t>(engine_.kv_waiting_requests()));
  load.set_kv_cache_waits(kv.counters().waits);
  load.set_kv_cache_preemptions(kv.counters().preemptions);
  skeleton_->membership().set_load(load);
}

absl::Status TargetService::LeaveBrokenGroup(absl::Status failure) {
  SPLITSPEC_LOG(ERROR) << "tp group '" << options_.identity.tp_group << "' failed: " << failure
                       << "; leaving the cluster so its " << engine_.active_requests()
                       << " request(s) are re-placed";
  absl::Status left =
      skeleton_->membership().Deregister(absl::StrCat("tp group failed: ", failure.message()));
  if (!left.ok()) SPLITSPEC_LOG(WARNING) << "deregistering: " << left;
  return failure;
}

void TargetService::DrainData() {
  // A draft worker's key admitted at its handshake just now (or rotated) is known here too.
  if (data_->Readable() && key_refresher_.Poll(absl::Now()))
    data_security_ = net::DefaultChannelSecurity();
  while (data_->Readable()) {
    absl::StatusOr<net::Frame> frame = data_->Receive(absl::ZeroDuration());
    if (!frame.ok()) return;
    const proto::Envelope& envelope = frame->envelope;
    if (envelope.has_draft_block()) {
      TakeBlock(*std::move(frame));
    } else if (envelope.has_sync_request()) {
      if (absl::Status allowed = AuthorizeData(*frame, envelope.sync_request().request_id());
          absl::IsPermissionDenied(allowed)) {
        net::CountRefusedMessage();
        SPLITSPEC_LOG(WARNING) << "refused 'SyncRequest' from peer '" << frame->peer << "' at "
                               << (frame->peer_address.empty() ? "(in-process)"
                                                               : frame->peer_address)
                               << " on " << data_endpoint_ << ": " << allowed.message();
        continue;
      }
      absl::StatusOr<proto::VerifyResult> sync =
          engine_.SyncResult(envelope.sync_request().request_id());
      if (!sync.ok()) continue;  // released meanwhile: the coordinator tells the draft
      proto::Envelope reply = net::NewEnvelope();
      *reply.mutable_verify_result() = *std::move(sync);
      (void)data_->Send(frame->peer, reply);
    }
  }
}

void TargetService::TakeBlock(net::Frame frame) {
  const proto::DraftBlock& block = frame.envelope.draft_block();
  const absl::Status allowed = AuthorizeData(frame, block.request_id());
  if (absl::IsPermissionDenied(allowed)) {
    // A reassigned draft worker's late blocks land here too: refused quietly.
    net::CountRefusedMessage();
    SPLITSPEC_LOG(DEBUG) << "dropped DraftBlock from '" << frame.peer << "': " << allowed;
    return;
  }
  if (absl::IsNotFound(allowed)) {  // no Assignment yet, or released
    if (early_blocks_.size() >= static_cast<size_t>(std::max(1, options_.engine.max_requests)))
      early_blocks_.pop_front();
    early_blocks_.push_back({std::move(frame), absl::Now()});
    return;
  }
  if (Tracer::Global().enabled()) {
    Tracer::Global().Mark("block", absl::StrCat("received ", block.block_sequence()), absl::Now());
  }
  engine_.AddBlock(block, frame.peer);
}

void TargetService::TakeEarlyBlocks(const std::string& request_id) {
  const absl::Time oldest = absl::Now() - options_.engine.block_wait;
  std::deque<EarlyBlock> held = std::move(early_blocks_);
  early_blocks_.clear();
  for (EarlyBlock& early : held) {
    if (early.received < oldest) continue;
    if (early.frame.envelope.draft_block().request_id() == request_id) {
      SPLITSPEC_LOG(DEBUG) << "request " << request_id << ": block "
                           << early.frame.envelope.draft_block().block_sequence()
                           << " came before the assignment, taken now";
      TakeBlock(std::move(early.frame));
    } else {
      early_blocks_.push_back(std::move(early));
    }
  }
}

absl::Status TargetService::AuthorizeData(const net::Frame& frame,
                                          const std::string& request_id) const {
  if (frame.peer == LocalDrafts::PeerName()) {
    return absl::PermissionDeniedError(
        absl::StrCat("peer name '", frame.peer, "' is reserved for this target's own drafter"));
  }
  if ((data_security_.RolesOf(frame.peer_key) & net::kDraft) == 0) {
    return absl::PermissionDeniedError(
        absl::StrCat("key ", frame.peer_key, " is not a draft worker's key"));
  }
  return engine_.CheckDraftPeer(request_id, frame.peer, frame.peer_key);
}

void TargetService::TraceStep(const std::vector<TargetEvent>& events, absl::Time start,
                              absl::Time end) const {
  // Per step: whether it decided a draft block ("verified N", the block's
  // sequence), decided a position alone, or decided nothing (a token fed alone).
  bool decided = false;
  for (const TargetEvent& event : events) {
    const proto::VerifyResult& result = event.result;
    if (result.full_sequence()) continue;
    decided = true;
    if (event.draft_peer.empty()) continue;  // a request without a draft worker
    const std::string name = result.block_sequence() > 0
                                 ? absl::StrCat("verified ", result.block_sequence())
                                 : std::string("decided alone");
    Tracer::Global().Record("block", name, start, end);
  }
  if (!decided) Tracer::Global().Record("target.steps", "undecided", start, end);
}

void TargetService::SendEvents(std::vector<TargetEvent>& events) {
  for (TargetEvent& event : events) {
    proto::Envelope envelope = net::NewEnvelope();
    *envelope.mutable_verify_result() = std::move(event.result);
    if (!event.draft_peer.empty()) {
      // NotFound: that draft worker is not connected (yet, or any more).
      (void)data_->Send(event.draft_peer, envelope);
    }
    if (event.to_coordinator) skeleton_->SendToCoordinator(std::move(envelope));
  }
}

}  // namespace splitspec::target

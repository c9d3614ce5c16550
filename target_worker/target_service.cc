#include "target_worker/target_service.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/trace.h"
#include "runtime/net/wire_format.h"

namespace splitspec::target {

absl::StatusOr<std::unique_ptr<TargetService>> TargetService::Create(model::LanguageModel* model,
                                                                     TargetServiceOptions options) {
  ASSIGN_OR_RETURN(std::unique_ptr<net::Channel> data, net::ListenChannel(options.data_endpoint));
  if (options.data_faults.has_value()) {
    data = std::make_unique<net::FaultInjectingChannel>(std::move(data), *options.data_faults);
  }
  options.identity.role = proto::ROLE_TARGET_WORKER;
  options.identity.data_endpoint = data->endpoint();
  ASSIGN_OR_RETURN(proto::Register registration, net::BuildRegistration(options.identity));
  registration.mutable_capabilities()->set_max_sequences(options.engine.max_requests);
  registration.mutable_capabilities()->set_max_batch_tokens(options.engine.step_token_budget);
  registration.mutable_model()->set_vocab_size(model->config().vocab_size);
  ASSIGN_OR_RETURN(std::unique_ptr<net::MembershipClient> control,
                   net::MembershipClient::Connect(options.coordinator_endpoint, registration));
  return std::unique_ptr<TargetService>(
      new TargetService(model, std::move(options), std::move(data), std::move(control)));
}

TargetService::TargetService(model::LanguageModel* model, TargetServiceOptions options,
                             std::unique_ptr<net::Channel> data, std::unique_ptr<net::MembershipClient> control)
    : options_(std::move(options)),
      data_(std::move(data)),
      data_endpoint_(data_->endpoint()),
      control_(std::move(control)),
      engine_(model, options_.engine) {}

absl::Status TargetService::Run(const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed) && !drain_requested_) {
    const absl::Time now = absl::Now();
    RETURN_IF_ERROR(control_->SendDue(now));
    if (absl::Status flushed = to_coordinator_.Flush(control_->channel()); !flushed.ok()) {
      SPLITSPEC_LOG(WARNING) << "result to coordinator failed: " << flushed;
    }
    DrainControl();
    DrainData();
    if (engine_.HasWork(absl::Now())) {
      std::vector<TargetEvent> events;
      absl::Status step;
      const absl::Time step_start = absl::Now();
      {
        ScopedTrace span("target", "verify step");
        step = engine_.Step(step_start, &events);
      }
      ReportLoad(absl::Now() - step_start);
      if (!step.ok() && options_.group_leader != nullptr && !options_.group_leader->status().ok()) {
        return LeaveBrokenGroup(step);
      }
      if (!step.ok()) SPLITSPEC_LOG(ERROR) << "target step failed: " << step;
      SendEvents(events);
      continue;
    }
    if (options_.group_leader != nullptr) {
      absl::Status alive = options_.group_leader->KeepAliveIfIdle(absl::Now());
      if (!alive.ok()) return LeaveBrokenGroup(alive);
    }
    // Waiting results are retried every millisecond until the coordinator takes them.
    const absl::Duration poll = to_coordinator_.empty() ? absl::Milliseconds(50) : absl::Milliseconds(1);
    const absl::Time wake = std::min({control_->next_send(), engine_.NextDeadline(), now + poll});
    net::WaitAnyReadable({&control_->channel(), data_.get()}, std::max(wake - absl::Now(), absl::ZeroDuration()));
  }
  FlushBeforeLeaving();
  if (drain_requested_) {
    SPLITSPEC_LOG(INFO) << "target worker '" << options_.identity.name << "' drained; deregistering and exiting";
    return control_->Deregister("drained");
  }
  return control_->Deregister("shutdown");
}

void TargetService::ReportLoad(absl::Duration step_time) {
  // An exponential moving average over ~10 steps: recent enough to show a
  // slow worker, smooth enough not to jump with one long prefill.
  const double ms = absl::ToDoubleMilliseconds(step_time);
  mean_step_ms_ = mean_step_ms_ == 0 ? ms : 0.9 * mean_step_ms_ + 0.1 * ms;
  proto::LoadReport load;
  load.set_active_requests(static_cast<uint32_t>(engine_.active_requests()));
  load.set_mean_step_ms(mean_step_ms_);
  control_->set_load(load);
}

absl::Status TargetService::LeaveBrokenGroup(absl::Status failure) {
  SPLITSPEC_LOG(ERROR) << "tp group '" << options_.identity.tp_group << "' failed: " << failure
                       << "; leaving the cluster so its " << engine_.active_requests()
                       << " request(s) are re-placed";
  absl::Status left = control_->Deregister(absl::StrCat("tp group failed: ", failure.message()));
  if (!left.ok()) SPLITSPEC_LOG(WARNING) << "deregistering: " << left;
  return failure;
}

void TargetService::DrainControl() {
  while (control_->channel().Readable()) {
    absl::StatusOr<net::Frame> frame = control_->channel().Receive(absl::ZeroDuration());
    if (!frame.ok()) return;
    if (!control_->HandleReply(frame->envelope)) HandleControl(frame->envelope);
  }
}

void TargetService::HandleControl(const proto::Envelope& envelope) {
  if (envelope.has_assignment()) {
    absl::Status added = engine_.AddRequest(envelope.assignment());
    if (!added.ok()) SendError(envelope.assignment().request_id(), added);
  } else if (envelope.has_release()) {
    engine_.Release(envelope.release().request_id());
  } else if (envelope.has_cancel()) {
    engine_.Release(envelope.cancel().request_id());
  } else if (envelope.has_drain()) {
    // The coordinator has re-placed or seen finished every request here.
    SPLITSPEC_LOG(INFO) << "drain requested: " << envelope.drain().reason();
    drain_requested_ = true;
  } else {
    SPLITSPEC_LOG(DEBUG) << "target: ignored '" << net::BodyName(envelope) << "' on the control channel";
  }
}

void TargetService::DrainData() {
  while (data_->Readable()) {
    absl::StatusOr<net::Frame> frame = data_->Receive(absl::ZeroDuration());
    if (!frame.ok()) return;
    const proto::Envelope& envelope = frame->envelope;
    if (envelope.has_draft_block()) {
      engine_.AddBlock(envelope.draft_block(), frame->peer);
    } else if (envelope.has_sync_request()) {
      absl::StatusOr<proto::VerifyResult> sync = engine_.SyncResult(envelope.sync_request().request_id());
      if (!sync.ok()) continue;  // released meanwhile: the coordinator tells the draft
      proto::Envelope reply = net::NewEnvelope();
      *reply.mutable_verify_result() = *std::move(sync);
      (void)data_->Send(frame->peer, reply);
    }
  }
}

void TargetService::SendEvents(std::vector<TargetEvent>& events) {
  for (TargetEvent& event : events) {
    proto::Envelope envelope = net::NewEnvelope();
    *envelope.mutable_verify_result() = std::move(event.result);
    if (!event.draft_peer.empty()) {
      // NotFound: that draft worker is not connected (yet, or any more).
      (void)data_->Send(event.draft_peer, envelope);
    }
    if (event.to_coordinator) SendToCoordinator(std::move(envelope));
  }
}

void TargetService::SendError(const std::string& request_id, const absl::Status& status) {
  SPLITSPEC_LOG(WARNING) << "request " << request_id << " refused: " << status;
  proto::Envelope envelope = net::NewEnvelope();
  proto::Error* error = envelope.mutable_error();
  error->set_code(absl::IsResourceExhausted(status) ? proto::ERROR_CODE_RESOURCE_EXHAUSTED
                                                    : proto::ERROR_CODE_INVALID_ARGUMENT);
  error->set_message(std::string(status.message()));
  error->set_request_id(request_id);
  SendToCoordinator(std::move(envelope));
}

void TargetService::SendToCoordinator(proto::Envelope envelope) {
  absl::Status sent = to_coordinator_.Send(control_->channel(), std::move(envelope));
  if (!sent.ok()) SPLITSPEC_LOG(WARNING) << "result to coordinator failed: " << sent;
}

void TargetService::FlushBeforeLeaving() {
  const absl::Time give_up = absl::Now() + absl::Seconds(1);
  while (!to_coordinator_.empty() && absl::Now() < give_up) {
    (void)to_coordinator_.Flush(control_->channel());
    if (!to_coordinator_.empty()) absl::SleepFor(absl::Milliseconds(1));
  }
  if (!to_coordinator_.empty()) {
    SPLITSPEC_LOG(WARNING) << to_coordinator_.pending() << " result(s) for the coordinator were not sent";
  }
}

}  // namespace splitspec::target

#include "draft_worker/draft_service.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/trace.h"
#include "runtime/net/wire_format.h"

namespace splitspec::draft {

absl::StatusOr<std::unique_ptr<DraftService>> DraftService::Create(spec::Drafter* drafter,
                                                                   DraftServiceOptions options) {
  options.identity.role = proto::ROLE_DRAFT_WORKER;
  ASSIGN_OR_RETURN(proto::Register registration, net::BuildRegistration(options.identity));
  registration.mutable_capabilities()->add_drafters(std::string(drafter->name()));
  registration.mutable_capabilities()->set_max_sequences(options.engine.max_requests);
  ASSIGN_OR_RETURN(std::unique_ptr<net::MembershipClient> control,
                   net::MembershipClient::Connect(options.coordinator_endpoint, registration));
  return std::unique_ptr<DraftService>(new DraftService(drafter, std::move(options), std::move(control)));
}

DraftService::DraftService(spec::Drafter* drafter, DraftServiceOptions options,
                           std::unique_ptr<net::MembershipClient> control)
    : options_(std::move(options)), control_(std::move(control)), engine_(drafter, options_.engine) {}

absl::Status DraftService::Run(const std::atomic<bool>& stop) {
  while (!stop.load(std::memory_order_relaxed) && !drain_requested_) {
    const absl::Time now = absl::Now();
    RETURN_IF_ERROR(control_->SendDue(now));
    DrainControl();
    DrainTargets();
    if (engine_.HasWork()) {
      std::vector<OutgoingBlock> blocks;
      absl::Status step;
      {
        ScopedTrace span("draft", "draft step");
        step = engine_.Step(&blocks);
      }
      if (!step.ok()) SPLITSPEC_LOG(ERROR) << "draft step failed: " << step;
      for (OutgoingBlock& outgoing : blocks) {
        absl::StatusOr<net::Channel*> channel = TargetChannel(outgoing.target_endpoint);
        if (!channel.ok()) {
          SPLITSPEC_LOG(WARNING) << channel.status();
          continue;
        }
        proto::Envelope envelope = net::NewEnvelope();
        *envelope.mutable_draft_block() = std::move(outgoing.block);
        (void)(*channel)->Send("", envelope);
      }
      continue;
    }
    std::vector<net::Channel*> channels = {&control_->channel()};
    for (auto& [endpoint, channel] : targets_) channels.push_back(channel.get());
    const absl::Time wake = std::min(control_->next_send(), now + absl::Milliseconds(50));
    net::WaitAnyReadable(channels, std::max(wake - absl::Now(), absl::ZeroDuration()));
  }
  if (drain_requested_) {
    SPLITSPEC_LOG(INFO) << "draft worker '" << options_.identity.name << "' drained (" << engine_.active_requests()
                        << " request(s) left, all handed over); deregistering and exiting";
    return control_->Deregister("drained");
  }
  return control_->Deregister("shutdown");
}

absl::StatusOr<net::Channel*> DraftService::TargetChannel(const std::string& endpoint) {
  auto it = targets_.find(endpoint);
  if (it != targets_.end()) return it->second.get();
  if (!control_->registered()) return absl::UnavailableError("not registered yet");
  ASSIGN_OR_RETURN(std::unique_ptr<net::Channel> channel,
                   net::ConnectChannel(endpoint, net::DraftPeerName(control_->worker_id())));
  if (options_.data_faults.has_value()) {
    channel = std::make_unique<net::FaultInjectingChannel>(std::move(channel), *options_.data_faults);
  }
  net::Channel* raw = channel.get();
  targets_.emplace(endpoint, std::move(channel));
  return raw;
}

void DraftService::DrainControl() {
  while (control_->channel().Readable()) {
    absl::StatusOr<net::Frame> frame = control_->channel().Receive(absl::ZeroDuration());
    if (!frame.ok()) return;
    const proto::Envelope& envelope = frame->envelope;
    if (control_->HandleReply(envelope)) continue;
    if (envelope.has_assignment()) {
      absl::Status added = engine_.AddRequest(envelope.assignment());
      if (added.ok()) added = TargetChannel(envelope.assignment().target_endpoint()).status();
      if (!added.ok()) SendError(envelope.assignment().request_id(), added);
    } else if (envelope.has_release()) {
      engine_.Release(envelope.release().request_id());
    } else if (envelope.has_cancel()) {
      engine_.Release(envelope.cancel().request_id());
    } else if (envelope.has_drain()) {
      // The coordinator has handed every request here to other draft workers.
      SPLITSPEC_LOG(INFO) << "drain requested: " << envelope.drain().reason();
      drain_requested_ = true;
    }
  }
}

void DraftService::DrainTargets() {
  for (auto& [endpoint, channel] : targets_) {
    while (channel->Readable()) {
      absl::StatusOr<net::Frame> frame = channel->Receive(absl::ZeroDuration());
      if (!frame.ok()) break;
      if (!frame->envelope.has_verify_result()) continue;
      const proto::VerifyResult& result = frame->envelope.verify_result();
      if (engine_.OnResult(result) == ResultAction::kNeedSync) {
        proto::Envelope sync = net::NewEnvelope();
        sync.mutable_sync_request()->set_request_id(result.request_id());
        sync.mutable_sync_request()->set_known_frontier(
            static_cast<uint32_t>(std::max(0, engine_.KnownFrontier(result.request_id()))));
        (void)channel->Send("", sync);
      }
    }
  }
}

void DraftService::SendError(const std::string& request_id, const absl::Status& status) {
  SPLITSPEC_LOG(WARNING) << "request " << request_id << " refused: " << status;
  proto::Envelope envelope = net::NewEnvelope();
  proto::Error* error = envelope.mutable_error();
  error->set_code(proto::ERROR_CODE_INVALID_ARGUMENT);
  error->set_message(std::string(status.message()));
  error->set_request_id(request_id);
  (void)control_->channel().Send("", envelope);
}

}  // namespace splitspec::draft

#include "runtime/worker/worker_skeleton.h"

#include <algorithm>

#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/wire_format.h"

namespace splitspec::worker {

using net::BodyName;
using net::Frame;
using net::NewEnvelope;

absl::StatusOr<std::unique_ptr<WorkerSkeleton>> WorkerSkeleton::Connect(
    const std::string& coordinator_endpoint, const proto::Register& registration) {
  ASSIGN_OR_RETURN(std::unique_ptr<net::MembershipClient> membership,
                   net::MembershipClient::Connect(coordinator_endpoint, registration));
  return std::unique_ptr<WorkerSkeleton>(new WorkerSkeleton(std::move(membership)));
}

absl::Status WorkerSkeleton::Tick(absl::Time now) {
  RETURN_IF_ERROR(membership_->SendDue(now));
  if (absl::Status flushed = to_coordinator_.Flush(control_channel()); !flushed.ok()) {
    SPLITSPEC_LOG(WARNING) << "message to coordinator failed: " << flushed;
  }
  return absl::OkStatus();
}

void WorkerSkeleton::DispatchControl(ControlHandler& handler) {
  while (control_channel().Readable()) {
    absl::StatusOr<Frame> frame = control_channel().Receive(absl::ZeroDuration());
    if (!frame.ok()) return;
    const proto::Envelope& envelope = frame->envelope;
    if (membership_->HandleReply(envelope)) continue;
    if (envelope.has_assignment()) {
      absl::Status added = handler.Assign(envelope.assignment());
      if (!added.ok()) SendError(envelope.assignment().request_id(), added);
    } else if (envelope.has_release()) {
      handler.Release(envelope.release().request_id());
    } else if (envelope.has_cancel()) {
      handler.Release(envelope.cancel().request_id());
    } else if (envelope.has_drain()) {
      SPLITSPEC_LOG(INFO) << "drain requested: " << envelope.drain().reason();
      drain_requested_ = true;
    } else {
      SPLITSPEC_LOG(DEBUG) << "ignored '" << BodyName(envelope) << "' on the control channel";
    }
  }
}

void WorkerSkeleton::SendError(const std::string& request_id, const absl::Status& status) {
  SPLITSPEC_LOG(WARNING) << "request " << request_id << " refused: " << status;
  proto::Envelope envelope = NewEnvelope();
  proto::Error* error = envelope.mutable_error();
  error->set_code(absl::IsResourceExhausted(status) ? proto::ERROR_CODE_RESOURCE_EXHAUSTED
                                                    : proto::ERROR_CODE_INVALID_ARGUMENT);
  error->set_message(std::string(status.message()));
  error->set_request_id(request_id);
  SendToCoordinator(std::move(envelope));
}

void WorkerSkeleton::SendToCoordinator(proto::Envelope envelope) {
  absl::Status sent = to_coordinator_.Send(control_channel(), std::move(envelope));
  if (!sent.ok()) SPLITSPEC_LOG(WARNING) << "message to coordinator failed: " << sent;
}

absl::Time WorkerSkeleton::NextWake(absl::Time now) const {
  // Waiting messages are retried every millisecond until the coordinator takes them.
  const absl::Duration poll =
      to_coordinator_.empty() ? absl::Milliseconds(50) : absl::Milliseconds(1);
  return std::min(membership_->next_send(), now + poll);
}

void WorkerSkeleton::FlushBeforeLeaving() {
  const absl::Time give_up = absl::Now() + absl::Seconds(1);
  while (!to_coordinator_.empty() && absl::Now() < give_up) {
    (void)to_coordinator_.Flush(control_channel());
    if (!to_coordinator_.empty()) absl::SleepFor(absl::Milliseconds(1));
  }
  if (!to_coordinator_.empty()) {
    SPLITSPEC_LOG(WARNING) << to_coordinator_.pending()
                           << " message(s) for the coordinator were not sent";
  }
}

absl::Status WorkerSkeleton::Leave(const std::string& worker_description) {
  FlushBeforeLeaving();
  if (!drain_requested_) return membership_->Deregister("shutdown");
  SPLITSPEC_LOG(INFO) << worker_description << " drained; deregistering and exiting";
  return membership_->Deregister("drained");
}

}  // namespace splitspec::worker

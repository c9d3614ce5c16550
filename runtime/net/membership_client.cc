#include "runtime/net/membership_client.h"

#include <unistd.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/wire_format.h"

namespace splitspec::net {

absl::StatusOr<std::unique_ptr<MembershipClient>> MembershipClient::Connect(
    const std::string& coordinator_endpoint, proto::Register registration) {
  // Unique across restarts of the same worker, so a stale ROUTER entry never
  // swallows the new process's replies.
  std::random_device entropy;
  const std::string identity =
      absl::StrCat(registration.worker_name(), "-", getpid(), "-", entropy() % 100000);
  ASSIGN_OR_RETURN(std::unique_ptr<Channel> channel,
                   ConnectChannel(coordinator_endpoint, identity));
  return std::unique_ptr<MembershipClient>(
      new MembershipClient(std::move(channel), coordinator_endpoint, std::move(registration)));
}

MembershipClient::MembershipClient(std::unique_ptr<Channel> channel,
                                   std::string coordinator_endpoint, proto::Register registration)
    : channel_(std::move(channel)),
      registration_(std::move(registration)),
      coordinator_endpoint_(std::move(coordinator_endpoint)) {}

void MembershipClient::set_load(const proto::LoadReport& load) {
  load_ = load;
  if (heartbeats_) heartbeats_->set_load(load);
}

absl::Status MembershipClient::SendDue(absl::Time now) {
  if (heartbeats_ && heartbeats_->forgotten()) {
    SPLITSPEC_LOG(WARNING) << "coordinator no longer knows worker " << worker_id_
                           << "; registering again";
    heartbeats_.reset();
    worker_id_ = 0;
    next_send_ = absl::InfinitePast();
  }
  if (worker_id_ != 0 || now < next_send_) return absl::OkStatus();
  proto::Envelope envelope = NewEnvelope();
  *envelope.mutable_register_worker() = registration_;
  next_send_ = now + register_retry_;
  absl::Status status = channel_->Send("", envelope);
  // A full queue (coordinator unreachable) is not fatal: retry next interval.
  if (absl::IsResourceExhausted(status)) return absl::OkStatus();
  return status;
}

bool MembershipClient::HandleReply(const proto::Envelope& envelope) {
  if (!envelope.has_register_ack() && !envelope.has_heartbeat_ack()) return false;
  if (envelope.has_register_ack()) {
    const proto::RegisterAck& ack = envelope.register_ack();
    if (worker_id_ == 0) {
      heartbeat_interval_ = absl::Milliseconds(std::max<uint32_t>(ack.heartbeat_interval_ms(), 1));
      absl::StatusOr<std::unique_ptr<HeartbeatSender>> sender =
          HeartbeatSender::Start(coordinator_endpoint_, ack.worker_id(), heartbeat_interval_);
      if (!sender.ok()) {
        SPLITSPEC_LOG(ERROR) << "cannot start heartbeats: " << sender.status();
        return true;  // stay unregistered; the next SendDue registers again
      }
      heartbeats_ = *std::move(sender);
      heartbeats_->set_load(load_);
      worker_id_ = ack.worker_id();
      next_send_ = absl::InfiniteFuture();
      SPLITSPEC_LOG(INFO) << "registered as worker " << worker_id_ << ", heartbeat every "
                          << absl::FormatDuration(heartbeat_interval_);
    }
  }
  return true;
}

absl::Status MembershipClient::Poll(absl::Duration budget, proto::Envelope* other,
                                    bool* got_other) {
  if (got_other != nullptr) *got_other = false;
  const absl::Time deadline = absl::Now() + budget;
  while (true) {
    const absl::Time now = absl::Now();
    RETURN_IF_ERROR(SendDue(now));
    if (now >= deadline) return absl::OkStatus();
    const absl::Duration wait = std::min(deadline, next_send_) - now;
    absl::StatusOr<Frame> frame = channel_->Receive(std::max(wait, absl::ZeroDuration()));
    if (!frame.ok()) {
      if (absl::IsDeadlineExceeded(frame.status())) continue;
      return frame.status();
    }
    if (HandleReply(frame->envelope)) continue;
    if (other != nullptr) {
      *other = std::move(frame->envelope);
      if (got_other != nullptr) *got_other = true;
      return absl::OkStatus();
    }
  }
}

absl::Status MembershipClient::Deregister(const std::string& reason) {
  heartbeats_.reset();
  if (worker_id_ == 0 && next_send_ != absl::InfinitePast()) {
    // A Register is in flight: the coordinator may already count us, so wait
    // for its acknowledgement and leave properly.
    const absl::Time deadline = absl::Now() + absl::Seconds(1);
    while (worker_id_ == 0 && absl::Now() < deadline) {
      absl::StatusOr<Frame> frame = channel_->Receive(deadline - absl::Now());
      if (!frame.ok()) break;
      if (frame->envelope.has_register_ack())
        worker_id_ = frame->envelope.register_ack().worker_id();
    }
  }
  if (worker_id_ == 0) return absl::OkStatus();
  proto::Envelope envelope = NewEnvelope();
  envelope.mutable_deregister()->set_worker_id(worker_id_);
  envelope.mutable_deregister()->set_reason(reason);
  RETURN_IF_ERROR(channel_->Send("", envelope));
  // Wait for the acknowledgement (a HeartbeatAck with known=false), so the
  // frame is not lost when the process exits right after.
  const absl::Time deadline = absl::Now() + absl::Seconds(1);
  while (absl::Now() < deadline) {
    absl::StatusOr<Frame> frame = channel_->Receive(deadline - absl::Now());
    if (!frame.ok()) break;
    if (frame->envelope.has_heartbeat_ack() && !frame->envelope.heartbeat_ack().known()) {
      worker_id_ = 0;
      return absl::OkStatus();
    }
  }
  return absl::DeadlineExceededError("the coordinator did not acknowledge Deregister within 1s");
}

}  // namespace splitspec::net

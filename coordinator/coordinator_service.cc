#include "coordinator/coordinator_service.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/wire_format.h"

namespace splitspec::coordinator {

absl::Status CoordinatorOptions::Validate() const {
  if (control_endpoint.empty())
    return absl::InvalidArgumentError("control_endpoint must not be empty");
  return membership.Validate();
}

absl::StatusOr<std::unique_ptr<CoordinatorService>> CoordinatorService::Create(
    const CoordinatorOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  ASSIGN_OR_RETURN(std::unique_ptr<net::Channel> channel,
                   net::ListenChannel(options.control_endpoint));
  return std::unique_ptr<CoordinatorService>(new CoordinatorService(options, std::move(channel)));
}

CoordinatorService::CoordinatorService(const CoordinatorOptions& options,
                                       std::unique_ptr<net::Channel> channel)
    : options_(options),
      control_(std::move(channel)),
      control_endpoint_(control_->endpoint()),
      membership_(options.membership),
      router_(options.router),
      started_(options_.clock()) {}

absl::Status CoordinatorService::Run(const std::atomic<bool>& stop) {
  // Sweep several times per interval so a death is seen within one interval of
  // its deadline.
  const absl::Duration tick = options_.membership.heartbeat_interval / 4;
  absl::Time next_sweep = options_.clock();
  while (!stop.load(std::memory_order_relaxed)) {
    absl::StatusOr<net::Frame> frame = control_->Receive(tick);
    if (frame.ok()) {
      Handle(*frame);
    } else if (!absl::IsDeadlineExceeded(frame.status())) {
      return frame.status();
    }
    const absl::Time now = options_.clock();
    if (now >= next_sweep) {
      SweepLiveness(now);
      next_sweep = now + tick;
    }
  }
  return absl::OkStatus();
}

void CoordinatorService::SweepLiveness(absl::Time now) {
  std::vector<Outgoing> out;
  for (uint64_t id : membership_.Sweep(now)) {
    SPLITSPEC_LOG(WARNING) << "worker " << id << " declared dead after "
                           << options_.membership.dead_after_missed << " missed heartbeats";
    router_.OnWorkerGone(id, &out);
  }
  const uint64_t replaced_before = router_.counters().reassigned_target;
  router_.Tick(now, &out);  // drain deadlines, and Drain to workers that hold no request
  if (router_.counters().reassigned_target > replaced_before) {
    SPLITSPEC_LOG(INFO) << "drain timeout: re-placed "
                        << router_.counters().reassigned_target - replaced_before
                        << " request(s) of draining target group(s) from their committed tokens";
  }
  LogDrainsSent(out);
  SendAll(out);
}

void CoordinatorService::Handle(const net::Frame& frame) {
  const proto::Envelope& envelope = frame.envelope;
  switch (envelope.body_case()) {
    case proto::Envelope::kRegisterWorker:
      HandleRegister(frame.peer, envelope.register_worker());
      break;
    case proto::Envelope::kHeartbeat:
      HandleHeartbeat(frame.peer, envelope.heartbeat());
      break;
    case proto::Envelope::kDeregister: {
      proto::Envelope ack = net::NewEnvelope();
      ack.mutable_heartbeat_ack()->set_worker_id(envelope.deregister().worker_id());
      ack.mutable_heartbeat_ack()->set_known(false);
      Reply(frame.peer, ack);
      if (membership_.Deregister(envelope.deregister().worker_id()).ok()) {
        SPLITSPEC_LOG(INFO) << "worker " << envelope.deregister().worker_id()
                            << " left: " << envelope.deregister().reason();
        std::vector<Outgoing> out;
        router_.OnWorkerGone(envelope.deregister().worker_id(), &out);
        SendAll(out);
      }
      break;
    }
    case proto::Envelope::kSubmit: {
      std::vector<Outgoing> out;
      router_.OnSubmit(frame.peer, envelope.submit(), &out);
      SendAll(out);
      break;
    }
    case proto::Envelope::kCancel: {
      std::vector<Outgoing> out;
      router_.OnCancel(envelope.cancel(), &out);
      SendAll(out);
      break;
    }
    case proto::Envelope::kVerifyResult: {
      std::vector<Outgoing> out;
      router_.OnResult(frame.peer, envelope.verify_result(), &out);
      SendAll(out);
      break;
    }
    case proto::Envelope::kError: {
      std::vector<Outgoing> out;
      router_.OnWorkerError(frame.peer, envelope.error(), &out);
      SendAll(out);
      break;
    }
    case proto::Envelope::kStatusRequest:
      HandleStatus(frame.peer);
      break;
    case proto::Envelope::kDrainRequest:
      HandleDrainRequest(frame.peer, envelope.drain_request());
      break;
    case proto::Envelope::kGroupAnnounce: {
      proto::Envelope reply = net::NewEnvelope();
      *reply.mutable_group_info() = groups_.Announce(envelope.group_announce());
      SPLITSPEC_LOG(INFO) << "tp group '" << envelope.group_announce().group() << "' generation "
                          << envelope.group_announce().generation() << " at "
                          << envelope.group_announce().rendezvous_endpoint();
      Reply(frame.peer, reply);
      break;
    }
    case proto::Envelope::kGroupLookup: {
      proto::Envelope reply = net::NewEnvelope();
      *reply.mutable_group_info() = groups_.Lookup(envelope.group_lookup());
      Reply(frame.peer, reply);
      break;
    }
    default: {
      ++unexpected_messages_;
      proto::Envelope reply = net::NewEnvelope();
      reply.mutable_error()->set_code(proto::ERROR_CODE_INVALID_ARGUMENT);
      reply.mutable_error()->set_message(absl::StrCat(
          "unexpected message '", net::BodyName(envelope), "' on the control channel"));
      Reply(frame.peer, reply);
    }
  }
}

void CoordinatorService::HandleRegister(const std::string& peer,
                                        const proto::Register& registration) {
  const std::optional<uint64_t> repeat = membership_.FindRepeat(registration);
  const uint64_t id = repeat ? *repeat : membership_.Register(registration, options_.clock());
  SPLITSPEC_LOG(INFO) << (repeat ? "repeated registration of " : "registered ")
                      << proto::Role_Name(registration.role()) << " '" << registration.worker_name()
                      << "' as worker " << id;
  proto::Envelope reply = net::NewEnvelope();
  proto::RegisterAck* ack = reply.mutable_register_ack();
  ack->set_worker_id(id);
  ack->set_heartbeat_interval_ms(
      static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.membership.heartbeat_interval)));
  ack->set_suspect_after_missed(options_.membership.suspect_after_missed);
  ack->set_dead_after_missed(options_.membership.dead_after_missed);
  Reply(peer, reply);
  if (repeat) return;  // the router already knows this worker
  for (const proto::MemberStatus& member : membership_.Snapshot()) {
    if (member.worker_id() != id) continue;
    std::vector<Outgoing> out;
    router_.OnWorkerAlive(member, peer, &out);
    SendAll(out);
  }
}

void CoordinatorService::HandleHeartbeat(const std::string& peer,
                                         const proto::Heartbeat& heartbeat) {
  proto::Envelope reply = net::NewEnvelope();
  reply.mutable_heartbeat_ack()->set_worker_id(heartbeat.worker_id());
  reply.mutable_heartbeat_ack()->set_known(membership_.Heartbeat(heartbeat, options_.clock()));
  Reply(peer, reply);
}

void CoordinatorService::HandleStatus(const std::string& peer) {
  // The report shows liveness as of now; a death this sweep finds must reach
  // the router here, since Membership reports each death once.
  SweepLiveness(options_.clock());
  proto::Envelope reply = net::NewEnvelope();
  proto::StatusReply* status = reply.mutable_status_reply();
  for (proto::MemberStatus& member : membership_.Snapshot())
    *status->add_members() = std::move(member);
  *status->mutable_control_channel() = control_->CountersProto();
  status->set_uptime_ms(absl::ToInt64Milliseconds(options_.clock() - started_));
  status->set_protocol_version(proto::PROTOCOL_VERSION_CURRENT);
  status->set_queued_requests(static_cast<uint32_t>(router_.queued()));
  status->set_running_requests(static_cast<uint32_t>(router_.running()));
  Reply(peer, reply);
}

void CoordinatorService::HandleDrainRequest(const std::string& peer,
                                            const proto::DrainRequest& request) {
  std::vector<Outgoing> out;
  absl::StatusOr<std::vector<uint64_t>> draining =
      router_.StartDrain(request, options_.clock(), &out);
  proto::Envelope reply = net::NewEnvelope();
  if (!draining.ok()) {
    SPLITSPEC_LOG(WARNING) << "drain refused: " << draining.status();
    const absl::StatusCode code = draining.status().code();
    reply.mutable_error()->set_code(
        code == absl::StatusCode::kNotFound      ? proto::ERROR_CODE_NOT_FOUND
        : code == absl::StatusCode::kUnavailable ? proto::ERROR_CODE_UNAVAILABLE
                                                 : proto::ERROR_CODE_INVALID_ARGUMENT);
    reply.mutable_error()->set_message(std::string(draining.status().message()));
    return Reply(peer, reply);
  }
  for (uint64_t id : *draining) {
    absl::Status marked = membership_.MarkDraining(id);
    if (!marked.ok()) SPLITSPEC_LOG(WARNING) << "drain: " << marked;
    reply.mutable_drain_reply()->add_worker_ids(id);
  }
  reply.mutable_drain_reply()->set_message(
      absl::StrCat("draining ", draining->size(), " worker(s): ", request.reason()));
  SPLITSPEC_LOG(INFO) << "draining workers " << absl::StrJoin(*draining, ",") << ": "
                      << request.reason();
  Reply(peer, reply);
  LogDrainsSent(out);
  SendAll(out);
}

void CoordinatorService::LogDrainsSent(const std::vector<Outgoing>& out) {
  for (const Outgoing& message : out) {
    if (!message.envelope.has_drain()) continue;
    SPLITSPEC_LOG(INFO) << "worker " << message.envelope.drain().worker_id()
                        << " holds no request any more: sent Drain";
  }
}

void CoordinatorService::SendAll(std::vector<Outgoing>& out) {
  for (const Outgoing& message : out) Reply(message.peer, message.envelope);
  out.clear();
}

void CoordinatorService::Reply(const std::string& peer, const proto::Envelope& envelope) {
  absl::Status status = control_->Send(peer, envelope);
  if (!status.ok()) {
    SPLITSPEC_LOG(WARNING) << "reply '" << net::BodyName(envelope) << "' to '" << peer
                           << "' failed: " << status;
  }
}

}  // namespace splitspec::coordinator

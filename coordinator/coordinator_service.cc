#include "coordinator/coordinator_service.h"

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/channel_security.h"
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
  const net::ChannelSecurity security = options.security.value_or(net::DefaultChannelSecurity());
  // inproc:// never leaves the process; anything else is reachable by others.
  if (!security.curve && !absl::StartsWith(options.control_endpoint, "inproc://")) {
    SPLITSPEC_LOG(WARNING) << "INSECURE: the control channel " << options.control_endpoint
                           << " has no CURVE authentication; anyone who reaches it controls "
                              "the cluster";
  }
  ASSIGN_OR_RETURN(std::unique_ptr<net::Channel> channel,
                   net::ListenChannel(options.control_endpoint, security));
  return std::unique_ptr<CoordinatorService>(new CoordinatorService(options, std::move(channel)));
}

CoordinatorService::CoordinatorService(const CoordinatorOptions& options,
                                       std::unique_ptr<net::Channel> channel)
    : options_(options),
      control_(std::move(channel)),
      control_endpoint_(control_->endpoint()),
      membership_(options.membership),
      router_(options.router),
      started_(options_.clock()),
      security_(options.security.value_or(net::DefaultChannelSecurity())) {}

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
    if (now >= next_sweep || !status_waiting_.empty()) {
      RETURN_IF_ERROR(HandleQueuedFrames());
      SweepLiveness(options_.clock());
      next_sweep = now + tick;
      RefreshKeys();
      for (const std::string& peer : status_waiting_) AnswerStatus(peer);
      status_waiting_.clear();
    }
  }
  return absl::OkStatus();
}

absl::Status CoordinatorService::HandleQueuedFrames() {
  // Bounded, so a flood of frames cannot hold the sweep off for good.
  constexpr int kMaxFramesBeforeSweep = 10000;
  for (int handled = 0; handled < kMaxFramesBeforeSweep; ++handled) {
    absl::StatusOr<net::Frame> frame = control_->Receive(absl::ZeroDuration());
    if (absl::IsDeadlineExceeded(frame.status())) return absl::OkStatus();
    if (!frame.ok()) return frame.status();
    Handle(*frame);
  }
  return absl::OkStatus();
}

void CoordinatorService::SweepLiveness(absl::Time now) {
  std::vector<Outgoing> out;
  for (uint64_t id : membership_.Sweep(now)) {
    SPLITSPEC_LOG(WARNING) << "worker " << id << " declared dead after "
                           << options_.membership.dead_after_missed << " missed heartbeats";
    worker_peers_.erase(id);
    worker_keys_.erase(id);
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

void CoordinatorService::RefreshKeys() {
  // Keys rotated or added in the key directory (docs/protocol.md, "Security model").
  if (!options_.security.has_value() && key_refresher_.Poll(absl::Now()))
    security_ = net::DefaultChannelSecurity();
}

void CoordinatorService::Handle(const net::Frame& frame) {
  RefreshKeys();  // a new worker's key may have been admitted at its handshake just now
  if (absl::Status allowed = Authorize(frame); !allowed.ok()) return Refuse(frame, allowed);
  Dispatch(frame);
}

absl::Status CoordinatorService::Authorize(const net::Frame& frame) const {
  const proto::Envelope& envelope = frame.envelope;
  if (!frame.peer_key.empty()) {
    auto bound = peer_keys_.find(frame.peer);
    if (bound != peer_keys_.end() && bound->second != frame.peer_key) {
      return absl::PermissionDeniedError(
          absl::StrCat("peer name '", frame.peer, "' belongs to another key"));
    }
  }
  const uint32_t roles = security_.RolesOf(frame.peer_key);
  auto need = [&](uint32_t any_of, absl::string_view what) -> absl::Status {
    if ((roles & any_of) != 0) return absl::OkStatus();
    return absl::PermissionDeniedError(absl::StrCat(what, " needs the ",
                                                    net::KeyRolesString(any_of),
                                                    " key; the sender holds ",
                                                    net::KeyRolesString(roles)));
  };
  constexpr uint32_t kWorker = net::kTarget | net::kDraft;
  switch (envelope.body_case()) {
    case proto::Envelope::kRegisterWorker: {
      const proto::Role role = envelope.register_worker().role();
      if (role == proto::ROLE_TARGET_WORKER) return need(net::kTarget, "registering a target");
      if (role == proto::ROLE_DRAFT_WORKER) return need(net::kDraft, "registering a draft worker");
      return need(kWorker, "Register");
    }
    case proto::Envelope::kVerifyResult:
    case proto::Envelope::kError:
      return need(kWorker, net::BodyName(envelope));
    case proto::Envelope::kHeartbeat:
      // Only the worker an id was given to keeps it alive: a heartbeat for another's id
      // would hide that worker's death (its requests would wait on a dead process).
      // Heartbeats come on a channel of their own (another peer name), so they are
      // bound to the key that registered the id.
      RETURN_IF_ERROR(need(kWorker, "Heartbeat"));
      return CheckRegisteringKey(frame, envelope.heartbeat().worker_id());
    case proto::Envelope::kDeregister: {
      RETURN_IF_ERROR(need(kWorker, "Deregister"));
      auto owner = worker_peers_.find(envelope.deregister().worker_id());
      if (owner != worker_peers_.end() && owner->second != frame.peer) {
        return absl::PermissionDeniedError(absl::StrCat(
            "Deregister of worker ", envelope.deregister().worker_id(), " from '", frame.peer,
            "', which is not that worker"));
      }
      return absl::OkStatus();
    }
    case proto::Envelope::kSubmit:
    case proto::Envelope::kCancel:
      return need(net::kClient, net::BodyName(envelope));
    case proto::Envelope::kDrainRequest:
      return need(net::kAdmin, "DrainRequest");
    case proto::Envelope::kGroupAnnounce:
    case proto::Envelope::kGroupLookup:
      return need(net::kTarget, net::BodyName(envelope));
    default:
      return need(net::kAllRoles, net::BodyName(envelope));
  }
}

absl::Status CoordinatorService::CheckRegisteringKey(const net::Frame& frame,
                                                     uint64_t worker_id) const {
  auto owner = worker_keys_.find(worker_id);
  if (owner == worker_keys_.end() || owner->second == frame.peer_key) return absl::OkStatus();
  return absl::PermissionDeniedError(
      absl::StrCat("Heartbeat of worker ", worker_id, " from '", frame.peer,
                   "', whose key is not the one that registered that worker"));
}

void CoordinatorService::Refuse(const net::Frame& frame, const absl::Status& why) {
  SPLITSPEC_LOG(WARNING) << "refused '" << net::BodyName(frame.envelope) << "' from peer '"
                         << frame.peer << "' at "
                         << (frame.peer_address.empty() ? "(in-process)" : frame.peer_address)
                         << (frame.peer_key.empty() ? "" : " key ") << frame.peer_key << ": "
                         << why.message();
  net::CountRefusedMessage();
  proto::Envelope reply = net::NewEnvelope();
  reply.mutable_error()->set_code(proto::ERROR_CODE_PERMISSION_DENIED);
  reply.mutable_error()->set_message(absl::StrCat("permission denied: ", why.message()));
  if (frame.envelope.has_cancel())
    reply.mutable_error()->set_request_id(frame.envelope.cancel().request_id());
  Reply(frame.peer, reply);
}

void CoordinatorService::Dispatch(const net::Frame& frame) {
  const proto::Envelope& envelope = frame.envelope;
  switch (envelope.body_case()) {
    case proto::Envelope::kRegisterWorker:
      HandleRegister(frame, envelope.register_worker());
      break;
    case proto::Envelope::kHeartbeat:
      HandleHeartbeat(frame.peer, envelope.heartbeat());
      break;
    case proto::Envelope::kDeregister:
      HandleDeregister(frame);
      break;
    case proto::Envelope::kSubmit: {
      if (!frame.peer_key.empty()) peer_keys_[frame.peer] = frame.peer_key;
      std::vector<Outgoing> out;
      router_.OnSubmit(frame.peer, envelope.submit(), &out);
      SendAll(out);
      break;
    }
    case proto::Envelope::kCancel: {
      std::vector<Outgoing> out;
      absl::Status cancelled = router_.OnCancel(frame.peer, envelope.cancel(), &out);
      if (!cancelled.ok()) return Refuse(frame, cancelled);
      SendAll(out);
      break;
    }
    case proto::Envelope::kVerifyResult: {
      LogIfNotHolder(frame, envelope.verify_result().request_id());
      std::vector<Outgoing> out;
      router_.OnResult(frame.peer, envelope.verify_result(), &out);
      SendAll(out);
      break;
    }
    case proto::Envelope::kError: {
      LogIfNotHolder(frame, envelope.error().request_id());
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
      *reply.mutable_group_info() = groups_.Announce(envelope.group_announce(), frame.peer_key);
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

void CoordinatorService::LogIfNotHolder(const net::Frame& frame, const std::string& request_id) {
  if (router_.Holds(request_id, frame.peer)) return;
  // Not answered: a target the request was taken from may still be finishing a step.
  SPLITSPEC_LOG(WARNING) << "ignored '" << net::BodyName(frame.envelope) << "' for request '"
                         << request_id << "' from peer '" << frame.peer << "' at "
                         << (frame.peer_address.empty() ? "(in-process)" : frame.peer_address)
                         << ": it does not hold that request (taken from it, or forged)";
}

void CoordinatorService::HandleDeregister(const net::Frame& frame) {
  const proto::Deregister& deregister = frame.envelope.deregister();
  proto::Envelope ack = net::NewEnvelope();
  ack.mutable_heartbeat_ack()->set_worker_id(deregister.worker_id());
  ack.mutable_heartbeat_ack()->set_known(false);
  Reply(frame.peer, ack);
  if (!membership_.Deregister(deregister.worker_id()).ok()) return;
  SPLITSPEC_LOG(INFO) << "worker " << deregister.worker_id() << " left: " << deregister.reason();
  worker_peers_.erase(deregister.worker_id());
  worker_keys_.erase(deregister.worker_id());
  std::vector<Outgoing> out;
  router_.OnWorkerGone(deregister.worker_id(), &out);
  SendAll(out);
}

void CoordinatorService::HandleRegister(const net::Frame& frame,
                                        const proto::Register& registration) {
  const std::string& peer = frame.peer;
  const std::optional<uint64_t> repeat = membership_.FindRepeat(registration);
  const uint64_t id = repeat ? *repeat : membership_.Register(registration, options_.clock());
  worker_peers_[id] = peer;
  if (!frame.peer_key.empty()) worker_keys_[id] = frame.peer_key;
  if (!frame.peer_key.empty()) peer_keys_[peer] = frame.peer_key;
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
  const bool known = membership_.Heartbeat(heartbeat, options_.clock());
  reply.mutable_heartbeat_ack()->set_known(known);
  if (known) router_.OnWorkerLoad(heartbeat.worker_id(), heartbeat.load());
  Reply(peer, reply);
}

void CoordinatorService::HandleStatus(const std::string& peer) {
  // Answered by Run once the frames queued behind this request are handled and
  // membership swept (AnswerStatus): the report shows liveness as of now, and a
  // heartbeat waiting in the queue is not mistaken for a missed one.
  status_waiting_.push_back(peer);
}

void CoordinatorService::AnswerStatus(const std::string& peer) {
  proto::Envelope reply = net::NewEnvelope();
  proto::StatusReply* status = reply.mutable_status_reply();
  for (proto::MemberStatus& member : membership_.Snapshot())
    *status->add_members() = std::move(member);
  *status->mutable_control_channel() = control_->CountersProto();
  status->set_uptime_ms(absl::ToInt64Milliseconds(options_.clock() - started_));
  status->set_protocol_version(proto::PROTOCOL_VERSION_CURRENT);
  status->set_queued_requests(static_cast<uint32_t>(router_.queued()));
  status->set_running_requests(static_cast<uint32_t>(router_.running()));
  status->set_refused_peers(net::RefusedHandshakes() + net::RefusedMessages());
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
  for (Outgoing& message : out) {
    if (message.envelope.has_assignment())
      StampWorkerKeys(message.envelope.mutable_assignment());
    Reply(message.peer, message.envelope);
  }
  out.clear();
}

void CoordinatorService::StampWorkerKeys(proto::Assignment* assignment) const {
  // The target binds the request's draft traffic to the draft worker's key, and
  // the draft worker expects the target's key of its data port (docs/protocol.md).
  auto key = worker_keys_.find(assignment->draft_worker_id());
  if (assignment->draft_worker_id() != 0 && key != worker_keys_.end())
    assignment->set_draft_worker_key(key->second);
  key = worker_keys_.find(assignment->target_worker_id());
  if (key != worker_keys_.end()) assignment->set_target_worker_key(key->second);
}

void CoordinatorService::Reply(const std::string& peer, const proto::Envelope& envelope) {
  absl::Status status = control_->Send(peer, envelope);
  if (!status.ok()) {
    SPLITSPEC_LOG(WARNING) << "reply '" << net::BodyName(envelope) << "' to '" << peer
                           << "' failed: " << status;
  }
}

}  // namespace splitspec::coordinator

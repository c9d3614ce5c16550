#include "coordinator/membership.h"

#include "absl/strings/str_cat.h"

namespace splitspec::coordinator {

absl::Status MembershipOptions::Validate() const {
  if (heartbeat_interval <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("heartbeat_interval must be positive, got ",
                                                   absl::FormatDuration(heartbeat_interval)));
  }
  if (suspect_after_missed < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("suspect_after_missed must be >= 1, got ", suspect_after_missed));
  }
  if (dead_after_missed <= suspect_after_missed) {
    return absl::InvalidArgumentError(absl::StrCat("dead_after_missed (", dead_after_missed,
                                                   ") must exceed suspect_after_missed (",
                                                   suspect_after_missed, ")"));
  }
  return absl::OkStatus();
}

uint64_t Membership::Register(const proto::Register& registration, absl::Time now) {
  const uint64_t id = next_id_++;
  Member& member = members_[id];
  proto::MemberStatus& s = member.status;
  s.set_worker_id(id);
  s.set_role(registration.role());
  s.set_worker_name(registration.worker_name());
  s.set_state(proto::MEMBER_STATE_ALIVE);
  s.set_data_endpoint(registration.data_endpoint());
  *s.mutable_model() = registration.model();
  s.set_tp_group(registration.tp_group());
  s.set_tp_rank(registration.tp_rank());
  s.set_tp_size(registration.tp_size());
  s.set_pid(registration.pid());
  s.set_host(registration.host());
  *s.mutable_capabilities() = registration.capabilities();
  member.last_seen = now;
  return id;
}

std::optional<uint64_t> Membership::FindRepeat(const proto::Register& registration) const {
  if (registration.pid() == 0) return std::nullopt;
  for (const auto& [id, member] : members_) {
    const proto::MemberStatus& s = member.status;
    const bool live = s.state() == proto::MEMBER_STATE_ALIVE ||
                      s.state() == proto::MEMBER_STATE_SUSPECT ||
                      s.state() == proto::MEMBER_STATE_DRAINING;
    if (live && s.role() == registration.role() && s.worker_name() == registration.worker_name() &&
        s.host() == registration.host() && s.pid() == registration.pid() &&
        s.tp_group() == registration.tp_group() && s.tp_rank() == registration.tp_rank()) {
      return id;
    }
  }
  return std::nullopt;
}

bool Membership::Heartbeat(const proto::Heartbeat& heartbeat, absl::Time now) {
  auto it = members_.find(heartbeat.worker_id());
  if (it == members_.end()) return false;
  proto::MemberStatus& s = it->second.status;
  if (s.state() == proto::MEMBER_STATE_DEAD || s.state() == proto::MEMBER_STATE_LEFT) return false;
  it->second.last_seen = now;
  if (s.state() != proto::MEMBER_STATE_DRAINING) s.set_state(proto::MEMBER_STATE_ALIVE);
  s.set_missed_heartbeats(0);
  s.set_heartbeats_received(s.heartbeats_received() + 1);
  *s.mutable_load() = heartbeat.load();
  return true;
}

absl::Status Membership::Deregister(uint64_t worker_id) {
  auto it = members_.find(worker_id);
  if (it == members_.end())
    return absl::NotFoundError(absl::StrCat("no worker with id ", worker_id));
  it->second.status.set_state(proto::MEMBER_STATE_LEFT);
  return absl::OkStatus();
}

absl::Status Membership::MarkDraining(uint64_t worker_id) {
  auto it = members_.find(worker_id);
  if (it == members_.end())
    return absl::NotFoundError(absl::StrCat("no worker with id ", worker_id));
  proto::MemberStatus& s = it->second.status;
  if (s.state() == proto::MEMBER_STATE_DEAD || s.state() == proto::MEMBER_STATE_LEFT) {
    return absl::FailedPreconditionError(absl::StrCat(
        "worker ", worker_id, " is ", proto::MemberState_Name(s.state()), "; it cannot drain"));
  }
  s.set_state(proto::MEMBER_STATE_DRAINING);
  return absl::OkStatus();
}

std::vector<uint64_t> Membership::Sweep(absl::Time now) {
  std::vector<uint64_t> newly_dead;
  for (auto& [id, member] : members_) {
    proto::MemberStatus& s = member.status;
    if (s.state() == proto::MEMBER_STATE_DEAD || s.state() == proto::MEMBER_STATE_LEFT) continue;
    const int64_t missed = (now - member.last_seen) / options_.heartbeat_interval;
    s.set_missed_heartbeats(static_cast<uint32_t>(std::max<int64_t>(missed, 0)));
    if (missed >= options_.dead_after_missed) {
      s.set_state(proto::MEMBER_STATE_DEAD);
      newly_dead.push_back(id);
    } else if (missed >= options_.suspect_after_missed &&
               s.state() != proto::MEMBER_STATE_DRAINING) {
      s.set_state(proto::MEMBER_STATE_SUSPECT);
    }
  }
  return newly_dead;
}

std::vector<proto::MemberStatus> Membership::Snapshot() const {
  std::vector<proto::MemberStatus> out;
  out.reserve(members_.size());
  for (const auto& [id, member] : members_) out.push_back(member.status);
  return out;
}

}  // namespace splitspec::coordinator

// Membership: the coordinator's table of workers and their liveness.
//
// Pure policy: no sockets, no clock of its own (callers pass `now`), so the
// state machine is testable with a fake clock.
//
//   ALIVE --(suspect_after_missed heartbeat intervals without one)--> SUSPECT
//   SUSPECT --(heartbeat)--> ALIVE
//   ALIVE/SUSPECT --(dead_after_missed intervals without one)--> DEAD   (final)
//   ALIVE/SUSPECT --(MarkDraining)--> DRAINING --(heartbeats)--> DRAINING
//   DRAINING --(dead_after_missed intervals without one)--> DEAD
//   any --(Deregister)--> LEFT   (final)
//
// DRAINING is sticky: heartbeats keep the worker in it (it must not become
// ALIVE again and be given work); a missed interval shows in missed_heartbeats
// but does not make it SUSPECT.
//
// "Missed" counts whole heartbeat intervals since the last heartbeat (or the
// registration). A DEAD or LEFT worker that comes back must register again and
// gets a new id; ids are never reused.
//
// Thread safety: thread-compatible (the coordinator's control thread owns it).
#ifndef SPLITSPEC_COORDINATOR_MEMBERSHIP_H_
#define SPLITSPEC_COORDINATOR_MEMBERSHIP_H_

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"

namespace splitspec::coordinator {

struct MembershipOptions {
  absl::Duration heartbeat_interval = absl::Milliseconds(500);  // asked of every worker
  int suspect_after_missed = 2;  // intervals without a heartbeat before SUSPECT
  int dead_after_missed = 5;     // intervals without a heartbeat before DEAD

  // InvalidArgument naming the field if the options are inconsistent.
  absl::Status Validate() const;
};

class Membership {
 public:
  explicit Membership(MembershipOptions options) : options_(options) {}

  // Adds a worker; returns its new id (>= 1).
  uint64_t Register(const proto::Register& registration, absl::Time now);

  // The id of a live (ALIVE, SUSPECT or DRAINING) member that this registration repeats: same
  // role, name, host, pid (non-zero) and group rank. A worker re-sends Register until it hears
  // the ack, so under load one process may register twice; the repeat must get the same id,
  // not a second member that looks alive until it is declared dead.
  std::optional<uint64_t> FindRepeat(const proto::Register& registration) const;

  // Records a heartbeat. Returns false if the id is unknown, DEAD or LEFT (the
  // worker must register again).
  bool Heartbeat(const proto::Heartbeat& heartbeat, absl::Time now);

  // Marks the worker LEFT. NotFound if the id is unknown.
  absl::Status Deregister(uint64_t worker_id);

  // Marks an ALIVE or SUSPECT worker DRAINING (a DRAINING one stays so).
  // NotFound if the id is unknown; FailedPrecondition if it is DEAD or LEFT.
  absl::Status MarkDraining(uint64_t worker_id);

  // Recomputes SUSPECT/DEAD from `now`; returns the ids that became DEAD in this call.
  // Each death is returned once, by whichever call sees it first: every caller
  // must act on the result (hand the dead workers' requests on).
  std::vector<uint64_t> Sweep(absl::Time now);

  // One entry per worker ever registered, by id.
  std::vector<proto::MemberStatus> Snapshot() const;

  const MembershipOptions& options() const { return options_; }

 private:
  struct Member {
    proto::MemberStatus status;
    absl::Time last_seen;
  };
  MembershipOptions options_;
  uint64_t next_id_ = 1;
  std::map<uint64_t, Member> members_;
};

}  // namespace splitspec::coordinator

#endif  // SPLITSPEC_COORDINATOR_MEMBERSHIP_H_

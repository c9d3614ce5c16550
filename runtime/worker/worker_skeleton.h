// WorkerSkeleton: what every worker service (draft, target) does with the
// coordinator, whatever it serves: register and heartbeat (MembershipClient),
// dispatch the control messages (Assignment, Release, Cancel, Drain), refuse a
// request with an Error, deliver messages for the coordinator in order even
// while its queue is full (OrderedOutbox), and deregister on the way out.
//
//   ASSIGN_OR_RETURN(auto skeleton, WorkerSkeleton::Connect(endpoint, registration));
//   while (!stop && !skeleton->drain_requested()) {
//     RETURN_IF_ERROR(skeleton->Tick(absl::Now()));
//     skeleton->DispatchControl(handler);   // handler: the service's engine
//     ... serve the data plane, sleep until skeleton->NextWake(now) at the latest ...
//   }
//   return skeleton->Leave("draft worker 'd1'");
//
// Thread safety: none; the service's loop thread only (the membership client's
// heartbeat thread is its own business).
#ifndef SPLITSPEC_RUNTIME_WORKER_WORKER_SKELETON_H_
#define SPLITSPEC_RUNTIME_WORKER_WORKER_SKELETON_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/net/channel.h"
#include "runtime/net/membership_client.h"
#include "runtime/net/ordered_outbox.h"

namespace splitspec::worker {

// What a worker does with the coordinator's requests.
class ControlHandler {
 public:
  virtual ~ControlHandler() = default;
  // Takes the request on. An error goes back to the coordinator as an Error
  // for that request (WorkerSkeleton::SendError), which fails the request.
  virtual absl::Status Assign(const proto::Assignment& assignment) = 0;
  // Release (the request finished) or Cancel (the client went away): forget it.
  virtual void Release(const std::string& request_id) = 0;
};

class WorkerSkeleton {
 public:
  // Connects (asynchronously) to the coordinator and starts registering with
  // `registration`. Errors: a malformed endpoint.
  static absl::StatusOr<std::unique_ptr<WorkerSkeleton>> Connect(
      const std::string& coordinator_endpoint, const proto::Register& registration);

  // Once per loop turn: sends the Register or Heartbeat that is due and retries
  // the messages waiting for the coordinator. Errors: a broken control channel.
  absl::Status Tick(absl::Time now);
  // Handles every control frame waiting: membership replies; Assignment ->
  // handler.Assign; Release and Cancel -> handler.Release; Drain (the
  // coordinator has handed this worker's requests elsewhere) ->
  // drain_requested(); anything else is logged and ignored.
  void DispatchControl(ControlHandler& handler);
  // Refuses `request_id`: an Error with the status's message, code
  // RESOURCE_EXHAUSTED for a full worker, else INVALID_ARGUMENT.
  void SendError(const std::string& request_id, const absl::Status& status);
  // Queues `envelope` for the coordinator behind those waiting, in order.
  void SendToCoordinator(proto::Envelope envelope);
  // The latest time the loop should wake to Tick: the next Register, 1 ms
  // while messages wait for the coordinator, else `now` + 50 ms.
  absl::Time NextWake(absl::Time now) const;

  // On the way out of the loop: gives the waiting messages up to a second to
  // leave, then deregisters, "drained" after a Drain (logged with
  // `worker_description`), else "shutdown".
  absl::Status Leave(const std::string& worker_description);

  bool drain_requested() const { return drain_requested_; }
  net::MembershipClient& membership() { return *membership_; }
  net::Channel& control_channel() { return membership_->channel(); }

 private:
  explicit WorkerSkeleton(std::unique_ptr<net::MembershipClient> membership)
      : membership_(std::move(membership)) {}
  void FlushBeforeLeaving();

  std::unique_ptr<net::MembershipClient> membership_;
  net::OrderedOutbox to_coordinator_{"", /*max_pending=*/1 << 16};
  bool drain_requested_ = false;
};

}  // namespace splitspec::worker

#endif  // SPLITSPEC_RUNTIME_WORKER_WORKER_SKELETON_H_

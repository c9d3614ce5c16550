// CoordinatorService: the coordinator's control plane — worker registration,
// heartbeats, liveness, status reports — and request routing: clients submit
// and cancel on the same control channel and receive TokenStreams; workers
// receive Assignments and Releases and send back VerifyResults. Admin tools
// (`splitspec scale`) send DrainRequests: see RequestRouter::StartDrain.
//
//   CoordinatorOptions options;  options.control_endpoint = "tcp://127.0.0.1:5555";
//   ASSIGN_OR_RETURN(auto service, CoordinatorService::Create(options));
//   service->Run(stop_flag);   // returns when stop_flag becomes true
//
// Authorization (docs/protocol.md, "Security model"): each message is checked
// against the roles of its sender's CURVE key (net::ChannelSecurity::RolesOf)
// and against what that sender owns: Register needs the key of the role it
// claims; Submit and Cancel the client key, and a Cancel must come from the
// request's submitter; Deregister only for the sender's own worker id;
// DrainRequest the admin key; results and errors only from the worker serving
// the request (RequestRouter). A peer name (ZeroMQ routing id) that registered
// or submitted stays bound to its key. A refused message is answered with
// ERROR_CODE_PERMISSION_DENIED, logged with the sender's address and counted
// (StatusReply.refused_peers).
//
// Thread safety: Run() owns the control channel and the membership table; call
// it from one thread. control_endpoint() may be read from any thread after Create.
#ifndef SPLITSPEC_COORDINATOR_COORDINATOR_SERVICE_H_
#define SPLITSPEC_COORDINATOR_COORDINATOR_SERVICE_H_

#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/group_directory.h"
#include "coordinator/membership.h"
#include "coordinator/request_router.h"
#include "runtime/net/channel.h"
#include "runtime/net/channel_security.h"

namespace splitspec::coordinator {

struct CoordinatorOptions {
  // Where workers and tools reach the coordinator. Default: loopback only.
  std::string control_endpoint = "tcp://127.0.0.1:5555";
  MembershipOptions membership;
  RouterOptions router;
  // The time liveness, queue waits and drain deadlines are measured on (tests
  // pass a fake one).
  std::function<absl::Time()> clock = [] { return absl::Now(); };
  // The control channel's security; nullopt: net::DefaultChannelSecurity().
  std::optional<net::ChannelSecurity> security;

  absl::Status Validate() const;
};

class CoordinatorService {
 public:
  // Binds the control endpoint. Errors: invalid options (naming the field), or
  // the bind failure (address in use, bad endpoint).
  static absl::StatusOr<std::unique_ptr<CoordinatorService>> Create(
      const CoordinatorOptions& options);

  // Serves until `stop` is true. Bad or unexpected traffic is counted and
  // dropped; only a broken control channel ends the loop with an error.
  absl::Status Run(const std::atomic<bool>& stop);

  // The bound endpoint (a tcp "*" port resolved).
  const std::string& control_endpoint() const { return control_endpoint_; }

 private:
  CoordinatorService(const CoordinatorOptions& options, std::unique_ptr<net::Channel> channel);
  void Handle(const net::Frame& frame);
  void Dispatch(const net::Frame& frame);
  // OK, or PermissionDenied naming what the sender lacks.
  absl::Status Authorize(const net::Frame& frame) const;
  // OK unless `worker_id` was registered with a CURVE key other than the sender's:
  // PermissionDenied naming the worker id and the sending peer. Workers of one role
  // share that role's key, so this binds an id to its role's key, not to one process.
  absl::Status CheckRegisteringKey(const net::Frame& frame, uint64_t worker_id) const;
  void Refuse(const net::Frame& frame, const absl::Status& why);
  // Logs (with the sender's address) a result or error for a request the
  // sender does not hold; the router then ignores it.
  void LogIfNotHolder(const net::Frame& frame, const std::string& request_id);
  void HandleDeregister(const net::Frame& frame);
  void HandleRegister(const net::Frame& frame, const proto::Register& registration);
  void HandleHeartbeat(const std::string& peer, const proto::Heartbeat& heartbeat);
  void HandleStatus(const std::string& peer);
  void AnswerStatus(const std::string& peer);
  // Handles the frames already queued on the control channel (at most 10000), so
  // that a sweep after a stall (a loaded machine, a burst of traffic) sees the
  // heartbeats that arrived in time. Errors: the control channel's.
  absl::Status HandleQueuedFrames();
  void HandleDrainRequest(const std::string& peer, const proto::DrainRequest& request);
  // Declares the members past their heartbeat deadline dead and hands their
  // requests on (router OnWorkerGone), then the router's Tick. Run calls it only
  // after HandleQueuedFrames. Every path that sweeps membership goes through
  // here: a death another sweep swallowed would leave its requests on a dead
  // worker for good.
  void SweepLiveness(absl::Time now);
  void LogDrainsSent(const std::vector<Outgoing>& out);
  void Reply(const std::string& peer, const proto::Envelope& envelope);
  void SendAll(std::vector<Outgoing>& out);
  // Takes the process's security again when its key directory changed.
  void RefreshKeys();
  // Sets an assignment's draft_worker_key and target_worker_key to the keys that
  // registered its draft worker and its target.
  void StampWorkerKeys(proto::Assignment* assignment) const;

  CoordinatorOptions options_;
  std::unique_ptr<net::Channel> control_;
  std::string control_endpoint_;
  Membership membership_;
  RequestRouter router_;
  GroupDirectory groups_;  // tensor-parallel group rendezvous
  absl::Time started_;
  uint64_t unexpected_messages_ = 0;
  net::ChannelSecurity security_;
  // Re-reads the key directory while it runs (rotated and added keys), when
  // security_ is the process's default.
  net::SecurityRefresher key_refresher_;
  // Worker id -> the peer name it registered from; peer name -> its key.
  std::map<uint64_t, std::string> worker_peers_;
  // The CURVE key each live worker id registered with (none in plaintext).
  std::map<uint64_t, std::string> worker_keys_;
  std::map<std::string, std::string> peer_keys_;
  // Peers whose StatusRequest waits for the next sweep (see HandleStatus).
  std::vector<std::string> status_waiting_;
};

}  // namespace splitspec::coordinator

#endif  // SPLITSPEC_COORDINATOR_COORDINATOR_SERVICE_H_

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
// Thread safety: Run() owns the control channel and the membership table; call
// it from one thread. control_endpoint() may be read from any thread after Create.
#ifndef SPLITSPEC_COORDINATOR_COORDINATOR_SERVICE_H_
#define SPLITSPEC_COORDINATOR_COORDINATOR_SERVICE_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/group_directory.h"
#include "coordinator/membership.h"
#include "coordinator/request_router.h"
#include "runtime/net/channel.h"

namespace splitspec::coordinator {

struct CoordinatorOptions {
  // Where workers and tools reach the coordinator. Default: loopback only.
  std::string control_endpoint = "tcp://127.0.0.1:5555";
  MembershipOptions membership;
  RouterOptions router;
  // The time liveness, queue waits and drain deadlines are measured on (tests
  // pass a fake one).
  std::function<absl::Time()> clock = [] { return absl::Now(); };

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
  void HandleRegister(const std::string& peer, const proto::Register& registration);
  void HandleHeartbeat(const std::string& peer, const proto::Heartbeat& heartbeat);
  void HandleStatus(const std::string& peer);
  void HandleDrainRequest(const std::string& peer, const proto::DrainRequest& request);
  // Declares the members past their heartbeat deadline dead and hands their
  // requests on (router OnWorkerGone), then the router's Tick. Every path that
  // sweeps membership goes through here: a death another sweep swallowed would
  // leave its requests on a dead worker for good.
  void SweepLiveness(absl::Time now);
  void LogDrainsSent(const std::vector<Outgoing>& out);
  void Reply(const std::string& peer, const proto::Envelope& envelope);
  void SendAll(std::vector<Outgoing>& out);

  CoordinatorOptions options_;
  std::unique_ptr<net::Channel> control_;
  std::string control_endpoint_;
  Membership membership_;
  RequestRouter router_;
  GroupDirectory groups_;  // tensor-parallel group rendezvous
  absl::Time started_;
  uint64_t unexpected_messages_ = 0;
};

}  // namespace splitspec::coordinator

#endif  // SPLITSPEC_COORDINATOR_COORDINATOR_SERVICE_H_

// DraftService: the draft worker's sockets around a DraftEngine.
//
// Channels: a control DEALER to the coordinator (membership, assignments,
// releases) and one data DEALER per target leader it drafts for, with identity
// DraftPeerName(worker id), on which it sends DraftBlocks and SyncRequests and
// receives VerifyResults.
//
// Thread model: Run() is the draft worker's only thread; it owns every socket,
// the engine and the drafter. Each loop turn drains results, drafts one block
// for every request with room in its lookahead window (one batched Propose),
// sends them, and sleeps on all sockets only when there is nothing to draft.
#ifndef SPLITSPEC_DRAFT_WORKER_DRAFT_SERVICE_H_
#define SPLITSPEC_DRAFT_WORKER_DRAFT_SERVICE_H_

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "draft_worker/draft_engine.h"
#include "runtime/net/channel.h"
#include "runtime/net/fault_injecting_channel.h"
#include "runtime/net/worker_identity.h"
#include "runtime/spec/drafter.h"
#include "runtime/worker/worker_skeleton.h"

namespace splitspec::draft {

struct DraftServiceOptions {
  std::string coordinator_endpoint = "tcp://127.0.0.1:5555";
  net::WorkerIdentity identity;  // role is set to ROLE_DRAFT_WORKER
  DraftEngineOptions engine;
  // Tests: drop / delay / reorder the results this worker receives from target
  // leaders (runtime/net/fault_injecting_channel.h). Unset in production.
  std::optional<net::FaultOptions> data_faults;
};

class DraftService : private worker::ControlHandler {
 public:
  // `drafter` must outlive the service. Errors: connect failures, bad identity.
  static absl::StatusOr<std::unique_ptr<DraftService>> Create(spec::Drafter* drafter,
                                                              DraftServiceOptions options);

  // Serves until `stop` is true, or until the coordinator sends Drain (it has
  // handed this worker's requests to others: returns OK); deregisters on the way out.
  absl::Status Run(const std::atomic<bool>& stop);

  const DraftEngine& engine() const { return engine_; }
  // The engine's counters().requests_released as of Run's last loop turn.
  // Thread-safe: for threads other than Run's (the engine itself is Run's).
  uint64_t requests_released() const { return requests_released_.load(std::memory_order_acquire); }

 private:
  DraftService(spec::Drafter* drafter, DraftServiceOptions options,
               std::unique_ptr<worker::WorkerSkeleton> skeleton);
  // worker::ControlHandler: the coordinator's requests.
  absl::Status Assign(const proto::Assignment& assignment) override;
  void Release(const std::string& request_id) override { engine_.Release(request_id); }
  void DrainTargets();
  // Sets the load the next heartbeat reports (requests, speculation cache totals,
  // the drafter's KV accounting).
  void ReportLoad();
  void SendBlocks(std::vector<OutgoingBlock>& blocks);
  // The channel to the target data port at `endpoint`, made on first use.
  // `server_key`: the target's CURVE key from its Assignment ("" : the key the
  // channel was made with, else the shared target key); a different key than
  // the cached channel's (the target there restarted with another key)
  // replaces the channel.
  absl::StatusOr<net::Channel*> TargetChannel(const std::string& endpoint,
                                              const std::string& server_key = "");

  DraftServiceOptions options_;
  std::unique_ptr<worker::WorkerSkeleton> skeleton_;  // membership, control dispatch, drain
  std::map<std::string, std::unique_ptr<net::Channel>> targets_;  // data endpoint -> channel
  std::map<std::string, std::string> target_keys_;  // data endpoint -> its channel's server key
  spec::Drafter* drafter_;  // the engine's, for its KV accounting
  DraftEngine engine_;
  std::atomic<uint64_t> requests_released_{0};
};

}  // namespace splitspec::draft

#endif  // SPLITSPEC_DRAFT_WORKER_DRAFT_SERVICE_H_

// TargetService: the target leader's sockets around a TargetEngine.
//
// Channels: a control DEALER to the coordinator (membership, assignments,
// releases; results go back on it) and a data ROUTER on which draft workers
// send DraftBlocks and SyncRequests and receive VerifyResults. With a local
// drafter (options.local_drafter: lookup, ngram) the requests assigned no draft
// worker are drafted in this loop (local_drafts.h), with no data traffic.
//
//   ASSIGN_OR_RETURN(auto service, TargetService::Create(model, options));
//   RETURN_IF_ERROR(service->Run(stop));
//
// Thread model: Run() is the target leader's only thread; it owns both
// sockets, the engine and the model's forward calls. A step runs while blocks
// keep arriving: they queue in ZeroMQ and are drained before the next step.
#ifndef SPLITSPEC_TARGET_WORKER_TARGET_SERVICE_H_
#define SPLITSPEC_TARGET_WORKER_TARGET_SERVICE_H_

#include <atomic>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "draft_worker/draft_engine.h"
#include "runtime/model/language_model.h"
#include "runtime/net/channel.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/fault_injecting_channel.h"
#include "runtime/net/worker_identity.h"
#include "runtime/spec/drafter.h"
#include "runtime/worker/worker_skeleton.h"
#include "target_worker/group_leader_model.h"
#include "target_worker/local_drafts.h"
#include "target_worker/target_engine.h"

namespace splitspec::target {

struct TargetServiceOptions {
  std::string coordinator_endpoint = "tcp://127.0.0.1:5555";
  std::string data_endpoint = "tcp://127.0.0.1:*";  // where draft workers connect
  net::WorkerIdentity identity;                     // role is set to ROLE_TARGET_WORKER
  TargetEngineOptions engine;
  // Tests: drop / delay / reorder the frames this worker receives from draft
  // workers (runtime/net/fault_injecting_channel.h). Unset in production.
  std::optional<net::FaultOptions> data_faults;
  // Set when this worker leads a tensor-parallel group (rank 0) and `model` is
  // this object: the service keeps the idle group alive, and when the group
  // breaks it deregisters (the coordinator re-places its requests) and Run
  // returns the failure, for the owner to re-form the group. Null for TP=1.
  GroupLeaderModel* group_leader = nullptr;
  // The CUDA ordinal to verify on (TargetEngine::UseDeviceRows): the device a
  // one-rank `model`, or a CUDA group's leader, runs on; its logits then never
  // come to the host. -1: verify on the host (the CPU). Create fails if the
  // model cannot keep its logits there or the build has no CUDA.
  int verify_device = -1;
  // A model-free drafter this leader runs itself for the requests the
  // coordinator assigns no draft worker (unless their drafter is "none"), with
  // the draft engine's options (local_drafts.h); must outlive the service.
  // Null: those requests decode alone.
  spec::Drafter* local_drafter = nullptr;
  draft::DraftEngineOptions local_draft;
};

class TargetService : private worker::ControlHandler {
 public:
  // Binds the data endpoint and connects to the coordinator. `model` must
  // outlive the service. Errors: bind/connect failures, bad identity.
  static absl::StatusOr<std::unique_ptr<TargetService>> Create(model::LanguageModel* model,
                                                               TargetServiceOptions options);

  // Serves until `stop` is true; deregisters on the way out. Errors: a broken
  // control channel; a broken tensor-parallel group (after deregistering).
  absl::Status Run(const std::atomic<bool>& stop);

  const std::string& data_endpoint() const { return data_endpoint_; }
  const TargetEngine& engine() const { return engine_; }

 private:
  TargetService(model::LanguageModel* model, TargetServiceOptions options,
                std::unique_ptr<net::Channel> data,
                std::unique_ptr<worker::WorkerSkeleton> skeleton);
  // worker::ControlHandler: the coordinator's requests.
  absl::Status Assign(const proto::Assignment& assignment) override;
  // Frees the request (both sequences of a guided one) and publishes the new load
  // at once: no step may follow to do it, and the heartbeat must not go on
  // reporting a released request.
  void Release(const std::string& request_id) override;
  void DrainData();
  // One DraftBlock from the data channel: authorized, then queued in the engine; a
  // block for a request this target has no Assignment for yet is held (early_blocks_).
  void TakeBlock(net::Frame frame);
  // The held blocks of `request_id`, taken in arrival order now that its Assignment
  // came; held blocks older than the engine's block_wait are dropped on the way.
  void TakeEarlyBlocks(const std::string& request_id);
  // A DraftBlock or SyncRequest for `request_id` is taken only from the draft
  // worker assigned to it (its data-channel name), holding the draft key.
  absl::Status AuthorizeData(const net::Frame& frame, const std::string& request_id) const;
  void SendEvents(std::vector<TargetEvent>& events);
  // With the global tracer on: what a step did, on the "block" and "target.steps" tracks.
  void TraceStep(const std::vector<TargetEvent>& events, absl::Time start, absl::Time end) const;
  // The group failed: deregister so the coordinator re-places the requests
  // (their results of the failed step are dropped), and return `failure`.
  absl::Status LeaveBrokenGroup(absl::Status failure);
  // Folds `step_time` into the mean step time, then PublishLoad.
  void ReportLoad(absl::Duration step_time);
  // Publishes active requests, the mean step time and the KV accounting in the
  // next heartbeats.
  void PublishLoad();

  TargetServiceOptions options_;
  std::unique_ptr<net::Channel> data_;
  std::string data_endpoint_;
  // Membership, control dispatch, errors, drain; results for the coordinator go
  // through its outbox, so that a full control queue delays them instead of
  // losing a request.
  std::unique_ptr<worker::WorkerSkeleton> skeleton_;
  net::ChannelSecurity data_security_;  // whose keys are draft keys
  const model::LanguageModel* model_;   // the engine's; its counters go into heartbeats
  net::SecurityRefresher key_refresher_;  // re-reads the key directory (rotated keys)
  TargetEngine engine_;
  std::optional<LocalDrafts> local_;  // options.local_drafter set
  // Blocks for requests with no Assignment here yet. The coordinator sends the
  // Assignment to the target before the draft worker, but on another connection,
  // so on a loaded machine the draft's first block can arrive first; dropped, it
  // left the draft waiting for that block's result and the target waiting for a
  // block (a hung request, or with block_wait a position decided alone). Kept for
  // the engine's block_wait at most (a block older than that would find its
  // position decided alone), and at most max_requests of them: blocks of released
  // requests land here too.
  struct EarlyBlock {
    net::Frame frame;
    absl::Time received;
  };
  std::deque<EarlyBlock> early_blocks_;
  double mean_step_ms_ = 0;  // moving average, reported in heartbeats
  uint64_t kv_bytes_per_position_;  // of this model's caches (reported in heartbeats)
};

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_TARGET_SERVICE_H_

// InProcessCluster: coordinator, one target worker and (optionally) one draft
// worker as threads of this process, talking over inproc:// (or tcp://
// loopback) channels: the same services and code paths as a cluster of
// processes. `splitspec generate` and `splitspec bench spec` run on it, and so
// do the pipeline tests.
//
//   InProcessClusterOptions options;
//   options.target = target_model.get();
//   options.drafter = &ngram;                 // nullptr: the target decodes alone
//   ASSIGN_OR_RETURN(auto cluster, InProcessCluster::Start(options));
//   ASSIGN_OR_RETURN(auto client, net::RequestClient::Connect(cluster->coordinator_endpoint()));
//
// Thread model: one thread per service (coordinator, target leader, draft
// worker), each owning its sockets, plus one per follower rank of a
// tensor-parallel target group; the caller's thread owns its clients.
// The destructor stops the services (draft, target, coordinator) and joins.
//
// Security: inproc:// stays inside the process and needs no keys. With tcp://
// (use_tcp, or the Gloo rendezvous of a tensor-parallel group) Start gives the
// process one fresh CURVE key holding every role (net::SingleKeySecurity) as
// its default, unless it already has one; clients in this process use it too.
#ifndef SPLITSPEC_TOOLS_CLUSTER_IN_PROCESS_CLUSTER_H_
#define SPLITSPEC_TOOLS_CLUSTER_IN_PROCESS_CLUSTER_H_

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coordinator/coordinator_service.h"
#include "draft_worker/draft_service.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/drafter.h"
#include "target_worker/target_service.h"

namespace splitspec::tools {

struct InProcessClusterOptions {
  model::Transformer* target = nullptr;  // required; outlives the cluster
  spec::Drafter* drafter = nullptr;      // optional; outlives the cluster
  // Optional; outlives the cluster: a model-free drafter the target leader runs
  // itself for requests with no draft worker (target_worker/local_drafts.h), with
  // draft_engine's options.
  spec::Drafter* target_drafter = nullptr;
  target::TargetEngineOptions target_engine;
  // The CUDA ordinal the one-rank target verifies on (TargetServiceOptions::
  // verify_device); -1: on the host.
  int target_verify_device = -1;
  draft::DraftEngineOptions draft_engine;
  coordinator::MembershipOptions membership;
  coordinator::RouterOptions router;
  bool use_tcp = false;  // tcp://127.0.0.1 with free ports instead of inproc://
  // Tests: faults on the draft <-> target data path, in both directions.
  std::optional<net::FaultOptions> data_faults;
  // Tensor parallelism of the target group: with target_tp > 1 the group is
  // target_tp rank threads (target_worker/tp_group_runner.h; Gloo over
  // 127.0.0.1) that each load their shard of `target_path` with
  // `target_threads` threads; `target` then only supplies the config.
  int target_tp = 1;
  std::string target_path;
  int target_threads = 1;
};

class InProcessCluster {
 public:
  // Starts the services and waits until the workers have registered.
  static absl::StatusOr<std::unique_ptr<InProcessCluster>> Start(InProcessClusterOptions options);
  ~InProcessCluster();

  const std::string& coordinator_endpoint() const { return coordinator_endpoint_; }
  // Stops the draft worker's thread without deregistering (as if it died).
  void KillDraftWorker();
  // Waits until the draft worker has released `count` requests in all (DraftCounters::
  // requests_released): from then on its drafter holds nothing of them and it runs no
  // Propose for them, so another cluster may use the same drafter. OK at once
  // without a draft worker; DeadlineExceeded (naming both counts) after `timeout`.
  absl::Status WaitForDraftReleases(uint64_t count, absl::Duration timeout) const;
  // The draft worker's engine counters and speculation cache totals. Only after
  // KillDraftWorker (its thread owns them while it runs); zero without a drafter.
  draft::DraftCounters DraftCountersAfterKill() const;
  spec::SpeculationCacheCounters CacheCountersAfterKill() const;

 private:
  InProcessCluster() = default;
  absl::Status WaitForWorkers(int expected);
  void StartTensorParallelGroup(const InProcessClusterOptions& options,
                                const target::TargetServiceOptions& leader_service);

  std::string coordinator_endpoint_;
  std::unique_ptr<coordinator::CoordinatorService> coordinator_;
  std::unique_ptr<target::TargetService> target_;
  std::unique_ptr<draft::DraftService> draft_;
  std::atomic<bool> stop_coordinator_{false};
  std::atomic<bool> stop_target_{false};
  std::atomic<bool> stop_draft_{false};
  std::thread coordinator_thread_;
  std::thread target_thread_;
  std::vector<std::thread> tp_rank_threads_;  // target_tp > 1: one per rank
  std::thread draft_thread_;
};

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_CLUSTER_IN_PROCESS_CLUSTER_H_

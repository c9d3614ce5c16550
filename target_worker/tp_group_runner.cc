#include "target_worker/tp_group_runner.h"

#include <memory>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/kv_budget.h"
#include "runtime/model/transformer.h"
#if defined(SPLITSPEC_HAVE_CUDA)
#include "runtime/dist/host_staged_communicator.h"
#endif
#include "runtime/net/membership_client.h"
#include "runtime/net/worker_identity.h"
#include "target_worker/group_follower.h"
#include "target_worker/group_leader_model.h"
#include "target_worker/request_setup.h"

namespace splitspec::target {
namespace {

// Load errors that a new formation cannot fix end the rank.
bool IsPermanent(const absl::Status& status) {
  return absl::IsInvalidArgument(status) || absl::IsNotFound(status) ||
         absl::IsUnimplemented(status);
}

void Pause(const TpRankOptions& options, const std::atomic<bool>& stop) {
  const absl::Time until = absl::Now() + options.retry_interval;
  while (!stop.load(std::memory_order_relaxed) && absl::Now() < until) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

net::WorkerIdentity RankIdentity(const TpRankOptions& options) {
  net::WorkerIdentity identity = options.service.identity;
  identity.role = proto::ROLE_TARGET_WORKER;
  if (identity.name.empty())
    identity.name = absl::StrCat(options.group.group, "-rank-", options.group.rank);
  if (identity.model_path.empty()) identity.model_path = options.model_path;
  identity.tp_group = options.group.group;
  identity.tp_rank = options.group.rank;
  identity.tp_size = options.group.size;
  identity.threads = options.threads;
  return identity;
}

// The rank's model over the formed group: on a CUDA device its collectives go
// over the group's NCCL communicator, or else through a host-staged view of its
// Gloo communicator, which the model must not outlive (members in that order).
struct RankModel {
  std::unique_ptr<net::Communicator> staged;
  std::unique_ptr<model::Transformer> model;
  uint64_t kv_cache_bytes = 0;  // this rank's KV budget
};

absl::StatusOr<RankModel> LoadRankModel(const TpRankOptions& options, FormedGroup& formed) {
  RankModel rank;
  const model::DeviceSpec& device = options.group.device;
  net::Communicator* comm = formed.nccl != nullptr ? formed.nccl.get() : formed.comm.get();
#if defined(SPLITSPEC_HAVE_CUDA)
  if (device.is_cuda() && formed.nccl == nullptr) {
    rank.staged = std::make_unique<net::HostStagedCommunicator>(comm, device.ordinal);
    comm = rank.staged.get();
  }
#endif
  SPLITSPEC_LOG(INFO) << "tp group '" << options.group.group << "' rank " << options.group.rank
                      << " on " << device.ToString() << ": collectives over "
                      << comm->backend_name() << " (" << formed.transport.reason << ")";
  ASSIGN_OR_RETURN(rank.model,
                   model::Transformer::Load(options.model_path, comm,
                                            {.threads = options.threads, .device = device}));
  ASSIGN_OR_RETURN(rank.kv_cache_bytes,
                   model::StartKvBudget(*rank.model, options.kv_cache_memory,
                                        absl::StrCat("tp group '", options.group.group, "' rank ",
                                                     options.group.rank)));
  return rank;
}

// One formation of the group, as its leader. OK: stopped or drained.
absl::Status LeadOneFormation(const TpRankOptions& options, FormedGroup& formed,
                              const std::atomic<bool>& stop) {
  ASSIGN_OR_RETURN(RankModel rank, LoadRankModel(options, formed));
  GroupLeaderModel leader(rank.model.get(), formed.comm.get());
  TargetServiceOptions service_options = options.service;
  service_options.identity = RankIdentity(options);
  service_options.group_leader = &leader;
  service_options.engine.kv_cache_bytes = rank.kv_cache_bytes;
  // Structured outputs: the leader masks the gathered rows, as a one-rank target does.
  if (service_options.engine.grammar_compiler == nullptr) {
    ASSIGN_OR_RETURN(service_options.engine.grammar_compiler,
                     GrammarCompilerForModel(options.model_path, rank.model->config().vocab_size));
  }
  // A CUDA leader keeps the gathered logits on its device and verifies there, as a
  // one-rank CUDA target does: the target's probabilities never reach the host.
  if (options.group.device.is_cuda()) service_options.verify_device = options.group.device.ordinal;
  ASSIGN_OR_RETURN(std::unique_ptr<TargetService> service,
                   TargetService::Create(&leader, service_options));
  SPLITSPEC_LOG(INFO) << "tp group '" << options.group.group << "' generation " << formed.generation
                      << " formed: leading " << options.group.size << " ranks, serving on "
                      << service->data_endpoint();
  absl::Status served = service->Run(stop);
  service.reset();  // its caches go before the model
  if (served.ok()) leader.Leave(/*disband=*/!stop.load());
  return served;
}

// One formation of the group, as a follower.
absl::StatusOr<FollowerExit> FollowOneFormation(const TpRankOptions& options, FormedGroup& formed,
                                                const std::atomic<bool>& stop) {
  ASSIGN_OR_RETURN(RankModel rank, LoadRankModel(options, formed));
  // Registered for liveness only (the router places requests on leaders).
  ASSIGN_OR_RETURN(proto::Register registration, net::BuildRegistration(RankIdentity(options)));
  ASSIGN_OR_RETURN(auto membership, net::MembershipClient::Connect(
                                        options.group.coordinator_endpoint, registration));
  const absl::Time register_by = absl::Now() + absl::Seconds(2);
  while (!membership->registered() && absl::Now() < register_by) {
    RETURN_IF_ERROR(membership->Poll(absl::Milliseconds(50)));
  }
  SPLITSPEC_LOG(INFO) << "tp group '" << options.group.group << "' generation " << formed.generation
                      << " joined as rank " << options.group.rank;
  absl::StatusOr<FollowerExit> exit = RunGroupFollower(*rank.model, *formed.comm, stop);
  (void)membership->Deregister(
      exit.ok() ? "tp group left" : absl::StrCat("tp group failed: ", exit.status().message()));
  return exit;
}

}  // namespace

absl::Status RunGroupLeader(const TpRankOptions& options, const std::atomic<bool>& stop) {
  RETURN_IF_ERROR(ValidateTpGroupOptions(options.group));
  if (options.group.rank != 0)
    return absl::InvalidArgumentError("RunGroupLeader: the leader is rank 0");
  ASSIGN_OR_RETURN(std::unique_ptr<net::RendezvousServer> server,
                   StartGroupRendezvous(options.group));
  uint64_t generation = static_cast<uint64_t>(absl::ToUnixMicros(absl::Now()));
  while (!stop.load(std::memory_order_relaxed)) {
    absl::StatusOr<FormedGroup> formed = FormAsLeader(options.group, *server, generation++);
    if (!formed.ok()) {
      if (absl::IsInvalidArgument(formed.status())) return formed.status();
      SPLITSPEC_LOG(WARNING) << "tp group '" << options.group.group
                             << "': not formed: " << formed.status();
      Pause(options, stop);
      continue;
    }
    absl::Status served = LeadOneFormation(options, *formed, stop);
    if (served.ok()) return served;
    if (IsPermanent(served)) return served;
    SPLITSPEC_LOG(WARNING) << "tp group '" << options.group.group << "' generation "
                           << formed->generation << " failed (" << served << "); re-forming";
    Pause(options, stop);
  }
  return absl::OkStatus();
}

absl::Status RunGroupFollower(const TpRankOptions& options, const std::atomic<bool>& stop) {
  RETURN_IF_ERROR(ValidateTpGroupOptions(options.group));
  if (options.group.rank == 0)
    return absl::InvalidArgumentError("RunGroupFollower: rank 0 is the leader");
  uint64_t min_generation = 0;
  while (!stop.load(std::memory_order_relaxed)) {
    absl::StatusOr<FormedGroup> formed = JoinAsFollower(options.group, min_generation, stop);
    if (!formed.ok()) {
      if (absl::IsCancelled(formed.status())) break;
      if (absl::IsInvalidArgument(formed.status())) return formed.status();
      SPLITSPEC_LOG(WARNING) << "tp group '" << options.group.group
                             << "': not joined: " << formed.status();
      Pause(options, stop);
      continue;
    }
    min_generation = formed->generation + 1;
    absl::StatusOr<FollowerExit> exit = FollowOneFormation(options, *formed, stop);
    if (exit.ok() && *exit == FollowerExit::kDisbanded) {
      SPLITSPEC_LOG(INFO) << "tp group '" << options.group.group << "' disbanded by its leader";
      return absl::OkStatus();
    }
    if (!exit.ok()) {
      if (IsPermanent(exit.status())) return exit.status();
      SPLITSPEC_LOG(WARNING) << "tp group '" << options.group.group << "' generation "
                             << formed->generation << " failed on rank " << options.group.rank
                             << ": " << exit.status();
    }
  }
  return absl::OkStatus();
}

}  // namespace splitspec::target

#include "tools/cluster/in_process_cluster.h"

#include <unistd.h>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/request_client.h"
#include "target_worker/tp_group_runner.h"

namespace splitspec::tools {
namespace {

std::string Endpoint(bool use_tcp, const std::string& name) {
  static std::atomic<int> counter{0};
  if (use_tcp) return "tcp://127.0.0.1:*";
  return absl::StrCat("inproc://splitspec-", getpid(), "-", counter.fetch_add(1), "-", name);
}

}  // namespace

absl::StatusOr<std::unique_ptr<InProcessCluster>> InProcessCluster::Start(
    InProcessClusterOptions options) {
  if (options.target == nullptr)
    return absl::InvalidArgumentError("InProcessClusterOptions.target is null");
  std::unique_ptr<InProcessCluster> cluster(new InProcessCluster());
  // Loopback sockets are reachable by every local user: secure them with one
  // fresh key for the whole process unless the process already has keys.
  if ((options.use_tcp || options.target_tp > 1) && !net::DefaultChannelSecurity().curve) {
    ASSIGN_OR_RETURN(net::ChannelSecurity security, net::SingleKeySecurity());
    net::SetDefaultChannelSecurity(security);
  }

  coordinator::CoordinatorOptions coordinator_options;
  coordinator_options.control_endpoint = Endpoint(options.use_tcp, "control");
  coordinator_options.membership = options.membership;
  coordinator_options.router = options.router;
  coordinator_options.router.context_length = options.target->config().context_length;
  ASSIGN_OR_RETURN(cluster->coordinator_,
                   coordinator::CoordinatorService::Create(coordinator_options));
  cluster->coordinator_endpoint_ = cluster->coordinator_->control_endpoint();

  if (options.target_tp < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("InProcessClusterOptions.target_tp is ", options.target_tp));
  }
  target::TargetServiceOptions target_options;
  target_options.coordinator_endpoint = cluster->coordinator_endpoint_;
  target_options.data_endpoint = Endpoint(options.use_tcp, "target-0");
  target_options.identity.name = "target-0";
  target_options.identity.threads = options.target->num_threads();
  target_options.engine = options.target_engine;
  if (options.target_tp == 1) target_options.verify_device = options.target_verify_device;
  target_options.data_faults = options.data_faults;
  target_options.local_drafter = options.target_drafter;
  target_options.local_draft = options.draft_engine;
  if (options.target_tp == 1) {
    ASSIGN_OR_RETURN(cluster->target_,
                     target::TargetService::Create(options.target, target_options));
  }

  if (options.drafter != nullptr) {
    draft::DraftServiceOptions draft_options;
    draft_options.coordinator_endpoint = cluster->coordinator_endpoint_;
    draft_options.identity.name = "draft-0";
    draft_options.engine = options.draft_engine;
    draft_options.data_faults = options.data_faults;
    ASSIGN_OR_RETURN(cluster->draft_, draft::DraftService::Create(options.drafter, draft_options));
  }

  InProcessCluster* c = cluster.get();
  c->coordinator_thread_ = std::thread([c] {
    absl::Status status = c->coordinator_->Run(c->stop_coordinator_);
    if (!status.ok()) SPLITSPEC_LOG(ERROR) << "coordinator: " << status;
  });
  if (c->target_ != nullptr) {
    c->target_thread_ = std::thread([c] {
      absl::Status status = c->target_->Run(c->stop_target_);
      if (!status.ok()) SPLITSPEC_LOG(ERROR) << "target worker: " << status;
    });
  } else {
    c->StartTensorParallelGroup(options, target_options);
  }
  if (c->draft_ != nullptr) {
    c->draft_thread_ = std::thread([c] {
      absl::Status status = c->draft_->Run(c->stop_draft_);
      if (!status.ok()) SPLITSPEC_LOG(ERROR) << "draft worker: " << status;
    });
  }
  RETURN_IF_ERROR(c->WaitForWorkers(options.target_tp + (c->draft_ != nullptr ? 1 : 0)));
  return cluster;
}

void InProcessCluster::StartTensorParallelGroup(
    const InProcessClusterOptions& options, const target::TargetServiceOptions& leader_service) {
  for (int rank = 0; rank < options.target_tp; ++rank) {
    target::TpRankOptions rank_options;
    rank_options.group = {.coordinator_endpoint = coordinator_endpoint_,
                          .group = "target-0",
                          .rank = rank,
                          .size = options.target_tp,
                          .host = "127.0.0.1"};
    rank_options.model_path = options.target_path;
    rank_options.threads = options.target_threads;
    rank_options.service = leader_service;
    rank_options.service.identity.name = absl::StrCat("target-0-rank-", rank);
    tp_rank_threads_.emplace_back([this, rank_options] {
      absl::Status status = rank_options.group.rank == 0
                                ? target::RunGroupLeader(rank_options, stop_target_)
                                : target::RunGroupFollower(rank_options, stop_target_);
      if (!status.ok())
        SPLITSPEC_LOG(ERROR) << "target rank " << rank_options.group.rank << ": " << status;
    });
  }
}

absl::Status InProcessCluster::WaitForWorkers(int expected) {
  for (int attempt = 0; attempt < 500; ++attempt) {
    absl::StatusOr<proto::StatusReply> status =
        net::FetchCoordinatorStatus(coordinator_endpoint_, absl::Seconds(2));
    if (status.ok()) {
      int alive = 0;
      for (const proto::MemberStatus& m : status->members())
        alive += m.state() == proto::MEMBER_STATE_ALIVE;
      if (alive >= expected) return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("workers did not register with ", coordinator_endpoint_));
}

absl::Status InProcessCluster::WaitForDraftReleases(uint64_t count, absl::Duration timeout) const {
  if (draft_ == nullptr) return absl::OkStatus();
  const absl::Time deadline = absl::Now() + timeout;
  while (draft_->requests_released() < count) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat("the draft worker released ",
                                                      draft_->requests_released(), " of ", count,
                                                      " requests within ", absl::FormatDuration(timeout)));
    }
    absl::SleepFor(absl::Microseconds(200));
  }
  return absl::OkStatus();
}

void InProcessCluster::KillDraftWorker() {
  stop_draft_ = true;
  if (draft_thread_.joinable()) draft_thread_.join();
}

draft::DraftCounters InProcessCluster::DraftCountersAfterKill() const {
  return draft_ != nullptr && !draft_thread_.joinable() ? draft_->engine().counters()
                                                        : draft::DraftCounters();
}

spec::SpeculationCacheCounters InProcessCluster::CacheCountersAfterKill() const {
  return draft_ != nullptr && !draft_thread_.joinable() ? draft_->engine().cache_counters()
                                                        : spec::SpeculationCacheCounters();
}

InProcessCluster::~InProcessCluster() {
  stop_draft_ = true;
  if (draft_thread_.joinable()) draft_thread_.join();
  stop_target_ = true;
  if (target_thread_.joinable()) target_thread_.join();
  for (std::thread& rank : tp_rank_threads_) rank.join();
  stop_coordinator_ = true;
  if (coordinator_thread_.joinable()) coordinator_thread_.join();
}

}  // namespace splitspec::tools

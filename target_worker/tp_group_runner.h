// The lives of the ranks of a tensor-parallel target group (TP >= 2): form the
// group through the coordinator, load this rank's shard, serve, and re-form
// after a failure until told to stop. splitspec-target-worker runs one of
// these per process; tools/cluster/in_process_cluster runs them as threads.
//
//   TpRankOptions options;  options.group = {.group = "g0", .rank = r, .size = 2};
//   options.model_path = path;  options.service = ...;   // rank 0: the leader's sockets
//   RETURN_IF_ERROR(r == 0 ? RunGroupLeader(options, stop) : RunGroupFollower(options, stop));
//
// Written without a GPU: the NCCL path of a group of several ranks has not run
// (it needs one GPU per rank; tests/gpu/tp_group_nccl_test.cc skips below two).
//
// Leader (rank 0): one RendezvousServer for the process; each formation
// announces a new generation (starting from the clock, so a restarted leader
// outranks its predecessor), waits for the followers, loads the shard and runs
// a TargetService (registered with the coordinator only while the group
// works: requests are placed only on a whole group). When the group breaks
// (a follower died or stopped answering) the service deregisters, the
// coordinator re-places the group's requests (re-prefill from their committed
// tokens), and the leader forms the next generation when the followers are
// back. Returns on `stop` (followers are told to wait for a new leader) or
// after the coordinator drained it (followers are told to exit).
//
// Follower (rank > 0): looks the group up, joins, loads its shard, registers
// with the coordinator for liveness (never placed: only leaders are), and runs
// the leader's steps; after a failure or the leader's leave it looks up the
// next generation. Returns on `stop` or when the leader disbands the group.
#ifndef SPLITSPEC_TARGET_WORKER_TP_GROUP_RUNNER_H_
#define SPLITSPEC_TARGET_WORKER_TP_GROUP_RUNNER_H_

#include <atomic>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "runtime/base/memory_amount.h"
#include "runtime/model/device.h"
#include "target_worker/target_service.h"
#include "target_worker/tp_group.h"

namespace splitspec::target {

struct TpRankOptions {
  TpGroupOptions group;
  std::string model_path;
  int threads = 1;  // this rank's compute threads
  // This rank's device is group.device. On CUDA the transformer's collectives go
  // over the group's NCCL communicator when the group chose NCCL (group.comm,
  // runtime/dist/tp_transport.h), else over its Gloo communicator staged through
  // the host (runtime/dist/host_staged_communicator.h); step plans stay on Gloo.
  // A CUDA leader verifies on its device (TargetServiceOptions::verify_device).
  // CUDA builds only (a CPU build refuses cuda:N at start-up).
  // The leader's service; identity.name/tp_* are filled from `group` where empty.
  TargetServiceOptions service;
  // This rank's KV-cache budget (runtime/model/kv_budget.h; unset: the default
  // share). The leader's engine schedules by the leader's; each rank logs its own.
  std::optional<MemoryAmount> kv_cache_memory;
  // Pause between formation attempts after a failure.
  absl::Duration retry_interval = absl::Milliseconds(500);
};

// Errors: only ones retrying cannot fix (a model that does not load or does
// not split `group.size` ways, invalid options); group failures are retried.
absl::Status RunGroupLeader(const TpRankOptions& options, const std::atomic<bool>& stop);
absl::Status RunGroupFollower(const TpRankOptions& options, const std::atomic<bool>& stop);

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_TP_GROUP_RUNNER_H_

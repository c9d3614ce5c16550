// The follower side of a tensor-parallel target group (ranks 1..N-1): receive
// the leader's step plan, run the same forward on this rank's shard, repeat.
// The leader's side is group_leader_model.h; the wire is proto::GroupStep.
//
//   ASSIGN_OR_RETURN(FollowerExit exit, RunGroupFollower(*tp_model, *comm, stop));
//
// Caches are keyed as the leader's: a step's sequence with an unknown key and
// start 0 gets a new cache; before appending, each cache is truncated to the
// step's `start`. Logits are computed (the all-gather needs every rank) and
// dropped.
#ifndef SPLITSPEC_TARGET_WORKER_GROUP_FOLLOWER_H_
#define SPLITSPEC_TARGET_WORKER_GROUP_FOLLOWER_H_

#include <atomic>
#include <cstdint>

#include "absl/status/statusor.h"
#include "runtime/dist/communicator.h"
#include "runtime/model/transformer.h"

namespace splitspec::target {

enum class FollowerExit {
  kLeaderLeft,  // the leader is going; wait for the group to re-form
  kDisbanded,   // the group was drained: exit
  kStopped,     // `stop` was set (noticed between steps; the leader sends at
                // least one step per keep-alive interval)
};

struct FollowerCounters {
  uint64_t steps = 0;
  uint64_t forwards = 0;
  uint64_t tokens = 0;
  // Positions the follower's caches hold reserved after its last forward (the
  // leader's caches reserve as many: group_leader_model.h).
  uint64_t reserved_positions = 0;
};

// A step this rank cannot run (Transformer::PrepareForward's errors) is refused
// and the group told before any collective (group_step_vote.h): every rank skips
// it, this rank logs why, and the loop goes on.
// Errors: the first failed collective (the group is broken; re-form), or
// DataLoss naming the step when the leader's plan cannot be followed (an
// unknown cache key with start > 0, a start past the cache's length), returned
// after the group has been told.
absl::StatusOr<FollowerExit> RunGroupFollower(model::Transformer& model, net::Communicator& comm,
                                              const std::atomic<bool>& stop,
                                              FollowerCounters* counters = nullptr);

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_GROUP_FOLLOWER_H_

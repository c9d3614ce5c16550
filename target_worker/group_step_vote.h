// The agreement of a tensor-parallel group's ranks on one step before its
// forward: each rank checks the step on its own (Transformer::PrepareForward:
// caches, room, tokens), then every rank learns every rank's verdict in one
// small host collective. A rank that refuses (its cache in the wrong memory, its
// device out of memory, a plan it cannot follow) so tells its group at once:
// either every rank runs the forward's collectives or none does, and no rank
// waits in a collective that a peer never enters.
//
//   const absl::Status local = model.PrepareForward(batch);
//   absl::Status agreed;
//   RETURN_IF_ERROR(AgreeOnStep(comm, step_number, local, &agreed));
//   if (!agreed.ok()) return agreed;          // every rank skips this step
//   RETURN_IF_ERROR(model.Forward(batch, &out));
//
// Cost: one all-gather of one float per rank over the host communicator per step.
#ifndef SPLITSPEC_TARGET_WORKER_GROUP_STEP_VOTE_H_
#define SPLITSPEC_TARGET_WORKER_GROUP_STEP_VOTE_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "runtime/dist/communicator.h"

namespace splitspec::target {

// Every rank of `comm` (a host communicator) calls this with its own verdict on
// step `step`. Sets `*agreed` to the agreed verdict: OK when every rank is ready;
// otherwise the refusal of the lowest refusing rank, with its status code, naming
// the step and the rank (and carrying the message when that rank is this one;
// other ranks log their own). Returns the collective's own failure: the group is
// then broken (dist/communicator.h). (Two statuses, not StatusOr<Status>: that
// type reads an error Status as its value, so a failed collective would pass for
// a refusal and the group would not re-form.)
absl::Status AgreeOnStep(net::Communicator& comm, uint64_t step, const absl::Status& local,
                         absl::Status* agreed);

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_GROUP_STEP_VOTE_H_

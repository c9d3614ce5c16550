// Forming a tensor-parallel target group through the coordinator.
//
// The leader (rank 0) serves a RendezvousServer and announces it to the
// coordinator under the group's name with a generation number; followers look
// the name up, join the store, and every rank creates the group's Gloo
// communicator under "<group>/gen-<generation>". Before that every rank reports
// its device through the store and all choose the transport of the device
// collectives alike (runtime/dist/tp_transport.h, --tp-comm): NCCL when every
// rank has a GPU of its own (the NCCL unique id also passes through the store),
// else Gloo staged through the host. A failed group is re-formed
// with a higher generation, so keys of the dead formation never mix in.
//
//   // leader                                     // follower
//   ASSIGN_OR_RETURN(auto server, StartGroupRendezvous(options));
//   ASSIGN_OR_RETURN(FormedGroup g, FormAsLeader(options, *server, generation));
//                                                 ASSIGN_OR_RETURN(FormedGroup g,
//                                                     JoinAsFollower(options, min_generation,
//                                                     stop));
//   ... Transformer::Load(path, g.comm.get(), ...)
//
// Every call is bounded: announce/lookup by the coordinator's answer time,
// communicator creation by options.timeout (DeadlineExceeded names the group
// when a rank did not appear). Nothing here retries; the runners in
// tp_group_runner.h loop.
#ifndef SPLITSPEC_TARGET_WORKER_TP_GROUP_H_
#define SPLITSPEC_TARGET_WORKER_TP_GROUP_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/dist/communicator.h"
#include "runtime/dist/tp_transport.h"
#include "runtime/model/device.h"
#include "runtime/net/rendezvous_server.h"

namespace splitspec::target {

struct TpGroupOptions {
  std::string coordinator_endpoint = "tcp://127.0.0.1:5555";
  std::string group;  // required; the name the launcher gave every rank
  int rank = 0;
  int size = 2;  // >= 2 (TP=1 needs no group)
  // Address this rank's Gloo listener publishes, and where the leader's
  // rendezvous store listens. Empty: derived by GroupHostFor().
  std::string host;
  // Bound on every collective and on forming the group.
  absl::Duration timeout = absl::Seconds(30);
  // This rank's device (where its shard runs), reported to the group.
  model::DeviceSpec device = {};
  // The transport of the device collectives; every rank must name the same.
  net::TpComm comm = net::TpComm::kAuto;
};

// The host a rank binds and publishes: the host of its data endpoint when that
// names one (tcp://10.0.0.5:7000 -> 10.0.0.5), else 127.0.0.1 when the
// coordinator is on loopback, else "" (Gloo then uses the machine's host name).
std::string GroupHostFor(const std::string& data_endpoint, const std::string& coordinator_endpoint);

// InvalidArgument naming the field (empty group, size < 2, rank out of range).
absl::Status ValidateTpGroupOptions(const TpGroupOptions& options);

struct FormedGroup {
  // Gloo (host memory): step plans, and the model's collectives unless `nccl`.
  std::unique_ptr<net::Communicator> comm;
  // NCCL (device memory) when the group chose it (transport.transport ==
  // kNccl), for the model's collectives; null otherwise. Declared after `comm`,
  // so it is destroyed first.
  std::unique_ptr<net::Communicator> nccl;
  net::TpTransportChoice transport;
  uint64_t generation = 0;
};

// Leader: the store every formation of this leader process uses.
absl::StatusOr<std::unique_ptr<net::RendezvousServer>> StartGroupRendezvous(
    const TpGroupOptions& options);

// Leader: announces `generation` and creates the communicator (waits up to
// options.timeout for the followers). Errors: Unavailable (the coordinator did
// not answer), FailedPrecondition (it recorded a newer generation: another
// leader holds the name), DeadlineExceeded (a follower did not join),
// InvalidArgument from net::ChooseTpTransport (--tp-comm nccl with two ranks on
// one GPU, a CPU rank or no NCCL; ranks naming different --tp-comm): permanent.
absl::StatusOr<FormedGroup> FormAsLeader(const TpGroupOptions& options,
                                         net::RendezvousServer& server, uint64_t generation);

// Follower: polls the coordinator until the group's leader announced a
// generation >= min_generation (or `stop`: Cancelled), then joins. Errors as
// FormAsLeader's.
absl::StatusOr<FormedGroup> JoinAsFollower(const TpGroupOptions& options, uint64_t min_generation,
                                           const std::atomic<bool>& stop);

// One request/answer with the coordinator on a short-lived connection.
// Errors: Unavailable naming the endpoint when no GroupInfo came within `timeout`.
absl::StatusOr<proto::GroupInfo> AskCoordinator(const std::string& coordinator_endpoint,
                                                const proto::Envelope& request,
                                                absl::Duration timeout);

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_TP_GROUP_H_

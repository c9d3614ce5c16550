// Exchanges of small values through a group's RendezvousStore, before any
// collective can run: one rank's value shared with all (an NCCL unique id made
// by rank 0), or every rank's value gathered by all (each rank's device, so
// that the group can choose its transport; tp_transport.h).
//
//   ASSIGN_OR_RETURN(std::string id, ShareFromRoot(store, options, "nccl/unique-id",
//                                                  kIdBytes, MakeId));
//   ASSIGN_OR_RETURN(std::vector<std::string> all, GatherFromAll(store, options, "devices",
//                                                                mine));
//
// Keys are "<options.group>/<name>" (ShareFromRoot) and
// "<options.group>/<name>/rank-<r>" (GatherFromAll); a store key is set once, so
// a name is used once per group. Every Get waits at most options.timeout.
#ifndef SPLITSPEC_RUNTIME_DIST_STORE_EXCHANGE_H_
#define SPLITSPEC_RUNTIME_DIST_STORE_EXCHANGE_H_

#include <cstddef>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/dist/communicator.h"
#include "runtime/dist/rendezvous_store.h"

namespace splitspec::net {

// Rank 0 calls `make` and publishes its bytes; the other ranks wait for them.
// Every rank returns the same bytes. Errors: ValidateCommunicatorOptions';
// `make`'s (rank 0); InvalidArgument naming the key if the value does not hold
// exactly `bytes` bytes; the store's (DeadlineExceeded naming the key when rank
// 0 never published).
absl::StatusOr<std::string> ShareFromRoot(RendezvousStore& store,
                                          const CommunicatorOptions& options,
                                          absl::string_view name, size_t bytes,
                                          absl::FunctionRef<absl::StatusOr<std::string>()> make);

// Publishes `mine` and returns every rank's value, in rank order ([size];
// element options.rank is `mine`). Errors: ValidateCommunicatorOptions'; the
// store's (DeadlineExceeded naming the key of a rank that never published).
absl::StatusOr<std::vector<std::string>> GatherFromAll(RendezvousStore& store,
                                                       const CommunicatorOptions& options,
                                                       absl::string_view name,
                                                       absl::string_view mine);

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_DIST_STORE_EXCHANGE_H_

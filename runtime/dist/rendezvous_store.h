// RendezvousStore: a small key-value store through which the ranks of one
// tensor-parallel group find each other before any collective can run.
//
//   // Rank 0 (the group leader) serves the store; every rank, leader included,
//   // connects to it and creates its communicator through it:
//   ASSIGN_OR_RETURN(auto server, RendezvousServer::Start("tcp://0.0.0.0:*"));
//   ASSIGN_OR_RETURN(auto store, ConnectRendezvousStore(server->endpoint(), "group-a/rank-0"));
//   RETURN_IF_ERROR(store->Set("group-a/rank-0/address", bytes));
//   ASSIGN_OR_RETURN(std::string peer, store->Get("group-a/rank-1/address", absl::Seconds(30)));
//
// Keys are strings; values are arbitrary bytes. A key is set once: setting it
// again is refused, so a stale rank of an earlier group with the same name
// cannot silently overwrite a live one. Communicators prefix every key with
// their group name, so one store can serve many groups; a group name is used
// for one rendezvous.
//
// Implementations: FileRendezvousStore (a directory that every rank on one host,
// or on a shared file system, can read: Gloo's FileStore underneath) and
// ChannelRendezvousStore (a client of the RendezvousServer that the group leader
// runs over a splitspec Channel: works across hosts).
//
// Thread safety: an instance is used by one thread at a time (the thread that
// creates a communicator); distinct instances may share one backing store.
#ifndef SPLITSPEC_RUNTIME_DIST_RENDEZVOUS_STORE_H_
#define SPLITSPEC_RUNTIME_DIST_RENDEZVOUS_STORE_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace splitspec::net {

class RendezvousStore {
 public:
  virtual ~RendezvousStore() = default;

  // Publishes `value` under `key`. Errors: InvalidArgument (empty key);
  // AlreadyExists naming the key if it is set already (its value is unchanged);
  // Unavailable (the store cannot be reached or written; the message names the
  // key and where).
  virtual absl::Status Set(const std::string& key, absl::string_view value) = 0;

  // Waits up to `timeout` until `key` is set and returns its value.
  // Errors: DeadlineExceeded naming the key and the timeout; Unavailable as Set.
  virtual absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) = 0;

  // Where the store lives ("file:/tmp/x", "tcp://10.0.0.1:5555"), for messages.
  virtual std::string location() const = 0;
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_DIST_RENDEZVOUS_STORE_H_

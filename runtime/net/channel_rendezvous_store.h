// ChannelRendezvousStore: a RendezvousStore whose keys live in a
// RendezvousServer (normally served by the group leader), reached over a
// splitspec Channel (tcp:// across hosts, ipc:// / inproc:// / mem:// locally).
//
//   ASSIGN_OR_RETURN(auto store, ConnectRendezvousStore("tcp://10.0.0.1:5555", "group-a/rank-1"));
//   ASSIGN_OR_RETURN(std::string id, store->Get("group-a/nccl-id", absl::Seconds(60)));
//
// Thread safety: one thread at a time (it owns the connector Channel).
#ifndef SPLITSPEC_RUNTIME_NET_CHANNEL_RENDEZVOUS_STORE_H_
#define SPLITSPEC_RUNTIME_NET_CHANNEL_RENDEZVOUS_STORE_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "runtime/dist/rendezvous_store.h"
#include "runtime/net/channel.h"

namespace splitspec::net {
namespace internal {
enum class RendezvousOp : uint8_t;  // rendezvous_wire.h
}  // namespace internal

class ChannelRendezvousStore final : public RendezvousStore {
 public:
  // `reply_timeout`: how long Set waits for the server's acknowledgement, and how
  // much longer than its own timeout Get waits for the server's answer.
  ChannelRendezvousStore(std::unique_ptr<Channel> channel, absl::Duration reply_timeout);

  // Errors: AlreadyExists naming the key; Unavailable naming the server if no
  // acknowledgement came within reply_timeout (the server is down or
  // unreachable; the key may or may not be set).
  absl::Status Set(const std::string& key, absl::string_view value) override;
  // Errors: DeadlineExceeded naming the key and timeout if the server answered
  // that the key was not set in time; Unavailable if the server did not answer.
  absl::StatusOr<std::string> Get(const std::string& key, absl::Duration timeout) override;
  std::string location() const override { return channel_->endpoint(); }

 private:
  // Sends an `op` request (kGet: the server may wait up to `wait` for the key)
  // and waits up to `timeout` for the reply with its request id, skipping
  // replies to earlier, abandoned requests. Returns the reply's value; its op
  // goes to *reply_op.
  absl::StatusOr<std::string> Call(internal::RendezvousOp op, const std::string& key,
                                   std::string value, absl::Duration wait, absl::Duration timeout,
                                   internal::RendezvousOp* reply_op);

  std::unique_ptr<Channel> channel_;
  absl::Duration reply_timeout_;
  uint64_t next_request_id_ = 1;
};

// Connects to the RendezvousServer at `endpoint` as `identity` (unique among the
// server's clients, e.g. "<group>/rank-<r>"). Errors: those of ConnectChannel.
// reply_timeout: see ChannelRendezvousStore. `server_key`: the CURVE public key
// of the leader serving it (GroupInfo.leader_key); "" expects the shared
// target key (DefaultChannelSecurity().target_public_key).
absl::StatusOr<std::unique_ptr<RendezvousStore>> ConnectRendezvousStore(
    const std::string& endpoint, const std::string& identity,
    absl::Duration reply_timeout = absl::Seconds(10), const std::string& server_key = "");

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_CHANNEL_RENDEZVOUS_STORE_H_

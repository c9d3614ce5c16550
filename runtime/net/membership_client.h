// MembershipClient: a worker's side of cluster membership. Registers with the
// coordinator on the control channel, then heartbeats at the interval the
// coordinator asked for from a HeartbeatSender thread with its own connection
// (so a long forward pass never starves liveness), and re-registers if the
// coordinator forgot it (restart, or declared it dead).
//
//   proto::Register me;  me.set_role(proto::ROLE_DRAFT_WORKER); me.set_worker_name("draft-0");
//   ASSIGN_OR_RETURN(auto client, MembershipClient::Connect("tcp://10.0.0.1:5555", me));
//   while (!stop) RETURN_IF_ERROR(client->Poll(absl::Milliseconds(50)));
//   client->Deregister("shutdown");
//
// Thread safety: thread-compatible; owned by the worker's control thread, which
// also owns the underlying control Channel (the heartbeat thread is internal).
#ifndef SPLITSPEC_RUNTIME_NET_MEMBERSHIP_CLIENT_H_
#define SPLITSPEC_RUNTIME_NET_MEMBERSHIP_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/net/channel.h"
#include "runtime/net/heartbeat_sender.h"

namespace splitspec::net {

class MembershipClient {
 public:
  // Connects (asynchronously) to the coordinator's control endpoint. The
  // registration is sent on the first Poll. Errors: those of ConnectChannel.
  static absl::StatusOr<std::unique_ptr<MembershipClient>> Connect(
      const std::string& coordinator_endpoint, proto::Register registration);

  // Sends what is due (Register until acknowledged, then Heartbeat every
  // interval) and handles replies, returning after about `budget`. Messages
  // other than membership replies are returned through `other` if non-null
  // (the caller's data plane may share the control channel), else ignored.
  // Errors: only transport failures that make the channel unusable.
  absl::Status Poll(absl::Duration budget, proto::Envelope* other = nullptr,
                    bool* got_other = nullptr);

  // Finer-grained use by a service loop that receives on channel() itself:
  // sends the Register that is due at `now` (and notices a forgotten worker)...
  absl::Status SendDue(absl::Time now);
  // ...and consumes membership replies (RegisterAck, HeartbeatAck); returns
  // false for any other message, which is the caller's to handle.
  bool HandleReply(const proto::Envelope& envelope);
  // When the next Register is due (InfiniteFuture once registered).
  absl::Time next_send() const { return next_send_; }

  // Graceful leave: the coordinator marks this worker LEFT and acknowledges;
  // waits up to 1 s for that (DeadlineExceeded otherwise).
  absl::Status Deregister(const std::string& reason);

  bool registered() const { return worker_id_ != 0; }
  uint64_t worker_id() const { return worker_id_; }
  // Heartbeats sent since the last registration.
  uint64_t heartbeats_sent() const { return heartbeats_ ? heartbeats_->sent() : 0; }
  void set_load(const proto::LoadReport& load);
  Channel& channel() { return *channel_; }

 private:
  MembershipClient(std::unique_ptr<Channel> channel, std::string coordinator_endpoint,
                   proto::Register registration);

  std::unique_ptr<Channel> channel_;
  proto::Register registration_;
  std::string coordinator_endpoint_;
  proto::LoadReport load_;
  uint64_t worker_id_ = 0;
  std::unique_ptr<HeartbeatSender> heartbeats_;
  absl::Duration heartbeat_interval_ = absl::Milliseconds(500);
  absl::Duration register_retry_ = absl::Milliseconds(250);
  absl::Time next_send_ = absl::InfinitePast();
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_MEMBERSHIP_CLIENT_H_

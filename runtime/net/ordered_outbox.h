// OrderedOutbox: envelopes to one peer of a Channel that must all arrive, in the
// order they were given, even while the channel's send queue is full. ZeroMQ
// refuses a non-blocking send once a peer's queue reaches its high-water mark,
// which happens when a worker produces results faster than the coordinator reads
// them (a burst of re-placed requests on a fast model). A plain Send would drop
// such a result and the coordinator would wait for it forever; the outbox keeps
// it and sends it before anything newer.
//
//   OrderedOutbox to_coordinator("", /*max_pending=*/65536);
//   RETURN_IF_ERROR(to_coordinator.Send(channel, std::move(result)));  // queued or sent
//   ...
//   (void)to_coordinator.Flush(channel);  // every loop; retries what waits
//
// Errors other than ResourceExhausted (Unavailable, NotFound) drop the envelope at
// the front and are returned, as Channel::Send's would be. Send returns
// ResourceExhausted (and drops the new envelope) only when max_pending envelopes
// are already waiting: the peer has stopped reading, and membership will notice.
//
// Thread safety: none; the owner's thread only.
#ifndef SPLITSPEC_RUNTIME_NET_ORDERED_OUTBOX_H_
#define SPLITSPEC_RUNTIME_NET_ORDERED_OUTBOX_H_

#include <cstddef>
#include <deque>
#include <string>

#include "absl/status/status.h"
#include "proto/splitspec.pb.h"
#include "runtime/net/channel.h"

namespace splitspec::net {

class OrderedOutbox {
 public:
  OrderedOutbox(std::string peer, size_t max_pending)
      : peer_(std::move(peer)), max_pending_(max_pending) {}

  // Queues `envelope` behind those waiting, then flushes.
  absl::Status Send(Channel& channel, proto::Envelope envelope);
  // Sends the waiting envelopes, oldest first, until the channel's queue is full
  // again (they stay) or all are sent.
  absl::Status Flush(Channel& channel);

  bool empty() const { return pending_.empty(); }
  size_t pending() const { return pending_.size(); }

 private:
  std::string peer_;
  size_t max_pending_;
  std::deque<proto::Envelope> pending_;
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_ORDERED_OUTBOX_H_

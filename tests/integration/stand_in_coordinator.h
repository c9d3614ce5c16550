// The coordinator's side of a worker's control channel, played by a test that
// drives a single service (a target worker) message by message.
#ifndef SPLITSPEC_TESTS_INTEGRATION_STAND_IN_COORDINATOR_H_
#define SPLITSPEC_TESTS_INTEGRATION_STAND_IN_COORDINATOR_H_

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/net/channel.h"
#include "runtime/net/wire_format.h"

namespace splitspec::testing {

// The next message of kind `body` on `channel`, skipping others; DEADLINE_EXCEEDED
// (the channel's error) if none comes within `wait`.
inline absl::StatusOr<proto::Envelope> AwaitBody(net::Channel& channel,
                                                 proto::Envelope::BodyCase body,
                                                 absl::Duration wait) {
  const absl::Time deadline = absl::Now() + wait;
  while (true) {
    absl::StatusOr<net::Frame> frame = channel.Receive(deadline - absl::Now());
    if (!frame.ok()) return frame.status();
    if (frame->envelope.body_case() == body) return frame->envelope;
  }
}

// Waits up to `wait` for a worker's RegisterWorker on `coordinator` and
// acknowledges it as worker `worker_id` (heartbeats every second); returns the
// worker's peer name there.
inline absl::StatusOr<std::string> AcceptRegistration(net::Channel& coordinator,
                                                      uint64_t worker_id,
                                                      absl::Duration wait) {
  absl::StatusOr<net::Frame> frame;
  const absl::Time deadline = absl::Now() + wait;
  do {
    frame = coordinator.Receive(deadline - absl::Now());
    if (!frame.ok()) return frame.status();
  } while (!frame->envelope.has_register_worker());
  proto::Envelope ack = net::NewEnvelope();
  ack.mutable_register_ack()->set_worker_id(worker_id);
  ack.mutable_register_ack()->set_heartbeat_interval_ms(1000);
  ack.mutable_register_ack()->set_suspect_after_missed(2);
  ack.mutable_register_ack()->set_dead_after_missed(5);
  if (absl::Status sent = coordinator.Send(frame->peer, ack); !sent.ok()) return sent;
  return frame->peer;
}

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_INTEGRATION_STAND_IN_COORDINATOR_H_

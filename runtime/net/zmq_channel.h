// ZeroMQ implementation of Channel (tcp://, ipc://, inproc://).
//
// Listener = ROUTER socket (ZMQ_ROUTER_MANDATORY, so sending to an unknown peer
// is an error, not a silent drop); connector = DEALER socket whose routing id is
// the identity. One process-wide zmq::context_t is shared so inproc:// works
// between threads. Every zmq::error_t is caught here and turned into a Status.
#ifndef SPLITSPEC_RUNTIME_NET_ZMQ_CHANNEL_H_
#define SPLITSPEC_RUNTIME_NET_ZMQ_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/net/channel.h"

namespace splitspec::net {

absl::StatusOr<std::unique_ptr<Channel>> ListenZmqChannel(const std::string& endpoint);
absl::StatusOr<std::unique_ptr<Channel>> ConnectZmqChannel(const std::string& endpoint,
                                                           const std::string& identity);

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_ZMQ_CHANNEL_H_

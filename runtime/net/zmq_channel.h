// ZeroMQ implementation of Channel (tcp://, ipc://, inproc://).
//
// Listener = ROUTER socket (ZMQ_ROUTER_MANDATORY, so sending to an unknown peer
// is an error, not a silent drop); connector = DEALER socket whose routing id is
// the identity. Optionally CURVE-encrypted and authenticated (channel_security.h).
// One process-wide zmq::context_t is shared so inproc:// works
// between threads. Every zmq::error_t is caught here and turned into a Status.
#ifndef SPLITSPEC_RUNTIME_NET_ZMQ_CHANNEL_H_
#define SPLITSPEC_RUNTIME_NET_ZMQ_CHANNEL_H_

#include <memory>
#include <string>

#include <zmq.hpp>

#include "absl/status/statusor.h"
#include "runtime/net/channel.h"
#include "runtime/net/channel_security.h"

namespace splitspec::net {

// With security.curve: a CURVE server with security.own whose ZAP domain
// accepts security.authorized (see channel_security.h).
absl::StatusOr<std::unique_ptr<Channel>> ListenZmqChannel(const std::string& endpoint,
                                                          const ChannelSecurity& security);
// With security.curve: a CURVE client with security.own that expects the
// listener's public key `server_key`.
absl::StatusOr<std::unique_ptr<Channel>> ConnectZmqChannel(const std::string& endpoint,
                                                           const std::string& identity,
                                                           const ChannelSecurity& security,
                                                           const std::string& server_key);

// The process-wide context every splitspec ZeroMQ socket lives in.
zmq::context_t& SharedZmqContext();

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_ZMQ_CHANNEL_H_

// In-memory implementation of Channel (mem://name), for tests.
//
// Same semantics as the ZeroMQ channels: a listener binds a name in a
// process-wide hub and talks to many peers by identity; a connector talks to
// its listener. Frames travel as bytes, so decoding, malformed-frame counting
// and fault injection behave exactly as over ZeroMQ. Unlike ZeroMQ, sending to
// a name nobody listens on is an error (Unavailable) rather than queued.
#ifndef SPLITSPEC_RUNTIME_NET_MEM_CHANNEL_H_
#define SPLITSPEC_RUNTIME_NET_MEM_CHANNEL_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/net/channel.h"

namespace splitspec::net {

// Errors: AlreadyExists if `endpoint` is already bound in this process.
absl::StatusOr<std::unique_ptr<Channel>> ListenMemChannel(const std::string& endpoint);
// Errors: Unavailable if nothing listens on `endpoint`; AlreadyExists if the
// listener already has a peer named `identity`.
absl::StatusOr<std::unique_ptr<Channel>> ConnectMemChannel(const std::string& endpoint,
                                                           const std::string& identity);

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_MEM_CHANNEL_H_

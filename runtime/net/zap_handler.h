// The process's ZAP handler (ZeroMQ RFC 27): decides which CURVE clients a
// listener accepts, and names each accepted client by its public key (the
// "User-Id" every frame from it then carries). Internal to runtime/net; see
// channel_security.h for the model.
//
// One thread per process, started by the first RegisterZapDomain; it lives as
// long as the process (like the shared ZeroMQ context it serves).
#ifndef SPLITSPEC_RUNTIME_NET_ZAP_HANDLER_H_
#define SPLITSPEC_RUNTIME_NET_ZAP_HANDLER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"

namespace splitspec::net {

// Registers a CURVE listener bound at `endpoint` that accepts the public keys
// in `authorized` (empty: any key) and returns the ZAP domain to set on its
// socket. Starts the handler thread on first use. Errors: the handler's bind.
absl::StatusOr<std::string> RegisterZapDomain(const std::string& endpoint,
                                              const std::map<std::string, uint32_t>& authorized);

// Watches the handshake failures of the listener bound at `listener` through
// its monitor at `monitor_endpoint` (zmq_socket_monitor, already started):
// logged (rate-limited) and counted as refused handshakes. Connects to the
// monitor before it returns, so no failure after the call goes unseen.
void WatchHandshakes(const std::string& monitor_endpoint, const std::string& listener);

// Every listener whose authorized table is `from` admits `to` from now on
// (RefreshProcessSecurity: the key directory changed). Peers already
// connected stay connected; the services authorize each of their messages
// against the new keys.
void ReplaceZapAuthorizedKeys(const std::map<std::string, uint32_t>& from,
                              const std::map<std::string, uint32_t>& to);

// Called (on the handler's thread, no lock held) before a key is refused, so
// that a key written to the key directory just before its process started is
// found (RefreshProcessSecurity): a CURVE client refused at the handshake does
// not try again. Set once, by ConfigureProcessSecurity.
void SetZapRefreshHook(std::function<void()> hook);

// Fixes the endpoint a domain's refusals name (known only after the bind).
void SetZapDomainEndpoint(const std::string& domain, const std::string& endpoint);

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_ZAP_HANDLER_H_

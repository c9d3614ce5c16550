// RendezvousServer: the key-value store a tensor-parallel group leader serves
// so that its ranks (on any host) can find each other by the group name.
// Clients are ChannelRendezvousStore instances; the protocol is in
// rendezvous_wire.h.
//
//   ASSIGN_OR_RETURN(auto server, RendezvousServer::Start("tcp://0.0.0.0:*"));
//   std::string endpoint = server->endpoint();  // tell the ranks (the coordinator does)
//   ...                                          // communicators are created
//   server.reset();                              // stops the thread, drops the keys
//
// A Get for a key that is not set yet waits on the server (up to the client's
// timeout) and is answered the moment a Set provides it. Malformed frames are
// dropped and counted; the server keeps serving.
//
// Thread model: one background thread owns the listening Channel and the map;
// the public methods only read atomics or stop the thread, so they are safe
// from any thread.
#ifndef SPLITSPEC_RUNTIME_NET_RENDEZVOUS_SERVER_H_
#define SPLITSPEC_RUNTIME_NET_RENDEZVOUS_SERVER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "runtime/net/channel.h"

namespace splitspec::net {

class RendezvousServer {
 public:
  // Binds `endpoint` (any Channel endpoint: tcp://host:* picks a free port) and
  // starts serving. Errors: those of ListenChannel (InvalidArgument, Unavailable).
  static absl::StatusOr<std::unique_ptr<RendezvousServer>> Start(const std::string& endpoint);
  // Stops the thread (within ~50 ms); waiting clients get no answer and time out.
  ~RendezvousServer();

  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  // The bound endpoint (port resolved), for clients.
  const std::string& endpoint() const { return endpoint_; }
  uint64_t malformed_frames() const { return malformed_frames_.load(); }
  uint64_t keys_set() const { return keys_set_.load(); }

 private:
  explicit RendezvousServer(std::unique_ptr<Channel> channel);
  void Serve();

  std::unique_ptr<Channel> channel_;  // owned by the serving thread once started
  std::string endpoint_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> malformed_frames_{0};
  std::atomic<uint64_t> keys_set_{0};
  std::thread thread_;
};

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_RENDEZVOUS_SERVER_H_

// Channel: a message pipe that carries proto::Envelope frames between processes
// (or threads), whatever the transport.
//
//   ASSIGN_OR_RETURN(auto server, ListenChannel("tcp://127.0.0.1:*"));
//   ASSIGN_OR_RETURN(auto client, ConnectChannel(server->endpoint(), "draft-0"));
//   RETURN_IF_ERROR(client->Send("", envelope));
//   ASSIGN_OR_RETURN(Frame frame, server->Receive(absl::Seconds(1)));
//   RETURN_IF_ERROR(server->Send(frame.peer, reply));   // back to "draft-0"
//
// Endpoints: tcp://host:port (port "*" picks a free one), ipc://path and
// inproc://name use ZeroMQ (ROUTER for listeners, DEALER for connectors);
// mem://name is the in-memory implementation for tests (same semantics, no
// ZeroMQ). A listener talks to many peers, each named by the identity it
// connected with; a connector talks to its one listener and ignores `peer`.
//
// Malformed frames (see wire_format.h) are dropped and counted; Receive never
// returns them. No ZeroMQ exception leaves this module.
//
// Thread safety: thread-compatible. A channel (its socket) belongs to one
// thread at a time; the owning class's header says which thread.
#ifndef SPLITSPEC_RUNTIME_NET_CHANNEL_H_
#define SPLITSPEC_RUNTIME_NET_CHANNEL_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "proto/splitspec.pb.h"
#include "runtime/net/channel_security.h"

namespace splitspec::net {

// A decoded message and who sent it ("" on a connector).
struct Frame {
  std::string peer;
  proto::Envelope envelope;
  // On a CURVE listener: the sender's public key (Z85), authenticated by the
  // handshake, and its transport address ("" where there is none: inproc://,
  // mem://, plaintext). See channel_security.h.
  std::string peer_key;
  std::string peer_address;
};

// Bytes as they came off the transport, before decoding.
struct RawFrame {
  std::string peer;
  std::string bytes;
  bool multipart = false;  // the transport delivered more parts than one message has: malformed
  std::string peer_key;      // as in Frame
  std::string peer_address;  // as in Frame
};

struct ChannelCounters {
  uint64_t frames_received = 0;  // well-formed frames returned by Receive
  uint64_t frames_sent = 0;
  uint64_t malformed_frames = 0;  // dropped by Receive
  uint64_t send_failures = 0;
};

class Channel {
 public:
  virtual ~Channel() = default;

  // Encodes and sends. Errors: NotFound (listener: no such peer connected),
  // Unavailable (transport closed), ResourceExhausted (peer's queue full).
  // A failed send changes nothing but the send_failures counter.
  absl::Status Send(absl::string_view peer, const proto::Envelope& envelope);

  // Waits up to `timeout` for the next well-formed frame. DeadlineExceeded if
  // none arrived in time; malformed frames are counted and skipped meanwhile.
  absl::StatusOr<Frame> Receive(absl::Duration timeout);

  // Transport-level primitives; Send/Receive are built on them. Public so that
  // wrappers (FaultInjectingChannel) and tests can inject raw bytes.
  virtual absl::Status SendBytes(absl::string_view peer, std::string bytes) = 0;
  virtual absl::StatusOr<RawFrame> ReceiveBytes(absl::Duration timeout) = 0;

  // The endpoint as resolved (a tcp "*" port replaced by the bound port).
  virtual std::string endpoint() const = 0;

  // The ZeroMQ socket handle for zmq_poll, or nullptr for other transports.
  virtual void* zmq_socket_handle() { return nullptr; }
  // True if a frame can be received now without waiting (may be a malformed one).
  virtual bool Readable() = 0;

  ChannelCounters counters() const;
  proto::ChannelCounters CountersProto() const;

 private:
  std::atomic<uint64_t> frames_received_{0};
  std::atomic<uint64_t> frames_sent_{0};
  std::atomic<uint64_t> malformed_frames_{0};
  std::atomic<uint64_t> send_failures_{0};
};

// Waits up to `timeout` until one of `channels` is Readable(); returns its
// index, or -1 on timeout. ZeroMQ channels are waited on together with
// zmq_poll; other transports are checked in slices of at most 1 ms.
int WaitAnyReadable(const std::vector<Channel*>& channels, absl::Duration timeout);

// Binds `endpoint` and accepts many peers. Errors: InvalidArgument (unknown
// scheme), Unavailable (address in use, bad path). Secured as `security` says
// (default: DefaultChannelSecurity(); mem:// is never secured).
absl::StatusOr<std::unique_ptr<Channel>> ListenChannel(const std::string& endpoint);
absl::StatusOr<std::unique_ptr<Channel>> ListenChannel(const std::string& endpoint,
                                                       const ChannelSecurity& security);

// Connects to the listener at `endpoint` as `identity` (unique among that
// listener's peers; non-empty). Connection is asynchronous for ZeroMQ: sends
// queue until the listener is reachable. With CURVE the listener must hold the
// secret of `server_key` ("": security.coordinator_public_key); with a wrong
// key no message ever arrives (the handshake fails).
absl::StatusOr<std::unique_ptr<Channel>> ConnectChannel(const std::string& endpoint,
                                                        const std::string& identity);
absl::StatusOr<std::unique_ptr<Channel>> ConnectChannel(const std::string& endpoint,
                                                        const std::string& identity,
                                                        const ChannelSecurity& security,
                                                        const std::string& server_key = "");

}  // namespace splitspec::net

#endif  // SPLITSPEC_RUNTIME_NET_CHANNEL_H_

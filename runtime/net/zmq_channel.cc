#include "runtime/net/zmq_channel.h"

#include <zmq.hpp>

#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/wire_format.h"
#include "runtime/net/zap_handler.h"

// ThreadSanitizer cannot see libzmq's internal synchronization (Debian's build
// is not instrumented). A message buffer handed between threads over inproc://
// is written and read only by our code, so the hand-off is declared explicitly:
// release after filling a buffer, acquire after receiving one.
#if defined(__SANITIZE_THREAD__)
#include <sanitizer/tsan_interface.h>
#define SPLITSPEC_TSAN_RELEASE(addr) __tsan_release(addr)
#define SPLITSPEC_TSAN_ACQUIRE(addr) __tsan_acquire(addr)
#else
#define SPLITSPEC_TSAN_RELEASE(addr) ((void)(addr))
#define SPLITSPEC_TSAN_ACQUIRE(addr) ((void)(addr))
#endif

namespace splitspec::net {

// Leaked on purpose: contexts must outlive every socket, including sockets of
// objects destroyed during static destruction.
zmq::context_t& SharedZmqContext() {
  static zmq::context_t* context = new zmq::context_t(1);
  return *context;
}

namespace {

// A metadata property of a received message ("" if it has none).
std::string Property(zmq::message_t& message, const char* name) {
  const char* value = zmq_msg_gets(message.handle(), name);
  return value == nullptr ? std::string() : std::string(value);
}

absl::Status ZmqError(const zmq::error_t& e, absl::string_view what) {
  const int code = e.num();
  const std::string message = absl::StrCat(what, ": ", e.what(), " (errno ", code, ")");
  if (code == EHOSTUNREACH) return absl::NotFoundError(message);
  if (code == EAGAIN) return absl::ResourceExhaustedError(message);
  if (code == EINVAL || code == EPROTONOSUPPORT || code == ENOENT)
    return absl::InvalidArgumentError(message);
  return absl::UnavailableError(message);
}

class ZmqChannel final : public Channel {
 public:
  ZmqChannel(zmq::socket_t socket, bool is_listener, std::string endpoint)
      : socket_(std::move(socket)), is_listener_(is_listener), endpoint_(std::move(endpoint)) {}

  absl::Status SendBytes(absl::string_view peer, std::string bytes) override {
    try {
      if (is_listener_) {
        socket_.send(zmq::buffer(peer.data(), peer.size()),
                     zmq::send_flags::sndmore | zmq::send_flags::dontwait);
      }
      zmq::message_t message(bytes.data(), bytes.size());
      SPLITSPEC_TSAN_RELEASE(message.data());
      auto sent = socket_.send(message, zmq::send_flags::dontwait);
      if (!sent)
        return absl::ResourceExhaustedError(
            absl::StrCat("send to '", peer, "' on ", endpoint_, ": queue full"));
      return absl::OkStatus();
    } catch (const zmq::error_t& e) {
      return ZmqError(e, absl::StrCat("send to '", peer, "' on ", endpoint_));
    }
  }

  absl::StatusOr<RawFrame> ReceiveBytes(absl::Duration timeout) override {
    try {
      zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
      const long timeout_ms =
          timeout == absl::InfiniteDuration() ? -1 : absl::ToInt64Milliseconds(timeout);
      if (zmq::poll(&item, 1, std::chrono::milliseconds(timeout_ms)) == 0) {
        return absl::DeadlineExceededError(
            absl::StrCat("no message on ", endpoint_, " within ", absl::FormatDuration(timeout)));
      }
      std::vector<zmq::message_t> parts;
      do {
        zmq::message_t part;
        if (!socket_.recv(part, zmq::recv_flags::dontwait)) break;
        SPLITSPEC_TSAN_ACQUIRE(part.data());
        parts.push_back(std::move(part));
      } while (socket_.get(zmq::sockopt::rcvmore));
      RawFrame frame;
      size_t payload_index = 0;
      if (is_listener_) {
        if (parts.empty()) return absl::InternalError("ROUTER delivered no routing id");
        frame.peer = parts[0].to_string();
        payload_index = 1;
        if (parts.size() > 1) {
          frame.peer_key = Property(parts[1], "User-Id");
          frame.peer_address = Property(parts[1], "Peer-Address");
        }
      }
      const size_t payload_parts = parts.size() - payload_index;
      frame.multipart = payload_parts != 1;
      if (payload_parts >= 1) frame.bytes = parts[payload_index].to_string();
      return frame;
    } catch (const zmq::error_t& e) {
      // A signal (e.g. SIGTERM asking for shutdown) interrupts the wait: report
      // "nothing arrived" so the caller's loop can look at its stop flag.
      if (e.num() == EINTR)
        return absl::DeadlineExceededError(absl::StrCat("receive on ", endpoint_, " interrupted"));
      return ZmqError(e, absl::StrCat("receive on ", endpoint_));
    }
  }

  std::string endpoint() const override { return endpoint_; }
  void* zmq_socket_handle() override { return socket_.handle(); }
  bool Readable() override {
    try {
      return (socket_.get(zmq::sockopt::events) & ZMQ_POLLIN) != 0;
    } catch (const zmq::error_t&) {
      return false;
    }
  }

 private:
  zmq::socket_t socket_;
  const bool is_listener_;
  const std::string endpoint_;
};

void ConfigureCommon(zmq::socket_t& socket) {
  // A closed connector keeps trying to deliver its last frames (e.g. a
  // Deregister) for a short while; listeners drop theirs at once.
  socket.set(zmq::sockopt::linger, 0);
  socket.set(zmq::sockopt::maxmsgsize, kMaxFrameBytes);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Channel>> ListenZmqChannel(const std::string& endpoint,
                                                          const ChannelSecurity& security) {
  try {
    zmq::socket_t socket(SharedZmqContext(), zmq::socket_type::router);
    ConfigureCommon(socket);
    socket.set(zmq::sockopt::router_mandatory, 1);
    std::string domain;
    if (security.curve) {
      ASSIGN_OR_RETURN(domain, RegisterZapDomain(endpoint, security.authorized));
      socket.set(zmq::sockopt::curve_server, 1);
      socket.set(zmq::sockopt::curve_secretkey, security.own.secret_key);
      socket.set(zmq::sockopt::zap_domain, domain);
    }
    socket.bind(endpoint);
    std::string resolved = socket.get(zmq::sockopt::last_endpoint);
    if (security.curve) {
      SetZapDomainEndpoint(domain, resolved);
      const std::string monitor = absl::StrCat("inproc://", domain, "-monitor");
      if (zmq_socket_monitor(socket.handle(), monitor.c_str(),
                             ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                 ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL |
                                 ZMQ_EVENT_MONITOR_STOPPED) == 0) {
        WatchHandshakes(monitor, resolved);
      }
    }
    return std::unique_ptr<Channel>(
        new ZmqChannel(std::move(socket), /*is_listener=*/true, resolved));
  } catch (const zmq::error_t& e) {
    return ZmqError(e, absl::StrCat("bind ", endpoint));
  }
}

absl::StatusOr<std::unique_ptr<Channel>> ConnectZmqChannel(const std::string& endpoint,
                                                           const std::string& identity,
                                                           const ChannelSecurity& security,
                                                           const std::string& server_key) {
  if (security.curve && server_key.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "connect ", endpoint, " as '", identity, "': CURVE is on but the server's public key "
        "is not known"));
  }
  try {
    zmq::socket_t socket(SharedZmqContext(), zmq::socket_type::dealer);
    ConfigureCommon(socket);
    if (security.curve) {
      socket.set(zmq::sockopt::curve_serverkey, server_key);
      socket.set(zmq::sockopt::curve_publickey, security.own.public_key);
      socket.set(zmq::sockopt::curve_secretkey, security.own.secret_key);
    }
    socket.set(zmq::sockopt::routing_id, identity);
    socket.set(zmq::sockopt::linger, 200);
    socket.connect(endpoint);
    return std::unique_ptr<Channel>(
        new ZmqChannel(std::move(socket), /*is_listener=*/false, endpoint));
  } catch (const zmq::error_t& e) {
    return ZmqError(e, absl::StrCat("connect ", endpoint, " as '", identity, "'"));
  }
}

}  // namespace splitspec::net

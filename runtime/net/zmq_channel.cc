#include "runtime/net/zmq_channel.h"

#include <zmq.hpp>

#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/net/wire_format.h"

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
namespace {

// Leaked on purpose: contexts must outlive every socket, including sockets of
// objects destroyed during static destruction.
zmq::context_t& SharedContext() {
  static zmq::context_t* context = new zmq::context_t(1);
  return *context;
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

absl::StatusOr<std::unique_ptr<Channel>> ListenZmqChannel(const std::string& endpoint) {
  try {
    zmq::socket_t socket(SharedContext(), zmq::socket_type::router);
    ConfigureCommon(socket);
    socket.set(zmq::sockopt::router_mandatory, 1);
    socket.bind(endpoint);
    std::string resolved = socket.get(zmq::sockopt::last_endpoint);
    return std::unique_ptr<Channel>(
        new ZmqChannel(std::move(socket), /*is_listener=*/true, resolved));
  } catch (const zmq::error_t& e) {
    return ZmqError(e, absl::StrCat("bind ", endpoint));
  }
}

absl::StatusOr<std::unique_ptr<Channel>> ConnectZmqChannel(const std::string& endpoint,
                                                           const std::string& identity) {
  try {
    zmq::socket_t socket(SharedContext(), zmq::socket_type::dealer);
    ConfigureCommon(socket);
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

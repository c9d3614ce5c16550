#include "runtime/net/zap_handler.h"

#include <zmq.h>

#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "runtime/base/logging.h"
#include "runtime/base/mutex.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/zmq_channel.h"

namespace splitspec::net {
namespace {

// The address libzmq sends ZAP requests to (RFC 27).
constexpr char kZapEndpoint[] = "inproc://zeromq.zap.01";

struct Domain {
  std::string endpoint;
  std::map<std::string, uint32_t> authorized;
};

Mutex domains_mu;
absl::flat_hash_map<std::string, Domain>& Domains() ABSL_EXCLUSIVE_LOCKS_REQUIRED(domains_mu) {
  static auto* domains = new absl::flat_hash_map<std::string, Domain>();
  return *domains;
}
std::atomic<uint64_t> next_domain{1};
std::atomic<uint64_t> refused_handshakes{0};

// Decides one request: {status code, status text, user id}.
struct Verdict {
  std::string code;
  std::string text;
  std::string user_id;
};

Mutex hook_mu;
std::function<void()>& RefreshHook() ABSL_EXCLUSIVE_LOCKS_REQUIRED(hook_mu) {
  static auto* hook = new std::function<void()>();
  return *hook;
}

Verdict Decide(const std::string& domain_name, const std::string& address,
               const std::string& mechanism, const std::string& credential) {
  if (mechanism != "CURVE") return {"200", "OK", ""};  // plaintext listeners decide nothing here
  char key[41] = {};
  if (credential.size() != 32 ||
      zmq_z85_encode(key, reinterpret_cast<const uint8_t*>(credential.data()), 32) == nullptr) {
    return {"400", "malformed CURVE credential", ""};
  }
  std::function<void()> refresh;
  {
    MutexLock lock(&hook_mu);
    refresh = RefreshHook();
  }
  // Twice at most: after a miss, the key directory is read again (a worker's new key).
  for (int attempt = 0;; ++attempt) {
    {
      MutexLock lock(&domains_mu);
      auto it = Domains().find(domain_name);
      if (it == Domains().end()) return {"400", "unknown ZAP domain", ""};
      const Domain& domain = it->second;
      if (domain.authorized.empty() || domain.authorized.contains(key)) return {"200", "OK", key};
      if (attempt > 0 || !refresh) {
        SPLITSPEC_LOG(WARNING) << "refused peer at " << address << " on " << domain.endpoint
                               << ": CURVE public key " << key << " is not authorized";
        // After the line: tests wait on the count.
        refused_handshakes.fetch_add(1, std::memory_order_relaxed);
        return {"400", "public key not authorized", ""};
      }
    }
    refresh();
  }
}

// Answers one ZAP request waiting on `socket` (REP).
void AnswerRequest(zmq::socket_t& socket) {
  std::vector<zmq::message_t> parts;
  do {
    zmq::message_t part;
    if (!socket.recv(part, zmq::recv_flags::dontwait)) break;
    parts.push_back(std::move(part));
  } while (socket.get(zmq::sockopt::rcvmore));
  if (parts.empty()) return;
  parts.resize(std::max<size_t>(parts.size(), 7));  // a short request is refused below
  const Verdict verdict = Decide(parts[2].to_string(), parts[3].to_string(),
                                 parts[5].to_string(), parts[6].to_string());
  const std::vector<std::string> reply = {"1.0", parts[1].to_string(), verdict.code,
                                          verdict.text, verdict.user_id, ""};
  for (size_t i = 0; i < reply.size(); ++i) {
    socket.send(zmq::buffer(reply[i]),
                i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
}

// A listener's handshake failures (zmq_socket_monitor): a client with the
// wrong server key, or a plaintext one. The events name the listener, not the
// client. A client retries its handshake every ~100 ms, so the line is logged
// at most every 10 s per listener, with the count since; every failure counts.
struct Monitor {
  zmq::socket_t socket;
  std::string listener;
  absl::Time last_logged = absl::InfinitePast();
  uint64_t unlogged = 0;
};

// Returns false when the listener closed (the monitor is done).
bool ReadMonitorEvent(Monitor& monitor) {
  zmq::message_t event, address;
  if (!monitor.socket.recv(event, zmq::recv_flags::dontwait)) return true;
  if (monitor.socket.get(zmq::sockopt::rcvmore))
    (void)monitor.socket.recv(address, zmq::recv_flags::dontwait);
  if (event.size() < 6) return true;
  uint16_t kind;
  uint32_t value;
  std::memcpy(&kind, event.data(), sizeof(kind));
  std::memcpy(&value, static_cast<const char*>(event.data()) + 2, sizeof(value));
  if (kind == ZMQ_EVENT_MONITOR_STOPPED) return false;
  if (kind != ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL && kind != ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL)
    return true;  // AUTH failures: the ZAP verdict above already logged them
  ++monitor.unlogged;
  const absl::Time now = absl::Now();
  if (now - monitor.last_logged >= absl::Seconds(10)) {
    const char* why = value == ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC
                          ? "cryptographic error: the client expects another server key"
                      : value == ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH
                          ? "the client does not use CURVE"
                          : "protocol error";
    SPLITSPEC_LOG(WARNING) << "refused a peer on " << monitor.listener
                           << ": CURVE handshake failed (" << why << "); " << monitor.unlogged
                           << " such failure(s) since the last line";
    monitor.last_logged = now;
    monitor.unlogged = 0;
  }
  refused_handshakes.fetch_add(1, std::memory_order_relaxed);  // after the line: tests wait on it
  return true;
}

// Monitors connected by the listener's thread (so that no event is lost
// before the handler takes them), handed to the handler's thread.
Mutex monitors_mu;
std::vector<Monitor>& PendingMonitors() ABSL_EXCLUSIVE_LOCKS_REQUIRED(monitors_mu) {
  static auto* pending = new std::vector<Monitor>();
  return *pending;
}

void Serve(zmq::socket_t socket) {
  std::vector<Monitor> monitors;
  while (true) {
    try {
      {
        MutexLock lock(&monitors_mu);
        for (Monitor& monitor : PendingMonitors()) monitors.push_back(std::move(monitor));
        PendingMonitors().clear();
      }
      std::vector<zmq::pollitem_t> items = {{socket.handle(), 0, ZMQ_POLLIN, 0}};
      for (Monitor& m : monitors) items.push_back({m.socket.handle(), 0, ZMQ_POLLIN, 0});
      zmq::poll(items.data(), items.size(), std::chrono::milliseconds(100));
      if (items[0].revents & ZMQ_POLLIN) AnswerRequest(socket);
      for (size_t i = monitors.size(); i-- > 0;) {
        if ((items[i + 1].revents & ZMQ_POLLIN) && !ReadMonitorEvent(monitors[i]))
          monitors.erase(monitors.begin() + static_cast<std::ptrdiff_t>(i));
      }
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      SPLITSPEC_LOG(WARNING) << "ZAP handler: " << e.what();
    }
  }
}

absl::Status StartHandlerOnce() {
  static absl::once_flag once;
  static absl::Status* started = new absl::Status();
  absl::call_once(once, [] {
    try {
      zmq::socket_t socket(SharedZmqContext(), zmq::socket_type::rep);
      socket.set(zmq::sockopt::linger, 0);
      socket.bind(kZapEndpoint);
      std::thread(Serve, std::move(socket)).detach();
    } catch (const zmq::error_t& e) {
      *started = absl::UnavailableError(absl::StrCat("ZAP handler: bind ", kZapEndpoint, ": ",
                                                     e.what()));
    }
  });
  return *started;
}

}  // namespace

absl::StatusOr<std::string> RegisterZapDomain(const std::string& endpoint,
                                              const std::map<std::string, uint32_t>& authorized) {
  if (absl::Status started = StartHandlerOnce(); !started.ok()) return started;
  const std::string name = absl::StrCat("splitspec-", next_domain.fetch_add(1));
  MutexLock lock(&domains_mu);
  Domains()[name] = Domain{endpoint, authorized};
  return name;
}

void WatchHandshakes(const std::string& monitor_endpoint, const std::string& listener) {
  try {
    zmq::socket_t pair(SharedZmqContext(), zmq::socket_type::pair);
    pair.set(zmq::sockopt::linger, 0);
    pair.connect(monitor_endpoint);
    MutexLock lock(&monitors_mu);  // also the barrier that hands the socket over
    PendingMonitors().push_back(Monitor{std::move(pair), listener});
  } catch (const zmq::error_t& e) {
    SPLITSPEC_LOG(WARNING) << "handshake failures on " << listener << " go unlogged: "
                           << e.what();
  }
}

void ReplaceZapAuthorizedKeys(const std::map<std::string, uint32_t>& from,
                              const std::map<std::string, uint32_t>& to) {
  MutexLock lock(&domains_mu);
  for (auto& [name, domain] : Domains()) {
    if (domain.authorized == from) domain.authorized = to;
  }
}

void SetZapRefreshHook(std::function<void()> hook) {
  MutexLock lock(&hook_mu);
  RefreshHook() = std::move(hook);
}

void SetZapDomainEndpoint(const std::string& domain, const std::string& endpoint) {
  MutexLock lock(&domains_mu);
  auto it = Domains().find(domain);
  if (it != Domains().end()) it->second.endpoint = endpoint;
}

uint64_t RefusedHandshakes() { return refused_handshakes.load(std::memory_order_relaxed); }

}  // namespace splitspec::net

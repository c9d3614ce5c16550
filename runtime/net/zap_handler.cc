#include "runtime/net/zap_handler.h"

#include <zmq.h>

#include <zmq.hpp>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "absl/base/call_once.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "runtime/base/logging.h"
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

absl::Mutex domains_mu;
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

Verdict Decide(const std::string& domain_name, const std::string& address,
               const std::string& mechanism, const std::string& credential) {
  if (mechanism != "CURVE") return {"200", "OK", ""};  // plaintext listeners decide nothing here
  char key[41] = {};
  if (credential.size() != 32 ||
      zmq_z85_encode(key, reinterpret_cast<const uint8_t*>(credential.data()), 32) == nullptr) {
    return {"400", "malformed CURVE credential", ""};
  }
  absl::MutexLock lock(&domains_mu);
  auto it = Domains().find(domain_name);
  if (it == Domains().end()) return {"400", "unknown ZAP domain", ""};
  const Domain& domain = it->second;
  if (!domain.authorized.empty() && !domain.authorized.contains(key)) {
    SPLITSPEC_LOG(WARNING) << "refused peer at " << address << " on " << domain.endpoint
                           << ": CURVE public key " << key << " is not authorized";
    refused_handshakes.fetch_add(1, std::memory_order_relaxed);  // after the line: tests wait on it
    return {"400", "public key not authorized", ""};
  }
  return {"200", "OK", key};
}

void Serve(zmq::socket_t socket) {
  while (true) {
    std::vector<zmq::message_t> parts;
    try {
      do {
        zmq::message_t part;
        if (!socket.recv(part)) break;
        parts.push_back(std::move(part));
      } while (socket.get(zmq::sockopt::rcvmore));
      parts.resize(std::max<size_t>(parts.size(), 7));  // a short request is refused below
      const Verdict verdict = Decide(parts[2].to_string(), parts[3].to_string(),
                                     parts[5].to_string(), parts[6].to_string());
      const std::vector<std::string> reply = {"1.0", parts[1].to_string(), verdict.code,
                                              verdict.text, verdict.user_id, ""};
      for (size_t i = 0; i < reply.size(); ++i) {
        socket.send(zmq::buffer(reply[i]),
                    i + 1 < reply.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
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
  absl::MutexLock lock(&domains_mu);
  Domains()[name] = Domain{endpoint, authorized};
  return name;
}

void SetZapDomainEndpoint(const std::string& domain, const std::string& endpoint) {
  absl::MutexLock lock(&domains_mu);
  auto it = Domains().find(domain);
  if (it != Domains().end()) it->second.endpoint = endpoint;
}

uint64_t RefusedHandshakes() { return refused_handshakes.load(std::memory_order_relaxed); }

}  // namespace splitspec::net

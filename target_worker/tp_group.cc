#include "target_worker/tp_group.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/dist/gloo_communicator.h"
#include "runtime/dist/tp_transport.h"
#if defined(SPLITSPEC_HAVE_CUDA)
#include "runtime/dist/cuda_device_identity.h"
#endif
#if defined(SPLITSPEC_HAVE_NCCL)
#include "runtime/dist/nccl_communicator.h"
#endif
#include "runtime/net/channel.h"
#include "runtime/net/channel_rendezvous_store.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/wire_format.h"

namespace splitspec::target {
namespace {

constexpr absl::Duration kAnswerTimeout = absl::Seconds(5);
constexpr absl::Duration kLookupInterval = absl::Milliseconds(200);

// "tcp://HOST:PORT" -> HOST; "" for other transports or a wildcard host.
std::string TcpHost(const std::string& endpoint) {
  if (!absl::StartsWith(endpoint, "tcp://")) return "";
  std::string rest = endpoint.substr(6);
  const size_t colon = rest.rfind(':');
  std::string host = colon == std::string::npos ? rest : rest.substr(0, colon);
  if (host == "*" || host == "0.0.0.0" || host.empty()) return "";
  return host;
}

// Where followers reach the leader's store: the bound endpoint, with a
// wildcard address replaced by this machine's host name.
std::string AnnouncedEndpoint(const net::RendezvousServer& server) {
  std::string endpoint = server.endpoint();
  const std::string wildcard = "tcp://0.0.0.0:";
  if (!absl::StartsWith(endpoint, wildcard)) return endpoint;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) != 0) return endpoint;
  return absl::StrCat("tcp://", name, ":", endpoint.substr(wildcard.size()));
}

std::string GenerationGroup(const TpGroupOptions& options, uint64_t generation) {
  return absl::StrCat(options.group, "/gen-", generation);
}

// What this rank tells the group about its device.
absl::StatusOr<net::RankDevice> ThisRankDevice(const TpGroupOptions& options) {
  net::RankDevice mine;
  mine.device = options.device.ToString();
  mine.requested = options.comm;
  char name[256] = {};
  if (gethostname(name, sizeof(name) - 1) == 0) mine.host = name;
#if defined(SPLITSPEC_HAVE_NCCL)
  mine.nccl_built = true;
#endif
#if defined(SPLITSPEC_HAVE_CUDA)
  if (options.device.is_cuda()) {
    ASSIGN_OR_RETURN(mine.gpu_id, net::CudaDeviceUuid(options.device.ordinal));
  }
#endif
  return mine;
}

// The group's NCCL communicator on this rank's device (unique id through `store`).
absl::StatusOr<std::unique_ptr<net::Communicator>> CreateNccl(
    [[maybe_unused]] const TpGroupOptions& options, [[maybe_unused]] net::RendezvousStore& store,
    [[maybe_unused]] const net::CommunicatorOptions& group) {
#if defined(SPLITSPEC_HAVE_NCCL)
  ASSIGN_OR_RETURN(std::unique_ptr<net::NcclCommunicator> nccl,
                   net::NcclCommunicator::Create(store, group, {.device = options.device.ordinal}));
  return std::unique_ptr<net::Communicator>(std::move(nccl));
#else
  // ChooseTpTransport picks NCCL only when every rank reported it built in.
  return absl::InternalError("NCCL chosen in a build without NCCL");
#endif
}

// `leader_key`: the CURVE key of the leader serving the store ("" without CURVE).
absl::StatusOr<FormedGroup> CreateCommunicator(const TpGroupOptions& options,
                                               const std::string& store_endpoint,
                                               const std::string& leader_key,
                                               uint64_t generation) {
  ASSIGN_OR_RETURN(std::unique_ptr<net::RendezvousStore> store,
                   net::ConnectRendezvousStore(
                       store_endpoint,
                       absl::StrCat(GenerationGroup(options, generation), "/rank-", options.rank,
                                    "-", getpid()),
                       absl::Seconds(10), leader_key));
  const net::CommunicatorOptions group{.group = GenerationGroup(options, generation),
                                       .rank = options.rank,
                                       .size = options.size,
                                       .timeout = options.timeout};
  ASSIGN_OR_RETURN(net::RankDevice mine, ThisRankDevice(options));
  ASSIGN_OR_RETURN(std::vector<net::RankDevice> ranks,
                   net::ExchangeRankDevices(*store, group, mine));
  FormedGroup formed;
  formed.generation = generation;
  ASSIGN_OR_RETURN(formed.transport, net::ChooseTpTransport(options.group, ranks));
  ASSIGN_OR_RETURN(formed.comm, net::GlooCommunicator::Create(
                                    *store, group, {.hostname = options.host, .iface = ""}));
  if (formed.transport.transport == net::TpTransport::kNccl) {
    ASSIGN_OR_RETURN(formed.nccl, CreateNccl(options, *store, group));
  }
  return formed;
}

}  // namespace

std::string GroupHostFor(const std::string& data_endpoint,
                         const std::string& coordinator_endpoint) {
  if (std::string host = TcpHost(data_endpoint); !host.empty()) return host;
  const std::string coordinator = TcpHost(coordinator_endpoint);
  if (coordinator.empty() || absl::StartsWith(coordinator, "127.") || coordinator == "localhost" ||
      !absl::StartsWith(coordinator_endpoint, "tcp://")) {
    return "127.0.0.1";
  }
  return "";
}

absl::Status ValidateTpGroupOptions(const TpGroupOptions& options) {
  if (options.group.empty())
    return absl::InvalidArgumentError("tp group: --tp-group NAME is required when --tp-size > 1");
  if (options.size < 2) {
    return absl::InvalidArgumentError(absl::StrCat("tp group '", options.group, "': tp size ",
                                                   options.size, " needs no group (use >= 2)"));
  }
  if (options.rank < 0 || options.rank >= options.size) {
    return absl::InvalidArgumentError(absl::StrCat("tp group '", options.group, "': --tp-rank ",
                                                   options.rank, " is outside [0, ", options.size,
                                                   ")"));
  }
  if (options.timeout <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tp group '", options.group, "': timeout must be positive"));
  }
  return absl::OkStatus();
}

absl::StatusOr<proto::GroupInfo> AskCoordinator(const std::string& coordinator_endpoint,
                                                const proto::Envelope& request,
                                                absl::Duration timeout) {
  static std::atomic<int> counter{0};
  ASSIGN_OR_RETURN(
      std::unique_ptr<net::Channel> channel,
      net::ConnectChannel(coordinator_endpoint,
                          absl::StrCat("tp-group-", getpid(), "-", counter.fetch_add(1))));
  RETURN_IF_ERROR(channel->Send("", request));
  const absl::Time deadline = absl::Now() + timeout;
  while (absl::Now() < deadline) {
    absl::StatusOr<net::Frame> frame = channel->Receive(deadline - absl::Now());
    if (!frame.ok()) break;
    if (frame->envelope.has_group_info()) return frame->envelope.group_info();
  }
  return absl::UnavailableError(absl::StrCat("the coordinator at ", coordinator_endpoint,
                                             " did not answer '", net::BodyName(request),
                                             "' within ", absl::FormatDuration(timeout)));
}

namespace {

// ZeroMQ binds to an address or an interface, not a host name: a rank's
// configured host (`--tp-address node2`) is resolved to its IPv4 address here.
absl::StatusOr<std::string> BindableAddress(const std::string& host) {
  in_addr numeric{};
  if (host.empty()) return std::string("0.0.0.0");
  if (inet_pton(AF_INET, host.c_str(), &numeric) == 1) return host;
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(host.c_str(), nullptr, &hints, &found); error != 0) {
    return absl::InvalidArgumentError(absl::StrCat("tp group: cannot resolve the rank's address '",
                                                   host, "': ", gai_strerror(error)));
  }
  char text[INET_ADDRSTRLEN] = {};
  inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(found->ai_addr)->sin_addr, text,
            sizeof(text));
  freeaddrinfo(found);
  return std::string(text);
}

}  // namespace

absl::StatusOr<std::unique_ptr<net::RendezvousServer>> StartGroupRendezvous(
    const TpGroupOptions& options) {
  ASSIGN_OR_RETURN(const std::string address, BindableAddress(options.host));
  return net::RendezvousServer::Start(absl::StrCat("tcp://", address, ":*"));
}

absl::StatusOr<FormedGroup> FormAsLeader(const TpGroupOptions& options,
                                         net::RendezvousServer& server, uint64_t generation) {
  RETURN_IF_ERROR(ValidateTpGroupOptions(options));
  proto::Envelope announce = net::NewEnvelope();
  proto::GroupAnnounce* a = announce.mutable_group_announce();
  a->set_group(options.group);
  const std::string endpoint = AnnouncedEndpoint(server);
  a->set_rendezvous_endpoint(endpoint);
  a->set_generation(generation);
  a->set_tp_size(options.size);
  ASSIGN_OR_RETURN(proto::GroupInfo echo,
                   AskCoordinator(options.coordinator_endpoint, announce, kAnswerTimeout));
  if (!echo.found() || echo.generation() != generation || echo.rendezvous_endpoint() != endpoint) {
    return absl::FailedPreconditionError(absl::StrCat(
        "tp group '", options.group, "': the coordinator kept generation ", echo.generation(),
        " at '", echo.rendezvous_endpoint(), "' instead of this leader's generation ", generation,
        " (is another leader running with the same group name?)"));
  }
  // The store runs in this process: its server key is this process's own.
  return CreateCommunicator(options, endpoint, net::DefaultChannelSecurity().own.public_key,
                            generation);
}

absl::StatusOr<FormedGroup> JoinAsFollower(const TpGroupOptions& options, uint64_t min_generation,
                                           const std::atomic<bool>& stop) {
  RETURN_IF_ERROR(ValidateTpGroupOptions(options));
  proto::Envelope lookup = net::NewEnvelope();
  lookup.mutable_group_lookup()->set_group(options.group);
  lookup.mutable_group_lookup()->set_min_generation(min_generation);
  while (!stop.load(std::memory_order_relaxed)) {
    absl::StatusOr<proto::GroupInfo> info =
        AskCoordinator(options.coordinator_endpoint, lookup, kAnswerTimeout);
    if (info.ok() && info->found()) {
      if (static_cast<int>(info->tp_size()) != options.size) {
        return absl::InvalidArgumentError(
            absl::StrCat("tp group '", options.group, "': the leader announced tp size ",
                         info->tp_size(), ", this rank was started with --tp-size ", options.size));
      }
      return CreateCommunicator(options, info->rendezvous_endpoint(), info->leader_key(),
                                info->generation());
    }
    if (!info.ok()) SPLITSPEC_LOG(DEBUG) << info.status();
    std::this_thread::sleep_for(absl::ToChronoMilliseconds(kLookupInterval));
  }
  return absl::CancelledError(
      absl::StrCat("tp group '", options.group, "': stopped while waiting for the leader"));
}

}  // namespace splitspec::target

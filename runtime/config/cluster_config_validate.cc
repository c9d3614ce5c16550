// The semantic checks of a ClusterConfig (ValidateClusterConfig). Each error
// names where the value came from (FILE:LINE, the file alone for a default,
// or the command-line flag that set it), the field, and the value at fault.
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "runtime/base/memory_amount.h"
#include "runtime/base/status_macros.h"
#include "runtime/config/cluster_config.h"

namespace splitspec::config {
namespace {

constexpr int kMaxPoolSize = 64;
constexpr int kMaxDraftK = 64;
constexpr int kMaxLookahead = 64;
constexpr int kMaxThreads = 1024;

struct Endpoint {
  std::string scheme;  // "tcp" or "ipc"
  std::string host;    // tcp only
  std::string port;    // tcp only: digits or "*"
};

// tcp://HOST:PORT (PORT 1..65535, or "*" when `wildcard_port`) or ipc://PATH.
bool ParseEndpoint(const std::string& text, bool wildcard_port, Endpoint* out) {
  absl::string_view rest = text;
  if (absl::ConsumePrefix(&rest, "ipc://")) {
    out->scheme = "ipc";
    return !rest.empty();
  }
  if (!absl::ConsumePrefix(&rest, "tcp://")) return false;
  out->scheme = "tcp";
  const size_t colon = rest.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return false;
  out->host = std::string(rest.substr(0, colon));
  out->port = std::string(rest.substr(colon + 1));
  if (out->port == "*") return wildcard_port;
  int port = 0;
  return absl::SimpleAtoi(out->port, &port) && port >= 1 && port <= 65535;
}

bool IsWildcardHost(const std::string& host) {
  return host == "*" || host == "0.0.0.0" || host == "[::]";
}
bool IsLoopbackHost(const std::string& host) {
  return host == "localhost" || absl::StartsWith(host, "127.") || host == "[::1]" || host == "::1";
}
// ipc:// and loopback tcp:// endpoints are reachable from one host only.
bool IsHostLocal(const Endpoint& e) { return e.scheme == "ipc" || IsLoopbackHost(e.host); }
// "127.0.0.1" and "localhost" are the same host.
std::string CanonicalHost(const std::string& host) {
  return IsLoopbackHost(host) ? "localhost" : host;
}

bool IsValidName(const std::string& name) {
  if (name.empty() || name.size() > 63 || !absl::ascii_isalnum(static_cast<unsigned char>(name[0])))
    return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_' && c != '-' && c != '.')
      return false;
  }
  return true;
}

// An ssh destination: [user@]host, no spaces or shell metacharacters.
bool IsValidHost(const std::string& host) {
  if (host.empty()) return false;
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) &&
        std::string_view("_.-@:[]").find(c) == std::string_view::npos) {
      return false;
    }
  }
  return true;
}

bool IsValidEnvName(const std::string& name) {
  if (name.empty() || absl::ascii_isdigit(static_cast<unsigned char>(name[0]))) return false;
  for (char c : name) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '_') return false;
  }
  return true;
}

std::string Quoted(const std::string& s) { return absl::StrCat("\"", s, "\""); }
std::string QuotedList(const std::vector<std::string>& list) {
  std::vector<std::string> quoted;
  for (const std::string& s : list) quoted.push_back(Quoted(s));
  return absl::StrCat("[", absl::StrJoin(quoted, ", "), "]");
}

class Validator {
 public:
  explicit Validator(const ClusterConfig& config) : c_(config) {}

  absl::Status Run() {
    RETURN_IF_ERROR(CheckCoordinator());
    if (c_.security.mode != "curve" && c_.security.mode != "none") {
      return Fail("security.mode",
                  absl::StrCat(Quoted(c_.security.mode), " must be \"curve\" or \"none\""));
    }
    if (c_.security.tp_network != "trusted" && c_.security.tp_network != "untrusted") {
      return Fail("security.tp_network", absl::StrCat(Quoted(c_.security.tp_network),
                                                      " must be \"trusted\" or \"untrusted\""));
    }
    if (c_.target_groups.empty())
      return Fail("target_group", "at least one [[target_group]] is needed");
    std::set<std::string> names;
    for (size_t i = 0; i < c_.target_groups.size(); ++i) RETURN_IF_ERROR(CheckGroup(i, &names));
    for (size_t i = 0; i < c_.draft_pools.size(); ++i) RETURN_IF_ERROR(CheckPool(i, &names));
    return CheckReachability();
  }

 private:
  absl::Status Fail(const std::string& field, const std::string& problem) const {
    auto it = c_.origins.find(field);
    const std::string& origin = it != c_.origins.end() ? it->second : c_.source;
    return absl::InvalidArgumentError(absl::StrCat(origin, ": ", field, ": ", problem));
  }

  absl::Status CheckCoordinator() const {
    const CoordinatorConfig& co = c_.coordinator;
    if (!IsValidHost(co.host))
      return Fail("coordinator.host", absl::StrCat(Quoted(co.host), " is not a host name"));
    Endpoint control;
    if (!ParseEndpoint(co.control, false, &control)) {
      return Fail("coordinator.control",
                  absl::StrCat(Quoted(co.control),
                               " must be tcp://HOST:PORT (PORT 1..65535) or ipc://PATH"));
    }
    if (co.advertise.empty()) {
      if (control.scheme == "tcp" && IsWildcardHost(control.host)) {
        return Fail("coordinator.control",
                    absl::StrCat(Quoted(co.control),
                                 " binds every interface; set coordinator.advertise to the "
                                 "endpoint workers connect to"));
      }
    } else {
      Endpoint advertise;
      if (!ParseEndpoint(co.advertise, false, &advertise) || IsWildcardHost(advertise.host)) {
        return Fail("coordinator.advertise",
                    absl::StrCat(Quoted(co.advertise),
                                 " must be tcp://HOST:PORT with a reachable HOST, or ipc://PATH"));
      }
    }
    if (co.http != "none") {
      const size_t colon = co.http.rfind(':');
      int port = 0;
      if (colon == std::string::npos || colon == 0 ||
          !absl::SimpleAtoi(co.http.substr(colon + 1), &port) || port < 1 || port > 65535) {
        return Fail(
            "coordinator.http",
            absl::StrCat(Quoted(co.http), " must be HOST:PORT (PORT 1..65535) or \"none\""));
      }
    }
    if (!IsValidEnvName(co.api_key_env)) {
      return Fail("coordinator.api_key_env",
                  absl::StrCat(Quoted(co.api_key_env), " is not an environment variable name"));
    }
    const CoordinatorLimits& l = co.limits;
    if (l.max_queued_requests < 1)
      return Fail("coordinator.limits.max_queued_requests",
                  absl::StrCat(l.max_queued_requests, " must be >= 1"));
    if (l.context_length < 1)
      return Fail("coordinator.limits.context_length",
                  absl::StrCat(l.context_length, " must be >= 1"));
    if (l.max_new_tokens < 1 || l.max_new_tokens > l.context_length) {
      return Fail("coordinator.limits.max_new_tokens",
                  absl::StrCat(l.max_new_tokens,
                               " must be in [1, context_length = ", l.context_length, "]"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckName(const std::string& prefix, const std::string& name,
                         std::set<std::string>* names) const {
    if (!IsValidName(name)) {
      return Fail(
          prefix + ".name",
          absl::StrCat(Quoted(name),
                       " must be 1-63 of A-Z a-z 0-9 _ - . starting with a letter or digit"));
    }
    if (!names->insert(name).second) {
      return Fail(
          prefix + ".name",
          absl::StrCat(Quoted(name),
                       " is used twice (names are unique across target groups and draft pools)"));
    }
    return absl::OkStatus();
  }

  // ["cpu"], or GPUs "cuda:N" without repeats; for target groups, one GPU per rank.
  absl::Status CheckDevices(const std::string& field, const std::vector<std::string>& devices,
                            int ranks) const {
    if (devices.empty())
      return Fail(field, "must name at least one device (\"cpu\" or \"cuda:N\")");
    std::set<std::string> seen;
    for (const std::string& d : devices) {
      if (!IsCpuDevice(d) && !IsCudaDevice(d))
        return Fail(field, absl::StrCat(Quoted(d), " is not \"cpu\" or \"cuda:N\""));
      if (!seen.insert(d).second) return Fail(field, absl::StrCat(Quoted(d), " is listed twice"));
    }
    if (seen.contains("cpu")) {
      if (devices.size() != 1)
        return Fail(field,
                    absl::StrCat(QuotedList(devices), ": \"cpu\" cannot be mixed with GPUs"));
      return absl::OkStatus();
    }
    if (ranks > 0 && static_cast<int>(devices.size()) != ranks) {
      return Fail(field, absl::StrCat(QuotedList(devices), " has ", devices.size(),
                                      " GPU(s) for tp = ", ranks, " ranks; list one GPU per rank"));
    }
    return absl::OkStatus();
  }

  // hosts: empty, or one valid host per rank.
  absl::Status CheckRankHosts(const std::string& p, const TargetGroupConfig& g) const {
    if (g.hosts.empty()) return absl::OkStatus();
    if (static_cast<int>(g.hosts.size()) != g.tp) {
      return Fail(p + ".hosts", absl::StrCat(QuotedList(g.hosts), " has ", g.hosts.size(),
                                             " host(s) for tp = ", g.tp,
                                             " ranks; list one host per rank, or set host alone"));
    }
    for (const std::string& h : g.hosts) {
      if (!IsValidHost(h))
        return Fail(p + ".hosts", absl::StrCat(Quoted(h), " is not a host name"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckGroup(size_t i, std::set<std::string>* names) const {
    const TargetGroupConfig& g = c_.target_groups[i];
    const std::string p = absl::StrCat("target_group[", i, "]");
    RETURN_IF_ERROR(CheckName(p, g.name, names));
    if (g.tp != 1 && g.tp != 2 && g.tp != 4 && g.tp != 8)
      return Fail(p + ".tp", absl::StrCat(g.tp, " is not one of 1, 2, 4, 8"));
    RETURN_IF_ERROR(CheckDevices(p + ".devices", g.devices, g.tp));
    if (g.threads < 0 || g.threads > kMaxThreads)
      return Fail(p + ".threads", absl::StrCat(g.threads, " must be in [0, ", kMaxThreads,
                                               "] (0: the host's cores)"));
    if (!IsValidHost(g.host))
      return Fail(p + ".host", absl::StrCat(Quoted(g.host), " is not a host name"));
    RETURN_IF_ERROR(CheckKvCacheMemory(p, g.kv_cache_memory));
    // The names model::ParseKvCacheType takes (config sits below the model layer).
    if (g.kv_cache_type != "f16" && g.kv_cache_type != "q8_0")
      return Fail(p + ".kv_cache_type", absl::StrCat(Quoted(g.kv_cache_type), " is not f16 or q8_0"));
    if (g.kv_cache_type == "q8_0" && (g.tp != 1 || g.devices != std::vector<std::string>{"cpu"}))
      return Fail(p + ".kv_cache_type",
                  "q8_0 needs tp = 1 on the CPU (devices = [\"cpu\"]): the CUDA backend and "
                  "tensor-parallel groups store f16");
    RETURN_IF_ERROR(CheckRankHosts(p, g));
    Endpoint data;
    if (!ParseEndpoint(g.data_endpoint, true, &data) || IsWildcardHost(data.host)) {
      return Fail(p + ".data_endpoint",
                  absl::StrCat(Quoted(g.data_endpoint),
                               " must be tcp://ADDRESS:PORT (PORT may be *; ADDRESS an interface "
                               "address draft workers can reach, not *) or ipc://PATH"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckDrafter(const std::string& p, const DraftPoolConfig& pool) const {
    absl::string_view layers = pool.drafter;
    int l = 0;
    const bool layerskip = absl::ConsumePrefix(&layers, "layerskip:");
    if (layerskip && (!absl::SimpleAtoi(layers, &l) || l < 1)) {
      return Fail(p + ".drafter",
                  absl::StrCat(Quoted(pool.drafter), ": layerskip:L needs a layer count L >= 1"));
    }
    if (absl::StartsWith(pool.drafter, "sim:")) {
      return Fail(p + ".drafter", absl::StrCat(Quoted(pool.drafter),
                                               " is the simulated drafter of `splitspec bench "
                                               "spec` only; serve cannot use it"));
    }
    const bool named = pool.drafter == "ngram" || pool.drafter == "lookup" ||
                       pool.drafter == "model" || pool.drafter == "none";
    if (!layerskip && !named) {
      return Fail(p + ".drafter", absl::StrCat(Quoted(pool.drafter),
                                               " is not \"ngram\", \"lookup\", \"model\", "
                                               "\"layerskip:L\" or \"none\""));
    }
    if (pool.placement != "auto" && pool.placement != "target" && pool.placement != "workers") {
      return Fail(p + ".placement", absl::StrCat(Quoted(pool.placement),
                                                 " is not \"auto\", \"target\" or \"workers\""));
    }
    if (pool.placement == "target" && (pool.drafter == "model" || layerskip)) {
      return Fail(p + ".placement",
                  absl::StrCat("\"target\" runs only model-free drafters (\"lookup\", \"ngram\") "
                               "inside the target leaders; drafter ",
                               Quoted(pool.drafter), " needs \"workers\" or \"auto\""));
    }
    if (pool.drafter == "model" && pool.draft_model.empty() && c_.models.draft.empty() &&
        pool.count > 0) {
      return Fail(p + ".drafter", "\"model\" needs draft_model here or models.draft");
    }
    if (pool.vocab_mapping != "auto" && pool.vocab_mapping != "intersection" &&
        pool.vocab_mapping != "string") {
      return Fail(p + ".vocab_mapping",
                  absl::StrCat(Quoted(pool.vocab_mapping),
                               " is not \"auto\", \"intersection\" or \"string\""));
    }
    if (pool.drafter != "model" && !pool.draft_model.empty()) {
      return Fail(p + ".draft_model",
                  absl::StrCat(Quoted(pool.draft_model), " is set but drafter is ",
                               Quoted(pool.drafter), " (only \"model\" uses it)"));
    }
    return absl::OkStatus();
  }

  absl::Status CheckPool(size_t i, std::set<std::string>* names) const {
    const DraftPoolConfig& pool = c_.draft_pools[i];
    const std::string p = absl::StrCat("draft_pool[", i, "]");
    RETURN_IF_ERROR(CheckName(p, pool.name, names));
    if (pool.count < 0 || pool.count > kMaxPoolSize)
      return Fail(p + ".count", absl::StrCat(pool.count, " must be in [0, ", kMaxPoolSize, "]"));
    RETURN_IF_ERROR(CheckDrafter(p, pool));
    if (pool.k < 1 || pool.k > kMaxDraftK)
      return Fail(p + ".k", absl::StrCat(pool.k, " must be in [1, ", kMaxDraftK, "]"));
    if (pool.lookahead < 1 || pool.lookahead > kMaxLookahead) {
      return Fail(p + ".lookahead", absl::StrCat(pool.lookahead, " must be in [1, ", kMaxLookahead,
                                                 "] (1: sequential)"));
    }
    RETURN_IF_ERROR(CheckDevices(p + ".devices", pool.devices, 0));
    if (pool.threads < 1 || pool.threads > kMaxThreads)
      return Fail(p + ".threads", absl::StrCat(pool.threads, " must be in [1, ", kMaxThreads, "]"));
    if (!IsValidHost(pool.host))
      return Fail(p + ".host", absl::StrCat(Quoted(pool.host), " is not a host name"));
    RETURN_IF_ERROR(CheckKvCacheMemory(p, pool.kv_cache_memory));
    return absl::OkStatus();
  }

  // "" (the worker's default) or a MemoryAmount ("256MiB", "40%").
  absl::Status CheckKvCacheMemory(const std::string& p, const std::string& value) const {
    if (value.empty()) return absl::OkStatus();
    absl::StatusOr<MemoryAmount> amount = ParseMemoryAmount(value);
    if (!amount.ok()) return Fail(p + ".kv_cache_memory", std::string(amount.status().message()));
    return absl::OkStatus();
  }

  // When processes run on more than one host, the endpoints others connect to
  // must not be loopback or ipc.
  absl::Status CheckReachability() const {
    std::set<std::string> hosts = {CanonicalHost(c_.coordinator.host)};
    for (const TargetGroupConfig& g : c_.target_groups) {
      for (int rank = 0; rank < g.tp; ++rank) hosts.insert(CanonicalHost(g.HostOfRank(rank)));
    }
    for (const DraftPoolConfig& pool : c_.draft_pools) {
      if (pool.count > 0) hosts.insert(CanonicalHost(pool.host));
    }
    if (hosts.size() < 2) return absl::OkStatus();
    const std::string host_list = absl::StrJoin(hosts, ", ");
    Endpoint control;
    ParseEndpoint(c_.coordinator.WorkerEndpoint(), false, &control);
    if (IsHostLocal(control)) {
      const char* field =
          c_.coordinator.advertise.empty() ? "coordinator.control" : "coordinator.advertise";
      return Fail(field, absl::StrCat(Quoted(c_.coordinator.WorkerEndpoint()),
                                      " is reachable from one host only, but processes run on ",
                                      host_list));
    }
    for (size_t i = 0; i < c_.target_groups.size(); ++i) {
      Endpoint data;
      ParseEndpoint(c_.target_groups[i].data_endpoint, true, &data);
      if (IsHostLocal(data)) {
        return Fail(
            absl::StrCat("target_group[", i, "].data_endpoint"),
            absl::StrCat(Quoted(c_.target_groups[i].data_endpoint),
                         " is reachable from one host only, but processes run on ", host_list));
      }
    }
    return absl::OkStatus();
  }

  const ClusterConfig& c_;
};

}  // namespace

bool IsCpuDevice(const std::string& device) { return device == "cpu"; }

bool IsCudaDevice(const std::string& device, int* index) {
  absl::string_view rest = device;
  int n = 0;
  if (!absl::ConsumePrefix(&rest, "cuda:") || rest.empty() ||
      !absl::ascii_isdigit(static_cast<unsigned char>(rest[0])) || !absl::SimpleAtoi(rest, &n) ||
      n < 0 || n > 1023) {
    return false;
  }
  if (index != nullptr) *index = n;
  return true;
}

absl::Status ValidateClusterConfig(const ClusterConfig& config) { return Validator(config).Run(); }

}  // namespace splitspec::config

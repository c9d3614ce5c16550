#include "tools/serve_plan.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/coordinator_flags.h"
#include "runtime/base/json_string.h"
#include "runtime/base/status_macros.h"
#include "runtime/cli/worker_flags.h"
#include "runtime/net/channel_security.h"
#include "tools/default_paths.h"

namespace splitspec::tools {
namespace {

using config::ClusterConfig;

// A path from the command line: relative to the current directory.
std::string AbsolutePath(const std::string& path) {
  if (path.empty()) return path;
  std::error_code error;
  const std::filesystem::path absolute = std::filesystem::absolute(path, error);
  return error ? path : absolute.lexically_normal().string();
}

absl::StatusOr<ClusterConfig> LoadBaseConfig(const CliArgs& args, const ServeEnvironment& env) {
  if (args.Has("config")) return config::LoadClusterConfig(args.GetString("config", ""));
  const std::string shipped = env.repo_root + "/deploy/cluster.toml";
  std::error_code error;
  if (std::filesystem::exists(shipped, error)) return config::LoadClusterConfig(shipped);
  return ClusterConfig{};
}

// --targets N: N copies of the config's only group, named NAME-0 .. NAME-(N-1).
absl::Status OverrideTargets(const CliArgs& args, ClusterConfig* c) {
  if (!args.Has("targets")) return absl::OkStatus();
  ASSIGN_OR_RETURN(int n, args.GetInt<int>("targets", 1));
  if (n < 1 || n > 64)
    return absl::InvalidArgumentError(absl::StrCat("--targets ", n, " out of range [1, 64]"));
  if (c->target_groups.size() != 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--targets needs a config with one [[target_group]]; ", c->source, " has ",
                     c->target_groups.size(), " (edit the file instead)"));
  }
  if (n == 1) return absl::OkStatus();
  const config::TargetGroupConfig group = c->target_groups[0];
  c->target_groups.assign(n, group);
  for (int i = 0; i < n; ++i) {
    c->target_groups[i].name = absl::StrCat(group.name, "-", i);
    SetFieldOrigin(c, absl::StrCat("target_group[", i, "].name"), "--targets");
  }
  return absl::OkStatus();
}

absl::Status OverrideDraftPools(const CliArgs& args, ClusterConfig* c) {
  if (args.Has("drafts")) {
    ASSIGN_OR_RETURN(int n, args.GetInt<int>("drafts", 1));
    if (c->draft_pools.size() != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("--drafts needs a config with one [[draft_pool]]; ", c->source, " has ",
                       c->draft_pools.size(), " (edit the file instead)"));
    }
    c->draft_pools[0].count = n;  // out of range: validation names it
    SetFieldOrigin(c, "draft_pool[0].count", "--drafts");
  }
  const std::string draft = AbsolutePath(args.GetString("draft", ""));
  if (!draft.empty()) {
    c->models.draft = draft;
    SetFieldOrigin(c, "models.draft", "--draft");
  }
  for (size_t i = 0; i < c->draft_pools.size(); ++i) {
    config::DraftPoolConfig& pool = c->draft_pools[i];
    if (!draft.empty()) {
      pool.draft_model = draft;
      SetFieldOrigin(c, absl::StrCat("draft_pool[", i, "].draft_model"), "--draft");
    }
    if (args.Has("drafter") || !draft.empty()) {
      pool.drafter = args.GetString("drafter", "model");
      SetFieldOrigin(c, absl::StrCat("draft_pool[", i, "].drafter"),
                     args.Has("drafter") ? "--drafter" : "--draft");
    }
    if (args.Has("draft-placement")) {
      pool.placement = args.GetString("draft-placement", "auto");  // validation names a bad one
      SetFieldOrigin(c, absl::StrCat("draft_pool[", i, "].placement"), "--draft-placement");
    }
  }
  return absl::OkStatus();
}

absl::Status OverrideTargetGroups(const CliArgs& args, ClusterConfig* c) {
  RETURN_IF_ERROR(OverrideTargets(args, c));
  for (size_t i = 0; i < c->target_groups.size(); ++i) {
    config::TargetGroupConfig& g = c->target_groups[i];
    if (args.Has("target-tp")) {
      ASSIGN_OR_RETURN(g.tp, args.GetInt<int>("target-tp", 1));
      SetFieldOrigin(c, absl::StrCat("target_group[", i, "].tp"), "--target-tp");
    }
    if (args.Has("threads")) {
      ASSIGN_OR_RETURN(g.threads, args.GetInt<int>("threads", 0));
      SetFieldOrigin(c, absl::StrCat("target_group[", i, "].threads"), "--threads");
    }
    if (args.Has("kv-cache-memory")) {
      g.kv_cache_memory = args.GetString("kv-cache-memory", "");
      SetFieldOrigin(c, absl::StrCat("target_group[", i, "].kv_cache_memory"), "--kv-cache-memory");
    }
    if (args.Has("kv-cache-type")) {
      g.kv_cache_type = args.GetString("kv-cache-type", "f16");
      SetFieldOrigin(c, absl::StrCat("target_group[", i, "].kv_cache_type"), "--kv-cache-type");
    }
  }
  return absl::OkStatus();
}

void OverrideString(const CliArgs& args, const char* flag, const char* field, std::string* value,
                    ClusterConfig* c, bool is_path = false) {
  if (!args.Has(flag)) return;
  *value = is_path ? AbsolutePath(args.GetString(flag, "")) : args.GetString(flag, "");
  SetFieldOrigin(c, field, absl::StrCat("--", flag));
}

std::string ProcessName(const config::TargetGroupConfig& g, int rank) {
  return g.tp == 1 ? g.name : absl::StrCat(g.name, "-rank", rank);
}

// "cuda:3" -> CUDA_VISIBLE_DEVICES=3 and --device cuda:0: the process sees one GPU, which is
// its ordinal 0, and runs its model there ("cpu" adds nothing: workers default to the CPU).
void SetDevice(const std::string& device, PlannedProcess* p) {
  int index = 0;
  if (!config::IsCudaDevice(device, &index)) return;
  p->env.emplace_back("CUDA_VISIBLE_DEVICES", std::to_string(index));
  p->argv.insert(p->argv.end(), {"--device", "cuda:0"});
}

// Whether the ranks of `g` run on more than one host.
bool SpansHosts(const config::TargetGroupConfig& g) {
  for (int rank = 1; rank < g.tp; ++rank) {
    if (g.HostOfRank(rank) != g.HostOfRank(0)) return true;
  }
  return false;
}

// The address a rank's Gloo pair and the leader's rendezvous server bind
// (--tp-address): loopback when the group is on one host (its collectives never
// leave it), else the rank's host as the config names it (an address, or a name
// that host resolves to its address on the group's network).
std::string TpAddressOf(const config::TargetGroupConfig& g, int rank) {
  return SpansHosts(g) ? g.HostOfRank(rank) : "127.0.0.1";
}

// Gloo, which carries a group's collectives, has no encrypted transport in
// the Debian build (CURVE covers only ZeroMQ sockets): a group whose ranks
// talk across hosts is refused unless the config vouches for that network.
absl::Status CheckTpNetwork(const ClusterConfig& c) {
  if (c.security.tp_network == "trusted") return absl::OkStatus();
  for (size_t i = 0; i < c.target_groups.size(); ++i) {
    const config::TargetGroupConfig& g = c.target_groups[i];
    if (!SpansHosts(g)) continue;
    std::vector<std::string> hosts;
    for (int rank = 0; rank < g.tp; ++rank) hosts.push_back(g.HostOfRank(rank));
    const std::string field = absl::StrCat("target_group[", i, "].hosts");
    auto origin = c.origins.find(field);
    return absl::FailedPreconditionError(absl::StrCat(
        origin != c.origins.end() ? origin->second : c.source, ": target group '", g.name,
        "' spans hosts ", absl::StrJoin(hosts, ", "),
        ": its tensor-parallel traffic (Gloo collectives: activations and step plans) runs "
        "over plaintext, unauthenticated TCP between them (Gloo has no encrypted transport; "
        "CURVE covers only the ZeroMQ sockets), so anyone on that network could read or forge "
        "it. Put those hosts on a private network and set tp_network = \"trusted\" in "
        "[security], or run the group's ranks on one host"));
  }
  return absl::OkStatus();
}

absl::Status CheckLimitsHaveFlags(const ClusterConfig& c) {
  const config::CoordinatorLimits defaults;
  const config::CoordinatorLimits& l = c.coordinator.limits;
  const std::pair<const char*, std::pair<int, int>> fields[] = {
      {"max_queued_requests", {l.max_queued_requests, defaults.max_queued_requests}},
      {"max_new_tokens", {l.max_new_tokens, defaults.max_new_tokens}},
      {"context_length", {l.context_length, defaults.context_length}}};
  for (const auto& [name, values] : fields) {
    if (values.first == values.second) continue;
    const std::string field = absl::StrCat("coordinator.limits.", name);
    auto origin = c.origins.find(field);
    return absl::UnimplementedError(absl::StrCat(
        origin != c.origins.end() ? origin->second : c.source, ": ", field, " = ", values.first,
        ": splitspec-coordinator has no flag for this limit yet (it uses ", values.second,
        "); remove the key or set ", values.second));
  }
  return absl::OkStatus();
}

// The words to append to the coordinator's argv for the forwarded flags given.
absl::StatusOr<std::vector<std::string>> CoordinatorFlagWords(const CliArgs& args) {
  std::vector<std::string> words;
  for (const cli::Flag& flag : ForwardedCoordinatorFlags()) {
    if (!args.Has(flag.name)) continue;
    words.push_back(absl::StrCat("--", flag.name));
    if (flag.value.empty()) continue;  // a switch (given, so true)
    // An integer flag's value was range-checked by CliArgs::Parse (the table
    // keeps the coordinator's int_range), so a bad one fails here, not only
    // when the coordinator starts (and --dry-run shows it).
    words.push_back(args.GetString(flag.name, ""));
  }
  return words;
}

absl::StatusOr<RestartPolicy> ParseRestartPolicy(const CliArgs& args) {
  RestartPolicy policy;
  ASSIGN_OR_RETURN(policy.max_restarts, args.GetInt<int>("max-restarts", policy.max_restarts));
  ASSIGN_OR_RETURN(double window_s,
                   args.GetDouble("restart-window-s", absl::ToDoubleSeconds(policy.window)));
  policy.window = absl::Seconds(window_s);
  RETURN_IF_ERROR(policy.Validate());
  return policy;
}

// --register-timeout: "90s", "2m", "500ms", or bare seconds; 0 = never.
absl::StatusOr<absl::Duration> ParseRegisterTimeout(const CliArgs& args) {
  const std::string text = args.GetString("register-timeout", "60s");
  absl::Duration timeout;
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds) && std::isfinite(seconds)) {
    timeout = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &timeout)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--register-timeout '", text, "': not a duration (e.g. 90s, 2m) or a number of seconds"));
  }
  if (timeout < absl::ZeroDuration() || timeout == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--register-timeout '", text, "': must be finite and >= 0 (0: never)"));
  }
  return timeout == absl::ZeroDuration() ? absl::InfiniteDuration() : timeout;
}

}  // namespace

std::vector<cli::Flag> ForwardedCoordinatorFlags() {
  const std::set<std::string> set_by_serve = {"control", "endpoint-file", "http", "model",
                                              "api-key"};
  std::vector<cli::Flag> flags;
  for (cli::Flag flag : coordinator::CoordinatorFlagTable().flags) {
    if (set_by_serve.contains(flag.name)) continue;
    flag.help += " (passed to splitspec-coordinator)";
    flags.push_back(std::move(flag));
  }
  return flags;
}

ServeEnvironment ServeEnvironment::ForThisBinary() {
  return ServeEnvironment{.bin_dir = BinaryDirectory(),
                          .repo_root = RepositoryRoot(),
                          .default_model = DefaultModelPath()};
}

absl::StatusOr<ServeOptions> ParseServeOptions(const CommandArgs& argv,
                                               const ServeEnvironment& env) {
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, ServeFlagTable()));
  ServeOptions options;
  options.dry_run = args.Has("dry-run");
  ASSIGN_OR_RETURN(options.config, LoadBaseConfig(args, env));
  ClusterConfig& c = options.config;
  OverrideString(args, "control", "coordinator.control", &c.coordinator.control, &c);
  OverrideString(args, "advertise", "coordinator.advertise", &c.coordinator.advertise, &c);
  OverrideString(args, "http", "coordinator.http", &c.coordinator.http, &c);
  OverrideString(args, "model", "models.target", &c.models.target, &c, /*is_path=*/true);
  OverrideString(args, "log-dir", "cluster.run_dir", &c.run_dir, &c, /*is_path=*/true);
  RETURN_IF_ERROR(OverrideTargetGroups(args, &c));
  RETURN_IF_ERROR(OverrideDraftPools(args, &c));
  RETURN_IF_ERROR(config::ValidateClusterConfig(c));
  ASSIGN_OR_RETURN(options.coordinator_flags, CoordinatorFlagWords(args));
  ASSIGN_OR_RETURN(options.restart, ParseRestartPolicy(args));
  ASSIGN_OR_RETURN(options.register_timeout, ParseRegisterTimeout(args));
  ASSIGN_OR_RETURN(const bool trees, cli::ParseTreeSwitch(args.GetString("tree", "off")));
  if (trees) options.drafting_flags = {"--tree", "auto"};
  return options;
}

std::string RunDirOf(const ClusterConfig& c, const ServeEnvironment& env) {
  return c.run_dir.empty() ? env.repo_root + "/build/cluster" : c.run_dir;
}

absl::Status PrepareEphemeralKeys(ClusterConfig* config, const ServeEnvironment& env) {
  if (config->security.mode != "curve" || !config->security.keys_dir.empty())
    return absl::OkStatus();
  const std::string dir = RunDirOf(*config, env) + "/keys";
  std::error_code error;
  std::filesystem::create_directories(RunDirOf(*config, env), error);
  std::filesystem::remove_all(dir, error);  // the last run's keys: never reused
  if (error) return absl::UnavailableError(absl::StrCat("cannot remove ", dir, ": ",
                                                        error.message()));
  // A key of its own for every worker serve starts (its process name is its
  // --name, so it finds draft.d/NAME.key or target.d/NAME.key; a restarted
  // worker reuses it).
  std::vector<std::string> draft_workers;
  for (const config::DraftPoolConfig& pool : config->draft_pools) {
    for (int i = 0; i < pool.WorkerCount(); ++i)
      draft_workers.push_back(absl::StrCat(pool.name, "-", i));
  }
  std::vector<std::string> target_workers;
  for (const config::TargetGroupConfig& group : config->target_groups) {
    for (int rank = 0; rank < group.tp; ++rank) target_workers.push_back(ProcessName(group, rank));
  }
  RETURN_IF_ERROR(net::WriteEphemeralClusterKeys(dir, draft_workers, target_workers));
  config->security.keys_dir = dir;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<PlannedProcess>> PlanCluster(
    const ClusterConfig& c, const ServeEnvironment& env,
    const std::vector<std::string>& coordinator_flags,
    const std::vector<std::string>& drafting_flags) {
  RETURN_IF_ERROR(CheckLimitsHaveFlags(c));
  RETURN_IF_ERROR(CheckTpNetwork(c));
  const std::string run_dir = RunDirOf(c, env);
  const std::string model = c.models.target.empty() ? env.default_model : c.models.target;
  const std::string endpoint = c.coordinator.WorkerEndpoint();
  std::vector<PlannedProcess> plan;
  auto add = [&](PlannedProcess p) {
    p.log = absl::StrCat(run_dir, "/", p.name, ".log");
    // Security (docs/protocol.md): the keys every process loads its role's key
    // from, or plaintext asked for by name. Neither when curve has no keys_dir
    // yet: serve makes them (PrepareEphemeralKeys); a launcher that starts the
    // plan as is gets plaintext processes, which warn.
    if (c.security.mode == "none") {
      p.env.emplace_back("SPLITSPEC_SECURITY", "none");
    } else if (!c.security.keys_dir.empty()) {
      p.env.emplace_back("SPLITSPEC_KEYS", c.security.keys_dir);
    }
    plan.push_back(std::move(p));
  };

  PlannedProcess coordinator{
      .name = "coordinator", .role = "coordinator", .host = c.coordinator.host};
  coordinator.argv = {env.bin_dir + "/splitspec-coordinator", "--control", c.coordinator.control};
  if (c.coordinator.http != "none")
    coordinator.argv.insert(coordinator.argv.end(),
                            {"--http", c.coordinator.http, "--model", model});
  coordinator.argv.insert(coordinator.argv.end(), coordinator_flags.begin(),
                          coordinator_flags.end());
  coordinator.env_from.emplace_back("SPLITSPEC_API_KEY", c.coordinator.api_key_env);
  add(std::move(coordinator));

  // A model-free pool runs inside the target leaders (target_worker/local_drafts.h):
  // no draft process, no round trip per block. The first such pool is the one.
  const config::DraftPoolConfig* in_targets = nullptr;
  for (const config::DraftPoolConfig& pool : c.draft_pools) {
    if (pool.RunsInTargets() && in_targets == nullptr) in_targets = &pool;
  }
  for (const config::TargetGroupConfig& g : c.target_groups) {
    for (int rank = 0; rank < g.tp; ++rank) {
      PlannedProcess p{.name = ProcessName(g, rank),
                       .role = "target",
                       .host = g.HostOfRank(rank),
                       .group = g.name,
                       .tp_rank = rank,
                       .tp_size = g.tp};
      p.argv = {env.bin_dir + "/splitspec-target-worker",
                "--coordinator",
                endpoint,
                "--name",
                p.name,
                "--model",
                model,
                "--tp-group",
                g.name,
                "--tp-rank",
                std::to_string(rank),
                "--tp-size",
                std::to_string(g.tp)};
      // The leader owns the sockets draft workers connect to (docs/architecture.md).
      if (rank == 0) p.argv.insert(p.argv.end(), {"--data-endpoint", g.data_endpoint});
      if (rank == 0 && in_targets != nullptr) {
        p.argv.insert(p.argv.end(), {"--drafter", in_targets->drafter});
        p.argv.insert(p.argv.end(), drafting_flags.begin(), drafting_flags.end());
      }
      if (g.tp > 1) p.argv.insert(p.argv.end(), {"--tp-address", TpAddressOf(g, rank)});
      if (g.threads > 0) p.argv.insert(p.argv.end(), {"--threads", std::to_string(g.threads)});
      if (!g.kv_cache_memory.empty())
        p.argv.insert(p.argv.end(), {"--kv-cache-memory", g.kv_cache_memory});
      if (g.kv_cache_type != "f16") p.argv.insert(p.argv.end(), {"--kv-cache-type", g.kv_cache_type});
      SetDevice(g.DeviceOfRank(rank), &p);
      add(std::move(p));
    }
  }

  for (const config::DraftPoolConfig& pool : c.draft_pools) {
    for (int i = 0; i < pool.WorkerCount(); ++i) {
      PlannedProcess p{.name = absl::StrCat(pool.name, "-", i), .role = "draft", .host = pool.host};
      p.argv = {env.bin_dir + "/splitspec-draft-worker",
                "--coordinator",
                endpoint,
                "--name",
                p.name,
                "--drafter",
                pool.drafter,
                "--target-model",
                model,
                "--k",
                std::to_string(pool.k),
                "--lookahead",
                std::to_string(pool.lookahead),
                "--threads",
                std::to_string(pool.threads)};
      if (pool.drafter == "model") {
        p.argv.insert(p.argv.end(),
                      {"--draft", pool.draft_model.empty() ? c.models.draft : pool.draft_model,
                       "--vocab-mapping", pool.vocab_mapping});
      }
      if (!pool.kv_cache_memory.empty())
        p.argv.insert(p.argv.end(), {"--kv-cache-memory", pool.kv_cache_memory});
      p.argv.insert(p.argv.end(), drafting_flags.begin(), drafting_flags.end());
      SetDevice(pool.devices[i % pool.devices.size()], &p);
      add(std::move(p));
    }
  }

  std::set<std::string> names;
  for (const PlannedProcess& p : plan) {
    if (!names.insert(p.name).second) {
      return absl::InvalidArgumentError(absl::StrCat(
          c.source, ": two processes would be named '", p.name,
          "' (group ranks are NAME-rankR, pool workers NAME-I); rename a group or pool"));
    }
  }
  return plan;
}

std::string DecodingChoices(const ClusterConfig& c, unsigned hardware_threads) {
  auto origin = [&](const std::string& field) {
    auto it = c.origins.find(field);
    return it == c.origins.end() || it->second.rfind("--", 0) != 0
               ? std::string()
               : absl::StrCat(" (", it->second, ")");
  };
  std::vector<std::string> parts;
  for (size_t i = 0; i < c.target_groups.size(); ++i) {
    const config::TargetGroupConfig& g = c.target_groups[i];
    const std::string threads = g.threads > 0
                                    ? absl::StrCat("threads ", g.threads)
                                    : absl::StrCat("threads ", hardware_threads, " (all cores)");
    parts.push_back(
        absl::StrCat(g.name, ": ", threads, origin(absl::StrCat("target_group[", i, "].threads"))));
  }
  for (size_t i = 0; i < c.draft_pools.size(); ++i) {
    const config::DraftPoolConfig& pool = c.draft_pools[i];
    const std::string drafter = absl::StrCat(pool.name, ": drafter ", pool.drafter,
                                             origin(absl::StrCat("draft_pool[", i, "].drafter")));
    if (pool.count == 0 || pool.drafter == "none") {
      parts.push_back(absl::StrCat(drafter, ", off (plain decoding)",
                                   origin(absl::StrCat("draft_pool[", i, "].count"))));
    } else if (pool.RunsInTargets()) {
      parts.push_back(absl::StrCat(drafter, ", in the target leaders, k auto, sequential"));
    } else {
      parts.push_back(absl::StrCat(drafter, ", ", pool.count, " worker(s), k auto, lookahead ",
                                   pool.lookahead));
    }
  }
  return absl::StrJoin(parts, "; ");
}

std::string PlannedProcessJson(const PlannedProcess& p) {
  auto object = [](const std::vector<std::pair<std::string, std::string>>& pairs) {
    std::vector<std::string> fields;
    for (const auto& [k, v] : pairs)
      fields.push_back(absl::StrCat(JsonQuote(k), ":", JsonQuote(v)));
    return absl::StrCat("{", absl::StrJoin(fields, ","), "}");
  };
  std::vector<std::string> argv;
  for (const std::string& a : p.argv) argv.push_back(JsonQuote(a));
  std::string out = absl::StrCat("{\"name\":", JsonQuote(p.name), ",\"role\":", JsonQuote(p.role),
                                 ",\"host\":", JsonQuote(p.host), ",\"log\":", JsonQuote(p.log));
  if (p.role == "target") {
    absl::StrAppend(&out, ",\"group\":", JsonQuote(p.group), ",\"tp_rank\":", p.tp_rank,
                    ",\"tp_size\":", p.tp_size);
  }
  absl::StrAppend(&out, ",\"env\":", object(p.env), ",\"env_from\":", object(p.env_from),
                  ",\"argv\":[", absl::StrJoin(argv, ","), "]}");
  return out;
}

}  // namespace splitspec::tools

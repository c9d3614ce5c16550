// `splitspec serve [--config FILE] [--dry-run] [--control EP] [--advertise EP]
//                  [--http HOST:PORT | --http none] [--model PATH] [--drafter NAME]
//                  [--draft PATH] [--drafts N] [--targets N] [--target-tp N]
//                  [--threads N] [--log-dir DIR] [--max-restarts N]
//                  [--restart-window-s S] [--register-timeout D] [coordinator flags]`
//
// Starts a cluster on this machine as separate processes, as the cluster
// config describes it (runtime/config/cluster_config.h; --config FILE, else
// deploy/cluster.toml, which holds the defaults): one coordinator, every rank of
// every target group (splitspec-target-worker --tp-group G --tp-rank R
// --tp-size S) and every draft worker, binaries next to this one. Flags
// override the file (see tools/serve_plan.h for the list and the precedence).
// It waits until every group leader (tp_rank 0) and every draft worker has
// registered, prints the membership, and keeps running until Ctrl-C / SIGTERM
// (then stops the workers before the coordinator). Meanwhile it supervises
// (tools/serve_supervisor.h): a worker that dies, or hangs (the coordinator
// declared it dead: no heartbeats; or it has not registered within
// --register-timeout of its start, during start-up too), is restarted with
// back-off while the cluster keeps serving; the coordinator's exit, or a worker
// crash-looping past --max-restarts, stops the cluster with a message naming
// the process and quoting its log. A worker that exits with status 0 was
// drained by `splitspec scale` and is let go. A config that puts a process on
// another host is refused (deploy/ssh_cluster.sh starts those).
//
// Security: with security.mode "curve" (the default) and no security.keys_dir,
// serve writes fresh keys for every role to RUN_DIR/keys (0700 directory, 0600
// secret files; replaced on every start) and each process finds them through
// SPLITSPEC_KEYS in its environment; security.mode "none" runs plaintext
// (SPLITSPEC_SECURITY=none; the coordinator logs a warning).
//
// --dry-run prints the processes it would start, one JSON object per line
// (tools/serve_plan.h: name, role, host, log, group/tp_rank/tp_size, env,
// env_from, argv), and starts nothing; the deploy/ launchers read it.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "runtime/base/shutdown.h"
#include "runtime/base/status_macros.h"
#include "runtime/base/subprocess.h"
#include "runtime/net/channel_security.h"
#include "runtime/net/request_client.h"
#include "tools/commands.h"
#include "tools/serve_plan.h"
#include "tools/serve_supervisor.h"

namespace splitspec::tools {
namespace {

// The coordinator's view counts a target group once its leader (tp_rank 0) is
// alive; followers may or may not register on their own.
absl::Status WaitForMembers(const std::string& control, int groups, int drafts,
                            Supervisor& supervisor) {
  for (int attempt = 0; attempt < 600; ++attempt) {
    RETURN_IF_ERROR(supervisor.CheckStarted());
    absl::StatusOr<proto::StatusReply> status =
        net::FetchCoordinatorStatus(control, absl::Milliseconds(500));
    if (status.ok()) {
      int leaders = 0;
      int draft_workers = 0;
      for (const proto::MemberStatus& m : status->members()) {
        if (m.state() != proto::MEMBER_STATE_ALIVE) continue;
        leaders += m.role() == proto::ROLE_TARGET_WORKER && m.tp_rank() == 0;
        draft_workers += m.role() == proto::ROLE_DRAFT_WORKER;
      }
      if (leaders >= groups && draft_workers >= drafts) return absl::OkStatus();
    }
    absl::SleepFor(absl::Milliseconds(100));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("workers did not register with ", control, " within 60 s"));
}

bool IsThisHost(const std::string& host) {
  if (host == "localhost" || host == "127.0.0.1") return true;
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 && host == name;
}

// Refuses what a local start cannot do; done before anything is spawned.
absl::Status CheckLocal(const config::ClusterConfig& config,
                        const std::vector<PlannedProcess>& plan) {
  for (const PlannedProcess& p : plan) {
    if (!IsThisHost(p.host)) {
      return absl::InvalidArgumentError(absl::StrCat(
          config.source, ": ", p.name, " is to run on host '", p.host,
          "'; serve starts processes on this machine only (use deploy/ssh_cluster.sh)"));
    }
  }
  for (const PlannedProcess& p : plan) {
    if (!std::filesystem::exists(p.argv[0])) {
      return absl::NotFoundError(absl::StrCat(p.argv[0], " not found; build it (deploy/setup.sh)"));
    }
    for (size_t i = 0; i + 1 < p.argv.size(); ++i) {
      const std::string& flag = p.argv[i];
      if ((flag == "--model" || flag == "--target-model" || flag == "--draft") &&
          !std::filesystem::exists(p.argv[i + 1])) {
        return absl::NotFoundError(absl::StrCat(
            "model ", p.argv[i + 1], " (", p.name, " ", flag,
            ") not found; run deploy/setup.sh, set models.* in the config or pass --model PATH"));
      }
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> ProcessEnvironment(const PlannedProcess& p) {
  std::vector<std::string> env;
  for (const auto& [name, value] : p.env) env.push_back(absl::StrCat(name, "=", value));
  for (const auto& [name, from] : p.env_from) {
    const char* value = std::getenv(from.c_str());
    env.push_back(absl::StrCat(name, "=", value != nullptr ? value : ""));
  }
  return env;
}

// Fresh keys for a local cluster unless the config names its own or asks for
// plaintext; serve itself talks to the coordinator with the admin key.
absl::Status SecureServe(config::ClusterConfig* config, const ServeEnvironment& env) {
  RETURN_IF_ERROR(PrepareEphemeralKeys(config, env));
  if (config->security.mode == "none") {
    setenv("SPLITSPEC_SECURITY", "none", 1);
    unsetenv("SPLITSPEC_KEYS");
  } else {
    setenv("SPLITSPEC_KEYS", config->security.keys_dir.c_str(), 1);
    unsetenv("SPLITSPEC_SECURITY");
  }
  return net::ConfigureProcessSecurity(net::kAdmin);
}

absl::Status Serve(const ServeOptions& options, const std::vector<PlannedProcess>& plan) {
  const config::ClusterConfig& config = options.config;
  RETURN_IF_ERROR(CheckLocal(config, plan));
  std::printf("==> decoding with %s (config %s)\n",
              DecodingChoices(config, std::thread::hardware_concurrency()).c_str(),
              config.source.c_str());
  std::vector<std::vector<std::string>> environments;
  for (const PlannedProcess& p : plan) {
    std::filesystem::create_directories(std::filesystem::path(p.log).parent_path());
    environments.push_back(ProcessEnvironment(p));
  }
  Supervisor supervisor(plan, std::move(environments), options.restart, stdout);
  RETURN_IF_ERROR(supervisor.StartAll());
  int drafts = 0;
  for (const PlannedProcess& p : plan) drafts += p.role == "draft";
  const int groups = static_cast<int>(config.target_groups.size());
  const std::string control = config.coordinator.WorkerEndpoint();
  // A worker hung alive (stopped, deadlocked) never exits: once the coordinator
  // declares it dead (no heartbeat for its liveness window), or when it has not
  // registered within --register-timeout of its start (it never heartbeats), it
  // is killed and restarted. From the start: a worker may hang before it ever
  // registers.
  supervisor.SetRegisterTimeout(options.register_timeout);
  supervisor.WatchHeartbeats(
      [control]() -> absl::StatusOr<std::vector<proto::MemberStatus>> {
        absl::StatusOr<proto::StatusReply> status =
            net::FetchCoordinatorStatus(control, absl::Milliseconds(500));
        if (!status.ok()) return status.status();
        return std::vector<proto::MemberStatus>(status->members().begin(),
                                                status->members().end());
      },
      absl::Seconds(1));
  if (absl::Status ready = WaitForMembers(control, groups, drafts, supervisor); !ready.ok()) {
    supervisor.StopAll();
    return ready;
  }
  std::printf("==> cluster ready on %s: %d target group(s), %d draft worker(s); Ctrl-C stops it\n",
              control.c_str(), groups, drafts);
  if (config.coordinator.http != "none")
    std::printf("==> OpenAI-compatible API on http://%s/v1\n", config.coordinator.http.c_str());
  std::fflush(stdout);
  const absl::Status outcome = supervisor.Run(ShutdownRequested());
  if (!outcome.ok()) {
    std::printf("==> stopping the cluster (the reason follows on stderr)\n");
    std::fflush(stdout);
  }
  supervisor.StopAll();
  std::printf("==> stopped\n");
  return outcome;
}

}  // namespace

int RunServeCommand(const CommandArgs& args) {
  const ServeEnvironment env = ServeEnvironment::ForThisBinary();
  absl::StatusOr<ServeOptions> options = ParseServeOptions(args, env);
  if (options.ok() && !options->dry_run) {
    if (absl::Status secured = SecureServe(&options->config, env); !secured.ok()) {
      std::fprintf(stderr, "splitspec serve: %s\n", std::string(secured.message()).c_str());
      return 1;
    }
  }
  absl::StatusOr<std::vector<PlannedProcess>> plan =
      options.ok()
          ? PlanCluster(options->config, env, options->coordinator_flags, options->drafting_flags)
          : absl::StatusOr<std::vector<PlannedProcess>>(options.status());
  if (!plan.ok()) {
    std::fprintf(stderr, "splitspec serve: %s\n", std::string(plan.status().message()).c_str());
    return 2;
  }
  if (options->dry_run) {
    for (const PlannedProcess& p : *plan) std::printf("%s\n", PlannedProcessJson(p).c_str());
    return 0;
  }
  InstallShutdownHandlers();
  absl::Status status = Serve(*options, *plan);
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec serve: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

}  // namespace splitspec::tools

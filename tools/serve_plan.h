// What `splitspec serve` starts: the cluster config with the command-line
// overrides applied, turned into one PlannedProcess per process (coordinator,
// every rank of every target group, every draft worker). `serve` spawns the
// plan; `serve --dry-run` prints it (one JSON object per line), and the
// launchers in deploy/ (ssh, Slurm, Kubernetes) start the same command lines
// elsewhere, so the config has one interpretation.
//
//   ASSIGN_OR_RETURN(ServeOptions options, ParseServeOptions(args,
//   ServeEnvironment::ForThisBinary())); ASSIGN_OR_RETURN(std::vector<PlannedProcess> plan,
//   PlanCluster(options.config, env)); for (const PlannedProcess& p : plan)
//   std::puts(PlannedProcessJson(p).c_str());
//
// Precedence: built-in defaults < the config file < command-line flags. The
// config file is --config FILE, else REPO/deploy/cluster.toml when it exists
// (it holds the defaults), else the built-in defaults. Flags:
//   --control EP      coordinator.control         --advertise EP  coordinator.advertise
//   --http H:P|none   coordinator.http            --model PATH    models.target
//   --draft PATH      models.draft and every pool's draft_model; drafter "model"
//                     unless --drafter is given
//   --drafter NAME    every pool's drafter        --log-dir DIR   cluster.run_dir
//   --targets N       N copies of the config's only target group, named NAME-0..
//   --target-tp N     every group's tp            --threads N     every group's threads
//   --drafts N        the count of the config's only draft pool (0: plain decoding)
//   --draft-placement auto|target|workers   every pool's placement
// A pool of a model-free drafter (lookup, ngram) runs inside every target
// group's leader (placement "auto" or "target": the leader gets --drafter NAME
// and no draft worker is started); model drafters, and pools with placement
// "workers", start count draft workers. --drafter none or --drafts 0: neither,
// plain decoding.
// Relative paths given as flags resolve against the current directory (paths
// in the file resolve against the file's folder).
//
// The coordinator's flags that serve does not set itself (ForwardedCoordinatorFlags:
// --heartbeat-ms, --queue-timeout-ms, --http-max-connections-per-client,
// --metrics-open, ...) are accepted and passed on to splitspec-coordinator
// unchanged; it validates them. --max-restarts and --restart-window-s set
// the supervision policy (tools/restart_policy.h), --register-timeout how long
// a worker may take to register (tools/serve_supervisor.h).
#ifndef SPLITSPEC_TOOLS_SERVE_PLAN_H_
#define SPLITSPEC_TOOLS_SERVE_PLAN_H_

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/cli/cli_args.h"
#include "runtime/config/cluster_config.h"
#include "tools/commands.h"
#include "tools/restart_policy.h"

namespace splitspec::tools {

// Where serve finds things; tests pass their own.
struct ServeEnvironment {
  std::string bin_dir;        // the splitspec-* binaries
  std::string repo_root;      // default config (deploy/cluster.toml) and run_dir (build/cluster)
  std::string default_model;  // for models.target = ""
  static ServeEnvironment ForThisBinary();
};

struct ServeOptions {
  config::ClusterConfig config;  // overrides applied, validated
  bool dry_run = false;
  // The forwarded coordinator flags that were given, as argv words
  // ("--queue-timeout-ms", "5000", "--metrics-open"), in flag-table order.
  std::vector<std::string> coordinator_flags = {};
  RestartPolicy restart = {};
  // --register-timeout: a worker not registered this long after its start is
  // killed and restarted (Supervisor::SetRegisterTimeout); infinite: never.
  absl::Duration register_timeout = absl::Seconds(60);
  // Words passed to every drafting process (draft workers, and target leaders that
  // run a pool's drafter): "--tree", "auto" when serve was given --tree auto (off, the default, is the workers' default too).
  std::vector<std::string> drafting_flags = {};
};

// The coordinator's flags serve accepts and passes on: every flag of
// splitspec-coordinator (coordinator/coordinator_flags.h) except those serve
// derives from the config (--control, --endpoint-file, --http, --model) and
// --api-key (a secret stays off command lines; serve passes the variable
// coordinator.api_key_env names). Help texts say they are passed on.
std::vector<cli::Flag> ForwardedCoordinatorFlags();

// Errors: InvalidArgument naming the flag, or the config's file, line and
// field (see cluster_config.h); NotFound for an unreadable --config.
absl::StatusOr<ServeOptions> ParseServeOptions(const CommandArgs& args,
                                               const ServeEnvironment& env);

struct PlannedProcess {
  std::string name = {};  // unique; also the log file's stem
  std::string role = {};  // "coordinator", "target" or "draft"
  std::string host = {};  // from the config ("localhost" for this machine)
  std::string log = {};   // RUN_DIR/NAME.log
  // Target ranks only.
  std::string group = {};
  int tp_rank = 0;
  int tp_size = 1;
  // Environment variables set for the process (CUDA_VISIBLE_DEVICES), and ones
  // copied from a variable of the launcher's environment (NAME <- $FROM: the
  // API key, which never goes onto a command line).
  std::vector<std::pair<std::string, std::string>> env = {};
  std::vector<std::pair<std::string, std::string>> env_from = {};
  std::vector<std::string> argv = {};  // argv[0]: the binary's absolute path
};

// The processes in start order: coordinator, target ranks (group by group,
// rank 0 first), draft workers; `coordinator_flags` (ServeOptions) end the
// coordinator's argv. The ranks of a tensor-parallel group get --tp-address:
// 127.0.0.1 when the group is on one host, else their host as the config names
// it. Errors: InvalidArgument when two processes would share a name;
// Unimplemented for a coordinator limit other than the default
// (splitspec-coordinator has no flag for it yet); FailedPrecondition, saying
// why, for a group whose ranks span hosts while security.tp_network is not
// "trusted" (its Gloo traffic is plaintext TCP). `drafting_flags` go to every
// draft worker and to target leaders that run a pool's drafter (ServeOptions).
absl::StatusOr<std::vector<PlannedProcess>> PlanCluster(
    const config::ClusterConfig& config, const ServeEnvironment& env,
    const std::vector<std::string>& coordinator_flags = {},
    const std::vector<std::string>& drafting_flags = {});

// What the cluster will decode with, for serve's start-up line: per target
// group its compute threads (threads = 0: all `hardware_threads`), per draft
// pool its drafter, lookahead and k, and where each came from when a flag or a
// --config file set it. k is "auto" because HTTP requests carry no draft length:
// the draft worker's adaptive controller picks k per block and turns
// speculation off for a request while it is predicted to lose.
//   "target: threads 2 (all cores); draft: drafter lookup, k auto, lookahead 2"
std::string DecodingChoices(const config::ClusterConfig& config, unsigned hardware_threads);

// With security.mode "curve" and no security.keys_dir: writes fresh keys for
// every role to RUN_DIR/keys (replacing the last run's), and one of its own
// for each draft worker (draft.d/POOL-I) and each target rank (target.d/NAME,
// NAME its process name), and sets keys_dir there, so that a
// local cluster is authenticated without set-up. Otherwise
// changes nothing. Errors: the files cannot be written.
absl::Status PrepareEphemeralKeys(config::ClusterConfig* config, const ServeEnvironment& env);

// {"name":..,"role":..,"host":..,"log":..,["group":..,"tp_rank":..,"tp_size":..,]
//  "env":{..},"env_from":{..},"argv":[..]} on one line.
std::string PlannedProcessJson(const PlannedProcess& process);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_SERVE_PLAN_H_

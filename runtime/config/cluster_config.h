// The cluster config: which processes make up a splitspec cluster, where they
// run and with what. One TOML file (see deploy/cluster.toml, the default
// config, which spells out every field below with its default) drives
// `splitspec serve`, deploy/local_cluster.sh, deploy/ssh_cluster.sh, the Slurm
// batch script and the Kubernetes ConfigMap.
//
//   ASSIGN_OR_RETURN(ClusterConfig config, LoadClusterConfig("deploy/cluster.toml"));
//   for (const TargetGroupConfig& g : config.target_groups) ...
//   config.target_groups[0].tp = 2;   // e.g. a command-line override
//   SetFieldOrigin(&config, "target_group[0].tp", "--target-tp");
//   RETURN_IF_ERROR(ValidateClusterConfig(config));
//
// File layout (every table and key is optional; defaults in brackets):
//
//   [cluster]
//   run_dir = ""                 # logs go to RUN_DIR/NAME.log on each host [""
//                                # = the launcher's default, build/cluster]
//   [coordinator]
//   host = "localhost"           # where it runs (ssh host for ssh_cluster.sh)
//   control = "tcp://127.0.0.1:5555"   # the endpoint it binds (tcp:// or ipc://)
//   advertise = ""               # the endpoint workers connect to ["" = control];
//                                # required when control binds * or 0.0.0.0
//   http = "127.0.0.1:8000"      # OpenAI-compatible API HOST:PORT, or "none"
//   api_key_env = "SPLITSPEC_API_KEY"  # environment variable holding the API
//                                # key (unset or empty: no authentication)
//   [security]
//   mode = "curve"               # "curve": every ZeroMQ socket is CURVE-encrypted and
//                                # authenticated; "none": plaintext (anyone who reaches
//                                # a port controls the cluster; logged loudly)
//   keys_dir = ""                # the key files of every role (`splitspec keygen`):
//                                # coordinator, target, draft, client, admin .pub/.key
//                                # ["" = serve makes fresh ones in RUN_DIR/keys;
//                                # a multi-host cluster names files every host has]
//   tp_network = "untrusted"     # "trusted": the network between the hosts of a
//                                # multi-host target group is private (its Gloo
//                                # collectives are plaintext TCP; serve refuses
//                                # such a group unless this says "trusted")
//   [coordinator.limits]
//   max_queued_requests = 256    # waiting requests before submissions are refused
//   max_new_tokens = 4096        # upper bound on a request's max_tokens
//   context_length = 8192        # prompt + max_tokens must fit
//   [models]
//   target = ""                  # target GGUF ["" = $SPLITSPEC_MODEL, else
//                                # models/SmolLM2-135M-Instruct.Q4_1.gguf]
//   draft = ""                   # draft GGUF for pools with drafter = "model"
//   [[target_group]]             # one table per group [one group, as below]
//   name = "target"              # unique among groups and pools
//   tp = 1                       # ranks (processes) in the group: 1, 2, 4 or 8
//   devices = ["cpu"]            # ["cpu"] (every rank on CPU) or one "cuda:N"
//                                # per rank (count must equal tp)
//   threads = 0                  # compute threads per rank [0 = the worker's
//                                # default, the host's hardware concurrency]
//   host = "localhost"           # where every rank runs, unless hosts is set
//   hosts = []                   # one host per rank (length tp), e.g. ["n1", "n2"]:
//                                # rank r runs on hosts[r]; [] = every rank on host
//   data_endpoint = "tcp://127.0.0.1:*"  # where its leader serves draft workers
//   kv_cache_memory = ""         # each rank's KV-cache budget: bytes ("256MiB",
//                                # "2GiB") or a percentage ("40%") of the memory
//                                # left after the weights ["" = the worker's
//                                # default: 50% of host RAM, 80% of a GPU's]
//   kv_cache_type = "f16"        # how the ranks' KV caches store K and V: "f16" or
//                                # "q8_0" (--kv-cache-type; q8_0: tp = 1 on the CPU)
//   [[draft_pool]]               # one table per pool [one pool, as below]
//   name = "draft"               # workers are named NAME-0, NAME-1, ...
//   count = 1                    # workers in the pool (0..64); 0: the pool is off
//   drafter = "lookup"           # "ngram", "lookup", "model", "layerskip:L" (L >= 1)
//                                # or "none" (the pool is off: plain decoding)
//   placement = "auto"           # "target": the drafter runs inside every target
//                                # group's leader (model-free drafters only; count
//                                # then only turns it on); "workers": count draft
//                                # worker processes; "auto": "target" for ngram
//                                # and lookup, "workers" for model drafters
//   draft_model = ""             # ["" = models.draft]; needed by drafter "model"
//   vocab_mapping = "auto"       # drafter "model" whose vocabulary differs from the
//                                # target's: "auto", "intersection" or "string"
//                                # (runtime/spec/vocab_mapping.h)
//   k = 4                        # draft tokens per block (1..64)
//   lookahead = 2                # blocks drafted ahead (1 = sequential; 1..64)
//   devices = ["cpu"]            # worker i uses devices[i % len]; "cpu" or "cuda:N"
//   threads = 1                  # compute threads per worker (>= 1)
//   host = "localhost"
//   kv_cache_memory = ""         # each worker's KV-cache budget (drafter "model"),
//                                # as the target group's
//
// Relative paths (run_dir, models.target, models.draft, draft_model) resolve
// against the folder of the config file, not the current directory, so a
// config means the same wherever the launcher runs; deploy/cluster.toml
// therefore names ../models/... . Empty paths stay empty (the launcher's
// default applies).
//
// Validation is strict: an unknown key, a value of the wrong type, a tp not in
// {1, 2, 4, 8}, a GPU device list whose length differs from tp, duplicate
// names, a malformed endpoint, a loopback endpoint in a multi-host config, a
// security.mode other than "curve"/"none" are errors. Every error is
// InvalidArgument "FILE:LINE: FIELD: problem" (FILE alone when the field was
// not in the file; the flag's name when a command-line flag set it). Nothing
// is thrown.
#ifndef SPLITSPEC_RUNTIME_CONFIG_CLUSTER_CONFIG_H_
#define SPLITSPEC_RUNTIME_CONFIG_CLUSTER_CONFIG_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace splitspec::config {

struct CoordinatorLimits {
  int max_queued_requests = 256;
  int max_new_tokens = 4096;
  int context_length = 8192;
  bool operator==(const CoordinatorLimits&) const = default;
};

struct CoordinatorConfig {
  std::string host = "localhost";
  std::string control = "tcp://127.0.0.1:5555";
  std::string advertise;  // "" = control
  std::string http = "127.0.0.1:8000";
  std::string api_key_env = "SPLITSPEC_API_KEY";
  CoordinatorLimits limits;
  // The endpoint workers connect to.
  const std::string& WorkerEndpoint() const { return advertise.empty() ? control : advertise; }
};

struct SecurityConfig {
  std::string mode = "curve";  // "curve" or "none"
  std::string keys_dir;        // "" = ephemeral keys made by the launcher
  // "trusted" or "untrusted": whether the network that carries a multi-host
  // target group's Gloo traffic (plaintext TCP) is private.
  std::string tp_network = "untrusted";
};

struct ModelsConfig {
  std::string target;  // "" = the launcher's default model
  std::string draft;
};

struct TargetGroupConfig {
  std::string name = "target";
  int tp = 1;
  std::vector<std::string> devices = {"cpu"};
  int threads = 0;
  std::string host = "localhost";
  std::vector<std::string> hosts;  // one per rank, or empty: every rank on `host`
  std::string data_endpoint = "tcp://127.0.0.1:*";
  std::string kv_cache_memory;  // --kv-cache-memory of every rank; "" = the default
  std::string kv_cache_type = "f16";  // --kv-cache-type of every rank
  // Where rank `rank` runs: hosts[rank] when hosts is set, else host.
  const std::string& HostOfRank(int rank) const { return hosts.empty() ? host : hosts[rank]; }
  // The device of rank `rank`: devices[rank] for GPUs, "cpu" for ["cpu"].
  const std::string& DeviceOfRank(int rank) const {
    return devices.size() == 1 ? devices[0] : devices[rank];
  }
};

struct DraftPoolConfig {
  std::string name = "draft";
  int count = 1;
  std::string drafter = "lookup";
  std::string draft_model;  // "" = models.draft
  std::string vocab_mapping = "auto";  // "auto", "intersection" or "string" (see above)
  int k = 4;
  int lookahead = 2;
  std::vector<std::string> devices = {"cpu"};
  int threads = 1;
  std::string host = "localhost";
  std::string kv_cache_memory;  // --kv-cache-memory of every worker; "" = the default
  std::string placement = "auto";  // "auto", "target" or "workers" (see above)

  // On (count > 0, drafter not "none") and run by the target leaders themselves.
  bool RunsInTargets() const;
  // The draft worker processes the pool starts: count, or 0 when it runs in the
  // targets or is off.
  int WorkerCount() const;
};

struct ClusterConfig {
  std::string source = "(built-in defaults)";  // the file it came from, for messages
  std::string run_dir;
  CoordinatorConfig coordinator;
  SecurityConfig security;
  ModelsConfig models;
  std::vector<TargetGroupConfig> target_groups = {TargetGroupConfig{}};
  std::vector<DraftPoolConfig> draft_pools = {DraftPoolConfig{}};
  // Field path ("target_group[1].tp") -> where its value came from
  // ("FILE:LINE" or "--flag"); fields absent here came from the defaults.
  std::map<std::string, std::string> origins;
};

// Reads, parses and validates the file at `path`. Errors: NotFound if it
// cannot be read; InvalidArgument as described above.
absl::StatusOr<ClusterConfig> LoadClusterConfig(const std::string& path);

// Parses and validates `text`; `source` names it in messages, relative paths
// resolve against `base_dir`.
absl::StatusOr<ClusterConfig> ParseClusterConfig(absl::string_view text, const std::string& source,
                                                 const std::string& base_dir);

// The checks LoadClusterConfig runs after parsing; run it again after
// changing fields (command-line overrides).
absl::Status ValidateClusterConfig(const ClusterConfig& config);

// Records that `field` was set by `origin` (e.g. "--target-tp"), so that a
// validation error names it.
void SetFieldOrigin(ClusterConfig* config, const std::string& field, const std::string& origin);

// "cpu" or "cuda:N" (N a non-negative integer).
bool IsCpuDevice(const std::string& device);
bool IsCudaDevice(const std::string& device, int* index = nullptr);

}  // namespace splitspec::config

#endif  // SPLITSPEC_RUNTIME_CONFIG_CLUSTER_CONFIG_H_

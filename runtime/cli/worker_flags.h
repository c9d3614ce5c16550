// Command-line flags of the worker binaries (splitspec-draft-worker,
// splitspec-target-worker), and the main() they share.
//
//   int main(int argc, char** argv) {
//     return cli::RunWorkerMain(argc, argv, proto::ROLE_DRAFT_WORKER, ServeDrafts);
//   }
//
// The flags, their defaults and meanings are the table WorkerFlagTable(role)
// (`splitspec-target-worker --help` prints it): every worker takes
// --coordinator, --name, --model, --data-endpoint, --threads, --device,
// --kv-cache-memory; target workers
// also --step-tokens, --block-wait-ms, the tensor-parallel group's --tp-* and
// --drafter (a model-free drafter run by the leader itself, default none);
// draft workers --drafter, --draft, --target-model, --k, --lookahead.
// Security comes from the environment: SPLITSPEC_KEYS=DIR (CURVE with the
// role's keys) or SPLITSPEC_SECURITY=none (net::ConfigureProcessSecurity).
#ifndef SPLITSPEC_RUNTIME_CLI_WORKER_FLAGS_H_
#define SPLITSPEC_RUNTIME_CLI_WORKER_FLAGS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/base/memory_amount.h"
#include "runtime/cli/cli_args.h"
#include "runtime/dist/tp_transport.h"
#include "runtime/model/device.h"
#include "runtime/model/kv_cache.h"
#include "runtime/net/worker_identity.h"

namespace splitspec::cli {

struct WorkerFlags {
  std::string coordinator = "tcp://127.0.0.1:5555";
  net::WorkerIdentity identity;
  model::DeviceSpec device = {};  // --device: where the worker's model runs
  bool cuda_graphs = true;        // target workers: --cuda-graphs on|off
  // --kv-cache-memory; unset: the default share (runtime/model/kv_budget.h).
  std::optional<MemoryAmount> kv_cache_memory;
  // Target workers.
  model::KvCacheType kv_cache_type = model::KvCacheType::kF16;  // --kv-cache-type
  int step_tokens = 512;
  int block_wait_ms = 200;
  int tp_timeout_ms = 30000;                 // bound on each collective of a tensor-parallel group
  net::TpComm tp_comm = net::TpComm::kAuto;  // --tp-comm: transport of the group's collectives
  // --tp-address: the address this rank's Gloo listener and the leader's
  // rendezvous server bind; "" = derived (target::GroupHostFor).
  std::string tp_address;
  // Draft workers; and target workers' --drafter (default "none" there).
  std::string drafter = "ngram";
  std::string draft_path;
  std::string vocab_mapping = "auto";  // draft workers' --vocab-mapping (spec/vocab_mapping.h)
  std::string target_model;
  int k = 4;
  int lookahead = 2;
  bool spec_cache = false;       // draft workers: --spec-cache on|off
  bool cache_guard = true;       // draft workers: --cache-guard on|off
  bool adaptive_window = false;  // draft workers: --adaptive-window on|off
  // Draft workers and a target leader's own drafter: --tree auto|off (tree blocks
  // when the speculation policy finds they pay; off: chains only).
  bool trees = false;
};

// The --tree switch's help text and its value: "auto" -> true, "off" -> false;
// else InvalidArgument naming --tree and the value. serve and generate take it too.
inline constexpr const char* kTreeFlagHelp =
    "draft trees (issue 30): auto = a block is a tree of alternatives when the speculation "
    "policy predicts it commits more per step than the chain (lookup, ngram and CPU model "
    "drafters, to a target that runs trees: CPU, one rank); off = chains only (the default: "
    "on this CPU the rule's trees measured slower than chains, README \"Tree drafts\")";
absl::StatusOr<bool> ParseTreeSwitch(absl::string_view value);

// The flag table of a worker of `role` (ROLE_TARGET_WORKER or ROLE_DRAFT_WORKER).
const FlagTable& WorkerFlagTable(proto::Role role);

// Errors: InvalidArgument naming the flag at fault.
absl::StatusOr<WorkerFlags> ParseWorkerFlags(const std::vector<std::string>& args,
                                             proto::Role role);
absl::StatusOr<WorkerFlags> WorkerFlagsFrom(const CliArgs& args, proto::Role role);

// A worker binary's main(): installs the shutdown signal handlers, parses the
// flags of `role` (--help prints them and returns 0), and runs `serve`, which
// returns when shutdown is requested, the coordinator drains the worker, or it
// fails. Exit status: 0, 2 for a usage error (InvalidArgument), else 1, the
// error printed on stderr as "splitspec-ROLE-worker: message".
int RunWorkerMain(int argc, char** argv, proto::Role role,
                  absl::FunctionRef<absl::Status(WorkerFlags)> serve);

}  // namespace splitspec::cli

#endif  // SPLITSPEC_RUNTIME_CLI_WORKER_FLAGS_H_

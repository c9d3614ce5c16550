// Command-line flags shared by the worker binaries (splitspec-draft-worker,
// splitspec-target-worker):
//
//   --coordinator ENDPOINT   coordinator control endpoint (default tcp://127.0.0.1:5555)
//   --name NAME              worker name (default <role>-<pid>)
//   --model PATH             model file (fingerprinted into the registration)
//   --data-endpoint EP       where this worker serves data-plane traffic
//   --threads N              compute threads (default: hardware concurrency)
//   target workers: --tp-group G --tp-rank R --tp-size S (1, 2, 4, 8),
//                   --tp-timeout-ms N (30000), --step-tokens N (512),
//                   --block-wait-ms N (200)
//   draft workers:  --drafter NAME (ngram), --draft PATH, --target-model PATH,
//                   --k N (4), --lookahead N (2; 1 = sequential)
#ifndef SPLITSPEC_TOOLS_WORKER_FLAGS_H_
#define SPLITSPEC_TOOLS_WORKER_FLAGS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "runtime/net/worker_identity.h"

namespace splitspec::tools {

struct WorkerFlags {
  std::string coordinator = "tcp://127.0.0.1:5555";
  net::WorkerIdentity identity;
  // Target workers.
  int step_tokens = 512;
  int block_wait_ms = 200;
  int tp_timeout_ms = 30000;  // bound on each collective of a tensor-parallel group
  // Draft workers.
  std::string drafter = "ngram";
  std::string draft_path;
  std::string target_model;
  int k = 4;
  int lookahead = 2;
};

// Errors: InvalidArgument naming the flag at fault.
absl::StatusOr<WorkerFlags> ParseWorkerFlags(const std::vector<std::string>& args, proto::Role role);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_WORKER_FLAGS_H_

// Command-line flags shared by the worker binaries (splitspec-draft-worker,
// splitspec-target-worker):
//
//   --coordinator ENDPOINT   coordinator control endpoint (default tcp://127.0.0.1:5555)
//   --name NAME              worker name (default <role>-<pid>)
//   --model PATH             model file (fingerprinted into the registration)
//   --data-endpoint EP       where this worker serves data-plane traffic
//   --threads N              compute threads (default: hardware concurrency)
//   --tp-group G --tp-rank R --tp-size S   (target workers)
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
};

// Errors: InvalidArgument naming the flag at fault.
absl::StatusOr<WorkerFlags> ParseWorkerFlags(const std::vector<std::string>& args, proto::Role role);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_WORKER_FLAGS_H_

// splitspec-target-worker: a target worker — verifies draft blocks (one rank of a TP group).
//
// Thread model: the main thread is the control thread; it owns the control
// DEALER socket to the coordinator (registration, heartbeats, deregistration).
// The data plane (DESIGN.md §2–3) arrives with the pipeline issue and will
// document its threads here.
//
// Flags: see tools/worker_flags.h.
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/base/shutdown.h"
#include "tools/worker_flags.h"
#include "tools/worker_membership_loop.h"

int main(int argc, char** argv) {
  absl::StatusOr<splitspec::tools::WorkerFlags> flags = splitspec::tools::ParseWorkerFlags(
      std::vector<std::string>(argv + 1, argv + argc), splitspec::proto::ROLE_TARGET_WORKER);
  if (!flags.ok()) {
    std::fprintf(stderr, "splitspec-target-worker: %s\n", std::string(flags.status().message()).c_str());
    return 2;
  }
  splitspec::InstallShutdownHandlers();
  absl::Status status = splitspec::tools::RunWorkerMembership(*flags, splitspec::ShutdownRequested());
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec-target-worker: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

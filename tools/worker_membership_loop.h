// The membership part of a worker's control thread: register with the
// coordinator, heartbeat until shutdown is requested, deregister.
#ifndef SPLITSPEC_TOOLS_WORKER_MEMBERSHIP_LOOP_H_
#define SPLITSPEC_TOOLS_WORKER_MEMBERSHIP_LOOP_H_

#include <atomic>

#include "absl/status/status.h"
#include "tools/worker_flags.h"

namespace splitspec::tools {

// Runs until `stop` is true or the control channel breaks (returned as error).
absl::Status RunWorkerMembership(const WorkerFlags& flags, const std::atomic<bool>& stop);

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_WORKER_MEMBERSHIP_LOOP_H_

// Process shutdown on SIGINT/SIGTERM for service mains.
//
//   int main(...) {
//     InstallShutdownHandlers();
//     while (!ShutdownRequested().load()) { ... }
//   }
//
// The handler only sets an atomic flag (async-signal-safe); service loops poll it.
#ifndef SPLITSPEC_RUNTIME_BASE_SHUTDOWN_H_
#define SPLITSPEC_RUNTIME_BASE_SHUTDOWN_H_

#include <atomic>

namespace splitspec {

void InstallShutdownHandlers();
const std::atomic<bool>& ShutdownRequested();

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_SHUTDOWN_H_

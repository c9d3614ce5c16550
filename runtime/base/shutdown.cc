#include "runtime/base/shutdown.h"

#include <csignal>

namespace splitspec {
namespace {

std::atomic<bool> g_shutdown_requested{false};

extern "C" void OnShutdownSignal(int) { g_shutdown_requested.store(true); }

}  // namespace

void InstallShutdownHandlers() {
  struct sigaction action {};
  action.sa_handler = OnShutdownSignal;
  sigemptyset(&action.sa_mask);
  sigaction(SIGINT, &action, nullptr);
  sigaction(SIGTERM, &action, nullptr);
}

const std::atomic<bool>& ShutdownRequested() { return g_shutdown_requested; }

}  // namespace splitspec

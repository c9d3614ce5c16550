// splitspec-coordinator: the cluster's front door and membership authority.
//
// Thread model: one control thread (main) owns the control ROUTER socket and
// the membership table; it receives, handles and replies to every message and
// sweeps liveness several times per heartbeat interval. No other thread
// touches coordinator state. With --http, the OpenAI-compatible front door
// (coordinator/http/front_door.cc) adds its HTTP I/O thread, its parse pool and a
// bridge thread that talks to this coordinator over the control channel like
// any client; they share no state with the control thread.
//
// Security: SPLITSPEC_KEYS=DIR (CURVE: the coordinator's keypair and the
// public keys it authorizes) or SPLITSPEC_SECURITY=none; see
// runtime/net/channel_security.h.
//
// Flags: `splitspec-coordinator --help` (coordinator/coordinator_flags.h, with
// the HTTP front door's from coordinator/http/front_door_flags.h).
#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/coordinator_flags.h"
#include "coordinator/coordinator_service.h"
#include "coordinator/http/front_door.h"
#include "coordinator/http/front_door_flags.h"
#include "runtime/base/logging.h"
#include "runtime/base/shutdown.h"
#include "runtime/base/status_macros.h"
#include "runtime/cli/cli_args.h"
#include "runtime/net/channel_security.h"

namespace {

absl::StatusOr<splitspec::coordinator::CoordinatorOptions> ParseOptions(
    const splitspec::cli::CliArgs& parsed, std::string* endpoint_file) {
  splitspec::coordinator::CoordinatorOptions options;
  options.control_endpoint = parsed.GetString("control", options.control_endpoint);
  *endpoint_file = parsed.GetString("endpoint-file", "");
  ASSIGN_OR_RETURN(int64_t heartbeat_ms, parsed.GetInt<int64_t>("heartbeat-ms", 500));
  ASSIGN_OR_RETURN(int suspect_after, parsed.GetInt<int>("suspect-after", 2));
  ASSIGN_OR_RETURN(int dead_after, parsed.GetInt<int>("dead-after", 5));
  options.membership.heartbeat_interval = absl::Milliseconds(heartbeat_ms);
  options.membership.suspect_after_missed = suspect_after;
  options.membership.dead_after_missed = dead_after;
  ASSIGN_OR_RETURN(int64_t drain_timeout_ms, parsed.GetInt<int64_t>("drain-timeout-ms", 30000));
  if (drain_timeout_ms < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--drain-timeout-ms must be >= 0, got ", drain_timeout_ms));
  }
  options.router.drain_timeout = absl::Milliseconds(drain_timeout_ms);
  ASSIGN_OR_RETURN(int64_t queue_timeout_ms, parsed.GetInt<int64_t>("queue-timeout-ms", 30000));
  if (queue_timeout_ms < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--queue-timeout-ms must be >= 1, got ", queue_timeout_ms));
  }
  options.router.queue_timeout = absl::Milliseconds(queue_timeout_ms);
  return options;
}

absl::Status WriteEndpointFile(const std::string& path, const std::string& endpoint) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp);
    out << endpoint << "\n";
    if (!out) return absl::UnavailableError("cannot write --endpoint-file " + tmp);
  }
  // Rename so a reader never sees a half-written file.
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::UnavailableError("cannot rename " + tmp + " to " + path);
  }
  return absl::OkStatus();
}

absl::Status Serve(const splitspec::cli::CliArgs& args) {
  std::string endpoint_file;
  ASSIGN_OR_RETURN(splitspec::coordinator::CoordinatorOptions options,
                   ParseOptions(args, &endpoint_file));
  // Checked before binding anything; the endpoint is set once it is resolved.
  ASSIGN_OR_RETURN(auto http, splitspec::coordinator::http::FrontDoorOptionsFromFlags(
                                  args, options.control_endpoint));
  RETURN_IF_ERROR(splitspec::net::ConfigureProcessSecurity(splitspec::net::kCoordinator));
  splitspec::InstallShutdownHandlers();
  // From here on every failure is a run-time one (exit status 1), not a usage error.
  auto failed = [](const absl::Status& status) { return absl::UnavailableError(status.message()); };
  auto service = splitspec::coordinator::CoordinatorService::Create(options);
  if (!service.ok()) return failed(service.status());
  SPLITSPEC_LOG(INFO) << "coordinator control endpoint " << (*service)->control_endpoint();
  if (!endpoint_file.empty()) {
    absl::Status written = WriteEndpointFile(endpoint_file, (*service)->control_endpoint());
    if (!written.ok()) return failed(written);
  }
  std::unique_ptr<splitspec::coordinator::http::FrontDoor> front_door;
  if (http.has_value()) {
    http->coordinator_endpoint = (*service)->control_endpoint();
    auto started = splitspec::coordinator::http::FrontDoor::Start(*http);
    if (!started.ok()) return failed(started.status());
    front_door = *std::move(started);
  }
  absl::Status status = (*service)->Run(splitspec::ShutdownRequested());
  return status.ok() ? status : failed(status);
}

}  // namespace

int main(int argc, char** argv) {
  return splitspec::cli::RunMain(argc, argv, splitspec::coordinator::CoordinatorFlagTable(), Serve);
}

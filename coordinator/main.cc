// splitspec-coordinator: the cluster's front door and membership authority.
//
// Thread model: one control thread (main) owns the control ROUTER socket and
// the membership table; it receives, handles and replies to every message and
// sweeps liveness several times per heartbeat interval. No other thread
// touches coordinator state. (The HTTP front door and request routing arrive
// with later issues and will document their threads here.)
//
// Flags: --control ENDPOINT (default tcp://127.0.0.1:5555; "tcp://127.0.0.1:*"
// picks a free port), --endpoint-file PATH (write the bound endpoint there),
// --heartbeat-ms N (500), --suspect-after N (2), --dead-after N (5).
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "coordinator/coordinator_service.h"
#include "runtime/base/logging.h"
#include "runtime/base/shutdown.h"
#include "runtime/base/status_macros.h"
#include "tools/cli_args.h"

namespace {

absl::StatusOr<splitspec::coordinator::CoordinatorOptions> ParseOptions(const std::vector<std::string>& args,
                                                                         std::string* endpoint_file) {
  ASSIGN_OR_RETURN(splitspec::tools::CliArgs parsed,
                   splitspec::tools::CliArgs::Parse(
                       args, {"control", "endpoint-file", "heartbeat-ms", "suspect-after", "dead-after"}));
  splitspec::coordinator::CoordinatorOptions options;
  options.control_endpoint = parsed.GetString("control", options.control_endpoint);
  *endpoint_file = parsed.GetString("endpoint-file", "");
  ASSIGN_OR_RETURN(int64_t heartbeat_ms, parsed.GetInt("heartbeat-ms", 500));
  ASSIGN_OR_RETURN(int64_t suspect_after, parsed.GetInt("suspect-after", 2));
  ASSIGN_OR_RETURN(int64_t dead_after, parsed.GetInt("dead-after", 5));
  options.membership.heartbeat_interval = absl::Milliseconds(heartbeat_ms);
  options.membership.suspect_after_missed = static_cast<int>(suspect_after);
  options.membership.dead_after_missed = static_cast<int>(dead_after);
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

}  // namespace

int main(int argc, char** argv) {
  std::string endpoint_file;
  absl::StatusOr<splitspec::coordinator::CoordinatorOptions> options =
      ParseOptions(std::vector<std::string>(argv + 1, argv + argc), &endpoint_file);
  if (!options.ok()) {
    std::fprintf(stderr, "splitspec-coordinator: %s\n", std::string(options.status().message()).c_str());
    return 2;
  }
  splitspec::InstallShutdownHandlers();
  auto service = splitspec::coordinator::CoordinatorService::Create(*options);
  if (!service.ok()) {
    std::fprintf(stderr, "splitspec-coordinator: %s\n", std::string(service.status().message()).c_str());
    return 1;
  }
  SPLITSPEC_LOG(INFO) << "coordinator control endpoint " << (*service)->control_endpoint();
  if (!endpoint_file.empty()) {
    absl::Status written = WriteEndpointFile(endpoint_file, (*service)->control_endpoint());
    if (!written.ok()) {
      std::fprintf(stderr, "splitspec-coordinator: %s\n", std::string(written.message()).c_str());
      return 1;
    }
  }
  absl::Status status = (*service)->Run(splitspec::ShutdownRequested());
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec-coordinator: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}

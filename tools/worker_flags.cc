#include "tools/worker_flags.h"

#include <unistd.h>

#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "tools/cli_args.h"

namespace splitspec::tools {

absl::StatusOr<WorkerFlags> ParseWorkerFlags(const std::vector<std::string>& args, proto::Role role) {
  ASSIGN_OR_RETURN(CliArgs parsed, CliArgs::Parse(args, {"coordinator", "name", "model", "data-endpoint", "threads",
                                                         "tp-group", "tp-rank", "tp-size"}));
  WorkerFlags flags;
  const char* prefix = role == proto::ROLE_DRAFT_WORKER ? "draft" : "target";
  flags.coordinator = parsed.GetString("coordinator", flags.coordinator);
  net::WorkerIdentity& id = flags.identity;
  id.role = role;
  id.name = parsed.GetString("name", absl::StrCat(prefix, "-", getpid()));
  id.model_path = parsed.GetString("model", "");
  id.data_endpoint = parsed.GetString("data-endpoint", "");
  id.tp_group = parsed.GetString("tp-group", "");
  ASSIGN_OR_RETURN(int64_t threads, parsed.GetInt("threads", std::max(1u, std::thread::hardware_concurrency())));
  ASSIGN_OR_RETURN(int64_t tp_rank, parsed.GetInt("tp-rank", 0));
  ASSIGN_OR_RETURN(int64_t tp_size, parsed.GetInt("tp-size", 1));
  if (threads < 1) return absl::InvalidArgumentError(absl::StrCat("--threads must be >= 1, got ", threads));
  id.threads = static_cast<int>(threads);
  id.tp_rank = static_cast<int>(tp_rank);
  id.tp_size = static_cast<int>(tp_size);
  return flags;
}

}  // namespace splitspec::tools

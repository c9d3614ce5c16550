#include "tools/worker_flags.h"

#include <unistd.h>

#include <set>
#include <thread>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "tools/cli_args.h"

namespace splitspec::tools {

absl::StatusOr<WorkerFlags> ParseWorkerFlags(const std::vector<std::string>& args, proto::Role role) {
  std::set<std::string> known = {"coordinator", "name", "model", "data-endpoint", "threads"};
  if (role == proto::ROLE_TARGET_WORKER) {
    known.insert({"tp-group", "tp-rank", "tp-size", "tp-timeout-ms", "step-tokens", "block-wait-ms"});
  } else {
    known.insert({"drafter", "draft", "target-model", "k", "lookahead"});
  }
  ASSIGN_OR_RETURN(CliArgs parsed, CliArgs::Parse(args, known));
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
  ASSIGN_OR_RETURN(int64_t step_tokens, parsed.GetInt("step-tokens", flags.step_tokens));
  ASSIGN_OR_RETURN(int64_t block_wait_ms, parsed.GetInt("block-wait-ms", flags.block_wait_ms));
  ASSIGN_OR_RETURN(int64_t k, parsed.GetInt("k", flags.k));
  ASSIGN_OR_RETURN(int64_t lookahead, parsed.GetInt("lookahead", flags.lookahead));
  if (step_tokens < 1) return absl::InvalidArgumentError(absl::StrCat("--step-tokens must be >= 1, got ", step_tokens));
  if (block_wait_ms < 1) return absl::InvalidArgumentError(absl::StrCat("--block-wait-ms must be >= 1, got ", block_wait_ms));
  if (k < 1 || k > 64) return absl::InvalidArgumentError(absl::StrCat("--k must be in [1, 64], got ", k));
  if (lookahead < 1) return absl::InvalidArgumentError(absl::StrCat("--lookahead must be >= 1, got ", lookahead));
  flags.step_tokens = static_cast<int>(step_tokens);
  flags.block_wait_ms = static_cast<int>(block_wait_ms);
  flags.k = static_cast<int>(k);
  flags.lookahead = static_cast<int>(lookahead);
  flags.drafter = parsed.GetString("drafter", flags.drafter);
  flags.draft_path = parsed.GetString("draft", "");
  flags.target_model = parsed.GetString("target-model", "");
  ASSIGN_OR_RETURN(int64_t tp_timeout_ms, parsed.GetInt("tp-timeout-ms", flags.tp_timeout_ms));
  if (tp_size != 1 && tp_size != 2 && tp_size != 4 && tp_size != 8) {
    return absl::InvalidArgumentError(absl::StrCat("--tp-size must be 1, 2, 4 or 8, got ", tp_size));
  }
  if (tp_rank < 0 || tp_rank >= tp_size) {
    return absl::InvalidArgumentError(absl::StrCat("--tp-rank must be in [0, ", tp_size, "), got ", tp_rank));
  }
  if (tp_size > 1 && id.tp_group.empty()) {
    return absl::InvalidArgumentError("--tp-group NAME is required with --tp-size > 1 (every rank of a group names it)");
  }
  if (tp_timeout_ms < 1) return absl::InvalidArgumentError(absl::StrCat("--tp-timeout-ms must be >= 1, got ", tp_timeout_ms));
  flags.tp_timeout_ms = static_cast<int>(tp_timeout_ms);
  id.tp_rank = static_cast<int>(tp_rank);
  id.tp_size = static_cast<int>(tp_size);
  return flags;
}

}  // namespace splitspec::tools

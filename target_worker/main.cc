// splitspec-target-worker: the leader of a target group (TP=1 here): verifies
// draft blocks of many requests in batched forward steps.
//
// Thread model: the main thread runs TargetService::Run, which owns the control
// DEALER to the coordinator and the data ROUTER that draft workers connect to,
// and runs every forward step; the model's thread pool (--threads) is used only
// inside those steps. Signals only set the shutdown flag.
//
// Flags: see tools/worker_flags.h; --model PATH is required. Also
// --step-tokens N (token budget per step, 512), --block-wait-ms N (200).
#include <cstdio>
#include <string>
#include <vector>

#include "runtime/base/logging.h"
#include "runtime/base/shutdown.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/transformer.h"
#include "target_worker/target_service.h"
#include "tools/worker_flags.h"

namespace {

absl::Status Run(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(splitspec::tools::WorkerFlags flags,
                   splitspec::tools::ParseWorkerFlags(args, splitspec::proto::ROLE_TARGET_WORKER));
  if (flags.identity.model_path.empty()) return absl::InvalidArgumentError("--model PATH is required");
  ASSIGN_OR_RETURN(auto model, splitspec::model::Transformer::Load(flags.identity.model_path,
                                                                   {.threads = flags.identity.threads}));
  splitspec::target::TargetServiceOptions options;
  options.coordinator_endpoint = flags.coordinator;
  if (!flags.identity.data_endpoint.empty()) options.data_endpoint = flags.identity.data_endpoint;
  options.identity = flags.identity;
  options.engine.step_token_budget = flags.step_tokens;
  options.engine.block_wait = absl::Milliseconds(flags.block_wait_ms);
  ASSIGN_OR_RETURN(auto service, splitspec::target::TargetService::Create(model.get(), options));
  SPLITSPEC_LOG(INFO) << "target worker '" << flags.identity.name << "' serving " << flags.identity.model_path
                      << " on " << service->data_endpoint();
  return service->Run(splitspec::ShutdownRequested());
}

}  // namespace

int main(int argc, char** argv) {
  splitspec::InstallShutdownHandlers();
  absl::Status status = Run(std::vector<std::string>(argv + 1, argv + argc));
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec-target-worker: %s\n", std::string(status.message()).c_str());
    return absl::IsInvalidArgument(status) ? 2 : 1;
  }
  return 0;
}

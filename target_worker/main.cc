// splitspec-target-worker: one rank of a target group. With --tp-size 1 (the
// default) it is the whole group: it verifies draft blocks of many requests in
// batched forward steps. With --tp-size N > 1, N processes started with the
// same --tp-group name and ranks 0..N-1 form a tensor-parallel group through
// the coordinator (target_worker/tp_group_runner.h): rank 0 leads (sockets,
// scheduling, verification), ranks 1..N-1 follow its step plans.
//
// Thread model: the main thread runs the rank's loop: TargetService::Run for a
// leader (it owns the control DEALER to the coordinator and the data ROUTER
// that draft workers connect to, and runs every forward step), or the
// follower's step loop. The model's thread pool (--threads) is used only inside
// forward steps; a group's Gloo collectives run on the calling thread; the
// membership client's heartbeat thread only sends heartbeats. Signals only set
// the shutdown flag.
//
// With --drafter lookup|ngram the leader drafts, in the same loop, for the
// requests the coordinator gives no draft worker (target_worker/local_drafts.h).
//
// Flags: `splitspec-target-worker --help` (the table in runtime/cli/worker_flags.cc);
// --model PATH is required.
#include <atomic>

#include "absl/strings/str_cat.h"
#include "runtime/base/logging.h"
#include "runtime/base/shutdown.h"
#include "runtime/base/status_macros.h"
#include "runtime/cli/worker_flags.h"
#include "runtime/model/device.h"
#include "runtime/model/kv_budget.h"
#include "runtime/model/transformer.h"
#include "runtime/spec/drafter_factory.h"
#include "target_worker/request_setup.h"
#include "target_worker/single_rank_model.h"
#include "target_worker/target_service.h"
#include "target_worker/tp_group_runner.h"

namespace {


// The leader's own drafter (--drafter): null for none; model drafters are refused
// (they run in draft workers, with their own cores and caches).
absl::StatusOr<std::unique_ptr<splitspec::spec::Drafter>> LocalDrafter(
    const splitspec::cli::WorkerFlags& flags) {
  using Kind = splitspec::spec::DrafterSpec::Kind;
  ASSIGN_OR_RETURN(splitspec::spec::DrafterSpec spec,
                   splitspec::spec::ParseDrafterSpec(flags.drafter, ""));
  if (spec.kind == Kind::kNone) return nullptr;
  if (spec.kind != Kind::kLookup && spec.kind != Kind::kNgram) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--drafter ", flags.drafter,
        ": a target worker runs only model-free drafters (lookup, ngram); run model drafters in "
        "draft workers (splitspec-draft-worker)"));
  }
  return splitspec::spec::MakeDrafter(spec, "", nullptr, 0, 1);
}

splitspec::target::TargetServiceOptions ServiceOptions(const splitspec::cli::WorkerFlags& flags,
                                                       splitspec::spec::Drafter* local_drafter) {
  splitspec::target::TargetServiceOptions options;
  options.local_drafter = local_drafter;
  options.coordinator_endpoint = flags.coordinator;
  if (!flags.identity.data_endpoint.empty()) options.data_endpoint = flags.identity.data_endpoint;
  options.identity = flags.identity;
  options.engine.step_token_budget = flags.step_tokens;
  options.engine.block_wait = absl::Milliseconds(flags.block_wait_ms);
  options.local_draft.trees = flags.trees;
  return options;
}

absl::Status RunTensorParallelRank(const splitspec::cli::WorkerFlags& flags,
                                   splitspec::spec::Drafter* local_drafter) {
  splitspec::target::TpRankOptions options;
  options.group = {
      .coordinator_endpoint = flags.coordinator,
      .group = flags.identity.tp_group,
      .rank = flags.identity.tp_rank,
      .size = flags.identity.tp_size,
      .host = !flags.tp_address.empty()
                  ? flags.tp_address
                  : splitspec::target::GroupHostFor(flags.identity.data_endpoint,
                                                    flags.coordinator),
      .timeout = absl::Milliseconds(flags.tp_timeout_ms),
      .device = flags.device,
      .comm = flags.tp_comm};
  options.model_path = flags.identity.model_path;
  options.threads = flags.identity.threads;
  options.kv_cache_memory = flags.kv_cache_memory;
  options.service = ServiceOptions(flags, local_drafter);
  SPLITSPEC_LOG(INFO) << "target worker '" << flags.identity.name << "': rank "
                      << flags.identity.tp_rank << " of tp group '" << flags.identity.tp_group
                      << "' (size " << flags.identity.tp_size << ")";
  const std::atomic<bool>& stop = splitspec::ShutdownRequested();
  return flags.identity.tp_rank == 0 ? splitspec::target::RunGroupLeader(options, stop)
                                     : splitspec::target::RunGroupFollower(options, stop);
}

absl::Status ServeTargets(splitspec::cli::WorkerFlags flags) {
  if (flags.identity.model_path.empty())
    return absl::InvalidArgumentError("--model PATH is required");
  // A missing GPU or a bad ordinal is refused before the model is read; whether the model
  // fits is checked when it loads (Transformer::Load).
  RETURN_IF_ERROR(
      splitspec::model::CheckDeviceExists(flags.device, splitspec::model::SystemDeviceProbe()));
  ASSIGN_OR_RETURN(std::unique_ptr<splitspec::spec::Drafter> local_drafter, LocalDrafter(flags));
  if (local_drafter != nullptr && flags.identity.tp_rank == 0) {
    SPLITSPEC_LOG(INFO) << "target worker '" << flags.identity.name << "' drafts with "
                        << flags.drafter << " for requests without a draft worker";
  }
  if (flags.identity.tp_size > 1) return RunTensorParallelRank(flags, local_drafter.get());
  splitspec::model::TransformerOptions model_options;
  model_options.threads = flags.identity.threads;
  model_options.device = flags.device;
  model_options.memory.step_tokens = flags.step_tokens;
  model_options.cuda_graphs = flags.cuda_graphs;
  model_options.kv_cache_type = flags.kv_cache_type;
  // On a GPU the model joins a one-rank NCCL group (single_rank_model.h).
  ASSIGN_OR_RETURN(
      splitspec::target::SingleRankModel target,
      splitspec::target::LoadSingleRankModel(flags.identity.model_path, model_options));
  const std::unique_ptr<splitspec::model::Transformer>& model = target.model;
  splitspec::target::TargetServiceOptions service_options =
      ServiceOptions(flags, local_drafter.get());
  ASSIGN_OR_RETURN(
      service_options.engine.kv_cache_bytes,
      splitspec::model::StartKvBudget(*model, flags.kv_cache_memory,
                                      absl::StrCat("target worker '", flags.identity.name, "'")));
  // Structured outputs: grammars compile against the model file's tokenizer.
  ASSIGN_OR_RETURN(service_options.engine.grammar_compiler,
                   splitspec::target::GrammarCompilerForModel(flags.identity.model_path, model->config().vocab_size));
  // One rank on a GPU verifies there: the target's probabilities stay on the device.
  if (flags.device.is_cuda()) service_options.verify_device = flags.device.ordinal;
  ASSIGN_OR_RETURN(auto service,
                   splitspec::target::TargetService::Create(model.get(), service_options));
  SPLITSPEC_LOG(INFO) << "target worker '" << flags.identity.name << "' serving "
                      << flags.identity.model_path << " on " << service->data_endpoint()
                      << " (KV cache " << splitspec::model::KvCacheTypeName(flags.kv_cache_type)
                      << ", " << model->NewCache(1)->bytes_per_position() << " bytes per position)";
  return service->Run(splitspec::ShutdownRequested());
}

}  // namespace

int main(int argc, char** argv) {
  return splitspec::cli::RunWorkerMain(argc, argv, splitspec::proto::ROLE_TARGET_WORKER,
                                       ServeTargets);
}

// splitspec-draft-worker: drafts blocks of candidate tokens for the requests
// the coordinator assigns to it and streams them to their target leaders.
//
// Thread model: the main thread runs DraftService::Run, which owns the control
// DEALER to the coordinator and one data DEALER per target leader, and runs
// every draft step; a model drafter's thread pool (--threads) is used only
// inside those steps. Signals only set the shutdown flag. A Drain from the
// coordinator (run-time scale-down) ends Run with OK: exit status 0.
//
// Flags: `splitspec-draft-worker --help` (the table in runtime/cli/worker_flags.cc).
#include <memory>
#include <string>

#include "draft_worker/draft_service.h"
#include "runtime/base/logging.h"
#include "runtime/base/shutdown.h"
#include "runtime/base/status_macros.h"
#include "runtime/cli/worker_flags.h"
#include "runtime/model/device.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/model/kv_budget.h"
#include "runtime/spec/cross_vocab_drafter.h"
#include "runtime/spec/drafter_factory.h"
#include "runtime/spec/model_drafter.h"
#include "runtime/tokenizer/tokenizer_gguf.h"

namespace {

absl::Status ServeDrafts(splitspec::cli::WorkerFlags flags) {
  ASSIGN_OR_RETURN(splitspec::spec::DrafterSpec spec,
                   splitspec::spec::ParseDrafterSpec(flags.drafter, flags.draft_path));
  if (spec.kind == splitspec::spec::DrafterSpec::Kind::kNone) {
    return absl::InvalidArgumentError(
        "a draft worker needs a drafter: --drafter ngram|model|layerskip:L");
  }
  // A bad --device is refused at start-up for every drafter, also those that run on the host
  // (ngram, lookup) and so never touch it.
  RETURN_IF_ERROR(
      splitspec::model::CheckDeviceExists(flags.device, splitspec::model::SystemDeviceProbe()));
  spec.device = flags.device;
  ASSIGN_OR_RETURN(spec.vocab_mapping, splitspec::spec::ParseVocabMapping(flags.vocab_mapping));
  std::unique_ptr<splitspec::spec::Drafter> drafter;
  if (spec.kind == splitspec::spec::DrafterSpec::Kind::kNgram) {
    ASSIGN_OR_RETURN(drafter, splitspec::spec::MakeDrafter(spec, "", nullptr, 0, 1));
  } else {
    if (flags.target_model.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("drafter '", spec.name, "' needs --target-model PATH"));
    }
    ASSIGN_OR_RETURN(auto target_file, splitspec::model::GgufFile::Open(flags.target_model));
    ASSIGN_OR_RETURN(splitspec::model::Tokenizer tokenizer,
                     splitspec::model::LoadTokenizerFromGguf(*target_file));
    ASSIGN_OR_RETURN(drafter,
                     splitspec::spec::MakeDrafter(spec, flags.target_model, &tokenizer,
                                                  tokenizer.vocab_size(), flags.identity.threads));
  }
  // A drafter with a model keeps KV caches: give them their budget.
  auto* cross_drafter = dynamic_cast<splitspec::spec::CrossVocabDrafter*>(drafter.get());
  auto* model_drafter = cross_drafter != nullptr
                            ? &cross_drafter->inner()
                            : dynamic_cast<splitspec::spec::ModelDrafter*>(drafter.get());
  if (model_drafter != nullptr) {
    ASSIGN_OR_RETURN(
        uint64_t kv_cache_bytes,
        splitspec::model::StartKvBudget(model_drafter->draft_model(), flags.kv_cache_memory,
                                        absl::StrCat("draft worker '", flags.identity.name, "'")));
    model_drafter->SetKvBudget(kv_cache_bytes);
  }
  if (flags.identity.model_path.empty()) {
    flags.identity.model_path = spec.kind == splitspec::spec::DrafterSpec::Kind::kModel
                                    ? spec.draft_path
                                    : flags.target_model;
  }
  splitspec::draft::DraftServiceOptions options;
  options.coordinator_endpoint = flags.coordinator;
  options.identity = flags.identity;
  options.engine.default_k = flags.k;
  options.engine.lookahead_blocks = flags.lookahead;
  options.engine.spec_cache = flags.spec_cache;
  options.engine.cache_guard = flags.cache_guard;
  options.engine.adaptive_window = flags.adaptive_window;
  options.engine.trees = flags.trees;
  ASSIGN_OR_RETURN(auto service, splitspec::draft::DraftService::Create(drafter.get(), options));
  SPLITSPEC_LOG(INFO) << "draft worker '" << flags.identity.name << "' drafting with " << spec.name
                      << (cross_drafter != nullptr
                              ? absl::StrCat(" (", cross_drafter->Describe(), ")")
                              : std::string());
  return service->Run(splitspec::ShutdownRequested());
}

}  // namespace

int main(int argc, char** argv) {
  return splitspec::cli::RunWorkerMain(argc, argv, splitspec::proto::ROLE_DRAFT_WORKER,
                                       ServeDrafts);
}

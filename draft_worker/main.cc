// splitspec-draft-worker: drafts blocks of candidate tokens for the requests
// the coordinator assigns to it and streams them to their target leaders.
//
// Thread model: the main thread runs DraftService::Run, which owns the control
// DEALER to the coordinator and one data DEALER per target leader, and runs
// every draft step; a model drafter's thread pool (--threads) is used only
// inside those steps. Signals only set the shutdown flag. A Drain from the
// coordinator (run-time scale-down) ends Run with OK: exit status 0.
//
// Flags: see tools/worker_flags.h, plus --drafter ngram|model|layerskip:L
// (default ngram), --draft PATH (drafter "model"), --target-model PATH (the
// target's GGUF: its tokenizer for the vocabulary check, and the weights of a
// layerskip drafter), --k N (draft tokens per block, 4), --lookahead N (blocks
// in flight per request, 2; 1 = sequential).
#include <cstdio>
#include <string>
#include <vector>

#include "draft_worker/draft_service.h"
#include "runtime/base/logging.h"
#include "runtime/base/shutdown.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "runtime/spec/drafter_factory.h"
#include "tools/worker_flags.h"

namespace {

absl::Status Run(const std::vector<std::string>& args) {
  ASSIGN_OR_RETURN(splitspec::tools::WorkerFlags flags,
                   splitspec::tools::ParseWorkerFlags(args, splitspec::proto::ROLE_DRAFT_WORKER));
  ASSIGN_OR_RETURN(splitspec::spec::DrafterSpec spec, splitspec::spec::ParseDrafterSpec(flags.drafter, flags.draft_path));
  if (spec.kind == splitspec::spec::DrafterSpec::Kind::kNone) {
    return absl::InvalidArgumentError("a draft worker needs a drafter: --drafter ngram|model|layerskip:L");
  }
  std::unique_ptr<splitspec::spec::Drafter> drafter;
  if (spec.kind == splitspec::spec::DrafterSpec::Kind::kNgram) {
    ASSIGN_OR_RETURN(drafter, splitspec::spec::MakeDrafter(spec, "", nullptr, 0, 1));
  } else {
    if (flags.target_model.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("drafter '", spec.name, "' needs --target-model PATH"));
    }
    ASSIGN_OR_RETURN(auto target_file, splitspec::model::GgufFile::Open(flags.target_model));
    ASSIGN_OR_RETURN(splitspec::model::Tokenizer tokenizer, splitspec::model::LoadTokenizerFromGguf(*target_file));
    ASSIGN_OR_RETURN(drafter, splitspec::spec::MakeDrafter(spec, flags.target_model, &tokenizer,
                                                           tokenizer.vocab_size(), flags.identity.threads));
  }
  if (flags.identity.model_path.empty()) {
    flags.identity.model_path = spec.kind == splitspec::spec::DrafterSpec::Kind::kModel ? spec.draft_path : flags.target_model;
  }
  splitspec::draft::DraftServiceOptions options;
  options.coordinator_endpoint = flags.coordinator;
  options.identity = flags.identity;
  options.engine.default_k = flags.k;
  options.engine.lookahead_blocks = flags.lookahead;
  ASSIGN_OR_RETURN(auto service, splitspec::draft::DraftService::Create(drafter.get(), options));
  SPLITSPEC_LOG(INFO) << "draft worker '" << flags.identity.name << "' drafting with " << spec.name;
  return service->Run(splitspec::ShutdownRequested());
}

}  // namespace

int main(int argc, char** argv) {
  splitspec::InstallShutdownHandlers();
  absl::Status status = Run(std::vector<std::string>(argv + 1, argv + argc));
  if (!status.ok()) {
    std::fprintf(stderr, "splitspec-draft-worker: %s\n", std::string(status.message()).c_str());
    return absl::IsInvalidArgument(status) ? 2 : 1;
  }
  return 0;
}

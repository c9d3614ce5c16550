// Turning an Assignment into a TargetRequest: validation of everything the
// coordinator sent, with errors naming the field at fault.
#ifndef SPLITSPEC_TARGET_WORKER_REQUEST_SETUP_H_
#define SPLITSPEC_TARGET_WORKER_REQUEST_SETUP_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "proto/splitspec.pb.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/model/language_model.h"
#include "target_worker/target_request.h"

namespace splitspec::target {

// Errors (InvalidArgument): empty request_id; no committed tokens; prompt_length
// 0 or past the committed tokens; a token outside [0, vocab); committed tokens
// not shorter than the model's context; bad sampling parameters.
// params.max_tokens 0 means defaults.max_new_tokens; stop_token_ids come from
// the assignment (the coordinator adds the model's end-of-sequence id).
absl::StatusOr<std::unique_ptr<TargetRequest>> NewTargetRequest(const proto::Assignment& assignment,
                                                                const model::LanguageModel& model,
                                                                const RequestLimits& defaults);

// The grammar compiler of structured-output requests
// (TargetEngineOptions::grammar_compiler): over the tokenizer of the GGUF at
// `path`, for logits rows of `vocab_size`. Errors name the file.
absl::StatusOr<std::shared_ptr<grammar::GrammarCompiler>> GrammarCompilerForModel(
    const std::string& path, int vocab_size);

}  // namespace splitspec::target

#endif  // SPLITSPEC_TARGET_WORKER_REQUEST_SETUP_H_

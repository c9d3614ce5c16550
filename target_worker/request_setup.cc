#include "target_worker/request_setup.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/net/spec_proto.h"
#include "runtime/tokenizer/tokenizer_gguf.h"

namespace splitspec::target {

namespace {

// Positions a cache may hold past the request's longest committed sequence: a
// draft block verified at its last positions (k <= 64) is fed before the stop
// is known. A cache's max_tokens bounds its doubling growth, so the KV budget
// counts at most this many positions per request.
constexpr int kBlockSlackTokens = 64;

// max_tokens of a cache for a sequence that may commit up to `longest` tokens
// and already holds `committed`.
int CacheTokens(int longest, int committed, int context) {
  return std::min(context, std::max(longest, committed + 1) + kBlockSlackTokens);
}

// The unconditional companion of a guided request: its prompt must be non-empty
// (the front door puts BOS there when the user gave no negative prompt), in the
// vocabulary, and the pair must fit the context.
absl::Status AttachGuidanceCompanion(const proto::Assignment& assignment,
                                     const model::LanguageModel& model, TargetRequest& request) {
  const std::string& id = assignment.request_id();
  const auto& negative = assignment.params().negative_prompt_tokens();
  if (negative.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", id, ": params.negative_prompt_tokens is empty; a guided request (",
        "guidance_scale ", request.params().guidance_scale,
        ") needs its unconditional prompt, at least BOS"));
  }
  const int vocab = model.config().vocab_size;
  for (int i = 0; i < negative.size(); ++i) {
    if (negative[i] < 0 || negative[i] >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("request ", id, ": params.negative_prompt_tokens[", i, "] = ", negative[i],
                       " outside the vocabulary [0, ", vocab, ")"));
    }
  }
  const int companion_length =
      negative.size() + assignment.committed_tokens_size() - request.prompt_length();
  if (companion_length >= model.config().context_length) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", id, ": the unconditional sequence (", companion_length,
        " tokens) does not fit the context length ", model.config().context_length));
  }
  const int longest = negative.size() + request.max_length() - request.prompt_length();
  request.AttachCompanion(
      {negative.begin(), negative.end()},
      model.NewCache(CacheTokens(longest, companion_length, model.config().context_length)));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<TargetRequest>> NewTargetRequest(const proto::Assignment& assignment,
                                                                const model::LanguageModel& model,
                                                                const RequestLimits& defaults) {
  const std::string& id = assignment.request_id();
  if (id.empty()) return absl::InvalidArgumentError("Assignment.request_id is empty");
  const int committed = assignment.committed_tokens_size();
  if (committed == 0)
    return absl::InvalidArgumentError(absl::StrCat("request ", id, ": no committed tokens"));
  const int prompt_length = static_cast<int>(assignment.prompt_length());
  if (prompt_length < 1 || prompt_length > committed) {
    return absl::InvalidArgumentError(absl::StrCat("request ", id, ": prompt_length ",
                                                   prompt_length, " outside [1, ", committed, "]"));
  }
  const int vocab = model.config().vocab_size;
  for (int i = 0; i < committed; ++i) {
    const int32_t token = assignment.committed_tokens(i);
    if (token < 0 || token >= vocab) {
      return absl::InvalidArgumentError(absl::StrCat("request ", id, ": token ", token,
                                                     " at index ", i,
                                                     " outside the vocabulary [0, ", vocab, ")"));
    }
  }
  const int context = model.config().context_length;
  if (committed >= context) {
    return absl::InvalidArgumentError(absl::StrCat(
        "request ", id, ": ", committed, " tokens do not fit the context length ", context));
  }
  ASSIGN_OR_RETURN(spec::SamplingParams params, net::SamplingParamsFromProto(assignment.params()));
  RequestLimits limits = defaults;
  if (assignment.params().max_tokens() > 0)
    limits.max_new_tokens = static_cast<int>(assignment.params().max_tokens());
  limits.context_length = context;
  if (params.guided()) {
    // The companion grows with the committed tokens: a longer negative prompt
    // shortens how far the pair may run.
    const int extra = assignment.params().negative_prompt_tokens_size() - prompt_length;
    if (extra > 0) limits.context_length = context - extra;
  }
  limits.stop_token_ids.assign(assignment.params().stop_token_ids().begin(),
                               assignment.params().stop_token_ids().end());
  const int longest = std::min(prompt_length + limits.max_new_tokens, limits.context_length);
  auto request = std::make_unique<TargetRequest>(
      assignment, std::move(limits), model.NewCache(CacheTokens(longest, committed, context)),
      params, net::VerifyModeFromProto(assignment.verify_mode(), params));
  if (params.guided()) {
    RETURN_IF_ERROR(AttachGuidanceCompanion(assignment, model, *request));
  }
  return request;
}

absl::StatusOr<std::shared_ptr<grammar::GrammarCompiler>> GrammarCompilerForModel(
    const std::string& path, int vocab_size) {
  absl::StatusOr<std::unique_ptr<model::GgufFile>> file = model::GgufFile::Open(path);
  if (!file.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ": ", file.status().message()));
  absl::StatusOr<model::Tokenizer> tokenizer = model::LoadTokenizerFromGguf(**file);
  if (!tokenizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer of ", path, ": ", tokenizer.status().message()));
  }
  absl::StatusOr<std::unique_ptr<grammar::GrammarCompiler>> compiler =
      grammar::GrammarCompiler::Create(*tokenizer, {.vocab_size = vocab_size});
  if (!compiler.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("grammar compiler for ", path, ": ", compiler.status().message()));
  }
  return std::shared_ptr<grammar::GrammarCompiler>(*std::move(compiler));
}

}  // namespace splitspec::target

#include "target_worker/request_setup.h"

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/spec_proto.h"

namespace splitspec::target {

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
  limits.stop_token_ids.assign(assignment.params().stop_token_ids().begin(),
                               assignment.params().stop_token_ids().end());
  return std::make_unique<TargetRequest>(
      assignment, std::move(limits), model.NewCache(), params,
      net::VerifyModeFromProto(assignment.verify_mode(), params));
}

}  // namespace splitspec::target

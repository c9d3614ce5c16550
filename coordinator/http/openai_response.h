// The OpenAI response schema of the front door: completion objects, streamed
// chunks, the model list and the error object, as JSON text; and the mapping
// of coordinator error codes to HTTP statuses.
//
//   CompletionUsage usage{.prompt_tokens = 5, .completion_tokens = 3, .stats = stats};
//   std::string body = CompletionJson({kind, "cmpl-1", created, "smollm2"}, "Hi!", "stop", usage);
//
// usage carries OpenAI's prompt_tokens / completion_tokens / total_tokens plus
// the speculation extension fields drafted_tokens, verified_tokens,
// accepted_tokens, acceptance_rate (accepted / verified, 0 when nothing was
// verified; docs/protocol.md) and steps.
//
// Thread safety: pure functions.
#ifndef SPLITSPEC_COORDINATOR_HTTP_OPENAI_RESPONSE_H_
#define SPLITSPEC_COORDINATOR_HTTP_OPENAI_RESPONSE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "coordinator/http/openai_logprobs.h"
#include "coordinator/http/openai_request.h"
#include "coordinator/http/tool_calls.h"
#include "proto/splitspec.pb.h"

namespace splitspec::coordinator::http {

// What every object of one response shares.
struct ResponseIdentity {
  CompletionRequest::Kind kind = CompletionRequest::kCompletion;
  std::string id;       // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;  // Unix seconds
  std::string model;
};

struct CompletionUsage {
  int prompt_tokens = 0;
  int completion_tokens = 0;
  proto::SpecStats stats;
  // Classifier-free guidance (1 = off): usage then carries a "guidance" object
  // with the scale, the unconditional prompt's tokens and the extra tokens the
  // target fed for guidance (stats.companion_forward_tokens).
  float guidance_scale = 1.0f;
  int unconditional_prompt_tokens = 0;
};

// One choice of a response (n > 1: several, by index).
struct ResponseChoice {
  int index = 0;
  std::string text;
  // The request asked for log probabilities: this choice's (a chunk's: its
  // tokens'), written by openai_logprobs.h; null: "logprobs": null.
  const std::vector<TokenLogprobText>* logprobs = nullptr;
  int text_offset = 0;  // completions: the characters before logprobs' first token
  std::vector<ToolCall> tool_calls;  // chat: the reply's calls (content null when text is empty)
};

// "stop", "length", "cancelled" or "error".
absl::string_view FinishReasonName(proto::FinishReason reason);

// A whole (non-streamed) text_completion or chat.completion object. A chat message with
// `tool_calls` carries them in OpenAI's shape ({"id", "type": "function", "function": {"name",
// "arguments"}}), its content null when `text` is empty.
std::string CompletionJson(const ResponseIdentity& identity, absl::string_view text,
                           absl::string_view finish_reason, const CompletionUsage& usage,
                           absl::Span<const ToolCall> tool_calls = {});

// The whole object of n choices; finish_reasons[i] is choices[i]'s.
std::string CompletionJson(const ResponseIdentity& identity,
                           const std::vector<ResponseChoice>& choices,
                           const std::vector<std::string>& finish_reasons,
                           const CompletionUsage& usage);

// One streamed chunk. Chat chunks carry the role in the first chunk
// (`first`). `finish_reason` and `usage` are set on the last chunk only.
std::string CompletionChunkJson(const ResponseIdentity& identity, absl::string_view text,
                                bool first, std::optional<absl::string_view> finish_reason,
                                const std::optional<CompletionUsage>& usage);
// The same for the choice `choice` (its index, text and logprobs); with n > 1
// choices, `first` is that choice's first chunk and `finish_reason` its last.
std::string CompletionChunkJson(const ResponseIdentity& identity, const ResponseChoice& choice,
                                bool first, std::optional<absl::string_view> finish_reason,
                                const std::optional<CompletionUsage>& usage);

// A streamed chat chunk of choice `choice_index` with one piece of a tool call: delta
// {"tool_calls": [{"index", "id", "type": "function", "function": {"name", "arguments": ""}}]}
// for a call's first piece, {"tool_calls": [{"index", "function": {"arguments": FRAGMENT}}]}
// for a later one (OpenAI's and vLLM's shapes); the role too when `first`.
std::string ToolCallChunkJson(const ResponseIdentity& identity, int choice_index,
                              const ToolCallDelta& piece, bool first);

// The usage-only chunk OpenAI sends last when stream_options.include_usage is
// set: "choices" is empty.
std::string UsageChunkJson(const ResponseIdentity& identity, const CompletionUsage& usage);

// {"object":"list","data":[{"id":model,"object":"model","created":..,"owned_by":"splitspec"}]}
std::string ModelsJson(absl::string_view model, int64_t created);

// OpenAI's error object {"error":{"message","type","param","code"}}; an empty
// `param` is written as null. The type follows the HTTP status
// ("invalid_request_error" for 4xx but 401 / 404 / 429, "server_error" ...).
std::string ErrorJson(int http_status, absl::string_view message, absl::string_view param = "",
                      absl::string_view code = "");

// INVALID_ARGUMENT 400, RESOURCE_EXHAUSTED 429, NOT_FOUND 404, UNAVAILABLE 503,
// anything else 500.
int HttpStatusForError(proto::ErrorCode code);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_OPENAI_RESPONSE_H_

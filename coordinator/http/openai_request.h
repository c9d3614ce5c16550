// The OpenAI request schema of the front door: JSON bodies of
// POST /v1/completions and POST /v1/chat/completions parsed into a
// CompletionRequest, and a CompletionRequest turned into a SubmitRequest.
//
//   ASSIGN_OR_RETURN(CompletionRequest request,
//                    ParseCompletionRequest(body, CompletionRequest::kChat));
//   proto::SubmitRequest submit = MakeSubmitRequest(request, prompt_ids, "req-1", eog_ids);
//
// Nothing in a body is silently ignored. A field this parser does not know is
// refused with OpenAI's "Unrecognized request argument supplied: NAME" (also a
// message's keys beyond role and content, and stream_options' beyond
// include_usage); a field of the other endpoint is refused naming it; a field
// known but not honoured yet (guided_* (vLLM's old names), functions,
// function_call (OpenAI's deprecated names of tools), suffix) is
// refused naming it unless null or its no-op value. Tools (chat): tools,
// tool_choice, parallel_tool_calls, and the messages' tool_calls (assistant),
// tool_call_id (tool) and role "tool", are read into `tools` and
// `message_tools` (chat_tools.h: how they reach the model and come back). Structured outputs are read
// into `grammar`: response_format (chat) {"type": "text" | "json_object" |
// "json_schema", "json_schema": {name, schema, strict (default false),
// description}} and vLLM's structured_outputs {exactly one of json (a schema,
// object or text), regex, choice ([string]), grammar (EBNF)}; the grammar
// itself is compiled by the target (a bad schema comes back by name from there). `user` is accepted and not
// used (OpenAI's end-user tag; it never changes the output).
// Fields read (null means "not given"):
//   model (string), prompt (completions: string, [string] of one, or [int] token
//   ids), messages (chat: [{role, content}] where content is a string, null, or
//   [{type:"text", text}] parts; role "developer" is read as "system"),
//   max_tokens / max_completion_tokens (integer >= 1), temperature (number in
//   [0, 2]), top_p (number in (0, 1]), top_k (integer >= -1; -1 and 0 are off),
//   min_p (number in [0, 1]), seed (int64), stop (string or [string], at most
//   16, none empty), n (integer in [1, 64]: independent choices, choice i seeded
//   with spec::ChoiceSeed(seed, i) = seed + i), stream (bool), stream_options.include_usage (bool),
//   echo (completions: bool; the prompt's text comes back before the completion).
//   presence_penalty, frequency_penalty (numbers in [-2, 2]; output tokens only),
//   repetition_penalty (vLLM's: number in (0, 10], prompt and output tokens),
//   logit_bias (object: token id as a string -> number in [-100, 100]; ids
//   within the vocabulary are checked by the front door).
//   logprobs: chat, a boolean, with top_logprobs (integer in [0, 20], only with
//   logprobs true); completions, an integer in [0, 20] (the alternatives per
//   token; OpenAI allows 5, vLLM up to its max_logprobs, 20 by default, as here),
//   false or null = off (runtime/spec/token_logprobs.h); not with echo (the prompt's
//   own log probabilities are not computed).
//   Refused, never ignored: best_of > 1 (choices are not ranked), echo on chat
//   completions (not a chat parameter).
//   Extension: drafter (string: "none" decodes without speculation, "" or
//   absent the cluster's default; SubmitRequest.drafter).
//   Extension, classifier-free guidance: guidance_scale (number in [0, 100];
//   1 or absent = off), negative_prompt (string: the unconditional prompt; on chat
//   it is sent as one user message), negative_messages (chat: like messages; not
//   with negative_prompt). A negative prompt without a scale other than 1 is
//   refused (it would be silently unused).
//
// Integers: the top-level ones (seed, max_tokens, max_completion_tokens,
// top_k, n, best_of) are read from their JSON text as int64, exactly
// (json_integers.h: protobuf's parser holds numbers as doubles, exact only to
// 2^53); one past int64 is refused naming the field, as is such a field given
// twice. Integral values written as decimals (1.0, 1e3) and token ids are read
// through the double, which is exact within 2^53 (ids are int32).
//
// Errors: InvalidArgument whose message names the field at fault; the field's
// name is also attached to the status (ParamOf), for OpenAI's error "param".
// The body passes CheckJsonText (json_guard.h: strict RFC 8259, valid UTF-8,
// nesting within limits.max_depth) before protobuf's parser sees it; a failure
// gives its InvalidArgument ("malformed JSON body: ..." or "JSON body nests
// deeper than the limit of 64 ...").
//
// Thread safety: pure functions.
#ifndef SPLITSPEC_COORDINATOR_HTTP_OPENAI_REQUEST_H_
#define SPLITSPEC_COORDINATOR_HTTP_OPENAI_REQUEST_H_

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "coordinator/http/chat_tools.h"
#include "coordinator/http/json_guard.h"
#include "proto/splitspec.pb.h"
#include "runtime/grammar/grammar_spec.h"
#include "runtime/tokenizer/chat_template.h"

namespace splitspec::coordinator::http {

struct CompletionRequest {
  enum Kind { kCompletion, kChat };
  Kind kind = kCompletion;
  std::string model;                         // as sent; "" if absent
  std::optional<std::string> prompt_text;    // completions: a text prompt
  std::vector<int32_t> prompt_tokens;        // completions: a token-id prompt
  std::vector<model::ChatMessage> messages;  // chat
  uint32_t max_tokens = 0;                   // 0: the coordinator's default
  float temperature = 1.0f;                  // OpenAI's default
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage
  bool echo = false;           // completions: return the prompt's text before the completion
  std::string drafter;         // extension; "" = cluster default
  float guidance_scale = 1.0f;  // extension: classifier-free guidance, 1 = off
  std::optional<std::string> negative_prompt;         // extension
  std::vector<model::ChatMessage> negative_messages;  // extension, chat
  // Context processors (runtime/spec/logits_pipeline.h); ids ascending, distinct.
  std::vector<std::pair<int32_t, float>> logit_bias;
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  float repetition_penalty = 1.0f;  // vLLM's extension; 1 = off
  // Structured outputs: response_format (json_object, json_schema) or vLLM's
  // structured_outputs (json, regex, choice, grammar). nullopt: unconstrained.
  std::optional<grammar::GrammarSpec> grammar;
  // Chat: tools, tool_choice, parallel_tool_calls; and the messages' tool fields
  // (empty, or index-aligned with `messages`).
  ChatTools tools;
  std::vector<MessageTools> message_tools;
  // Log probabilities: the alternatives per token (chat top_logprobs, completions
  // logprobs=N); nullopt = none.
  std::optional<int> logprobs;
  // Independent choices, each a request of its own at the coordinator.
  int n = 1;
  static constexpr int kMaxChoices = 64;
};

absl::StatusOr<CompletionRequest> ParseCompletionRequest(absl::string_view json,
                                                         CompletionRequest::Kind kind,
                                                         const JsonLimits& limits = {});

// The request's SamplingParams and prompt as a SubmitRequest; with guidance,
// `negative_prompt` is the unconditional prompt (the front door's encoding of
// negative_prompt / negative_messages, or BOS plus the chat template's prefix). `stop_token_ids`
// are the model's end-of-generation ids. The verify mode is left to the
// cluster (greedy at temperature 0, rejection otherwise).
proto::SubmitRequest MakeSubmitRequest(const CompletionRequest& request,
                                       absl::Span<const int32_t> prompt,
                                       const std::string& request_id,
                                       absl::Span<const int32_t> stop_token_ids,
                                       absl::Span<const int32_t> negative_prompt = {});

// The field an InvalidArgument from ParseCompletionRequest names ("" if none).
std::string ParamOf(const absl::Status& status);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_OPENAI_REQUEST_H_

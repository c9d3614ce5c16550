// CompletionResponder: turns the token streams of one HTTP request's choices
// (n >= 1, each a request of its own at the coordinator) into its HTTP
// response: a whole completion object, or server-sent events (OpenAI chunks
// ending with "data: [DONE]"). It detokenizes and applies stop strings per
// choice (completion_text.h), writes log probabilities when asked
// (openai_logprobs.h), fills usage with the speculation stats (summed over the
// choices; the prompt counted once), and records the request's metrics.
//
//   auto responder = std::make_shared<CompletionResponder>(context, &tokenizer, stop);
//   std::vector<std::unique_ptr<GenerationSink>> sinks =
//   CompletionResponder::ChoiceSinks(responder); for (int i = 0; i < n; ++i)
//   bridge.Submit(choice_i, std::move(sinks[i]));
//
// Choices: a whole response lists them by index once every one has finished;
// a stream interleaves their chunks as tokens come, each chunk naming its
// choice's index, each choice's last chunk carrying its finish_reason. A choice
// that fails fails the whole response (the others are cancelled).
// Log probabilities: one entry per token the choice consumed (usage's
// completion_tokens; tokens after a stop string are not), a stream's chunk
// carrying those of the tokens its request's TokenStream brought (some of whose
// text may still be held back for a stop string or an unfinished character).
// An entry missing from the coordinator's stream fails the response (500),
// never leaves it out.
//
// Usage of a stream: in the last chunk (the last choice's finish_reason), or,
// when the client set stream_options.include_usage, in a usage-only chunk
// after it (OpenAI's form).
//
// Streams start (status 200 and headers) with the first text, so a request the
// coordinator refuses still gets its real HTTP status (400, 429 + Retry-After,
// 503) and OpenAI error object. An error after the stream started is sent as a
// `data: {"error": ...}` event followed by [DONE].
//
// Thread safety: its sinks are GenerationSinks: called on the bridge thread only.
#ifndef SPLITSPEC_COORDINATOR_HTTP_COMPLETION_RESPONDER_H_
#define SPLITSPEC_COORDINATOR_HTTP_COMPLETION_RESPONDER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/http/completion_text.h"
#include "coordinator/http/coordinator_bridge.h"
#include "coordinator/http/front_door_metrics.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/openai_logprobs.h"
#include "coordinator/http/openai_response.h"
#include "coordinator/http/tool_call_stream.h"

namespace splitspec::coordinator::http {

struct ResponderContext {
  HttpServer* server = nullptr;  // outlives the responder
  ExchangeId exchange = 0;
  ResponseIdentity identity;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last usage-only chunk
  std::string echo;            // text before each choice's (echo: the prompt), not stop-checked
  int prompt_tokens = 0;
  float guidance_scale = 1.0f;          // 1: not guided
  int unconditional_prompt_tokens = 0;  // guided: the companion's prompt
  int retry_after_seconds = 1;           // for 429 / 503
  // Chat tools: what of the reply is content and what are tool calls (default: all content).
  ToolCallStream tool_calls;
  absl::Time received_at = absl::Now();  // when the HTTP request arrived
  FrontDoorMetrics* metrics = nullptr;   // outlives the responder
  int choices = 1;                       // n: >= 1
  bool logprobs = false;                 // the request asked for log probabilities
};

class CompletionResponder {
 public:
  // REQUIRES: tokenizer, context.server and context.metrics outlive this object.
  CompletionResponder(ResponderContext context, const model::Tokenizer* tokenizer,
                      std::vector<std::string> stop);
  ~CompletionResponder();

  // One sink per choice, in index order, for the bridge; each keeps the
  // responder alive, which goes with the last of them.
  static std::vector<std::unique_ptr<GenerationSink>> ChoiceSinks(
      std::shared_ptr<CompletionResponder> responder);

  // GenerationSink calls of choice `index`.
  bool OnTokens(int index, const proto::TokenStream& stream);
  void OnFinished(int index, const GenerationOutcome& outcome);

 private:
  struct Choice {
    Choice(const model::Tokenizer* tokenizer, std::vector<std::string> stop)
        : text(tokenizer, std::move(stop)) {}
    CompletionText text;
    proto::SpecStats stats;
    std::vector<TokenLogprobText> logprobs;  // whole responses: every consumed token's
    int text_offset = 0;                     // characters before the next entry's token
    bool started = false;                    // its first chunk was sent
    std::optional<std::string> finish_reason;
    ToolCallStream tool_calls;    // this choice's reply: content and tool calls
    std::string content;          // at its end: the reply's content
    std::vector<ToolCall> calls;  // at its end: the reply's tool calls
  };

  void StartStream();
  // A chunk of choice `index`; skipped when it would say nothing.
  void SendChunk(int index, const std::string& text, const std::vector<TokenLogprobText>& entries,
                 std::optional<absl::string_view> finish_reason,
                 const std::optional<CompletionUsage>& usage);
  // Chunks of choice `index`'s tool calls, one piece each, in order.
  void SendToolCallPieces(int index, const std::vector<ToolCallDelta>& pieces);
  void CompleteChoice(int index, absl::string_view finish_reason);
  CompletionUsage Usage() const;
  // Every choice finished: the whole response, or the stream's end.
  void Complete();
  // Records the failure in the metrics, then SendError.
  void Fail(int status, const std::string& message);
  // The error as a whole response, or as a last event if the stream started.
  void SendError(int status, const std::string& message);

  ResponderContext context_;
  const model::Tokenizer* tokenizer_;
  std::vector<Choice> choices_;
  int finished_choices_ = 0;
  bool started_ = false;  // stream headers sent
  bool done_ = false;     // the response is complete
  bool any_tokens_ = false;
  absl::Time last_tokens_at_;
};

// The error response every part of the front door sends: OpenAI's error JSON,
// with Retry-After for 429 and 503; `code` is the error's "code" ("" = null).
HttpResponse ErrorResponse(int status, const std::string& message, const std::string& param = "",
                           int retry_after_seconds = 1, const std::string& code = "");

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_COMPLETION_RESPONDER_H_

// CompletionResponder: turns one request's token stream from the coordinator
// into its HTTP response: a whole completion object, or server-sent events
// (OpenAI chunks ending with "data: [DONE]"). It detokenizes and applies stop
// strings (completion_text.h), fills usage with the speculation stats, and
// records the request's metrics.
//
// Usage of a stream: in the last chunk (with finish_reason), or, when the
// client set stream_options.include_usage, in a usage-only chunk after it
// (OpenAI's form).
//
// Streams start (status 200 and headers) with the first text, so a request the
// coordinator refuses still gets its real HTTP status (400, 429 + Retry-After,
// 503) and OpenAI error object. An error after the stream started is sent as a
// `data: {"error": ...}` event followed by [DONE].
//
// Thread safety: a GenerationSink: called on the bridge thread only.
#ifndef SPLITSPEC_COORDINATOR_HTTP_COMPLETION_RESPONDER_H_
#define SPLITSPEC_COORDINATOR_HTTP_COMPLETION_RESPONDER_H_

#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coordinator/http/completion_text.h"
#include "coordinator/http/coordinator_bridge.h"
#include "coordinator/http/front_door_metrics.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/openai_response.h"
#include "coordinator/http/tool_call_stream.h"

namespace splitspec::coordinator::http {

struct ResponderContext {
  HttpServer* server = nullptr;  // outlives the responder
  ExchangeId exchange = 0;
  ResponseIdentity identity;
  bool stream = false;
  bool include_usage = false;  // stream_options.include_usage: a last usage-only chunk
  std::string echo;            // text before the completion's (echo: the prompt), not stop-checked
  int prompt_tokens = 0;
  float guidance_scale = 1.0f;          // 1: not guided
  int unconditional_prompt_tokens = 0;  // guided: the companion's prompt
  int retry_after_seconds = 1;           // for 429 / 503
  // Chat tools: what of the reply is content and what are tool calls (default: all content).
  ToolCallStream tool_calls;
  absl::Time received_at = absl::Now();  // when the HTTP request arrived
  FrontDoorMetrics* metrics = nullptr;   // outlives the responder
};

class CompletionResponder : public GenerationSink {
 public:
  // REQUIRES: tokenizer, context.server and context.metrics outlive this object.
  CompletionResponder(ResponderContext context, const model::Tokenizer* tokenizer,
                      std::vector<std::string> stop);
  ~CompletionResponder() override;

  bool OnTokens(const std::vector<int32_t>& tokens, const proto::SpecStats& stats) override;
  void OnFinished(const GenerationOutcome& outcome) override;

 private:
  void StartStream();
  void SendText(const std::string& text);
  void Complete(absl::string_view finish_reason);
  // Records the failure in the metrics, then SendError.
  void Fail(int status, const std::string& message);
  // The error as a whole response, or as a last event if the stream started.
  void SendError(int status, const std::string& message);

  ResponderContext context_;
  CompletionText text_;
  proto::SpecStats stats_;
  bool started_ = false;  // stream headers sent
  bool done_ = false;     // the response is complete
  absl::Time last_tokens_at_;
};

// The error response every part of the front door sends: OpenAI's error JSON,
// with Retry-After for 429 and 503; `code` is the error's "code" ("" = null).
HttpResponse ErrorResponse(int status, const std::string& message, const std::string& param = "",
                           int retry_after_seconds = 1, const std::string& code = "");

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_COMPLETION_RESPONDER_H_

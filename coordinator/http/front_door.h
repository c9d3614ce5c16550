// FrontDoor: the coordinator's OpenAI-compatible HTTP API (README "Send a request").
//
//   FrontDoorOptions options;
//   options.http.host = "127.0.0.1";  options.http.port = 8000;
//   options.coordinator_endpoint = service->control_endpoint();
//   options.model_path = "/models/smollm2.gguf";     // the target's GGUF: tokenizer, chat template
//   ASSIGN_OR_RETURN(auto front_door, FrontDoor::Start(options));
//   ...                                                // serves until destroyed
//
// Endpoints:
//   POST /v1/completions        prompt (text or token ids) -> text_completion
//   POST /v1/chat/completions   messages, rendered by the model's chat template
//                               (both: "stream": true -> server-sent events; see
//                               openai_request.h for the parameters)
//   GET  /v1/models             the one served model
//   GET  /health                200 when at least one target worker is alive in
//                               the coordinator's membership table, else 503
//   GET  /metrics               Prometheus text (front_door_metrics.h); behind the API
//                               key when one is set, unless metrics_open (--metrics-open:
//                               a scraper on a private network)
//   POST /admin/drain           run-time scale-down: a proto DrainRequest as JSON
//                               ({"role":"ROLE_DRAFT_WORKER","count":1} or
//                               {"worker_ids":[3]}) -> {"worker_ids":[...],"message":"..."};
//                               the coordinator's refusal -> 400 / 404 / 409
//                               ({"force":true} also removes the last target group)
// With an API key set, /v1/*, /admin/* and /metrics require "Authorization: Bearer KEY"
// (the scheme's case does not matter; else 401); /health stays open for probes.
//
// Limits, enforced before any JSON parser runs (a request cannot freeze the
// front door): the body size (HttpLimits.max_body_bytes: 413), a linear
// strict-JSON check with a nesting limit (json_guard.h, JsonLimits.max_depth
// 64: 400 naming the limit; trailing commas and invalid UTF-8 refused), and
// connection limits, global and per client address (http_server.h: 503 +
// Retry-After). JSON parsing and tokenization run on a bounded JobPool
// (parse_threads threads, max_queued_parses waiting); when it is full the
// request gets 503 + Retry-After. Error messages never echo bytes that are not
// UTF-8 (JsonQuote writes U+FFFD), so every error body is valid JSON.
//
// Why our own HTTP parser and protobuf's JSON rather than cpp-httplib and
// nlohmann-json: the protections above are what keep the front door alive,
// and they live in our code whichever libraries sit under it (cpp-httplib's
// thread-per-connection model would still need the connection limits and the
// off-I/O-thread parsing; nlohmann-json would still need the depth pre-check,
// its recursive parser being the same hazard). Swapping libraries would cost a
// rewrite of tested code for no protection we lack.
//
// Errors are OpenAI error objects: 400 for bad requests (the reason and the
// field), prompts that do not fit the context, and the coordinator's
// INVALID_ARGUMENT; 429 + Retry-After when max_in_flight requests are running
// here or the coordinator's queue is full; 503 + Retry-After when the
// coordinator or its workers are unavailable; 404 / 405 for unknown routes.
// A client that disconnects before its response is complete has its request
// cancelled at the coordinator, which frees its KV on every worker.
//
// Thread model: see front_door.cc. Thread safety: Start and the destructor
// from one thread; the object is otherwise driven by its own threads.
#ifndef SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_H_
#define SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "coordinator/http/completion_responder.h"
#include "coordinator/http/coordinator_bridge.h"
#include "coordinator/http/front_door_metrics.h"
#include "coordinator/http/http_server.h"
#include "coordinator/http/job_pool.h"
#include "coordinator/http/openai_request.h"
#include "coordinator/http/tool_calls.h"
#include "runtime/net/channel_security.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::coordinator::http {

struct FrontDoorOptions {
  HttpServerOptions http;  // default 127.0.0.1:8000
  std::string coordinator_endpoint = "tcp://127.0.0.1:5555";
  std::string model_path;      // required: the target model's GGUF
  std::string model_name;      // --served-model-name; "" : the GGUF file name without .gguf
  std::string api_key;         // "" : no authentication
  int max_in_flight = 256;     // generation requests running here; more get 429
  bool metrics_open = false;   // serve /metrics without the API key
  int parse_threads = 2;       // JobPool threads: JSON parsing, tokenization
  int max_queued_parses = 64;  // requests waiting for a parse thread; more get 503
  int max_json_depth = 64;     // nesting of arrays and objects in a request body
  // --tool-call-parser: how tool calls are read from a reply under tool_choice "auto" (and
  // the call syntax the prompt teaches); nullopt: "auto" is refused (chat_tools.h).
  std::optional<ToolCallFormat> tool_call_parser;
  // --logprobs-mode: the row requests' log probabilities come from
  // (runtime/spec/token_logprobs.h); unspecified = raw.
  proto::LogprobsMode logprobs_mode = proto::LOGPROBS_MODE_RAW;
  BridgeOptions bridge;

  // InvalidArgument naming the field: empty model_path or coordinator_endpoint,
  // max_in_flight, parse_threads, max_queued_parses or max_json_depth < 1,
  // or the HTTP options'.
  absl::Status Validate() const;
};

class FrontDoor : public HttpHandler {
 public:
  // Loads the tokenizer (and chat template, if the model has one) from
  // options.model_path, connects to the coordinator and starts serving.
  // Errors: the options' (InvalidArgument), the GGUF's (naming the file), the
  // bind failure (Unavailable naming the address).
  static absl::StatusOr<std::unique_ptr<FrontDoor>> Start(FrontDoorOptions options);
  // Cancels every open request at the coordinator (their clients get a 503
  // "shutting down" where it can still be written), then stops the threads.
  ~FrontDoor() override;

  int port() const { return server_->port(); }
  const std::string& model_name() const { return model_name_; }

  // HttpHandler (the I/O thread).
  void OnRequest(HttpServer& server, ExchangeId id, HttpRequest request) override;
  void OnExchangeAborted(ExchangeId id) override;
  HttpResponse ProtocolError(int status, const std::string& reason) override;
  std::string RequestId(ExchangeId id) const override { return RequestIdFor(id); }

 private:
  explicit FrontDoor(FrontDoorOptions options) : options_(std::move(options)) {}
  absl::Status LoadModel();
  bool Authorized(const HttpRequest& request) const;
  // Runs `job` on the parse pool; when the pool is full, answers 503 + Retry-After.
  void OffloadOrRefuse(HttpServer& server, ExchangeId id, std::function<void()> job);
  void HandleCompletion(HttpServer& server, ExchangeId id, const HttpRequest& request,
                        CompletionRequest::Kind kind);
  // Submits the request's n choices (n >= 1) to the bridge, each with its
  // ChoiceRequestId and seed, all answered by `responder`.
  void SubmitChoices(proto::SubmitRequest submit, int n,
                     std::shared_ptr<CompletionResponder> responder);
  absl::StatusOr<std::vector<int32_t>> PromptTokens(const CompletionRequest& request) const;
  // Chat tools: plans them (a forced call becomes the request's grammar) and renders the
  // messages' tool fields into plain messages. Errors: PlanTools'.
  absl::StatusOr<ToolPlan> ApplyTools(CompletionRequest& request, std::string* field) const;
  absl::Status CheckFits(const CompletionRequest& request, size_t prompt_tokens) const;
  // Guided requests: the unconditional prompt (negative_prompt / negative_messages
  // encoded like a prompt; absent: BOS, plus the chat template's empty-conversation
  // prefix on chat). Empty when not guided.
  absl::StatusOr<std::vector<int32_t>> NegativePromptTokens(
      const CompletionRequest& request) const;
  // echo: the prompt as the client sent it (a text prompt verbatim, token ids decoded).
  absl::StatusOr<std::string> EchoText(const CompletionRequest& request) const;
  void HandleHealth(HttpServer& server, ExchangeId id);
  void HandleMetrics(HttpServer& server, ExchangeId id);
  void HandleDrain(HttpServer& server, ExchangeId id, const HttpRequest& request);
  void Reply(HttpServer& server, ExchangeId id, HttpResponse response);
  std::string RequestIdFor(ExchangeId id) const;

  const FrontDoorOptions options_;
  std::string model_name_;
  std::optional<model::Tokenizer> tokenizer_;
  std::optional<model::ChatTemplate> chat_template_;
  std::string chat_template_error_;  // why chat is unavailable, if it is
  int context_length_ = 0;
  std::vector<int32_t> end_of_generation_ids_;
  net::UnguessableIds request_ids_;
  int64_t started_unix_ = 0;
  FrontDoorMetrics metrics_;
  std::unique_ptr<JobPool> parse_pool_;
  Mutex parse_mu_;
  // Completions handed to the parse pool and not yet submitted -> whether
  // their client went away meanwhile (then they are never submitted).
  absl::flat_hash_map<ExchangeId, bool> parsing_ ABSL_GUARDED_BY(parse_mu_);
  std::unique_ptr<CoordinatorBridge> bridge_;
  std::unique_ptr<HttpServer> server_;
};

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_FRONT_DOOR_H_

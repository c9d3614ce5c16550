// The coordinator's OpenAI-compatible HTTP front door.
//
// Thread model (fixed, whatever the load):
//   - the HTTP I/O thread (HttpServer) owns every client socket: it accepts,
//     parses HTTP, and calls OnRequest / OnExchangeAborted here. Those handlers
//     never block and never parse JSON: they route, check the key, and answer
//     at once (errors, /v1/models) or hand the work on.
//   - the parse pool (JobPool, bounded): parses the JSON body (after the
//     linear json_guard check), tokenizes, and hands the request to the bridge
//     (completions), or parses a DrainRequest.
//   - the bridge thread (CoordinatorBridge) owns the one ZeroMQ socket to the
//     coordinator: it submits, cancels, asks for status and drains, and runs each
//     request's CompletionResponder, which detokenizes and posts response bytes
//     back to the HttpServer (a mutex-protected outbox + eventfd wakeup).
// Shared state: the bridge's job queue and the server's outbox (each behind
// its own splitspec::Mutex), FrontDoorMetrics (its own mutex); the tokenizer
// and chat template are immutable after Start.
#include "coordinator/http/front_door.h"

#include <unistd.h>

#include "absl/cleanup/cleanup.h"
#include "absl/random/random.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "coordinator/http/completion_responder.h"
#include "coordinator/http/json_guard.h"
#include "coordinator/http/json_writer.h"
#include "coordinator/http/openai_response.h"
#include "google/protobuf/util/json_util.h"
#include "runtime/base/file_path.h"
#include "runtime/base/logging.h"
#include "runtime/base/status_macros.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/model/model_config.h"
#include "runtime/spec/sampling_params.h"
#include "runtime/tokenizer/tokenizer_gguf.h"

namespace splitspec::coordinator::http {
namespace {

int64_t UnixNow() { return absl::ToUnixSeconds(absl::Now()); }

// Compares without an early exit, so the response time does not tell how much
// of a key of the right length matched.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

// The served model id from the file name: "models/smol.gguf" -> "smol".
std::string ModelNameFromPath(const std::string& path) {
  return std::string(absl::StripSuffix(BaseName(path), ".gguf"));
}

}  // namespace

absl::Status FrontDoorOptions::Validate() const {
  if (model_path.empty())
    return absl::InvalidArgumentError("model_path (--model) is required: the target's GGUF");
  if (coordinator_endpoint.empty())
    return absl::InvalidArgumentError("coordinator_endpoint must not be empty");
  if (max_in_flight < 1)
    return absl::InvalidArgumentError(absl::StrCat("max_in_flight ", max_in_flight, " < 1"));
  if (parse_threads < 1)
    return absl::InvalidArgumentError(absl::StrCat("parse_threads ", parse_threads, " < 1"));
  if (max_queued_parses < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_queued_parses ", max_queued_parses, " < 1"));
  }
  if (max_json_depth < 1)
    return absl::InvalidArgumentError(absl::StrCat("max_json_depth ", max_json_depth, " < 1"));
  return http.Validate();
}

absl::StatusOr<std::unique_ptr<FrontDoor>> FrontDoor::Start(FrontDoorOptions options) {
  RETURN_IF_ERROR(options.Validate());
  std::unique_ptr<FrontDoor> front_door(new FrontDoor(std::move(options)));
  RETURN_IF_ERROR(front_door->LoadModel());
  front_door->started_unix_ = UnixNow();
  front_door->parse_pool_ = std::make_unique<JobPool>(front_door->options_.parse_threads,
                                                      front_door->options_.max_queued_parses);
  ASSIGN_OR_RETURN(front_door->bridge_,
                   CoordinatorBridge::Start(front_door->options_.coordinator_endpoint,
                                            front_door->options_.bridge));
  ASSIGN_OR_RETURN(front_door->server_,
                   HttpServer::Start(front_door->options_.http, front_door.get()));
  SPLITSPEC_LOG(INFO) << "http front door on " << front_door->options_.http.host << ":"
                      << front_door->port() << " serving '" << front_door->model_name_ << "'";
  return front_door;
}

FrontDoor::~FrontDoor() {
  if (parse_pool_) parse_pool_->Stop();  // no job submits to the bridge after it stops
  if (bridge_) bridge_->Stop();          // sinks finish while the server still exists
  server_.reset();
  bridge_.reset();
}

absl::Status FrontDoor::LoadModel() {
  const std::string& path = options_.model_path;
  auto file = model::GgufFile::Open(path);
  if (!file.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("--model ", path, ": ", file.status().message()));
  auto tokenizer = model::LoadTokenizerFromGguf(**file);
  if (!tokenizer.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("tokenizer of ", path, ": ", tokenizer.status().message()));
  }
  auto config = model::ReadModelConfig(**file);
  if (!config.ok())
    return absl::InvalidArgumentError(
        absl::StrCat("config of ", path, ": ", config.status().message()));
  context_length_ = config->context_length;
  tokenizer_.emplace(*std::move(tokenizer));
  for (int32_t id = 0; id < tokenizer_->vocab_size(); ++id) {
    if (tokenizer_->IsEndOfGeneration(id)) end_of_generation_ids_.push_back(id);
  }
  // vLLM's default: the model as given on the command line, here the GGUF's
  // stem (general.name is a free-form title, not an id clients can type).
  model_name_ = options_.model_name.empty() ? ModelNameFromPath(path) : options_.model_name;
  const std::string bos =
      tokenizer_->bos_id() >= 0 ? tokenizer_->TokenText(tokenizer_->bos_id()) : "";
  auto chat = model::ChatTemplate::FromSource(tokenizer_->chat_template(), bos);
  if (chat.ok()) {
    chat_template_.emplace(*std::move(chat));
  } else {
    chat_template_error_ =
        absl::StrCat("chat completions are unavailable for this model: ", chat.status().message(),
                     "; use /v1/completions");
  }
  return absl::OkStatus();
}

void FrontDoor::OnRequest(HttpServer& server, ExchangeId id, HttpRequest request) {
  const std::string& path = request.path;
  const bool post = request.method == "POST";
  const bool get = request.method == "GET";
  auto wrong_method = [&](const char* allowed) {
    HttpResponse response =
        ErrorResponse(405, absl::StrCat("method ", request.method, " is not allowed on ", path,
                                        " (use ", allowed, ")"));
    response.headers.push_back({"Allow", allowed});
    Reply(server, id, std::move(response));
  };
  const bool guarded = absl::StartsWith(path, "/v1/") || absl::StartsWith(path, "/admin/") ||
                       (path == "/metrics" && !options_.metrics_open);
  if (guarded && !Authorized(request)) {
    return Reply(server, id,
                 ErrorResponse(401, "missing or invalid API key (send Authorization: Bearer KEY)"));
  }
  if (path == "/v1/completions" || path == "/v1/chat/completions") {
    if (!post) return wrong_method("POST");
    const CompletionRequest::Kind kind =
        path == "/v1/completions" ? CompletionRequest::kCompletion : CompletionRequest::kChat;
    {
      MutexLock lock(&parse_mu_);
      parsing_[id] = false;
    }
    return OffloadOrRefuse(server, id, [this, &server, id, kind, request = std::move(request)] {
      HandleCompletion(server, id, request, kind);
    });
  }
  if (path == "/v1/models") {
    if (!get) return wrong_method("GET");
    return Reply(server, id, HttpResponse::Json(200, ModelsJson(model_name_, started_unix_)));
  }
  if (path == "/health") {
    if (!get) return wrong_method("GET");
    return HandleHealth(server, id);
  }
  if (path == "/metrics") {
    if (!get) return wrong_method("GET");
    return HandleMetrics(server, id);
  }
  if (path == "/admin/drain") {
    if (!post) return wrong_method("POST");
    return OffloadOrRefuse(server, id, [this, &server, id, request = std::move(request)] {
      HandleDrain(server, id, request);
    });
  }
  Reply(server, id, ErrorResponse(404, absl::StrCat("no route for ", request.method, " ", path)));
}

void FrontDoor::OnExchangeAborted(ExchangeId id) {
  {
    MutexLock lock(&parse_mu_);
    if (auto it = parsing_.find(id); it != parsing_.end()) {
      it->second = true;  // not submitted yet: HandleCompletion drops it
      return;
    }
  }
  bridge_->Cancel(RequestIdFor(id));
}

HttpResponse FrontDoor::ProtocolError(int status, const std::string& reason) {
  metrics_.RecordHttpError(status);
  return ErrorResponse(status, reason, "", options_.http.retry_after_seconds);
}

bool FrontDoor::Authorized(const HttpRequest& request) const {
  if (options_.api_key.empty()) return true;
  const std::string* header = request.FindHeader("Authorization");
  // RFC 9110 §11.1: the scheme name is case-insensitive.
  if (header == nullptr || !absl::StartsWithIgnoreCase(*header, "Bearer ")) return false;
  return ConstantTimeEquals(absl::StripLeadingAsciiWhitespace(absl::string_view(*header).substr(7)),
                            options_.api_key);
}

void FrontDoor::OffloadOrRefuse(HttpServer& server, ExchangeId id, std::function<void()> job) {
  if (parse_pool_->TrySubmit(std::move(job))) return;
  {
    MutexLock lock(&parse_mu_);
    parsing_.erase(id);
  }
  metrics_.RecordOutcome(RequestOutcome::kRejected);
  Reply(server, id,
        ErrorResponse(503,
                      absl::StrCat("the server is busy parsing other requests (",
                                   options_.max_queued_parses, " waiting); retry later"),
                      "", options_.http.retry_after_seconds));
}

void FrontDoor::HandleCompletion(HttpServer& server, ExchangeId id, const HttpRequest& http_request,
                                 CompletionRequest::Kind kind) {
  absl::Cleanup forget = [this, id] {
    MutexLock lock(&parse_mu_);
    parsing_.erase(id);
  };
  absl::StatusOr<CompletionRequest> request = ParseCompletionRequest(
      http_request.body, kind, JsonLimits{.max_depth = options_.max_json_depth});
  if (!request.ok()) {
    metrics_.RecordOutcome(RequestOutcome::kRejected);
    return Reply(
        server, id,
        ErrorResponse(400, std::string(request.status().message()), ParamOf(request.status())));
  }
  if (!request->model.empty() && request->model != model_name_) {
    metrics_.RecordOutcome(RequestOutcome::kRejected);
    return Reply(
        server, id,
        ErrorResponse(404,
                      absl::StrCat("The model `", request->model,
                                   "` does not exist or you do not have access to it (this "
                                   "server serves '", model_name_, "')"),
                      "model", options_.http.retry_after_seconds, "model_not_found"));
  }
  if (metrics_.running() >= options_.max_in_flight) {
    metrics_.RecordOutcome(RequestOutcome::kRejected);
    return Reply(
        server, id,
        ErrorResponse(
            429, absl::StrCat("too many requests in flight (limit ", options_.max_in_flight, ")"),
            "", options_.http.retry_after_seconds));
  }
  std::string tools_field;
  absl::StatusOr<ToolPlan> tools = ApplyTools(*request, &tools_field);
  if (!tools.ok()) {
    metrics_.RecordOutcome(RequestOutcome::kRejected);
    return Reply(server, id,
                 ErrorResponse(400, std::string(tools.status().message()), tools_field));
  }
  absl::StatusOr<std::vector<int32_t>> prompt = PromptTokens(*request);
  absl::Status fits = prompt.ok() ? CheckFits(*request, prompt->size()) : prompt.status();
  if (!fits.ok()) {
    metrics_.RecordOutcome(RequestOutcome::kRejected);
    return Reply(server, id, ErrorResponse(400, std::string(fits.message()), ParamOf(fits)));
  }
  for (const auto& [token, bias] : request->logit_bias) {
    if (token >= tokenizer_->vocab_size()) {
      metrics_.RecordOutcome(RequestOutcome::kRejected);
      return Reply(server, id,
                   ErrorResponse(400,
                                 absl::StrCat("'logit_bias' names token ", token,
                                              ", outside the vocabulary [0, ",
                                              tokenizer_->vocab_size(), ")"),
                                 "logit_bias"));
    }
  }
  absl::StatusOr<std::vector<int32_t>> negative = NegativePromptTokens(*request);
  fits = negative.ok() ? (negative->empty() ? absl::OkStatus()
                                            : CheckFits(*request, negative->size()))
                       : negative.status();
  if (!fits.ok()) {
    metrics_.RecordOutcome(RequestOutcome::kRejected);
    const std::string param =
        request->negative_messages.empty() ? "negative_prompt" : "negative_messages";
    return Reply(server, id,
                 ErrorResponse(400, absl::StrCat("unconditional prompt: ", fits.message()), param));
  }
  if (!request->seed) request->seed = absl::Uniform<uint64_t>(absl::BitGen());
  ResponderContext context;
  context.server = &server;
  context.exchange = id;
  context.identity = {
      kind,
      absl::StrCat(kind == CompletionRequest::kChat ? "chatcmpl-" : "cmpl-", RequestIdFor(id)),
      UnixNow(), model_name_};
  context.stream = request->stream;
  if (tools->parse) {
    context.tool_calls = ToolCallStream(*tools, absl::StrCat("call_", RequestIdFor(id), "_"));
  }
  context.include_usage = request->stream && request->include_usage;
  if (request->echo) {
    absl::StatusOr<std::string> echo = EchoText(*request);
    if (!echo.ok()) {
      metrics_.RecordOutcome(RequestOutcome::kRejected);
      return Reply(server, id, ErrorResponse(400, std::string(echo.status().message()), "echo"));
    }
    context.echo = *std::move(echo);
  }
  context.prompt_tokens = static_cast<int>(prompt->size());
  context.guidance_scale = request->guidance_scale;
  context.unconditional_prompt_tokens = static_cast<int>(negative->size());
  context.retry_after_seconds = options_.http.retry_after_seconds;
  context.metrics = &metrics_;
  context.choices = request->n;
  context.logprobs = request->logprobs.has_value();
  // Under parse_mu_: an abort either came before (nothing to submit) or
  // comes after, and its Cancel then follows the Submit at the bridge.
  MutexLock lock(&parse_mu_);
  auto parsing = parsing_.find(id);
  const bool aborted = parsing != parsing_.end() && parsing->second;
  if (parsing != parsing_.end()) parsing_.erase(parsing);
  if (aborted) return metrics_.RecordOutcome(RequestOutcome::kCancelled);
  metrics_.AddPromptTokens(context.prompt_tokens);
  if (!negative->empty()) metrics_.RecordGuided();
  proto::SubmitRequest submit =
      MakeSubmitRequest(*request, *prompt, RequestIdFor(id), end_of_generation_ids_, *negative);
  if (request->logprobs.has_value())
    submit.mutable_params()->set_logprobs_mode(options_.logprobs_mode);
  SubmitChoices(
      std::move(submit), request->n,
      std::make_shared<CompletionResponder>(std::move(context), &*tokenizer_, request->stop));
}

void FrontDoor::SubmitChoices(proto::SubmitRequest submit, int n,
                              std::shared_ptr<CompletionResponder> responder) {
  // n independent requests (the prompt is prefilled for each: the target
  // shares no KV between requests); choice i's seed is ChoiceSeed(seed, i).
  std::vector<std::unique_ptr<GenerationSink>> sinks =
      CompletionResponder::ChoiceSinks(std::move(responder));
  const std::string request_id = submit.request_id();
  const uint64_t seed = submit.params().seed();
  for (int i = 0; i < n; ++i) {
    proto::SubmitRequest choice = submit;
    choice.set_request_id(ChoiceRequestId(request_id, i));
    choice.mutable_params()->set_seed(spec::ChoiceSeed(seed, i));
    bridge_->Submit(std::move(choice), std::move(sinks[i]));
  }
}

absl::StatusOr<ToolPlan> FrontDoor::ApplyTools(CompletionRequest& request,
                                               std::string* field) const {
  if (request.kind != CompletionRequest::kChat) return ToolPlan{};
  ASSIGN_OR_RETURN(ToolPlan plan, PlanTools(request.tools, options_.tool_call_parser, field));
  if (plan.forced) {
    request.grammar = grammar::GrammarSpec::JsonSchema(plan.forced_schema, /*strict=*/true);
  }
  request.messages = RenderToolConversation(
      request.messages, request.message_tools, request.tools, plan,
      chat_template_ ? chat_template_->default_system_prompt() : std::nullopt);
  request.message_tools.clear();
  return plan;
}

absl::StatusOr<std::vector<int32_t>> FrontDoor::PromptTokens(
    const CompletionRequest& request) const {
  if (request.kind == CompletionRequest::kChat) {
    if (!chat_template_) return absl::InvalidArgumentError(chat_template_error_);
    // Only the template's markers become special tokens; message contents stay text.
    ASSIGN_OR_RETURN(std::vector<model::ChatSegment> segments,
                     chat_template_->Render(request.messages, /*add_generation_prompt=*/true));
    return model::EncodeChat(*tokenizer_, segments);
  }
  if (request.prompt_text)
    return tokenizer_->Encode(*request.prompt_text, {.add_special = true, .parse_special = true});
  for (size_t i = 0; i < request.prompt_tokens.size(); ++i) {
    if (request.prompt_tokens[i] >= tokenizer_->vocab_size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("'prompt' token id ", request.prompt_tokens[i], " at index ", i,
                       " is outside the vocabulary [0, ", tokenizer_->vocab_size(), ")"));
    }
  }
  return request.prompt_tokens;
}

absl::StatusOr<std::vector<int32_t>> FrontDoor::NegativePromptTokens(
    const CompletionRequest& request) const {
  if (request.guidance_scale == 1.0f) return std::vector<int32_t>();
  const bool absent = !request.negative_prompt && request.negative_messages.empty();
  std::vector<int32_t> ids;
  if (request.kind == CompletionRequest::kChat) {
    if (!chat_template_) return absl::InvalidArgumentError(chat_template_error_);
    std::vector<model::ChatSegment> segments;
    if (!request.negative_messages.empty()) {
      ASSIGN_OR_RETURN(segments, chat_template_->Render(request.negative_messages,
                                                        /*add_generation_prompt=*/true));
    } else if (request.negative_prompt) {
      const std::vector<model::ChatMessage> messages = {{"user", *request.negative_prompt}};
      ASSIGN_OR_RETURN(segments, chat_template_->Render(messages, /*add_generation_prompt=*/true));
    } else {
      segments = chat_template_->RenderEmptyConversation();
    }
    ids = model::EncodeChat(*tokenizer_, segments);
  } else if (request.negative_prompt) {
    ids = tokenizer_->Encode(*request.negative_prompt,
                             {.add_special = true, .parse_special = true});
  }
  const int32_t bos = tokenizer_->bos_id();
  if (absent && bos >= 0 && (ids.empty() || ids.front() != bos)) ids.insert(ids.begin(), bos);
  if (ids.empty()) {
    return absl::InvalidArgumentError(
        absent ? "the model has no BOS token to stand for an absent negative prompt; give one"
               : "the negative prompt encodes to no tokens");
  }
  return ids;
}

absl::StatusOr<std::string> FrontDoor::EchoText(const CompletionRequest& request) const {
  if (request.prompt_text) return *request.prompt_text;
  return tokenizer_->Decode(request.prompt_tokens);
}

absl::Status FrontDoor::CheckFits(const CompletionRequest& request, size_t prompt_tokens) const {
  if (prompt_tokens == 0) return absl::InvalidArgumentError("the prompt encodes to no tokens");
  const size_t limit = static_cast<size_t>(context_length_);
  if (prompt_tokens >= limit ||
      (request.max_tokens > 0 && prompt_tokens + request.max_tokens > limit)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "this model's maximum context length is ", context_length_, " tokens; the request has ",
        prompt_tokens, " prompt tokens",
        request.max_tokens > 0 ? absl::StrCat(" and asks for ", request.max_tokens, " more") : "",
        " (the prompt must leave room for the completion)"));
  }
  return absl::OkStatus();
}

void FrontDoor::HandleHealth(HttpServer& server, ExchangeId id) {
  bridge_->QueryStatus([this, &server, id](absl::StatusOr<proto::StatusReply> status) {
    if (!status.ok()) {
      return Reply(server, id,
                   ErrorResponse(503, std::string(status.status().message()), "",
                                 options_.http.retry_after_seconds));
    }
    int targets = 0;
    int drafts = 0;
    for (const proto::MemberStatus& member : status->members()) {
      if (member.state() != proto::MEMBER_STATE_ALIVE) continue;
      targets += member.role() == proto::ROLE_TARGET_WORKER;
      drafts += member.role() == proto::ROLE_DRAFT_WORKER;
    }
    if (targets == 0) {
      return Reply(
          server, id,
          ErrorResponse(503, "no target worker is alive", "", options_.http.retry_after_seconds));
    }
    Reply(server, id,
          HttpResponse::Json(200, absl::StrCat(R"({"status":"ok","target_workers_alive":)", targets,
                                               R"(,"draft_workers_alive":)", drafts, "}")));
  });
}

void FrontDoor::HandleMetrics(HttpServer& server, ExchangeId id) {
  bridge_->QueryStatus([this, &server, id](absl::StatusOr<proto::StatusReply> status) {
    const std::string text = metrics_.Render(status.ok() ? &*status : nullptr);
    Reply(server, id, HttpResponse::Text(200, text, "text/plain; version=0.0.4; charset=utf-8"));
  });
}

void FrontDoor::HandleDrain(HttpServer& server, ExchangeId id, const HttpRequest& request) {
  proto::DrainRequest drain;
  absl::Status parsed =
      CheckJsonText(request.body, JsonLimits{.max_depth = options_.max_json_depth});
  if (parsed.ok()) {
    const auto converted = google::protobuf::util::JsonStringToMessage(
        google::protobuf::StringPiece(request.body.data(), request.body.size()), &drain);
    if (!converted.ok()) parsed = absl::InvalidArgumentError(std::string(converted.message()));
  }
  if (!parsed.ok()) {
    return Reply(
        server, id,
        ErrorResponse(
            400, absl::StrCat("malformed drain request: ", std::string(parsed.message()),
                              R"( (expected {"role":"ROLE_DRAFT_WORKER","count":1} or )",
                              R"({"worker_ids":[3]}, optional "reason", "timeout_ms", "force"))")));
  }
  if (drain.reason().empty()) drain.set_reason("POST /admin/drain");
  bridge_->Drain(std::move(drain), [this, &server, id](absl::StatusOr<proto::DrainReply> reply) {
    if (!reply.ok()) {
      // 409: the cluster's state (too few workers, the last target group busy) forbids it now.
      const int status = absl::IsInvalidArgument(reply.status()) ? 400
                         : absl::IsNotFound(reply.status())      ? 404
                         : absl::IsUnavailable(reply.status())   ? 409
                                                                 : 503;
      return Reply(server, id, ErrorResponse(status, std::string(reply.status().message())));
    }
    JsonWriter json;
    json.BeginObject().Key("worker_ids").BeginArray();
    for (uint64_t worker_id : reply->worker_ids()) json.Int(static_cast<int64_t>(worker_id));
    json.EndArray().Key("message").String(reply->message()).EndObject();
    Reply(server, id, HttpResponse::Json(200, json.Take()));
  });
}

void FrontDoor::Reply(HttpServer& server, ExchangeId id, HttpResponse response) {
  if (response.status >= 400) metrics_.RecordHttpError(response.status);
  server.Respond(id, std::move(response));
}

std::string FrontDoor::RequestIdFor(ExchangeId id) const {
  // Unguessable (128 bits): an id seen in one response tells nothing of another's.
  return request_ids_.For(id);
}

}  // namespace splitspec::coordinator::http

#include "coordinator/http/completion_responder.h"

#include "absl/strings/str_cat.h"
#include "coordinator/http/sse.h"
#include "runtime/base/logging.h"

namespace splitspec::coordinator::http {

HttpResponse ErrorResponse(int status, const std::string& message, const std::string& param,
                           int retry_after_seconds, const std::string& code) {
  HttpResponse response = HttpResponse::Json(status, ErrorJson(status, message, param, code));
  if (status == 429 || status == 503)
    response.headers.push_back({"Retry-After", absl::StrCat(retry_after_seconds)});
  if (status == 401) response.headers.push_back({"WWW-Authenticate", "Bearer"});
  return response;
}

CompletionResponder::CompletionResponder(ResponderContext context,
                                         const model::Tokenizer* tokenizer,
                                         std::vector<std::string> stop)
    : context_(std::move(context)),
      text_(tokenizer, std::move(stop)),
      last_tokens_at_(context_.received_at) {
  context_.metrics->AddRunning(1);
}

CompletionResponder::~CompletionResponder() { context_.metrics->AddRunning(-1); }

bool CompletionResponder::OnTokens(const std::vector<int32_t>& tokens,
                                   const proto::SpecStats& stats) {
  if (done_) return false;
  stats_ = stats;
  const int before = text_.tokens();
  std::string delta;
  for (int32_t token : tokens) {
    absl::StatusOr<std::string> piece = text_.Push(token);
    if (!piece.ok()) {
      Fail(500, absl::StrCat("cannot detokenize the model's output: ", piece.status().message()));
      return false;
    }
    delta += *piece;
    if (text_.stopped()) break;
  }
  const absl::Time now = absl::Now();
  context_.metrics->ObserveTokens(text_.tokens() - before,
                                  absl::ToDoubleSeconds(now - last_tokens_at_), before == 0);
  last_tokens_at_ = now;
  delta = context_.tool_calls.Push(delta);
  if (context_.stream) SendText(delta);
  if (text_.stopped()) {
    Complete("stop");
    return false;
  }
  return true;
}

void CompletionResponder::OnFinished(const GenerationOutcome& outcome) {
  if (done_) return;
  stats_ = outcome.stats;
  if (outcome.error_code != proto::ERROR_CODE_UNSPECIFIED) {
    Fail(HttpStatusForError(outcome.error_code), outcome.error_message);
  } else if (outcome.finish_reason == proto::FINISH_REASON_CANCELLED) {
    // Our client went away (the exchange is gone and nothing reaches it), or
    // someone cancelled the request at the coordinator.
    done_ = true;
    context_.metrics->RecordOutcome(RequestOutcome::kCancelled);
    SendError(503, "the request was cancelled");
  } else {
    Complete(FinishReasonName(outcome.finish_reason));
  }
}

void CompletionResponder::StartStream() {
  if (started_) return;
  started_ = true;
  HttpResponse head;
  head.headers = {{"Content-Type", kSseContentType}, {"Cache-Control", "no-cache"}};
  context_.server->BeginStream(context_.exchange, std::move(head));
}

void CompletionResponder::SendText(const std::string& text) {
  if (text.empty() && started_) return;
  const bool first = !started_;
  StartStream();
  context_.server->StreamWrite(
      context_.exchange,
      SseEvent(CompletionChunkJson(context_.identity, first ? context_.echo + text : text, first,
                                   std::nullopt, std::nullopt)));
}

void CompletionResponder::Complete(absl::string_view generation_finish_reason) {
  if (done_) return;
  done_ = true;
  const ToolCallStream::Result reply =
      context_.tool_calls.Finish(text_.Finish(), generation_finish_reason);
  const absl::string_view finish_reason = reply.finish_reason;
  const CompletionUsage usage{context_.prompt_tokens, text_.tokens(), stats_,
                              context_.guidance_scale, context_.unconditional_prompt_tokens};
  context_.metrics->RecordOutcome(finish_reason == "length" ? RequestOutcome::kLength
                                                            : RequestOutcome::kStop);
  context_.metrics->ObserveFinished(absl::ToDoubleSeconds(absl::Now() - context_.received_at),
                                    stats_);
  if (!context_.stream) {
    context_.server->Respond(
        context_.exchange,
        HttpResponse::Json(200, CompletionJson(context_.identity, context_.echo + reply.content,
                                               finish_reason, usage, reply.tool_calls)));
    return;
  }
  bool first = !started_;
  StartStream();
  std::string tail = first ? context_.echo + reply.content_tail : reply.content_tail;
  std::string events;
  if (!reply.tool_calls.empty()) {
    // Content, then each call whole, then the finish chunk (OpenAI's order).
    if (!tail.empty()) {
      events += SseEvent(
          CompletionChunkJson(context_.identity, tail, first, std::nullopt, std::nullopt));
      first = false;
      tail.clear();
    }
    for (size_t i = 0; i < reply.tool_calls.size(); ++i) {
      events += SseEvent(ToolCallChunkJson(context_.identity, static_cast<int>(i),
                                           reply.tool_calls[i], first));
      first = false;
    }
  }
  events += SseEvent(CompletionChunkJson(
      context_.identity, tail, first, finish_reason,
      context_.include_usage ? std::nullopt : std::optional(usage)));
  if (context_.include_usage) events += SseEvent(UsageChunkJson(context_.identity, usage));
  events += SseDone();
  context_.server->StreamWrite(context_.exchange, std::move(events));
  context_.server->EndStream(context_.exchange);
}

void CompletionResponder::Fail(int status, const std::string& message) {
  if (!done_) {
    done_ = true;
    context_.metrics->RecordOutcome(status < 500 ? RequestOutcome::kRejected
                                                 : RequestOutcome::kFailed);
    context_.metrics->ObserveFinished(absl::ToDoubleSeconds(absl::Now() - context_.received_at),
                                      stats_);
  }
  context_.metrics->RecordHttpError(status);
  SendError(status, message);
}

void CompletionResponder::SendError(int status, const std::string& message) {
  if (!started_) {
    context_.server->Respond(context_.exchange,
                             ErrorResponse(status, message, "", context_.retry_after_seconds));
    return;
  }
  std::string events = SseEvent(ErrorJson(status, message));
  events += SseDone();
  context_.server->StreamWrite(context_.exchange, std::move(events));
  context_.server->EndStream(context_.exchange);
}

}  // namespace splitspec::coordinator::http

#include "coordinator/http/completion_responder.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_cat.h"
#include "coordinator/http/sse.h"
#include "runtime/base/logging.h"

namespace splitspec::coordinator::http {
namespace {

// The bridge's sink of one choice: forwards to the shared responder.
class ChoiceSink : public GenerationSink {
 public:
  ChoiceSink(std::shared_ptr<CompletionResponder> responder, int index)
      : responder_(std::move(responder)), index_(index) {}
  bool OnTokens(const proto::TokenStream& stream) override {
    return responder_->OnTokens(index_, stream);
  }
  void OnFinished(const GenerationOutcome& outcome) override {
    responder_->OnFinished(index_, outcome);
  }

 private:
  std::shared_ptr<CompletionResponder> responder_;
  int index_;
};

void AddStats(const proto::SpecStats& add, proto::SpecStats* sum) {
  sum->set_drafted(sum->drafted() + add.drafted());
  sum->set_verified(sum->verified() + add.verified());
  sum->set_accepted(sum->accepted() + add.accepted());
  sum->set_steps(sum->steps() + add.steps());
  sum->set_companion_forward_tokens(sum->companion_forward_tokens() +
                                    add.companion_forward_tokens());
  sum->set_tree_steps(sum->tree_steps() + add.tree_steps());
}

}  // namespace

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
    : context_(std::move(context)), tokenizer_(tokenizer), last_tokens_at_(context_.received_at) {
  for (int i = 0; i < std::max(context_.choices, 1); ++i) {
    choices_.emplace_back(tokenizer, stop);
    choices_.back().tool_calls = context_.tool_calls;  // each choice parses its own reply
    choices_.back().text_offset = CharacterCount(context_.echo);
  }
  context_.metrics->AddRunning(1);
}

CompletionResponder::~CompletionResponder() { context_.metrics->AddRunning(-1); }

std::vector<std::unique_ptr<GenerationSink>> CompletionResponder::ChoiceSinks(
    std::shared_ptr<CompletionResponder> responder) {
  std::vector<std::unique_ptr<GenerationSink>> sinks;
  for (int i = 0; i < static_cast<int>(responder->choices_.size()); ++i)
    sinks.push_back(std::make_unique<ChoiceSink>(responder, i));
  return sinks;
}

bool CompletionResponder::OnTokens(int index, const proto::TokenStream& stream) {
  Choice& choice = choices_[index];
  if (done_ || choice.finish_reason.has_value()) return false;
  choice.stats = stream.stats();
  const int before = choice.text.tokens();
  std::string delta;
  for (int32_t token : stream.tokens()) {
    absl::StatusOr<std::string> piece = choice.text.Push(token);
    if (!piece.ok()) {
      Fail(500, absl::StrCat("cannot detokenize the model's output: ", piece.status().message()));
      return false;
    }
    delta += *piece;
    if (choice.text.stopped()) break;
  }
  const int consumed = choice.text.tokens() - before;
  std::vector<TokenLogprobText> entries;
  if (context_.logprobs) {
    if (stream.logprobs_size() < consumed) {
      Fail(500, absl::StrCat("the log probabilities of ", consumed - stream.logprobs_size(),
                             " of choice ", index,
                             "'s tokens were lost on their way from the "
                             "target worker"));
      return false;
    }
    absl::StatusOr<std::vector<TokenLogprobText>> texts =
        LogprobTexts(*tokenizer_, stream.logprobs(), consumed);
    if (!texts.ok()) {
      Fail(500, absl::StrCat("cannot write the log probabilities: ", texts.status().message()));
      return false;
    }
    entries = *std::move(texts);
  }
  const absl::Time now = absl::Now();
  context_.metrics->ObserveTokens(consumed, absl::ToDoubleSeconds(now - last_tokens_at_),
                                  !any_tokens_);
  any_tokens_ = any_tokens_ || consumed > 0;
  last_tokens_at_ = now;
  const ToolCallStream::Piece piece = choice.tool_calls.Push(delta);
  if (context_.stream) {
    SendChunk(index, piece.content, entries, std::nullopt, std::nullopt);
    SendToolCallPieces(index, piece.calls);
  } else {
    choice.logprobs.insert(choice.logprobs.end(), std::make_move_iterator(entries.begin()),
                           std::make_move_iterator(entries.end()));
  }
  if (choice.text.stopped()) {
    CompleteChoice(index, "stop");
    return false;
  }
  return true;
}

void CompletionResponder::OnFinished(int index, const GenerationOutcome& outcome) {
  Choice& choice = choices_[index];
  if (done_ || choice.finish_reason.has_value()) return;
  choice.stats = outcome.stats;
  if (outcome.error_code != proto::ERROR_CODE_UNSPECIFIED) {
    Fail(HttpStatusForError(outcome.error_code), outcome.error_message);
  } else if (outcome.finish_reason == proto::FINISH_REASON_CANCELLED) {
    // Our client went away (the exchange is gone and nothing reaches it), or
    // someone cancelled the request at the coordinator.
    done_ = true;
    context_.metrics->RecordOutcome(RequestOutcome::kCancelled);
    SendError(503, "the request was cancelled");
  } else {
    CompleteChoice(index, FinishReasonName(outcome.finish_reason));
  }
}

void CompletionResponder::StartStream() {
  if (started_) return;
  started_ = true;
  HttpResponse head;
  head.headers = {{"Content-Type", kSseContentType}, {"Cache-Control", "no-cache"}};
  context_.server->BeginStream(context_.exchange, std::move(head));
}

void CompletionResponder::SendChunk(int index, const std::string& text,
                                    const std::vector<TokenLogprobText>& entries,
                                    std::optional<absl::string_view> finish_reason,
                                    const std::optional<CompletionUsage>& usage) {
  Choice& choice = choices_[index];
  if (text.empty() && entries.empty() && !finish_reason && choice.started) return;
  const bool first = !choice.started;
  choice.started = true;
  StartStream();
  ResponseChoice chunk;
  chunk.index = index;
  chunk.text = first ? context_.echo + text : text;
  if (context_.logprobs) chunk.logprobs = &entries;
  chunk.text_offset = choice.text_offset;
  for (const TokenLogprobText& entry : entries) choice.text_offset += CharacterCount(entry.token);
  context_.server->StreamWrite(
      context_.exchange,
      SseEvent(CompletionChunkJson(context_.identity, chunk, first, finish_reason, usage)));
}

void CompletionResponder::SendToolCallPieces(int index, const std::vector<ToolCallDelta>& pieces) {
  if (pieces.empty()) return;
  Choice& choice = choices_[index];
  StartStream();
  std::string events;
  for (const ToolCallDelta& piece : pieces) {
    events += SseEvent(ToolCallChunkJson(context_.identity, index, piece, !choice.started));
    choice.started = true;
  }
  context_.server->StreamWrite(context_.exchange, std::move(events));
}

CompletionUsage CompletionResponder::Usage() const {
  CompletionUsage usage{
      context_.prompt_tokens, 0, {}, context_.guidance_scale, context_.unconditional_prompt_tokens};
  for (const Choice& choice : choices_) {
    usage.completion_tokens += choice.text.tokens();
    AddStats(choice.stats, &usage.stats);
  }
  return usage;
}

void CompletionResponder::CompleteChoice(int index, absl::string_view generation_finish_reason) {
  Choice& choice = choices_[index];
  ToolCallStream::Result reply =
      choice.tool_calls.Finish(choice.text.Finish(), generation_finish_reason);
  choice.finish_reason = reply.finish_reason;
  choice.content = std::move(reply.content);
  choice.calls = std::move(reply.tool_calls);
  const bool last = ++finished_choices_ == static_cast<int>(choices_.size());
  if (context_.stream) {
    std::string tail = std::move(reply.content_tail);
    if (!reply.call_tail.empty()) {
      // Content, then the calls' last pieces, then the finish chunk (OpenAI's order).
      if (!tail.empty()) SendChunk(index, tail, {}, std::nullopt, std::nullopt);
      tail.clear();
      SendToolCallPieces(index, reply.call_tail);
    }
    SendChunk(index, tail, {}, *choice.finish_reason,
              last && !context_.include_usage ? std::optional(Usage()) : std::nullopt);
  }
  if (last) Complete();
}

void CompletionResponder::Complete() {
  if (done_) return;
  done_ = true;
  const CompletionUsage usage = Usage();
  bool length = false;
  for (const Choice& choice : choices_) length = length || choice.finish_reason == "length";
  context_.metrics->RecordOutcome(length ? RequestOutcome::kLength : RequestOutcome::kStop);
  context_.metrics->ObserveFinished(absl::ToDoubleSeconds(absl::Now() - context_.received_at),
                                    usage.stats);
  if (!context_.stream) {
    std::vector<ResponseChoice> choices;
    std::vector<std::string> finish_reasons;
    for (size_t i = 0; i < choices_.size(); ++i) {
      ResponseChoice choice;
      choice.index = static_cast<int>(i);
      choice.text = context_.echo + choices_[i].content;
      choice.tool_calls = choices_[i].calls;
      if (context_.logprobs) choice.logprobs = &choices_[i].logprobs;
      choice.text_offset = CharacterCount(context_.echo);
      choices.push_back(std::move(choice));
      finish_reasons.push_back(choices_[i].finish_reason.value_or(""));
    }
    context_.server->Respond(
        context_.exchange,
        HttpResponse::Json(200, CompletionJson(context_.identity, choices, finish_reasons, usage)));
    return;
  }
  StartStream();
  std::string events;
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
                                      Usage().stats);
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

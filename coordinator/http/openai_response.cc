#include "coordinator/http/openai_response.h"

#include "coordinator/http/json_writer.h"

namespace splitspec::coordinator::http {
namespace {

bool IsChat(const ResponseIdentity& identity) { return identity.kind == CompletionRequest::kChat; }

void WriteHeader(const ResponseIdentity& identity, absl::string_view object, JsonWriter& w) {
  w.Key("id").String(identity.id);
  w.Key("object").String(object);
  w.Key("created").Int(identity.created);
  w.Key("model").String(identity.model);
}

void WriteUsage(const CompletionUsage& usage, JsonWriter& w) {
  const proto::SpecStats& stats = usage.stats;
  w.BeginObject();
  w.Key("prompt_tokens").Int(usage.prompt_tokens);
  w.Key("completion_tokens").Int(usage.completion_tokens);
  w.Key("total_tokens").Int(usage.prompt_tokens + usage.completion_tokens);
  w.Key("drafted_tokens").Int(static_cast<int64_t>(stats.drafted()));
  w.Key("verified_tokens").Int(static_cast<int64_t>(stats.verified()));
  w.Key("accepted_tokens").Int(static_cast<int64_t>(stats.accepted()));
  w.Key("acceptance_rate")
      .Double(stats.verified() == 0
                  ? 0.0
                  : static_cast<double>(stats.accepted()) / static_cast<double>(stats.verified()));
  w.Key("steps").Int(static_cast<int64_t>(stats.steps()));
  if (usage.guidance_scale != 1.0f) {
    w.Key("guidance").BeginObject();
    w.Key("scale").Double(usage.guidance_scale);
    w.Key("unconditional_prompt_tokens").Int(usage.unconditional_prompt_tokens);
    w.Key("extra_forward_tokens").Int(static_cast<int64_t>(stats.companion_forward_tokens()));
    w.EndObject();
  }
  w.EndObject();
}

void WriteChoiceLogprobs(const ResponseIdentity& identity, const ResponseChoice& choice,
                         JsonWriter& w) {
  w.Key("logprobs");
  if (choice.logprobs == nullptr) {
    w.Null();
  } else {
    WriteLogprobs(identity.kind, *choice.logprobs, choice.text_offset, w);
  }
}

absl::string_view ErrorType(int status) {
  switch (status) {
    case 401:
      return "authentication_error";
    case 404:
      return "not_found_error";
    case 429:
      return "rate_limit_error";
    case 503:
      return "service_unavailable_error";
    default:
      return status < 500 ? "invalid_request_error" : "server_error";
  }
}

// The members of one entry of `tool_calls` (the caller opens and closes the object).
void WriteToolCallMembers(const ToolCall& call, JsonWriter& w) {
  w.Key("id").String(call.id).Key("type").String("function");
  w.Key("function").BeginObject();
  w.Key("name").String(call.name).Key("arguments").String(call.arguments);
  w.EndObject();
}

}  // namespace

absl::string_view FinishReasonName(proto::FinishReason reason) {
  switch (reason) {
    case proto::FINISH_REASON_STOP:
      return "stop";
    case proto::FINISH_REASON_LENGTH:
      return "length";
    case proto::FINISH_REASON_CANCELLED:
      return "cancelled";
    default:
      return "error";
  }
}

std::string CompletionJson(const ResponseIdentity& identity, absl::string_view text,
                           absl::string_view finish_reason, const CompletionUsage& usage,
                           absl::Span<const ToolCall> tool_calls) {
  ResponseChoice choice;
  choice.text = std::string(text);
  choice.tool_calls.assign(tool_calls.begin(), tool_calls.end());
  return CompletionJson(identity, {choice}, {std::string(finish_reason)}, usage);
}

std::string CompletionJson(const ResponseIdentity& identity,
                           const std::vector<ResponseChoice>& choices,
                           const std::vector<std::string>& finish_reasons,
                           const CompletionUsage& usage) {
  JsonWriter w;
  w.BeginObject();
  WriteHeader(identity, IsChat(identity) ? "chat.completion" : "text_completion", w);
  w.Key("choices").BeginArray();
  for (size_t i = 0; i < choices.size(); ++i) {
    const ResponseChoice& choice = choices[i];
    w.BeginObject();
    w.Key("index").Int(choice.index);
    if (IsChat(identity)) {
      w.Key("message").BeginObject().Key("role").String("assistant").Key("content");
      if (choice.text.empty() && !choice.tool_calls.empty()) {
        w.Null();
      } else {
        w.String(choice.text);
      }
      if (!choice.tool_calls.empty()) {
        w.Key("tool_calls").BeginArray();
        for (const ToolCall& call : choice.tool_calls) {
          w.BeginObject();
          WriteToolCallMembers(call, w);
          w.EndObject();
        }
        w.EndArray();
      }
      w.EndObject();
    } else {
      w.Key("text").String(choice.text);
    }
    WriteChoiceLogprobs(identity, choice, w);
    w.Key("finish_reason").String(i < finish_reasons.size() ? finish_reasons[i] : "");
    w.EndObject();
  }
  w.EndArray();
  w.Key("usage");
  WriteUsage(usage, w);
  w.EndObject();
  return w.Take();
}

std::string CompletionChunkJson(const ResponseIdentity& identity, absl::string_view text,
                                bool first, std::optional<absl::string_view> finish_reason,
                                const std::optional<CompletionUsage>& usage) {
  ResponseChoice choice;
  choice.text = std::string(text);
  return CompletionChunkJson(identity, choice, first, finish_reason, usage);
}

std::string CompletionChunkJson(const ResponseIdentity& identity, const ResponseChoice& choice,
                                bool first, std::optional<absl::string_view> finish_reason,
                                const std::optional<CompletionUsage>& usage) {
  JsonWriter w;
  w.BeginObject();
  WriteHeader(identity, IsChat(identity) ? "chat.completion.chunk" : "text_completion", w);
  w.Key("choices").BeginArray().BeginObject();
  w.Key("index").Int(choice.index);
  if (IsChat(identity)) {
    w.Key("delta").BeginObject();
    if (first) w.Key("role").String("assistant");
    if (!choice.text.empty() || !finish_reason) w.Key("content").String(choice.text);
    w.EndObject();
  } else {
    w.Key("text").String(choice.text);
  }
  WriteChoiceLogprobs(identity, choice, w);
  if (finish_reason) {
    w.Key("finish_reason").String(*finish_reason);
  } else {
    w.Key("finish_reason").Null();
  }
  w.EndObject().EndArray();
  if (usage) {
    w.Key("usage");
    WriteUsage(*usage, w);
  }
  w.EndObject();
  return w.Take();
}

std::string ToolCallChunkJson(const ResponseIdentity& identity, int choice_index,
                              const ToolCallDelta& piece, bool first) {
  JsonWriter w;
  w.BeginObject();
  WriteHeader(identity, "chat.completion.chunk", w);
  w.Key("choices").BeginArray().BeginObject();
  w.Key("index").Int(choice_index);
  w.Key("delta").BeginObject();
  if (first) w.Key("role").String("assistant");
  w.Key("tool_calls").BeginArray().BeginObject().Key("index").Int(piece.index);
  if (piece.first()) {
    WriteToolCallMembers({piece.id, piece.name, piece.arguments}, w);
  } else {
    w.Key("function").BeginObject().Key("arguments").String(piece.arguments).EndObject();
  }
  w.EndObject().EndArray();
  w.EndObject();  // delta
  w.Key("logprobs").Null();
  w.Key("finish_reason").Null();
  w.EndObject().EndArray();
  w.EndObject();
  return w.Take();
}

std::string UsageChunkJson(const ResponseIdentity& identity, const CompletionUsage& usage) {
  JsonWriter w;
  w.BeginObject();
  WriteHeader(identity, IsChat(identity) ? "chat.completion.chunk" : "text_completion", w);
  w.Key("choices").BeginArray().EndArray();
  w.Key("usage");
  WriteUsage(usage, w);
  w.EndObject();
  return w.Take();
}

std::string ModelsJson(absl::string_view model, int64_t created) {
  JsonWriter w;
  w.BeginObject().Key("object").String("list").Key("data").BeginArray().BeginObject();
  w.Key("id").String(model).Key("object").String("model").Key("created").Int(created);
  w.Key("owned_by").String("splitspec");
  w.EndObject().EndArray().EndObject();
  return w.Take();
}

std::string ErrorJson(int http_status, absl::string_view message, absl::string_view param,
                      absl::string_view code) {
  JsonWriter w;
  w.BeginObject().Key("error").BeginObject();
  w.Key("message").String(message);
  w.Key("type").String(ErrorType(http_status));
  if (param.empty()) {
    w.Key("param").Null();
  } else {
    w.Key("param").String(param);
  }
  if (code.empty()) {
    w.Key("code").Null();
  } else {
    w.Key("code").String(code);
  }
  w.EndObject().EndObject();
  return w.Take();
}

int HttpStatusForError(proto::ErrorCode code) {
  switch (code) {
    case proto::ERROR_CODE_INVALID_ARGUMENT:
      return 400;
    case proto::ERROR_CODE_RESOURCE_EXHAUSTED:
      return 429;
    case proto::ERROR_CODE_NOT_FOUND:
      return 404;
    case proto::ERROR_CODE_UNAVAILABLE:
      return 503;
    default:
      return 500;
  }
}

}  // namespace splitspec::coordinator::http

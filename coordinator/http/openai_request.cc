#include "coordinator/http/openai_request.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "google/protobuf/struct.pb.h"
#include "coordinator/http/json_integers.h"
#include "google/protobuf/util/json_util.h"
#include "runtime/base/status_macros.h"
#include "runtime/net/spec_proto.h"
#include "runtime/spec/sampling_params.h"

namespace splitspec::coordinator::http {
namespace {

using google::protobuf::ListValue;
using google::protobuf::Struct;
using google::protobuf::Value;

constexpr char kParamPayload[] = "type.splitspec.dev/openai.param";
constexpr double kMaxExactInteger = 9007199254740992.0;  // 2^53
constexpr int kMaxStopStrings = 16;

absl::Status FieldError(absl::string_view field, absl::string_view message) {
  absl::Status status = absl::InvalidArgumentError(absl::StrCat("'", field, "' ", message));
  status.SetPayload(kParamPayload, absl::Cord(field));
  return status;
}

// OpenAI's answer to a field it does not know.
absl::Status UnrecognizedField(absl::string_view field) {
  absl::Status status =
      absl::InvalidArgumentError(absl::StrCat("Unrecognized request argument supplied: ", field));
  status.SetPayload(kParamPayload, absl::Cord(field));
  return status;
}

absl::string_view KindName(const Value& value) {
  switch (value.kind_case()) {
    case Value::kNumberValue:
      return "a number";
    case Value::kStringValue:
      return "a string";
    case Value::kBoolValue:
      return "a boolean";
    case Value::kStructValue:
      return "an object";
    case Value::kListValue:
      return "an array";
    default:
      return "null";
  }
}

absl::Status WrongType(absl::string_view field, absl::string_view expected, const Value& value) {
  return FieldError(field, absl::StrCat("must be ", expected, ", got ", KindName(value)));
}

// The field's value, or nullptr when absent or null.
const Value* Find(const Struct& object, const std::string& name) {
  auto it = object.fields().find(name);
  if (it == object.fields().end() || it->second.kind_case() == Value::kNullValue) return nullptr;
  return &it->second;
}

// An integer from its double: exact for integral values within 2^53 (a token
// id; a top-level field written 1.0 or 1e3).
absl::StatusOr<int64_t> AsInteger(absl::string_view field, const Value& value) {
  if (value.kind_case() != Value::kNumberValue) return WrongType(field, "an integer", value);
  const double number = value.number_value();
  if (std::floor(number) != number || std::fabs(number) > kMaxExactInteger) {
    return FieldError(field, absl::StrCat("must be an integer, got ", number));
  }
  return static_cast<int64_t>(number);
}

// The integer member `field` of the body: from its literal in the JSON text,
// exact over all of int64 (the double protobuf made of it is exact only to
// 2^53); written as a decimal (1.0, 1e3), through AsInteger.
absl::StatusOr<int64_t> ReadInteger(const JsonMemberIntegers& integers, const std::string& field,
                                    const Value& value) {
  if (value.kind_case() != Value::kNumberValue) return WrongType(field, "an integer", value);
  const std::optional<absl::string_view> literal = integers.Find(field);
  if (!literal) return AsInteger(field, value);
  int64_t exact = 0;
  if (!absl::SimpleAtoi(*literal, &exact)) {
    return FieldError(field,
                      absl::StrCat("is out of range: ", *literal,
                                   " is not in [-9223372036854775808, 9223372036854775807]"));
  }
  return exact;
}

// Reads an optional number field into *out, checking [low, high] (open at low when `low_open`).
absl::Status ReadNumber(const Struct& body, const std::string& field, double low, double high,
                        bool low_open, float* out) {
  const Value* value = Find(body, field);
  if (value == nullptr) return absl::OkStatus();
  if (value->kind_case() != Value::kNumberValue) return WrongType(field, "a number", *value);
  const double number = value->number_value();
  if (!(low_open ? number > low : number >= low) || number > high) {
    return FieldError(field, absl::StrCat("must be in ", low_open ? "(" : "[", low, ", ", high,
                                          "], got ", number));
  }
  *out = static_cast<float>(number);
  return absl::OkStatus();
}

absl::StatusOr<std::string> AsString(absl::string_view field, const Value& value) {
  if (value.kind_case() != Value::kStringValue) return WrongType(field, "a string", value);
  return value.string_value();
}

// Which endpoints take a top-level field.
enum Endpoints : uint8_t { kCompletionsOnly = 1, kChatOnly = 2, kBoth = 3 };

// Every top-level field the parser knows. A field not listed is refused as
// unrecognized (OpenAI's message); a listed field with a `refusal` is known but
// not honoured yet, and is refused by name unless null or its no-op value
// (`off_value`, compared as JSON text: a client that sends the default loses nothing).
struct KnownField {
  const char* name;
  Endpoints endpoints;
  const char* refusal = nullptr;  // why it is refused; nullptr: read
  const char* off_value = nullptr;
};

constexpr char kNoStructuredOutputs[] =
    "is not supported: use response_format or structured_outputs (vLLM's current name) instead";
constexpr char kUseTools[] =
    "is not supported: it is OpenAI's deprecated name; use tools and tool_choice";

constexpr KnownField kKnownFields[] = {
    {"model", kBoth},
    {"prompt", kCompletionsOnly},
    {"messages", kChatOnly},
    {"max_tokens", kBoth},
    {"max_completion_tokens", kBoth},
    {"temperature", kBoth},
    {"top_p", kBoth},
    {"top_k", kBoth},
    {"min_p", kBoth},
    {"seed", kBoth},
    {"stop", kBoth},
    {"n", kBoth},
    {"best_of", kCompletionsOnly},
    {"stream", kBoth},
    {"stream_options", kBoth},
    {"echo", kBoth},  // read (and refused on chat) by ReadFlags, with its own message
    {"logprobs", kBoth},
    {"top_logprobs", kChatOnly},
    // OpenAI's end-user identifier: metadata for abuse monitoring, it never
    // changes the output, so it is accepted and not used.
    {"user", kBoth},
    {"drafter", kBoth},
    {"guidance_scale", kBoth},
    {"negative_prompt", kBoth},
    {"negative_messages", kBoth},
    {"presence_penalty", kBoth},
    {"frequency_penalty", kBoth},
    {"repetition_penalty", kBoth},
    {"logit_bias", kBoth},
    {"suffix", kCompletionsOnly, "is not supported: this server does not insert text"},
    {"response_format", kChatOnly},
    {"structured_outputs", kBoth},
    {"guided_json", kBoth, kNoStructuredOutputs},
    {"guided_regex", kBoth, kNoStructuredOutputs},
    {"guided_choice", kBoth, kNoStructuredOutputs},
    {"guided_grammar", kBoth, kNoStructuredOutputs},
    {"tools", kChatOnly},
    {"tool_choice", kChatOnly},
    {"parallel_tool_calls", kChatOnly},
    {"functions", kChatOnly, kUseTools},
    {"function_call", kChatOnly, kUseTools},
};

// The JSON text of a scalar or empty-object value, for comparing with off_value.
std::string OffText(const Value& value) {
  switch (value.kind_case()) {
    case Value::kNumberValue:
      return absl::StrCat(value.number_value());
    case Value::kBoolValue:
      return value.bool_value() ? "true" : "false";
    case Value::kStructValue:
      return value.struct_value().fields().empty() ? "{}" : "";
    default:
      return "";
  }
}

// Refuses the first field of `body` that is unknown, belongs to the other
// endpoint, or is known but not honoured (and not null or its off value).
// Fields are checked in name order, so the error is the same whatever the JSON's order.
absl::Status CheckKnownFields(const Struct& body, CompletionRequest::Kind kind) {
  std::vector<std::string> names;
  for (const auto& [name, value] : body.fields()) names.push_back(name);
  std::sort(names.begin(), names.end());
  const Endpoints mine = kind == CompletionRequest::kChat ? kChatOnly : kCompletionsOnly;
  for (const std::string& name : names) {
    const KnownField* known = nullptr;
    for (const KnownField& field : kKnownFields) {
      if (name == field.name) known = &field;
    }
    if (known == nullptr) {
      return UnrecognizedField(name);
    }
    if ((known->endpoints & mine) == 0) {
      return FieldError(name, kind == CompletionRequest::kChat
                                  ? "is a /v1/completions parameter, not a chat one"
                                  : "is a /v1/chat/completions parameter, not a completions one");
    }
    const Value& value = body.fields().at(name);
    if (known->refusal == nullptr || value.kind_case() == Value::kNullValue) continue;
    if (known->off_value != nullptr && OffText(value) == known->off_value) continue;
    return FieldError(name, known->refusal);
  }
  return absl::OkStatus();
}

absl::Status ReadPrompt(const Struct& body, CompletionRequest* request) {
  const Value* prompt = Find(body, "prompt");
  if (prompt == nullptr) return FieldError("prompt", "is required");
  if (prompt->kind_case() == Value::kStringValue) {
    request->prompt_text = prompt->string_value();
  } else if (prompt->kind_case() == Value::kListValue) {
    const ListValue& list = prompt->list_value();
    if (list.values_size() == 1 && list.values(0).kind_case() == Value::kStringValue) {
      request->prompt_text = list.values(0).string_value();
      return absl::OkStatus();
    }
    for (int i = 0; i < list.values_size(); ++i) {
      const Value& item = list.values(i);
      if (item.kind_case() != Value::kNumberValue) {
        return FieldError(
            "prompt",
            absl::StrCat("must be a string, one string in an array, or an array of token ids;",
                         " element ", i, " is ", KindName(item),
                         " (batched prompts are not supported)"));
      }
      ASSIGN_OR_RETURN(int64_t id, AsInteger(absl::StrCat("prompt[", i, "]"), item));
      if (id < 0 || id > INT32_MAX)
        return FieldError(
            "prompt", absl::StrCat("token id ", id, " at index ", i, " is negative or too large"));
      request->prompt_tokens.push_back(static_cast<int32_t>(id));
    }
  } else {
    return WrongType("prompt", "a string or an array of token ids", *prompt);
  }
  if ((request->prompt_text && request->prompt_text->empty()) ||
      (!request->prompt_text && request->prompt_tokens.empty())) {
    return FieldError("prompt", "must not be empty");
  }
  return absl::OkStatus();
}

// Message content: a string, null, or an array of {type: "text", text} parts.
absl::StatusOr<std::string> ReadContent(const std::string& list, int index,
                                        const Struct& message) {
  const std::string field = absl::StrCat(list, "[", index, "].content");
  const Value* content = Find(message, "content");
  if (content == nullptr) return std::string();
  if (content->kind_case() == Value::kStringValue) return content->string_value();
  if (content->kind_case() != Value::kListValue)
    return WrongType(field, "a string or an array of text parts", *content);
  std::string text;
  for (const Value& part : content->list_value().values()) {
    if (part.kind_case() != Value::kStructValue)
      return WrongType(field, "an array of text parts", part);
    const Value* type = Find(part.struct_value(), "type");
    const Value* part_text = Find(part.struct_value(), "text");
    if (type == nullptr || type->kind_case() != Value::kStringValue ||
        type->string_value() != "text" || part_text == nullptr ||
        part_text->kind_case() != Value::kStringValue) {
      return FieldError(
          field, "parts must be {\"type\": \"text\", \"text\": string} (only text is supported)");
    }
    text += part_text->string_value();
  }
  return text;
}

// An error of chat_tools.h with the top-level field it names attached as the param.
absl::Status WithParam(absl::Status status, absl::string_view field) {
  status.SetPayload(kParamPayload, absl::Cord(field));
  return status;
}

// Reads the message list `name` ("messages" or "negative_messages") into *out,
// and the messages' tool fields into *tools (nullptr: tool fields are refused).
absl::Status ReadMessageList(const Value& messages, const std::string& name,
                             std::vector<model::ChatMessage>* out,
                             std::vector<MessageTools>* tools = nullptr) {
  if (messages.kind_case() != Value::kListValue) return WrongType(name, "an array", messages);
  if (messages.list_value().values_size() == 0) return FieldError(name, "must not be empty");
  int index = 0;
  for (const Value& item : messages.list_value().values()) {
    if (item.kind_case() != Value::kStructValue)
      return WrongType(absl::StrCat(name, "[", index, "]"), "an object", item);
    for (const auto& [key, unused] : item.struct_value().fields()) {
      const std::string field = absl::StrCat(name, "[", index, "].", key);
      if (key == "role" || key == "content") continue;
      if (tools != nullptr && (key == "tool_calls" || key == "tool_call_id")) continue;
      if (key == "name" || key == "tool_calls" || key == "tool_call_id") {
        return FieldError(field, tools != nullptr
                                     ? "is not supported yet: messages carry a role, content "
                                       "and their tool fields only"
                                     : "is not supported: these messages carry a role and "
                                       "content only");
      }
      return UnrecognizedField(field);
    }
    const Value* role = Find(item.struct_value(), "role");
    if (role == nullptr) return FieldError(absl::StrCat(name, "[", index, "].role"), "is required");
    ASSIGN_OR_RETURN(std::string role_name,
                     AsString(absl::StrCat(name, "[", index, "].role"), *role));
    ASSIGN_OR_RETURN(std::string content, ReadContent(name, index, item.struct_value()));
    if (role_name == "developer") role_name = "system";
    if (tools != nullptr) {
      absl::StatusOr<MessageTools> fields =
          ReadMessageTools(item.struct_value(), role_name, absl::StrCat(name, "[", index, "]"));
      if (!fields.ok()) return WithParam(fields.status(), name);
      tools->push_back(*std::move(fields));
    }
    out->push_back({std::move(role_name), std::move(content)});
    ++index;
  }
  return absl::OkStatus();
}

absl::Status ReadMessages(const Struct& body, CompletionRequest* request) {
  const Value* messages = Find(body, "messages");
  if (messages == nullptr) return FieldError("messages", "is required");
  RETURN_IF_ERROR(
      ReadMessageList(*messages, "messages", &request->messages, &request->message_tools));
  std::string field;
  absl::StatusOr<ChatTools> tools = ReadChatTools(body, &field);
  if (!tools.ok()) return WithParam(tools.status(), field);
  request->tools = *std::move(tools);
  return absl::OkStatus();
}

absl::Status ReadGuidance(const Struct& body, CompletionRequest* request) {
  RETURN_IF_ERROR(
      ReadNumber(body, "guidance_scale", 0.0, 100.0, false, &request->guidance_scale));
  if (const Value* negative = Find(body, "negative_prompt")) {
    ASSIGN_OR_RETURN(std::string text, AsString("negative_prompt", *negative));
    request->negative_prompt = std::move(text);
  }
  if (const Value* negative = Find(body, "negative_messages")) {
    if (request->kind != CompletionRequest::kChat) {
      return FieldError("negative_messages",
                        "is a /v1/chat/completions parameter; use negative_prompt");
    }
    if (request->negative_prompt) {
      return FieldError("negative_messages", "and negative_prompt cannot both be given");
    }
    RETURN_IF_ERROR(
        ReadMessageList(*negative, "negative_messages", &request->negative_messages));
  }
  const bool has_negative = request->negative_prompt || !request->negative_messages.empty();
  if (has_negative && request->guidance_scale == 1.0f) {
    return FieldError(request->negative_prompt ? "negative_prompt" : "negative_messages",
                      "needs guidance_scale other than 1 (1 = no guidance)");
  }
  return absl::OkStatus();
}

// presence_penalty, frequency_penalty, repetition_penalty, logit_bias.
absl::Status ReadProcessors(const Struct& body, CompletionRequest* request) {
  RETURN_IF_ERROR(
      ReadNumber(body, "presence_penalty", -2.0, 2.0, false, &request->presence_penalty));
  RETURN_IF_ERROR(
      ReadNumber(body, "frequency_penalty", -2.0, 2.0, false, &request->frequency_penalty));
  RETURN_IF_ERROR(ReadNumber(body, "repetition_penalty", 0.0,
                             spec::SamplingParams::kMaxRepetitionPenalty, true,
                             &request->repetition_penalty));
  const Value* bias = Find(body, "logit_bias");
  if (bias == nullptr) return absl::OkStatus();
  if (bias->kind_case() != Value::kStructValue)
    return WrongType("logit_bias", "an object of token id -> bias", *bias);
  for (const auto& [key, value] : bias->struct_value().fields()) {
    int64_t id = -1;
    if (!absl::SimpleAtoi(key, &id) || id < 0 || id > INT32_MAX) {
      return FieldError("logit_bias",
                        absl::StrCat("keys must be token ids (non-negative integers), got '", key,
                                     "'"));
    }
    if (value.kind_case() != Value::kNumberValue)
      return WrongType(absl::StrCat("logit_bias[", key, "]"), "a number", value);
    const double number = value.number_value();
    constexpr double kMax = spec::SamplingParams::kMaxLogitBias;
    if (!(number >= -kMax && number <= kMax)) {
      return FieldError("logit_bias", absl::StrCat("bias of token ", id, " must be in [", -kMax,
                                                   ", ", kMax, "], got ", number));
    }
    request->logit_bias.emplace_back(static_cast<int32_t>(id), static_cast<float>(number));
  }
  std::sort(request->logit_bias.begin(), request->logit_bias.end());
  for (size_t i = 1; i < request->logit_bias.size(); ++i) {
    if (request->logit_bias[i].first == request->logit_bias[i - 1].first) {
      return FieldError("logit_bias", absl::StrCat("names token ", request->logit_bias[i].first,
                                                   " twice"));
    }
  }
  return absl::OkStatus();
}

// A JSON Schema given as an object (or as its JSON text) at `field`; `raw` is
// the object's text in the body (RawJsonValue), which keeps the order of its
// properties: the order the grammar generates them in.
absl::StatusOr<std::string> SchemaText(absl::string_view field, const Value& schema,
                                       std::optional<absl::string_view> raw) {
  if (schema.kind_case() == Value::kStringValue) return schema.string_value();
  if (schema.kind_case() != Value::kStructValue)
    return WrongType(field, "a JSON Schema object", schema);
  if (!raw.has_value()) return FieldError(field, "could not be read back from the body");
  return std::string(*raw);
}

absl::Status ReadResponseFormat(const Struct& body, absl::string_view json,
                                CompletionRequest* request) {
  const Value* format = Find(body, "response_format");
  if (format == nullptr) return absl::OkStatus();
  if (format->kind_case() != Value::kStructValue)
    return WrongType("response_format", "an object", *format);
  const Value* type = Find(format->struct_value(), "type");
  if (type == nullptr || type->kind_case() != Value::kStringValue) {
    return FieldError("response_format.type",
                      "must be one of \"text\", \"json_object\", \"json_schema\"");
  }
  for (const auto& [name, value] : format->struct_value().fields()) {
    if (name != "type" && name != "json_schema") return UnrecognizedField("response_format." + name);
  }
  const std::string& kind = type->string_value();
  if (kind == "text") return absl::OkStatus();
  if (kind == "json_object") {
    request->grammar = grammar::GrammarSpec::JsonObject();
    return absl::OkStatus();
  }
  if (kind != "json_schema") {
    return FieldError("response_format.type",
                      absl::StrCat("must be one of \"text\", \"json_object\", \"json_schema\", "
                                   "got \"", kind, "\""));
  }
  const Value* json_schema = Find(format->struct_value(), "json_schema");
  if (json_schema == nullptr || json_schema->kind_case() != Value::kStructValue) {
    return FieldError("response_format.json_schema",
                      "must be an object {\"name\", \"schema\", \"strict\"} when type is "
                      "\"json_schema\"");
  }
  const Struct& fields = json_schema->struct_value();
  for (const auto& [name, value] : fields.fields()) {
    if (name != "name" && name != "schema" && name != "strict" && name != "description")
      return UnrecognizedField("response_format.json_schema." + name);
  }
  const Value* schema = Find(fields, "schema");
  if (schema == nullptr) return FieldError("response_format.json_schema.schema", "is required");
  ASSIGN_OR_RETURN(std::string text,
                   SchemaText("response_format.json_schema.schema", *schema,
                              RawJsonValue(json, {"response_format", "json_schema", "schema"})));
  bool strict = false;  // OpenAI's default
  if (const Value* flag = Find(fields, "strict")) {
    if (flag->kind_case() != Value::kBoolValue)
      return WrongType("response_format.json_schema.strict", "a boolean", *flag);
    strict = flag->bool_value();
  }
  request->grammar = grammar::GrammarSpec::JsonSchema(std::move(text), strict);
  return absl::OkStatus();
}

// vLLM's structured_outputs: exactly one of json, regex, choice, grammar.
absl::Status ReadStructuredOutputs(const Struct& body, absl::string_view json,
                                   CompletionRequest* request) {
  const Value* outputs = Find(body, "structured_outputs");
  if (outputs == nullptr) return absl::OkStatus();
  if (request->grammar.has_value()) {
    return FieldError("structured_outputs", "cannot be combined with response_format");
  }
  if (outputs->kind_case() != Value::kStructValue)
    return WrongType("structured_outputs", "an object", *outputs);
  int given = 0;
  for (const auto& [name, value] : outputs->struct_value().fields()) {
    if (value.kind_case() == Value::kNullValue) continue;
    const std::string field = "structured_outputs." + name;
    ++given;
    if (name == "json") {
      ASSIGN_OR_RETURN(std::string text,
                       SchemaText(field, value, RawJsonValue(json, {"structured_outputs", "json"})));
      request->grammar = grammar::GrammarSpec::JsonSchema(std::move(text), /*strict=*/false);
    } else if (name == "regex" || name == "grammar") {
      if (value.kind_case() != Value::kStringValue) return WrongType(field, "a string", value);
      request->grammar = name == "regex" ? grammar::GrammarSpec::Regex(value.string_value())
                                         : grammar::GrammarSpec::Ebnf(value.string_value());
    } else if (name == "choice") {
      if (value.kind_case() != Value::kListValue || value.list_value().values_size() == 0)
        return FieldError(field, "must be a non-empty array of strings");
      std::vector<std::string> choices;
      for (const Value& choice : value.list_value().values()) {
        if (choice.kind_case() != Value::kStringValue)
          return WrongType(field, "an array of strings", choice);
        choices.push_back(choice.string_value());
      }
      request->grammar = grammar::GrammarSpec::Choice(std::move(choices));
    } else {
      return UnrecognizedField(field);
    }
  }
  if (given != 1) {
    return FieldError("structured_outputs",
                      "must set exactly one of json, regex, choice, grammar");
  }
  return absl::OkStatus();
}

absl::Status ReadStop(const Struct& body, CompletionRequest* request) {
  const Value* stop = Find(body, "stop");
  if (stop == nullptr) return absl::OkStatus();
  if (stop->kind_case() == Value::kStringValue) {
    request->stop.push_back(stop->string_value());
  } else if (stop->kind_case() == Value::kListValue) {
    for (const Value& item : stop->list_value().values()) {
      ASSIGN_OR_RETURN(std::string text, AsString("stop", item));
      request->stop.push_back(std::move(text));
    }
  } else {
    return WrongType("stop", "a string or an array of strings", *stop);
  }
  if (request->stop.size() > kMaxStopStrings) {
    return FieldError(
        "stop", absl::StrCat("has ", request->stop.size(), " strings; at most ", kMaxStopStrings));
  }
  for (const std::string& text : request->stop) {
    if (text.empty()) return FieldError("stop", "must not contain an empty string");
  }
  return absl::OkStatus();
}

absl::Status ReadMaxTokens(const Struct& body, const JsonMemberIntegers& integers,
                           CompletionRequest* request) {
  for (const char* field : {"max_tokens", "max_completion_tokens"}) {
    const Value* value = Find(body, field);
    if (value == nullptr) continue;
    ASSIGN_OR_RETURN(int64_t max_tokens, ReadInteger(integers, field, *value));
    if (max_tokens < 1)
      return FieldError(field, absl::StrCat("must be at least 1, got ", max_tokens));
    if (max_tokens > UINT32_MAX)
      return FieldError(field, absl::StrCat("must be at most 4294967295, got ", max_tokens));
    request->max_tokens = static_cast<uint32_t>(max_tokens);
  }
  return absl::OkStatus();
}

absl::Status ReadSampling(const Struct& body, const JsonMemberIntegers& integers,
                          CompletionRequest* request) {
  RETURN_IF_ERROR(ReadNumber(body, "temperature", 0.0, 2.0, false, &request->temperature));
  RETURN_IF_ERROR(ReadNumber(body, "top_p", 0.0, 1.0, true, &request->top_p));
  RETURN_IF_ERROR(ReadNumber(body, "min_p", 0.0, 1.0, false, &request->min_p));
  if (const Value* top_k = Find(body, "top_k")) {
    ASSIGN_OR_RETURN(int64_t k, ReadInteger(integers, "top_k", *top_k));
    if (k < -1 || k > INT32_MAX)
      return FieldError("top_k", absl::StrCat("must be -1 (off), 0 (off) or positive, got ", k));
    request->top_k = k < 0 ? 0 : static_cast<int32_t>(k);
  }
  if (const Value* seed = Find(body, "seed")) {
    ASSIGN_OR_RETURN(int64_t value, ReadInteger(integers, "seed", *seed));
    request->seed = static_cast<uint64_t>(value);  // OpenAI's int64; negative ones wrap
  }
  return absl::OkStatus();
}

// n (independent choices) and best_of (only 1: no server-side ranking).
absl::Status ReadChoiceCount(const Struct& body, const JsonMemberIntegers& integers,
                             CompletionRequest* request) {
  if (const Value* n = Find(body, "n")) {
    ASSIGN_OR_RETURN(int64_t count, ReadInteger(integers, "n", *n));
    if (count < 1 || count > CompletionRequest::kMaxChoices) {
      return FieldError(
          "n", absl::StrCat("must be in [1, ", CompletionRequest::kMaxChoices, "], got ", count));
    }
    request->n = static_cast<int>(count);
  }
  if (const Value* best_of = Find(body, "best_of")) {
    ASSIGN_OR_RETURN(int64_t count, ReadInteger(integers, "best_of", *best_of));
    if (count != 1)
      return FieldError(
          "best_of",
          absl::StrCat("must be 1 (choices are not ranked by the server; use n), got ", count));
  }
  return absl::OkStatus();
}

// Log probabilities. Chat: logprobs (bool) and top_logprobs (integer in [0, 20],
// only with logprobs true). Completions: logprobs (integer in [0, 20]: the
// alternatives per token; OpenAI stops at 5, vLLM at its max_logprobs, 20 by
// default, which this server follows); false and null are off.
absl::Status ReadLogprobs(const Struct& body, const JsonMemberIntegers& integers,
                          CompletionRequest* request) {
  const Value* logprobs = Find(body, "logprobs");
  const Value* top = Find(body, "top_logprobs");
  auto top_count = [&](const std::string& field, const Value& value) -> absl::StatusOr<int> {
    ASSIGN_OR_RETURN(int64_t count, ReadInteger(integers, field, value));
    if (count < 0 || count > spec::kMaxTopLogprobs) {
      return FieldError(field,
                        absl::StrCat("must be in [0, ", spec::kMaxTopLogprobs, "], got ", count));
    }
    return static_cast<int>(count);
  };
  if (request->kind == CompletionRequest::kChat) {
    bool on = false;
    if (logprobs != nullptr) {
      if (logprobs->kind_case() != Value::kBoolValue)
        return WrongType("logprobs", "a boolean (chat completions)", *logprobs);
      on = logprobs->bool_value();
    }
    if (top != nullptr) {
      ASSIGN_OR_RETURN(int count, top_count("top_logprobs", *top));
      // 0 alternatives without logprobs asks for nothing: accepted, as before.
      if (!on && count > 0) return FieldError("top_logprobs", "needs \"logprobs\": true");
      if (on) request->logprobs = count;
    } else if (on) {
      request->logprobs = 0;
    }
    return absl::OkStatus();
  }
  if (logprobs == nullptr ||
      (logprobs->kind_case() == Value::kBoolValue && !logprobs->bool_value())) {
    return absl::OkStatus();
  }
  if (logprobs->kind_case() != Value::kNumberValue)
    return WrongType("logprobs", "an integer (completions: alternatives per token)", *logprobs);
  ASSIGN_OR_RETURN(request->logprobs, top_count("logprobs", *logprobs));
  // OpenAI's echo + logprobs also scores the prompt's tokens, which no target computes.
  if (const Value* echo = Find(body, "echo");
      echo != nullptr && echo->kind_case() == Value::kBoolValue && echo->bool_value()) {
    return FieldError("logprobs",
                      "with \"echo\": true would need the prompt's log probabilities, which "
                      "this server does not compute; ask without echo");
  }
  return absl::OkStatus();
}

absl::Status ReadFlags(const Struct& body, const JsonMemberIntegers& integers,
                       CompletionRequest* request) {
  RETURN_IF_ERROR(ReadChoiceCount(body, integers, request));
  RETURN_IF_ERROR(ReadLogprobs(body, integers, request));
  if (const Value* echo = Find(body, "echo")) {
    if (echo->kind_case() != Value::kBoolValue) return WrongType("echo", "a boolean", *echo);
    if (echo->bool_value() && request->kind == CompletionRequest::kChat)
      return FieldError("echo", "is a /v1/completions parameter; chat completions have no echo");
    request->echo = echo->bool_value();
  }
  if (const Value* stream = Find(body, "stream")) {
    if (stream->kind_case() != Value::kBoolValue) return WrongType("stream", "a boolean", *stream);
    request->stream = stream->bool_value();
  }
  if (const Value* options = Find(body, "stream_options")) {
    if (options->kind_case() != Value::kStructValue)
      return WrongType("stream_options", "an object", *options);
    for (const auto& [key, unused] : options->struct_value().fields()) {
      if (key != "include_usage") return UnrecognizedField(absl::StrCat("stream_options.", key));
    }
    if (const Value* usage = Find(options->struct_value(), "include_usage")) {
      if (usage->kind_case() != Value::kBoolValue)
        return WrongType("stream_options.include_usage", "a boolean", *usage);
      request->include_usage = usage->bool_value();
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CompletionRequest> ParseCompletionRequest(absl::string_view json,
                                                         CompletionRequest::Kind kind,
                                                         const JsonLimits& limits) {
  RETURN_IF_ERROR(CheckJsonText(json, limits));
  Value root;
  const auto parsed = google::protobuf::util::JsonStringToMessage(
      google::protobuf::StringPiece(json.data(), json.size()), &root);
  if (!parsed.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("malformed JSON body: ", std::string(parsed.message())));
  }
  if (root.kind_case() != Value::kStructValue) {
    return absl::InvalidArgumentError(
        absl::StrCat("the JSON body must be an object, got ", KindName(root)));
  }
  const Struct& body = root.struct_value();
  const JsonMemberIntegers integers = JsonMemberIntegers::Index(json);
  RETURN_IF_ERROR(CheckKnownFields(body, kind));
  CompletionRequest request;
  request.kind = kind;
  if (const Value* model = Find(body, "model")) {
    ASSIGN_OR_RETURN(request.model, AsString("model", *model));
  }
  if (const Value* drafter = Find(body, "drafter")) {
    ASSIGN_OR_RETURN(request.drafter, AsString("drafter", *drafter));
  }
  if (kind == CompletionRequest::kChat) {
    RETURN_IF_ERROR(ReadMessages(body, &request));
  } else {
    RETURN_IF_ERROR(ReadPrompt(body, &request));
  }
  RETURN_IF_ERROR(ReadMaxTokens(body, integers, &request));
  RETURN_IF_ERROR(ReadSampling(body, integers, &request));
  RETURN_IF_ERROR(ReadProcessors(body, &request));
  RETURN_IF_ERROR(ReadResponseFormat(body, json, &request));
  RETURN_IF_ERROR(ReadStructuredOutputs(body, json, &request));
  RETURN_IF_ERROR(ReadStop(body, &request));
  RETURN_IF_ERROR(ReadFlags(body, integers, &request));
  RETURN_IF_ERROR(ReadGuidance(body, &request));
  const ToolChoice::Mode tool_mode = request.tools.choice.mode;
  if (request.grammar.has_value() &&
      (tool_mode == ToolChoice::kRequired || tool_mode == ToolChoice::kNamed)) {
    return FieldError("tool_choice",
                      "\"required\" or a named function constrains the reply to a call; it "
                      "cannot be combined with response_format or structured_outputs");
  }
  return request;
}

proto::SubmitRequest MakeSubmitRequest(const CompletionRequest& request,
                                       absl::Span<const int32_t> prompt,
                                       const std::string& request_id,
                                       absl::Span<const int32_t> stop_token_ids,
                                       absl::Span<const int32_t> negative_prompt) {
  proto::SubmitRequest submit;
  submit.set_request_id(request_id);
  submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
  submit.set_drafter(request.drafter);
  proto::SamplingParams* params = submit.mutable_params();
  params->set_temperature(request.temperature);
  params->set_top_k(request.top_k);
  params->set_top_p(request.top_p);
  params->set_min_p(request.min_p);
  if (request.seed) params->set_seed(*request.seed);
  params->set_max_tokens(request.max_tokens);
  for (const std::string& stop : request.stop) params->add_stop(stop);
  params->mutable_stop_token_ids()->Assign(stop_token_ids.begin(), stop_token_ids.end());
  proto::LogitsProcessors* processors = params->mutable_processors();
  for (const auto& [token, bias] : request.logit_bias) {
    (*processors->mutable_logit_bias())[token] = bias;
  }
  processors->set_presence_penalty(request.presence_penalty);
  processors->set_frequency_penalty(request.frequency_penalty);
  if (request.repetition_penalty != 1.0f) {
    processors->set_repetition_penalty(request.repetition_penalty);
  }
  if (request.grammar.has_value()) {
    net::GrammarToProto(*request.grammar, processors->mutable_grammar());
  }
  if (processors->ByteSizeLong() == 0) params->clear_processors();
  if (request.logprobs.has_value()) params->set_logprobs(static_cast<uint32_t>(*request.logprobs));
  if (request.guidance_scale != 1.0f) {
    params->set_guidance_scale(request.guidance_scale);
    params->mutable_negative_prompt_tokens()->Assign(negative_prompt.begin(),
                                                     negative_prompt.end());
  }
  return submit;
}

std::string ParamOf(const absl::Status& status) {
  const auto param = status.GetPayload(kParamPayload);
  return param ? std::string(*param) : std::string();
}

}  // namespace splitspec::coordinator::http

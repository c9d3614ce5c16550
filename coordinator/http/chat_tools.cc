#include "coordinator/http/chat_tools.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coordinator/http/json_guard.h"
#include "runtime/base/json_string.h"
#include "runtime/base/status_macros.h"

namespace splitspec::coordinator::http {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

// The system-message blocks (README "Tool calling" quotes them). kToolsBlockHermes* is
// Qwen2.5's chat template text; kToolsBlockLlama3Json is Llama 3.1's JSON tool-calling prompt.
constexpr char kToolsBlockHermesHead[] =
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>";
constexpr char kToolsBlockHermesTail[] =
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
    "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>";
constexpr char kToolsBlockLlama3Json[] =
    "Given the following functions, please respond with a JSON for a function call with its "
    "proper arguments that best answers the given prompt.\n\nRespond in the format "
    "{\"name\": function name, \"parameters\": dictionary of argument name and its value}. Do "
    "not use variables.";
constexpr char kToolsBlockForcedHead[] =
    "# Tools\n\nYou are provided with function signatures within <tools></tools> XML tags:\n"
    "<tools>";

// The value at `name`, or nullptr when absent or null.
const Value* Find(const Struct& object, const std::string& name) {
  auto it = object.fields().find(name);
  if (it == object.fields().end() || it->second.kind_case() == Value::kNullValue) return nullptr;
  return &it->second;
}

bool IsNonEmptyString(const Value* value) {
  return value != nullptr && value->kind_case() == Value::kStringValue &&
         !value->string_value().empty();
}

absl::Status Invalid(absl::string_view field, absl::string_view message) {
  return absl::InvalidArgumentError(absl::StrCat("'", field, "' ", message));
}

absl::StatusOr<ToolCall> ReadHistoryCall(const Value& call, const std::string& where) {
  if (call.kind_case() != Value::kStructValue) return Invalid(where, "must be an object");
  const Struct& fields = call.struct_value();
  for (const auto& [key, unused] : fields.fields()) {
    if (key != "id" && key != "type" && key != "function") {
      return Invalid(absl::StrCat(where, ".", key), "is not a field of a tool call");
    }
  }
  const Value* id = Find(fields, "id");
  if (!IsNonEmptyString(id)) return Invalid(where + ".id", "must be a non-empty string");
  const Value* type = Find(fields, "type");
  if (type != nullptr && (type->kind_case() != Value::kStringValue ||
                          type->string_value() != "function")) {
    return Invalid(where + ".type", "must be \"function\"");
  }
  const Value* function = Find(fields, "function");
  if (function == nullptr || function->kind_case() != Value::kStructValue) {
    return Invalid(where + ".function", "must be an object {\"name\", \"arguments\"}");
  }
  const Value* name = Find(function->struct_value(), "name");
  if (!IsNonEmptyString(name)) {
    return Invalid(where + ".function.name", "must be a non-empty string");
  }
  const Value* arguments = Find(function->struct_value(), "arguments");
  if (arguments != nullptr && arguments->kind_case() != Value::kStringValue) {
    return Invalid(where + ".function.arguments", "must be a string (JSON text)");
  }
  return ToolCall{id->string_value(), name->string_value(),
                  arguments == nullptr ? "{}" : arguments->string_value()};
}

// Arguments as the prompt shows them: the JSON text as given, or (not JSON) as a JSON string.
std::string PromptArguments(absl::string_view arguments) {
  const absl::string_view trimmed = absl::StripAsciiWhitespace(arguments);
  if (!trimmed.empty() && CheckJsonText(trimmed).ok()) return std::string(trimmed);
  return JsonQuote(arguments);
}

// An assistant turn's content with its calls written in the request's call syntax.
std::string AssistantWithCalls(const std::string& content, absl::Span<const ToolCall> calls,
                               const ToolPlan& plan) {
  std::vector<std::string> parts;
  if (!content.empty()) parts.push_back(content);
  std::vector<std::string> written;
  for (const ToolCall& call : calls) {
    const char* arguments_key =
        !plan.forced && plan.format == ToolCallFormat::kLlama3Json ? "parameters" : "arguments";
    written.push_back(absl::StrCat("{\"name\": ", JsonQuote(call.name), ", \"", arguments_key,
                                   "\": ", PromptArguments(call.arguments), "}"));
  }
  if (plan.forced) {
    parts.push_back(absl::StrCat("[", absl::StrJoin(written, ", "), "]"));
  } else if (plan.format == ToolCallFormat::kLlama3Json) {
    parts.push_back(absl::StrJoin(written, "; "));
  } else {
    for (const std::string& call : written) {
      parts.push_back(absl::StrCat("<tool_call>\n", call, "\n</tool_call>"));
    }
  }
  return absl::StrJoin(parts, "\n");
}

}  // namespace

absl::StatusOr<ChatTools> ReadChatTools(const Struct& body, std::string* field) {
  ChatTools tools;
  if (const Value* list = Find(body, "tools")) {
    *field = "tools";
    absl::StatusOr<std::vector<ToolDefinition>> read = ReadTools(*list);
    if (!read.ok()) return read.status();
    tools.tools = *std::move(read);
  }
  tools.choice.mode = tools.tools.empty() ? ToolChoice::kNone : ToolChoice::kAuto;
  if (const Value* choice = Find(body, "tool_choice")) {
    *field = "tool_choice";
    ASSIGN_OR_RETURN(tools.choice, ReadToolChoice(*choice));
    if (tools.choice.mode != ToolChoice::kNone && tools.tools.empty()) {
      return Invalid("tool_choice", "needs tools: give the functions in 'tools'");
    }
  }
  if (const Value* parallel = Find(body, "parallel_tool_calls")) {
    *field = "parallel_tool_calls";
    if (parallel->kind_case() != Value::kBoolValue) {
      return Invalid("parallel_tool_calls", "must be a boolean");
    }
    tools.parallel_tool_calls = parallel->bool_value();
  }
  field->clear();
  return tools;
}

absl::StatusOr<MessageTools> ReadMessageTools(const Struct& message, const std::string& role,
                                              const std::string& where) {
  MessageTools out;
  if (const Value* calls = Find(message, "tool_calls")) {
    const std::string field = where + ".tool_calls";
    if (role != "assistant") return Invalid(field, "is only for role \"assistant\"");
    if (calls->kind_case() != Value::kListValue) return Invalid(field, "must be an array");
    for (int i = 0; i < calls->list_value().values_size(); ++i) {
      ASSIGN_OR_RETURN(ToolCall call, ReadHistoryCall(calls->list_value().values(i),
                                                      absl::StrCat(field, "[", i, "]")));
      out.tool_calls.push_back(std::move(call));
    }
  }
  const Value* id = Find(message, "tool_call_id");
  if (id != nullptr && role != "tool") {
    return Invalid(where + ".tool_call_id", "is only for role \"tool\"");
  }
  if (role == "tool") {
    if (!IsNonEmptyString(id)) {
      return Invalid(where + ".tool_call_id",
                     "is required on a tool message (the id of the call it answers)");
    }
    out.tool_call_id = id->string_value();
  }
  return out;
}

absl::StatusOr<ToolPlan> PlanTools(const ChatTools& tools, std::optional<ToolCallFormat> parser,
                                   std::string* field) {
  ToolPlan plan;
  plan.offered = !tools.tools.empty();
  plan.format = parser.value_or(ToolCallFormat::kHermes);
  plan.parallel_tool_calls = tools.parallel_tool_calls;
  switch (tools.choice.mode) {
    case ToolChoice::kNone:
      return plan;
    case ToolChoice::kAuto:
      if (!parser.has_value()) {
        *field = "tool_choice";
        return absl::InvalidArgumentError(
            "'tool_choice' \"auto\" (the default when tools are given) needs the server "
            "started with --tool-call-parser hermes|llama3_json, to read calls from the "
            "model's text; or send tool_choice \"required\", a named function, or \"none\"");
      }
      plan.parse = true;
      return plan;
    case ToolChoice::kRequired:
    case ToolChoice::kNamed: {
      absl::StatusOr<std::string> schema =
          ForcedToolCallSchema(tools.tools, tools.choice, tools.parallel_tool_calls);
      if (!schema.ok()) {
        *field = "tool_choice";
        return schema.status();
      }
      plan.forced = true;
      plan.parse = true;
      plan.forced_function = tools.choice.function_name;
      plan.forced_schema = *std::move(schema);
      return plan;
    }
  }
  return plan;
}

std::string ToolsSystemBlock(const ChatTools& tools, const ToolPlan& plan) {
  std::vector<std::string> listed;
  for (const ToolDefinition& tool : tools.tools) listed.push_back(ToolPromptJson(tool));
  if (plan.forced) {
    const bool one = !plan.forced_function.empty() || !plan.parallel_tool_calls;
    return absl::StrCat(
        kToolsBlockForcedHead, "\n", absl::StrJoin(listed, "\n"), "\n</tools>\n\n",
        plan.forced_function.empty() ? ""
                                     : absl::StrCat("Call the function ",
                                                    JsonQuote(plan.forced_function), ". "),
        one ? "Reply with a JSON array of one function call: "
              "[{\"name\": <function-name>, \"arguments\": <args-json-object>}]"
            : "Reply with a JSON array of one or more function calls: "
              "[{\"name\": <function-name>, \"arguments\": <args-json-object>}, ...]");
  }
  if (plan.format == ToolCallFormat::kLlama3Json) {
    return absl::StrCat(kToolsBlockLlama3Json, "\n\n", absl::StrJoin(listed, "\n\n"));
  }
  return absl::StrCat(kToolsBlockHermesHead, "\n", absl::StrJoin(listed, "\n"),
                      kToolsBlockHermesTail);
}

std::vector<model::ChatMessage> RenderToolConversation(
    absl::Span<const model::ChatMessage> messages, absl::Span<const MessageTools> message_tools,
    const ChatTools& tools, const ToolPlan& plan,
    const std::optional<std::string>& default_system_prompt) {
  std::vector<model::ChatMessage> out;
  size_t first = 0;
  if (plan.offered) {
    const std::string block = ToolsSystemBlock(tools, plan);
    if (!messages.empty() && messages[0].role == "system") {
      out.push_back({"system", absl::StrCat(messages[0].content, "\n\n", block)});
      first = 1;
    } else if (default_system_prompt.has_value()) {
      out.push_back({"system", absl::StrCat(*default_system_prompt, "\n\n", block)});
    } else {
      out.push_back({"system", block});
    }
  }
  std::vector<std::string> responses;  // consecutive tool messages: one user turn
  auto flush_responses = [&] {
    if (responses.empty()) return;
    out.push_back({"user", absl::StrJoin(responses, "\n")});
    responses.clear();
  };
  for (size_t i = first; i < messages.size(); ++i) {
    const model::ChatMessage& message = messages[i];
    const MessageTools* fields = i < message_tools.size() ? &message_tools[i] : nullptr;
    if (message.role == "tool") {
      responses.push_back(
          absl::StrCat("<tool_response>\n", message.content, "\n</tool_response>"));
      continue;
    }
    flush_responses();
    if (fields != nullptr && !fields->tool_calls.empty()) {
      out.push_back(
          {message.role, AssistantWithCalls(message.content, fields->tool_calls, plan)});
    } else {
      out.push_back(message);
    }
  }
  flush_responses();
  return out;
}

}  // namespace splitspec::coordinator::http

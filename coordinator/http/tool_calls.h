// OpenAI tool calling for the front door, as pure functions: reading `tool_choice` and
// `tools`, the JSON schema that makes a constrained decode emit a call (tool_choice
// "required" or a named function), and the parsers that turn a model's free text into
// `tool_calls` (tool_choice "auto", `--tool-call-parser hermes|llama3_json`, as vLLM names them).
//
//   ASSIGN_OR_RETURN(ToolChoice choice, ReadToolChoice(body_value_of_tool_choice));
//   if (choice.mode == ToolChoice::kRequired || choice.mode == ToolChoice::kNamed) {
//     ASSIGN_OR_RETURN(std::string schema, ForcedToolCallSchema(tools, choice, parallel));
//     ... decode under grammar::GrammarSpec::JsonSchema(schema, /*strict=*/true) ...
//     ASSIGN_OR_RETURN(ParsedToolCalls calls, ParseForcedToolCalls(text, "call_req-1_"));
//   } else if (choice.mode == ToolChoice::kAuto) {
//     ParsedToolCalls calls = ParseToolCalls(ToolCallFormat::kHermes, text, "call_req-1_");
//   }
//
// The forced shape: a JSON array of calls, [{"name": "get_weather", "arguments": {...}}, ...],
// each item one of the tools (an anyOf over them, the name a const and the arguments that
// tool's `parameters` schema), at least one item, at most one unless parallel tool calls are
// allowed. "name" comes before "arguments" (the grammar generates properties in the schema's
// order): the model picks the function, then writes its arguments.
//
// Arguments: OpenAI sends `arguments` as a string holding JSON. Here it is the arguments value
// exactly as the model wrote it (after the whole call passed the strict JSON check of
// json_guard.h): key order, spacing and number spelling kept, nothing lost to a double.
//
// Thread safety: pure functions.
#ifndef SPLITSPEC_COORDINATOR_HTTP_TOOL_CALLS_H_
#define SPLITSPEC_COORDINATOR_HTTP_TOOL_CALLS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "google/protobuf/struct.pb.h"

namespace splitspec::coordinator::http {

// The request's `tool_choice`.
struct ToolChoice {
  enum Mode {
    kNone,      // "none": never call a tool
    kAuto,      // "auto" (the default when tools are given): the model decides
    kRequired,  // "required": at least one call, enforced
    kNamed,     // {"type": "function", "function": {"name": N}}: a call of N, enforced
  };
  Mode mode = kAuto;
  std::string function_name;  // kNamed only
};

// Reads `tool_choice`: "none", "auto", "required", or {"type": "function", "function":
// {"name": "..."}}. Errors: InvalidArgument naming `tool_choice` and what is wrong.
absl::StatusOr<ToolChoice> ReadToolChoice(const google::protobuf::Value& tool_choice);

// One tool of the request's `tools`.
struct ToolDefinition {
  std::string name;
  std::string description;  // "" when the tool gives none
  // The `parameters` JSON Schema; {"type": "object"} when the tool gives none.
  google::protobuf::Value parameters;
};

// Reads `tools`: an array of {"type": "function", "function": {"name", "description"?,
// "parameters"?, "strict"?}}. Errors: InvalidArgument naming the element and field at fault
// ("tools[1].function.name must be a non-empty string"), or a name given twice.
absl::StatusOr<std::vector<ToolDefinition>> ReadTools(const google::protobuf::Value& tools);

// The JSON schema of the forced shape (header comment) for `choice` (kRequired: any of
// `tools`; kNamed: that tool), as compact JSON, the same text for the same tools on every
// request (the grammar cache's key): each call's "name" then "arguments", a tool's
// `parameters` with object keys sorted (its properties are generated alphabetically).
// Errors: InvalidArgument when `tools` is empty, when choice.mode is kNone or kAuto (nothing
// to force), or when the named function is not among `tools` ("tool_choice names the
// function 'f', which is not in tools").
absl::StatusOr<std::string> ForcedToolCallSchema(const std::vector<ToolDefinition>& tools,
                                                 const ToolChoice& choice,
                                                 bool parallel_tool_calls);

// The tool as the prompt lists it, in the style of Jinja's `tojson` (", " and ": "
// separators): {"type": "function", "function": {"name": N, "description": D, "parameters":
// P}} ("description" left out when empty; P with object keys sorted).
std::string ToolPromptJson(const ToolDefinition& tool);

// One entry of OpenAI's `tool_calls` (type is always "function").
struct ToolCall {
  std::string id;         // id_prefix + index: "call_req-1_0", "call_req-1_1", ...
  std::string name;       // function.name
  std::string arguments;  // function.arguments: JSON text
};

// One piece of a streamed call, OpenAI's delta.tool_calls[i]: a call's first piece names it
// (index, id, name; arguments ""), each later piece carries the next fragment of its arguments
// (id and name empty). The fragments of a call concatenate to its ToolCall::arguments.
struct ToolCallDelta {
  int index = 0;          // the call's place in the reply's tool_calls
  std::string id;         // first piece only
  std::string name;       // first piece only
  std::string arguments;  // later pieces: the next fragment
  bool first() const { return !id.empty(); }
};

struct ParsedToolCalls {
  std::string content;  // the text that is not a call (may be empty)
  std::vector<ToolCall> tool_calls;
};

// The output of a decode constrained by ForcedToolCallSchema, as tool calls (no content).
// Errors: InvalidArgument when `text` is not of the forced shape (a decode cut by max_tokens).
absl::StatusOr<ParsedToolCalls> ParseForcedToolCalls(absl::string_view text,
                                                     absl::string_view id_prefix);

// The tool-call formats models are trained to write, named as vLLM's --tool-call-parser.
enum class ToolCallFormat {
  // Hermes / Qwen: <tool_call>{"name": "f", "arguments": {...}}</tool_call>, one or more; the
  // text before the first call is content. A last call left open (cut by max_tokens) is read
  // if its JSON is complete.
  kHermes,
  // Llama 3.x JSON: the output is (after an optional <|python_tag|>) one call
  // {"name": "f", "parameters": {...}} ("arguments" is read too), or several separated by ";".
  kLlama3Json,
};

// "hermes" or "llama3_json". Errors: InvalidArgument listing the known names.
absl::StatusOr<ToolCallFormat> ToolCallFormatByName(absl::string_view name);

// Splits a model's free text into content and tool calls. Text that is not a well-formed call
// in `format` (malformed JSON, no "name") stays content, whole, with no calls: a reply never
// loses text. Never fails.
ParsedToolCalls ParseToolCalls(ToolCallFormat format, absl::string_view text,
                               absl::string_view id_prefix);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_TOOL_CALLS_H_

// The request side of OpenAI tool calling on /v1/chat/completions: reading `tools`,
// `tool_choice`, `parallel_tool_calls` and the tool fields of messages, deciding how a
// request's reply is decoded and read (ToolPlan), and rendering a conversation with tools into
// the plain system / user / assistant messages a chat template takes.
//
//   ASSIGN_OR_RETURN(ChatTools tools, ReadChatTools(body));                  // the parser
//   ASSIGN_OR_RETURN(ToolPlan plan, PlanTools(tools, parser_flag));           // the front door
//   if (plan.forced) grammar = GrammarSpec::JsonSchema(plan.forced_schema, /*strict=*/true);
//   std::vector<model::ChatMessage> plain =
//       RenderToolConversation(messages, message_tools, tools, plan, default_system_prompt);
//
// How tools reach the model. None of the chat templates the front door recognizes
// (runtime/tokenizer/chat_template.h: ChatML as SmolLM2's, Llama 3.0; Llama 3.1+ is refused)
// has a tool format, so tools are always written into the system message: the first message's
// content if it is a system message, else the template's default system prompt (if any), then
// "\n\n" and the block of the request's call syntax (kToolsBlock* in chat_tools.cc, quoted in
// README "Tool calling"). The hermes block is Qwen2.5's template text, word for word.
//
// Call syntax, one per request, used alike for the prompt's instructions, for earlier
// assistant turns with `tool_calls`, and for reading the reply:
//   - tool_choice "required" or a named function (forced): a JSON array
//     [{"name": "f", "arguments": {...}}, ...], enforced by the grammar of ForcedToolCallSchema;
//   - otherwise the serve's --tool-call-parser (hermes when none is set):
//     hermes       <tool_call>\n{"name": "f", "arguments": {...}}\n</tool_call>, one per call,
//                  joined by "\n" after the content;
//     llama3_json  {"name": "f", "parameters": {...}}, calls joined by "; ".
// Role "tool" messages become a user turn of <tool_response>\nCONTENT\n</tool_response>
// blocks, consecutive tool messages sharing one turn (joined by "\n"), as Qwen2.5's template
// renders them.
//
// tool_choice: "none" offers the tools in the prompt and never reads calls from the reply
// (vLLM's default); "auto" (the default with tools) reads calls with the parser and needs one
// (PlanTools refuses it otherwise, naming --tool-call-parser); "required" and a named function
// force a call by grammar. parallel_tool_calls false: a forced reply holds one call, and an
// auto reply keeps only its first call.
//
// Thread safety: pure functions.
#ifndef SPLITSPEC_COORDINATOR_HTTP_CHAT_TOOLS_H_
#define SPLITSPEC_COORDINATOR_HTTP_CHAT_TOOLS_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "coordinator/http/tool_calls.h"
#include "google/protobuf/struct.pb.h"
#include "runtime/tokenizer/chat_template.h"

namespace splitspec::coordinator::http {

// The tool fields of a chat request.
struct ChatTools {
  std::vector<ToolDefinition> tools;  // empty: no tools offered
  // OpenAI's default: "auto" when tools are given, "none" otherwise.
  ToolChoice choice{ToolChoice::kNone, ""};
  bool parallel_tool_calls = true;  // OpenAI's default
};

// The tool fields of one message (index-aligned with the request's messages).
struct MessageTools {
  std::vector<ToolCall> tool_calls;  // role "assistant": the calls it made (arguments: JSON text)
  std::string tool_call_id;          // role "tool": the call it answers
};

// Reads `tools`, `tool_choice` and `parallel_tool_calls` from a chat request's body (null
// means absent). Errors (InvalidArgument naming the field): tool_choice other than "none"
// without tools, and ReadTools' / ReadToolChoice's; `*field` is set to the top-level field at
// fault.
absl::StatusOr<ChatTools> ReadChatTools(const google::protobuf::Struct& body, std::string* field);

// Reads the tool fields of message `where` ("messages[2]") of role `role`: an assistant's
// `tool_calls` ([{"id", "type": "function", "function": {"name", "arguments": string}}]) and a
// tool message's `tool_call_id` (required there). Errors: InvalidArgument naming the field
// ("messages[2].tool_calls[0].function.name must be a non-empty string"), tool_calls on
// another role, tool_call_id on another role.
absl::StatusOr<MessageTools> ReadMessageTools(const google::protobuf::Struct& message,
                                              const std::string& role, const std::string& where);

// How a request's tools are offered and its reply read.
struct ToolPlan {
  bool offered = false;  // the system message lists the tools
  bool forced = false;   // "required" / named: the reply is the forced JSON array
  bool parse = false;    // forced or "auto": tool calls are read from the reply
  // The call syntax when not forced (prompt and parser): the parser flag's, else hermes.
  ToolCallFormat format = ToolCallFormat::kHermes;
  bool parallel_tool_calls = true;
  std::string forced_function;  // named: the function
  std::string forced_schema;    // forced: ForcedToolCallSchema's text
};

// The plan of `tools` under serve's --tool-call-parser (`parser`, nullopt when not set).
// Errors (InvalidArgument naming the field in `*field`): tool_choice "auto" with no parser
// ("tool_choice \"auto\" needs the server started with --tool-call-parser hermes|llama3_json
// ..."), and ForcedToolCallSchema's.
absl::StatusOr<ToolPlan> PlanTools(const ChatTools& tools, std::optional<ToolCallFormat> parser,
                                   std::string* field);

// The conversation as plain messages for ChatTemplate::Render (roles system, user, assistant):
// tools offered in the system message, earlier calls written into their assistant turns, tool
// results as user turns (header comment). `message_tools` is empty or index-aligned with
// `messages`. Messages without tool fields pass through unchanged.
std::vector<model::ChatMessage> RenderToolConversation(
    absl::Span<const model::ChatMessage> messages, absl::Span<const MessageTools> message_tools,
    const ChatTools& tools, const ToolPlan& plan,
    const std::optional<std::string>& default_system_prompt);

// The system-message block listing `tools` for `plan` (header comment).
std::string ToolsSystemBlock(const ChatTools& tools, const ToolPlan& plan);

}  // namespace splitspec::coordinator::http

#endif  // SPLITSPEC_COORDINATOR_HTTP_CHAT_TOOLS_H_

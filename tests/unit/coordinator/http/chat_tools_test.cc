// Tool calling on the request and reply sides (coordinator/http/chat_tools.h,
// tool_call_stream.h): tools, tool_choice and the messages' tool fields read from a chat body
// with errors by field; the plan (auto refused without a parser, forced calls as a grammar);
// the conversation rendered into plain messages; the reply split into content and calls, the
// streamed pieces always adding up to the whole reply; OpenAI's tool_calls JSON.
#include "coordinator/http/chat_tools.h"

#include <string>
#include <vector>

#include "coordinator/http/openai_request.h"
#include "coordinator/http/openai_response.h"
#include "coordinator/http/tool_call_stream.h"
#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "absl/strings/match.h"

namespace splitspec::coordinator::http {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kWeatherTool[] =
    R"({"type":"function","function":{"name":"get_weather","description":"Weather in a city",)"
    R"("parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}})";
constexpr char kTimeTool[] = R"({"type":"function","function":{"name":"get_time"}})";

std::string Chat(const std::string& extra) {
  return absl::StrCat(R"({"messages":[{"role":"user","content":"Weather in Paris?"}],"tools":[)",
                      kWeatherTool, ",", kTimeTool, "]", extra, "}");
}

CompletionRequest ParseChat(const std::string& json) {
  absl::StatusOr<CompletionRequest> r = ParseCompletionRequest(json, CompletionRequest::kChat);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : CompletionRequest{};
}

// The error's message and param.
std::pair<std::string, std::string> ChatError(const std::string& json) {
  absl::StatusOr<CompletionRequest> r = ParseCompletionRequest(json, CompletionRequest::kChat);
  EXPECT_FALSE(r.ok()) << json;
  if (r.ok()) return {};
  return {std::string(r.status().message()), ParamOf(r.status())};
}

TEST(ChatToolsTest, ToolsAndTheDefaultChoices) {
  CompletionRequest r = ParseChat(Chat(""));
  ASSERT_EQ(r.tools.tools.size(), 2u);
  EXPECT_EQ(r.tools.tools[0].name, "get_weather");
  EXPECT_EQ(r.tools.tools[0].description, "Weather in a city");
  EXPECT_EQ(r.tools.choice.mode, ToolChoice::kAuto);  // OpenAI's default with tools
  EXPECT_TRUE(r.tools.parallel_tool_calls);
  r = ParseChat(Chat(R"(,"tool_choice":{"type":"function","function":{"name":"get_time"}},)"
                     R"("parallel_tool_calls":false)"));
  EXPECT_EQ(r.tools.choice.mode, ToolChoice::kNamed);
  EXPECT_EQ(r.tools.choice.function_name, "get_time");
  EXPECT_FALSE(r.tools.parallel_tool_calls);
  // Without tools: "none", and tool_choice "none" is accepted.
  r = ParseChat(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"none"})");
  EXPECT_EQ(r.tools.choice.mode, ToolChoice::kNone);
  EXPECT_THAT(r.tools.tools, IsEmpty());
}

TEST(ChatToolsTest, BadToolFieldsAreRefusedByName) {
  EXPECT_EQ(ChatError(R"({"messages":[{"role":"user","content":"x"}],"tool_choice":"required"})"),
            std::make_pair(std::string("'tool_choice' needs tools: give the functions in 'tools'"),
                           std::string("tool_choice")));
  EXPECT_EQ(ChatError(Chat(R"(,"tool_choice":"sometimes")")).second, "tool_choice");
  EXPECT_EQ(ChatError(Chat(R"(,"parallel_tool_calls":1)")).second, "parallel_tool_calls");
  const auto [message, param] = ChatError(
      R"({"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{}}]})");
  EXPECT_EQ(param, "tools");
  EXPECT_THAT(message, HasSubstr("tools[0].function.name must be a non-empty string"));
  // A forced call constrains the reply: no second constraint beside it.
  EXPECT_EQ(ChatError(Chat(R"(,"tool_choice":"required","response_format":{"type":"json_object"})"))
                .second,
            "tool_choice");
  // Tools are a chat feature.
  EXPECT_EQ(ParamOf(ParseCompletionRequest(R"({"prompt":"x","tools":[]})",
                                           CompletionRequest::kCompletion)
                        .status()),
            "tools");
}

TEST(ChatToolsTest, HistoryWithCallsAndToolResultsIsRead) {
  const CompletionRequest r = ParseChat(R"({"messages":[
      {"role":"user","content":"Weather in Paris?"},
      {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function",
        "function":{"name":"get_weather","arguments":"{\"city\": \"Paris\"}"}}]},
      {"role":"tool","tool_call_id":"call_1","content":"18C, sunny"}]})");
  ASSERT_EQ(r.message_tools.size(), 3u);
  ASSERT_EQ(r.message_tools[1].tool_calls.size(), 1u);
  EXPECT_EQ(r.message_tools[1].tool_calls[0].id, "call_1");
  EXPECT_EQ(r.message_tools[1].tool_calls[0].arguments, R"({"city": "Paris"})");
  EXPECT_EQ(r.message_tools[2].tool_call_id, "call_1");
  EXPECT_EQ(r.messages[2].role, "tool");
}

TEST(ChatToolsTest, BadHistoryIsRefusedNamingTheField) {
  auto error = [](const std::string& messages) {
    return ChatError(absl::StrCat(R"({"messages":)", messages, "}"));
  };
  EXPECT_THAT(error(R"([{"role":"tool","content":"x"}])").first,
              HasSubstr("'messages[0].tool_call_id' is required on a tool message"));
  EXPECT_THAT(error(R"([{"role":"user","content":"x","tool_call_id":"c"}])").first,
              HasSubstr("'messages[0].tool_call_id' is only for role \"tool\""));
  EXPECT_THAT(error(R"([{"role":"user","content":"x","tool_calls":[]}])").first,
              HasSubstr("'messages[0].tool_calls' is only for role \"assistant\""));
  EXPECT_THAT(
      error(R"([{"role":"assistant","tool_calls":[{"id":"c","function":{"name":"f","arguments":{}}}]}])")
          .first,
      HasSubstr("'messages[0].tool_calls[0].function.arguments' must be a string"));
  EXPECT_EQ(error(R"([{"role":"assistant","tool_calls":[{"function":{"name":"f"}}]}])").second,
            "messages");
  // Negative prompts of guidance carry no tool fields.
  EXPECT_THAT(ChatError(R"({"messages":[{"role":"user","content":"x"}],"guidance_scale":2,
                  "negative_messages":[{"role":"tool","tool_call_id":"c","content":"x"}]})")
                  .first,
              HasSubstr("negative_messages[0].tool_call_id"));
}

TEST(ChatToolsTest, AutoNeedsAParserAndForcedChoicesBecomeASchema) {
  const CompletionRequest r = ParseChat(Chat(""));
  std::string field;
  absl::StatusOr<ToolPlan> plan = PlanTools(r.tools, std::nullopt, &field);
  EXPECT_EQ(field, "tool_choice");
  EXPECT_THAT(std::string(plan.status().message()), HasSubstr("--tool-call-parser"));
  plan = PlanTools(r.tools, ToolCallFormat::kLlama3Json, &field);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->parse);
  EXPECT_FALSE(plan->forced);
  EXPECT_EQ(plan->format, ToolCallFormat::kLlama3Json);

  ChatTools required = r.tools;
  required.choice = {ToolChoice::kRequired, ""};
  plan = PlanTools(required, std::nullopt, &field);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_TRUE(plan->forced);
  EXPECT_EQ(plan->forced_schema,
            *ForcedToolCallSchema(required.tools, required.choice, /*parallel=*/true));
  EXPECT_THAT(plan->forced_schema, HasSubstr(R"("name":{"const":"get_weather"},"arguments":)"));

  ChatTools none = r.tools;
  none.choice = {ToolChoice::kNone, ""};
  plan = PlanTools(none, std::nullopt, &field);
  ASSERT_TRUE(plan.ok());
  EXPECT_TRUE(plan->offered);  // vLLM's default: tools in the prompt, the reply never parsed
  EXPECT_FALSE(plan->parse);

  ChatTools unknown = r.tools;
  unknown.choice = {ToolChoice::kNamed, "nope"};
  EXPECT_THAT(std::string(PlanTools(unknown, std::nullopt, &field).status().message()),
              HasSubstr("'nope', which is not in tools"));
}

TEST(ChatToolsTest, TheSystemMessageListsTheToolsInTheHermesFormat) {
  const CompletionRequest r = ParseChat(Chat(""));
  std::string field;
  const ToolPlan plan = *PlanTools(r.tools, ToolCallFormat::kHermes, &field);
  const std::vector<model::ChatMessage> out = RenderToolConversation(
      r.messages, r.message_tools, r.tools, plan, std::string("You are SmolLM."));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].role, "system");
  EXPECT_EQ(out[0].content,
            "You are SmolLM.\n\n# Tools\n\nYou may call one or more functions to assist with the "
            "user query.\n\nYou are provided with function signatures within <tools></tools> XML "
            "tags:\n<tools>\n"
            R"({"type": "function", "function": {"name": "get_weather", "description": "Weather )"
            R"(in a city", "parameters": {"properties": {"city": {"type": "string"}}, )"
            R"("required": ["city"], "type": "object"}}})"
            "\n"
            R"({"type": "function", "function": {"name": "get_time", "parameters": {"type": )"
            R"("object"}}})"
            "\n</tools>\n\nFor each function call, return a json object with function name and "
            "arguments within <tool_call></tool_call> XML tags:\n<tool_call>\n{\"name\": "
            "<function-name>, \"arguments\": <args-json-object>}\n</tool_call>");
  EXPECT_EQ(out[1].content, "Weather in Paris?");
}

TEST(ChatToolsTest, AGivenSystemMessageKeepsItsTextBeforeTheTools) {
  CompletionRequest r = ParseChat(absl::StrCat(
      R"({"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"x"}],)",
      R"("tool_choice":"required","tools":[)", kTimeTool, "]}"));
  std::string field;
  const ToolPlan plan = *PlanTools(r.tools, std::nullopt, &field);
  const std::vector<model::ChatMessage> out =
      RenderToolConversation(r.messages, r.message_tools, r.tools, plan, std::string("unused"));
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].content,
            "Be brief.\n\n# Tools\n\nYou are provided with function signatures within "
            "<tools></tools> XML tags:\n<tools>\n"
            R"({"type": "function", "function": {"name": "get_time", "parameters": {"type": )"
            R"("object"}}})"
            "\n</tools>\n\nReply with a JSON array of one or more function calls: "
            "[{\"name\": <function-name>, \"arguments\": <args-json-object>}, ...]");
}

TEST(ChatToolsTest, EarlierCallsAndToolResultsAreWrittenInTheRequestsSyntax) {
  const CompletionRequest r = ParseChat(R"({"messages":[
      {"role":"user","content":"Weather in Paris and Rome?"},
      {"role":"assistant","content":"Checking.","tool_calls":[
        {"id":"a","type":"function","function":{"name":"w","arguments":"{\"city\": \"Paris\"}"}},
        {"id":"b","type":"function","function":{"name":"w","arguments":"not json"}}]},
      {"role":"tool","tool_call_id":"a","content":"18C"},
      {"role":"tool","tool_call_id":"b","content":"21C"},
      {"role":"user","content":"Thanks"}]})");
  ToolPlan hermes;
  std::vector<model::ChatMessage> out =
      RenderToolConversation(r.messages, r.message_tools, r.tools, hermes, std::nullopt);
  ASSERT_EQ(out.size(), 4u);  // no tools offered: no system message; two results, one turn
  EXPECT_EQ(out[1].role, "assistant");
  EXPECT_EQ(out[1].content,
            "Checking.\n<tool_call>\n{\"name\": \"w\", \"arguments\": {\"city\": \"Paris\"}}\n"
            "</tool_call>\n<tool_call>\n{\"name\": \"w\", \"arguments\": \"not json\"}\n"
            "</tool_call>");
  EXPECT_EQ(out[2].role, "user");
  EXPECT_EQ(out[2].content,
            "<tool_response>\n18C\n</tool_response>\n<tool_response>\n21C\n</tool_response>");
  EXPECT_EQ(out[3].content, "Thanks");

  ToolPlan llama;
  llama.format = ToolCallFormat::kLlama3Json;
  out = RenderToolConversation(r.messages, r.message_tools, r.tools, llama, std::nullopt);
  EXPECT_EQ(out[1].content,
            "Checking.\n{\"name\": \"w\", \"parameters\": {\"city\": \"Paris\"}}; "
            "{\"name\": \"w\", \"parameters\": \"not json\"}");
  ToolPlan forced;
  forced.forced = true;
  out = RenderToolConversation(r.messages, r.message_tools, r.tools, forced, std::nullopt);
  EXPECT_EQ(out[1].content,
            "Checking.\n[{\"name\": \"w\", \"arguments\": {\"city\": \"Paris\"}}, "
            "{\"name\": \"w\", \"arguments\": \"not json\"}]");
}

// A reply streamed in pieces of `piece` bytes: its Result, and what the stream carried.
struct Streamed {
  ToolCallStream::Result result;
  std::string content;               // the content pieces and content_tail, joined
  std::vector<ToolCall> calls;       // the call pieces and call_tail, assembled by index
  int fragments_before_finish = 0;  // argument fragments Push passed on
};

// Assembles call pieces as a client does (openai-python: by index), checking their shape: a
// call's first piece has its id and name and arguments "", then fragments only.
void Assemble(const std::vector<ToolCallDelta>& pieces, std::vector<ToolCall>* calls,
              int* fragments) {
  for (const ToolCallDelta& piece : pieces) {
    if (piece.first()) {
      EXPECT_EQ(piece.index, static_cast<int>(calls->size())) << "calls begin in order";
      EXPECT_EQ(piece.arguments, "") << "a call's first piece has no arguments";
      calls->push_back({piece.id, piece.name, ""});
      continue;
    }
    ASSERT_LT(piece.index, static_cast<int>(calls->size())) << "a fragment before its call";
    EXPECT_TRUE(piece.name.empty());
    EXPECT_FALSE(piece.arguments.empty()) << "an empty fragment";
    (*calls)[piece.index].arguments += piece.arguments;
    if (fragments != nullptr) ++*fragments;
  }
}

// Streams `text` in pieces of `piece` bytes; checks that the streamed content adds up to the
// reply read whole, and returns what was streamed.
Streamed StreamInPieces(const ToolPlan& plan, const std::string& text, size_t piece,
                        const std::string& finish = "stop") {
  ToolCallStream stream(plan, "call_x_");
  Streamed out;
  for (size_t i = 0; i + piece < text.size(); i += piece) {
    ToolCallStream::Piece pushed = stream.Push(text.substr(i, piece));
    out.content += pushed.content;
    Assemble(pushed.calls, &out.calls, &out.fragments_before_finish);
  }
  const size_t last = text.size() == 0 ? 0 : ((text.size() - 1) / piece) * piece;
  out.result = stream.Finish(text.substr(last), finish);
  out.content += out.result.content_tail;
  Assemble(out.result.call_tail, &out.calls, nullptr);
  EXPECT_EQ(out.content, out.result.content) << "piece " << piece;
  ToolCallStream whole(plan, "call_x_");
  const ToolCallStream::Result at_once = whole.Finish(text, finish);
  EXPECT_EQ(out.result.content, at_once.content);
  EXPECT_EQ(out.result.tool_calls.size(), at_once.tool_calls.size());
  EXPECT_EQ(out.result.finish_reason, at_once.finish_reason);
  return out;
}

MATCHER_P3(IsCall, id, name, arguments, "") {
  return arg.id == id && arg.name == name && arg.arguments == arguments;
}

// The streamed pieces assemble to exactly the reply's calls.
void ExpectPiecesAreTheCalls(const Streamed& s, size_t piece) {
  ASSERT_EQ(s.calls.size(), s.result.tool_calls.size()) << "piece " << piece;
  for (size_t i = 0; i < s.calls.size(); ++i) {
    EXPECT_THAT(s.calls[i], IsCall(s.result.tool_calls[i].id, s.result.tool_calls[i].name,
                                   s.result.tool_calls[i].arguments))
        << "piece " << piece << " call " << i << ": " << s.calls[i].arguments;
  }
}

TEST(ToolCallStreamTest, HermesArgumentsStreamInPiecesThatAddUpToTheCall) {
  ToolPlan plan;
  plan.parse = true;
  const std::string text =
      "Let me check. \n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"days\": [1, 2]}}\n</tool_call>";
  for (size_t piece : {1, 2, 5, 13, 400}) {
    const Streamed s = StreamInPieces(plan, text, piece);
    EXPECT_EQ(s.result.content, "Let me check.");
    ASSERT_EQ(s.result.tool_calls.size(), 1u);
    EXPECT_THAT(s.result.tool_calls[0],
                IsCall("call_x_0", "get_weather", R"({"city": "Paris", "days": [1, 2]})"));
    EXPECT_EQ(s.result.finish_reason, "tool_calls");
    ExpectPiecesAreTheCalls(s, piece);
    // As the model writes them: one piece per byte when it comes a byte at a time.
    if (piece == 1) {
      EXPECT_EQ(s.fragments_before_finish, 33);
    }
    if (piece == 400) {
      EXPECT_EQ(s.fragments_before_finish, 0);
    }
  }
  // Content that merely mentions '<' passes on as it comes.
  ToolCallStream stream(plan, "c");
  EXPECT_EQ(stream.Push("a <").content, "a");
  EXPECT_EQ(stream.Push(" b").content, " < b");
  // A malformed call: everything is content, and no call.
  for (size_t piece : {1, 3, 400}) {
    const Streamed s = StreamInPieces(plan, "x <tool_call>{\"name\": oops</tool_call>", piece);
    EXPECT_EQ(s.result.content, "x <tool_call>{\"name\": oops</tool_call>");
    EXPECT_THAT(s.result.tool_calls, IsEmpty());
    EXPECT_THAT(s.calls, IsEmpty());
    EXPECT_EQ(s.result.finish_reason, "stop");
  }
}

TEST(ToolCallStreamTest, ParallelHermesCallsStreamOneAfterTheOther) {
  ToolPlan plan;
  plan.parse = true;
  const std::string text =
      "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"b\", \"arguments\": {\"y\": {\"z\": \"}\"}}}\n</tool_call>";
  for (size_t piece : {1, 4, 400}) {
    const Streamed s = StreamInPieces(plan, text, piece);
    ASSERT_EQ(s.result.tool_calls.size(), 2u);
    EXPECT_THAT(s.result.tool_calls[1], IsCall("call_x_1", "b", R"({"y": {"z": "}"}})"));
    ExpectPiecesAreTheCalls(s, piece);
    if (piece < 400) {
      EXPECT_GT(s.fragments_before_finish, 2);
    }
  }
  // parallel_tool_calls false: the reply keeps, and the stream sends, the first call only.
  plan.parallel_tool_calls = false;
  for (size_t piece : {1, 400}) {
    const Streamed s = StreamInPieces(plan, text, piece);
    ASSERT_EQ(s.result.tool_calls.size(), 1u);
    ExpectPiecesAreTheCalls(s, piece);
  }
}

// What cannot stream as raw text comes whole at the end: arguments written as a JSON string
// (the call's arguments are the text it holds), arguments before the name.
TEST(ToolCallStreamTest, ArgumentsThatAreNotRawJsonComeWholeAtTheEnd) {
  ToolPlan plan;
  plan.parse = true;
  for (const std::string& text :
       {std::string(R"(<tool_call>{"name": "f", "arguments": "{\"a\": 1}"}</tool_call>)"),
        std::string(R"(<tool_call>{"arguments": {"a": 1}, "name": "f"}</tool_call>)")}) {
    const Streamed s = StreamInPieces(plan, text, 1);
    ASSERT_EQ(s.result.tool_calls.size(), 1u) << text;
    EXPECT_THAT(s.result.tool_calls[0], IsCall("call_x_0", "f", R"({"a": 1})"));
    ExpectPiecesAreTheCalls(s, 1);
    EXPECT_EQ(s.fragments_before_finish, 0) << text;
  }
}

TEST(ToolCallStreamTest, Llama3JsonHoldsWhatMayBeACall) {
  ToolPlan plan;
  plan.parse = true;
  plan.format = ToolCallFormat::kLlama3Json;
  const std::string two =
      " <|python_tag|>{\"name\": \"a\", \"parameters\": {\"q\": \"x;y\"}}; {\"name\": \"b\", "
      "\"parameters\": {}}";
  for (size_t piece : {1, 4, 400}) {
    const Streamed s = StreamInPieces(plan, two, piece);
    EXPECT_EQ(s.result.content, "");
    ASSERT_EQ(s.result.tool_calls.size(), 2u);
    EXPECT_THAT(s.result.tool_calls[0], IsCall("call_x_0", "a", R"({"q": "x;y"})"));
    ExpectPiecesAreTheCalls(s, piece);
    if (piece == 1) {
      EXPECT_EQ(s.fragments_before_finish, 14);
    }
  }
  plan.parallel_tool_calls = false;
  for (size_t piece : {1, 4, 400}) {
    const Streamed s = StreamInPieces(plan, two, piece);
    ASSERT_EQ(s.result.tool_calls.size(), 1u);  // parallel_tool_calls false: the first call only
    EXPECT_EQ(s.result.tool_calls[0].name, "a");
    ExpectPiecesAreTheCalls(s, piece);
  }
  ToolCallStream stream(plan, "c");
  EXPECT_EQ(stream.Push(" <|py").content, "");
  EXPECT_EQ(stream.Push("x").content, " <|pyx");
  for (size_t piece : {1, 7}) {
    EXPECT_EQ(StreamInPieces(plan, "The answer is 4.", piece).result.content, "The answer is 4.");
  }
}

TEST(ToolCallStreamTest, AForcedReplyStreamsItsCallsInPieces) {
  ToolPlan plan;
  plan.parse = true;
  plan.forced = true;
  const std::string text =
      R"([{"name": "get_time", "arguments": {}}, {"name": "f", "arguments": {"x": 1}}])";
  for (size_t piece : {1, 3, 400}) {
    const Streamed s = StreamInPieces(plan, text, piece);
    EXPECT_EQ(s.result.content, "");
    ASSERT_EQ(s.result.tool_calls.size(), 2u);
    EXPECT_THAT(s.result.tool_calls[1], IsCall("call_x_1", "f", R"({"x": 1})"));
    EXPECT_EQ(s.result.finish_reason, "tool_calls");
    ExpectPiecesAreTheCalls(s, piece);
    if (piece == 1) {
      EXPECT_EQ(s.fragments_before_finish, 10);
    }
  }
}

// A forced reply cut by max_tokens is its text, as content, read whole or streamed; the
// stream has already sent the pieces of the call it was writing, and keeps them.
TEST(ToolCallStreamTest, AForcedReplyCutInsideACallIsItsTextAndKeepsThePiecesSent) {
  ToolPlan plan;
  plan.parse = true;
  plan.forced = true;
  const std::string cut = R"([{"name": "f", "arguments": {"x": 1, "y)";
  const Streamed s = StreamInPieces(plan, cut, 3, "length");
  EXPECT_EQ(s.result.content, cut);
  EXPECT_THAT(s.result.tool_calls, IsEmpty());
  EXPECT_THAT(s.result.call_tail, IsEmpty());
  EXPECT_EQ(s.result.content_tail, cut);
  EXPECT_EQ(s.result.finish_reason, "length");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "f");
  EXPECT_TRUE(absl::StartsWith(s.calls[0].arguments, R"({"x": 1)")) << s.calls[0].arguments;
  // Cut before a call is named: nothing of it was sent.
  const Streamed early = StreamInPieces(plan, R"([{"name": "get_ti)", 3, "length");
  EXPECT_EQ(early.result.content, R"([{"name": "get_ti)");
  EXPECT_THAT(early.calls, IsEmpty());
  EXPECT_EQ(early.result.finish_reason, "length");
}

TEST(ToolCallStreamTest, WithoutParsingEverythingPassesAtOnce) {
  ToolCallStream stream;
  EXPECT_EQ(stream.Push("<tool_call>").content, "<tool_call>");
  const ToolCallStream::Result r = stream.Finish(" x", "length");
  EXPECT_EQ(r.content, "<tool_call> x");
  EXPECT_EQ(r.content_tail, " x");
  EXPECT_EQ(r.finish_reason, "length");
}

google::protobuf::Value Json(const std::string& json) {
  google::protobuf::Value value;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &value).ok()) << json;
  return value;
}

TEST(ToolCallJsonTest, AReplyAndAChunkCarryOpenAisShape) {
  const ResponseIdentity identity{CompletionRequest::kChat, "chatcmpl-1", 7, "m"};
  const std::vector<ToolCall> calls = {{"call_1_0", "get_weather", R"({"city": "Paris"})"}};
  google::protobuf::Value reply =
      Json(CompletionJson(identity, "", "tool_calls", CompletionUsage{}, calls));
  const auto& choice = reply.struct_value().fields().at("choices").list_value().values(0);
  const auto& message = choice.struct_value().fields().at("message").struct_value().fields();
  EXPECT_EQ(message.at("content").kind_case(), google::protobuf::Value::kNullValue);
  const auto& call = message.at("tool_calls").list_value().values(0).struct_value().fields();
  EXPECT_EQ(call.at("id").string_value(), "call_1_0");
  EXPECT_EQ(call.at("type").string_value(), "function");
  const auto& function = call.at("function").struct_value().fields();
  EXPECT_EQ(function.at("name").string_value(), "get_weather");
  EXPECT_EQ(function.at("arguments").string_value(), R"({"city": "Paris"})");
  EXPECT_EQ(choice.struct_value().fields().at("finish_reason").string_value(), "tool_calls");

  auto delta_of = [](const google::protobuf::Value& chunk) {
    return chunk.struct_value()
        .fields()
        .at("choices")
        .list_value()
        .values(0)
        .struct_value()
        .fields()
        .at("delta")
        .struct_value()
        .fields();
  };
  // A call's first piece: index, id, type, name, arguments "".
  google::protobuf::Value chunk = Json(
      ToolCallChunkJson(identity, 0, {1, "call_1_0", "get_weather", ""}, /*first=*/true));
  const auto delta = delta_of(chunk);
  EXPECT_EQ(delta.at("role").string_value(), "assistant");
  const auto& delta_call = delta.at("tool_calls").list_value().values(0).struct_value().fields();
  EXPECT_EQ(delta_call.at("index").number_value(), 1);
  EXPECT_EQ(delta_call.at("id").string_value(), "call_1_0");
  EXPECT_EQ(delta_call.at("type").string_value(), "function");
  EXPECT_EQ(delta_call.at("function").struct_value().fields().at("name").string_value(),
            "get_weather");
  EXPECT_EQ(delta_call.at("function").struct_value().fields().at("arguments").string_value(), "");
  // A later piece: index and a fragment of the arguments only.
  google::protobuf::Value later =
      Json(ToolCallChunkJson(identity, 0, {1, "", "", R"({"city": )"}, /*first=*/false));
  const auto later_delta = delta_of(later);
  EXPECT_FALSE(later_delta.contains("role"));
  const auto& later_call =
      later_delta.at("tool_calls").list_value().values(0).struct_value().fields();
  EXPECT_EQ(later_call.at("index").number_value(), 1);
  EXPECT_FALSE(later_call.contains("id"));
  EXPECT_FALSE(later_call.contains("type"));
  const auto& later_function = later_call.at("function").struct_value().fields();
  EXPECT_FALSE(later_function.contains("name"));
  EXPECT_EQ(later_function.at("arguments").string_value(), R"({"city": )");
}

}  // namespace
}  // namespace splitspec::coordinator::http

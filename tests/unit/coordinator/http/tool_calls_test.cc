// Tool calling (coordinator/http/tool_calls.h): tool_choice and tools read with errors by
// field, the parsers of free text (hermes, llama3_json), and the forced-call schema, compiled
// by runtime/grammar and sampled from: every constrained output parses into calls of the tools.
#include "coordinator/http/tool_calls.h"

#include <memory>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/grammar/grammar_matcher.h"
#include "runtime/tokenizer/tokenizer.h"
#include "tests/unit/grammar/grammar_test_util.h"
#include "tests/unit/tokenizer/tokenizer_test_util.h"

namespace splitspec::coordinator::http {

// Readable failure messages.
void PrintTo(const ToolCall& call, std::ostream* os) {
  *os << "{id: " << call.id << ", name: " << call.name << ", arguments: " << call.arguments << "}";
}

namespace {

using google::protobuf::Value;
using ::testing::ElementsAre;
using ::testing::Field;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

Value Json(const std::string& json) {
  Value value;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(json, &value).ok()) << json;
  return value;
}

auto Call(const std::string& id, const std::string& name, const std::string& arguments) {
  return ::testing::AllOf(Field(&ToolCall::id, id), Field(&ToolCall::name, name),
                          Field(&ToolCall::arguments, arguments));
}

TEST(HermesToolCallsTest, ContentThenCalls) {
  const std::string text =
      "Let me check.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"days\": 3}}\n</tool_call>\n<tool_call>{\"name\": \"get_time\", "
      "\"arguments\": {}}</tool_call>";
  ParsedToolCalls parsed = ParseToolCalls(ToolCallFormat::kHermes, text, "call_r1_");
  EXPECT_EQ(parsed.content, "Let me check.");
  EXPECT_THAT(parsed.tool_calls,
              ElementsAre(Call("call_r1_0", "get_weather", R"({"city": "Paris", "days": 3})"),
                          Call("call_r1_1", "get_time", "{}")));
}

TEST(HermesToolCallsTest, ALastCallLeftOpenIsReadWhenItsJsonIsComplete) {
  ParsedToolCalls parsed = ParseToolCalls(
      ToolCallFormat::kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"x\": 1}}", "c");
  EXPECT_EQ(parsed.content, "");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(Call("c0", "f", R"({"x": 1})")));
}

TEST(HermesToolCallsTest, TextThatIsNotAWellFormedCallStaysContentWhole) {
  for (const std::string& text :
       {std::string("no call here"), std::string("a <tool_call>{\"name\": \"f\", </tool_call>"),
        std::string("<tool_call>{\"arguments\": {}}</tool_call>"),
        std::string("<tool_call>[1, 2]</tool_call>"),
        std::string("<tool_call>{\"name\": \"f\"}</tool_call><tool_call>oops</tool_call>")}) {
    ParsedToolCalls parsed = ParseToolCalls(ToolCallFormat::kHermes, text, "c");
    EXPECT_EQ(parsed.content, text);
    EXPECT_THAT(parsed.tool_calls, IsEmpty()) << text;
  }
}

TEST(Llama3JsonToolCallsTest, OneCallWithParameters) {
  ParsedToolCalls parsed = ParseToolCalls(
      ToolCallFormat::kLlama3Json,
      " {\"name\": \"search\", \"parameters\": {\"query\": \"a;b\", \"n\": [1, 2]}} ", "id");
  EXPECT_EQ(parsed.content, "");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(Call("id0", "search", R"({"query": "a;b", "n": [1, 2]})")));
}

TEST(Llama3JsonToolCallsTest, PythonTagAndSeveralCallsSeparatedBySemicolons) {
  ParsedToolCalls parsed = ParseToolCalls(
      ToolCallFormat::kLlama3Json,
      "<|python_tag|>{\"name\": \"a\", \"parameters\": {\"s\": \"x}; {\"}}; "
      "{\"name\": \"b\", \"arguments\": {\"k\": true}}",
      "id");
  EXPECT_THAT(parsed.tool_calls, ElementsAre(Call("id0", "a", R"({"s": "x}; {"})"),
                                             Call("id1", "b", R"({"k": true})")));
}

TEST(Llama3JsonToolCallsTest, TextThatIsNotACallStaysContentWhole) {
  for (const std::string& text :
       {std::string("The answer is {\"name\": 1}"), std::string("{\"name\": \"f\", "),
        std::string("{\"parameters\": {}}"), std::string("{\"name\": \"f\"}; nonsense")}) {
    ParsedToolCalls parsed = ParseToolCalls(ToolCallFormat::kLlama3Json, text, "id");
    EXPECT_EQ(parsed.content, text);
    EXPECT_THAT(parsed.tool_calls, IsEmpty()) << text;
  }
}

TEST(ToolCallFormatTest, ByName) {
  EXPECT_EQ(*ToolCallFormatByName("hermes"), ToolCallFormat::kHermes);
  EXPECT_EQ(*ToolCallFormatByName("llama3_json"), ToolCallFormat::kLlama3Json);
  EXPECT_THAT(ToolCallFormatByName("mistral").status().message(),
              HasSubstr("unknown tool-call parser \"mistral\" (known: hermes, llama3_json)"));
}

TEST(ToolChoiceTest, ReadsTheModesAndANamedFunction) {
  EXPECT_EQ(ReadToolChoice(Json(R"("none")"))->mode, ToolChoice::kNone);
  EXPECT_EQ(ReadToolChoice(Json(R"("auto")"))->mode, ToolChoice::kAuto);
  EXPECT_EQ(ReadToolChoice(Json(R"("required")"))->mode, ToolChoice::kRequired);
  absl::StatusOr<ToolChoice> named =
      ReadToolChoice(Json(R"({"type": "function", "function": {"name": "f"}})"));
  ASSERT_TRUE(named.ok()) << named.status();
  EXPECT_EQ(named->mode, ToolChoice::kNamed);
  EXPECT_EQ(named->function_name, "f");
  EXPECT_THAT(ReadToolChoice(Json(R"("always")")).status().message(),
              HasSubstr("not \"always\""));
  EXPECT_THAT(ReadToolChoice(Json(R"({"type": "function", "function": {}})")).status().message(),
              HasSubstr("tool_choice.function.name must be a non-empty string"));
  EXPECT_THAT(ReadToolChoice(Json("3")).status().message(),
              HasSubstr("tool_choice must be a string or an object"));
}

TEST(ToolsTest, ReadsToolsAndNamesTheFieldAtFault) {
  absl::StatusOr<std::vector<ToolDefinition>> tools = ReadTools(Json(R"([
    {"type": "function", "function": {"name": "a", "parameters": {"type": "object",
      "properties": {"x": {"type": "integer"}}, "required": ["x"]}}},
    {"type": "function", "function": {"name": "b"}}])"));
  ASSERT_TRUE(tools.ok()) << tools.status();
  ASSERT_EQ(tools->size(), 2u);
  EXPECT_EQ((*tools)[0].name, "a");
  EXPECT_EQ((*tools)[1].parameters.struct_value().fields().at("type").string_value(), "object");

  EXPECT_THAT(ReadTools(Json(R"([{"type": "function", "function": {"name": ""}}])"))
                  .status()
                  .message(),
              HasSubstr("tools[0].function.name must be a non-empty string"));
  EXPECT_THAT(ReadTools(Json(R"([{"type": "function", "function": {"name": "a"}},
                                 {"type": "retrieval"}])"))
                  .status()
                  .message(),
              HasSubstr("tools[1].type must be \"function\""));
  EXPECT_THAT(ReadTools(Json(R"([{"type": "function", "function": {"name": "a"}},
                                 {"type": "function", "function": {"name": "a"}}])"))
                  .status()
                  .message(),
              HasSubstr("tools[1].function.name \"a\" is given twice"));
  EXPECT_THAT(ReadTools(Json(R"([{"type": "function",
                                  "function": {"name": "a", "parameters": 3}}])"))
                  .status()
                  .message(),
              HasSubstr("tools[0].function.parameters must be a JSON Schema object"));
}

TEST(ForcedToolCallSchemaTest, RefusesWhatCannotBeForced) {
  std::vector<ToolDefinition> tools = *ReadTools(
      Json(R"([{"type": "function", "function": {"name": "a"}}])"));
  EXPECT_THAT(ForcedToolCallSchema(tools, {ToolChoice::kNamed, "zzz"}, true).status().message(),
              HasSubstr("tool_choice names the function 'zzz', which is not in tools"));
  EXPECT_FALSE(ForcedToolCallSchema(tools, {ToolChoice::kAuto, ""}, true).ok());
  EXPECT_FALSE(ForcedToolCallSchema({}, {ToolChoice::kRequired, ""}, true).ok());
}

TEST(ForcedToolCallSchemaTest, ParseForcedToolCallsRefusesACutOutput) {
  EXPECT_THAT(ParseForcedToolCalls(R"([{"name": "a", "argu)", "c").status().message(),
              HasSubstr("not a JSON array of calls"));
  absl::StatusOr<ParsedToolCalls> parsed =
      ParseForcedToolCalls(R"( [{"arguments": {"x": 12345678901234567890, "y": "\""}, "name": "a"},
                                 {"name": "b", "arguments": [1e3]}] )",
                           "c");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  // Arguments as written: an integer beyond 2^64 and an escape kept exactly.
  EXPECT_THAT(parsed->tool_calls,
              ElementsAre(Call("c0", "a", R"({"x": 12345678901234567890, "y": "\""})"),
                          Call("c1", "b", "[1e3]")));
}

// The forced schema through the grammar engine: random constrained outputs are all calls of
// the allowed tools with arguments of their schemas.
class ForcedToolCallDecodeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    model::TokenizerVocab vocab =
        model::testing::MakeByteLevelVocab({{"{", "\""}}, "smollm", {"<|im_end|>"});
    vocab.eos_id = model::testing::IdOf(vocab, "<|im_end|>");
    absl::StatusOr<model::Tokenizer> tokenizer = model::Tokenizer::Create(std::move(vocab));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = std::make_unique<model::Tokenizer>(std::move(tokenizer).value());
    absl::StatusOr<std::unique_ptr<grammar::GrammarCompiler>> compiler =
        grammar::GrammarCompiler::Create(*tokenizer_);
    ASSERT_TRUE(compiler.ok()) << compiler.status();
    compiler_ = std::move(compiler).value();
    tools_ = *ReadTools(Json(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
        "properties": {"city": {"type": "string", "maxLength": 8}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "add", "parameters": {"type": "object",
        "properties": {"a": {"type": "integer", "minimum": 0, "maximum": 9},
                       "b": {"type": "integer", "minimum": 0, "maximum": 9}},
        "required": ["a", "b"]}}}])"));
  }

  std::vector<ParsedToolCalls> Decode(const ToolChoice& choice, bool parallel, int samples) {
    absl::StatusOr<std::string> schema = ForcedToolCallSchema(tools_, choice, parallel);
    EXPECT_TRUE(schema.ok()) << schema.status();
    absl::StatusOr<std::shared_ptr<const grammar::CompiledGrammar>> compiled =
        compiler_->Compile(grammar::GrammarSpec::JsonSchema(*schema, /*strict=*/true));
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    std::vector<ParsedToolCalls> outputs;
    if (!compiled.ok()) return outputs;
    std::mt19937 rng(5);
    for (int i = 0; i < samples; ++i) {
      grammar::GrammarMatcher matcher(*compiled);
      grammar::testing::SampledText text =
          // No boost of closing tokens: every string and number here is bounded, and "," and
          // "]" after a call are then equally likely (parallel calls come up).
          grammar::testing::SampleConstrained(matcher, *tokenizer_, rng, 600, 0.0f);
      EXPECT_TRUE(text.terminated) << text.text;
      absl::StatusOr<ParsedToolCalls> parsed = ParseForcedToolCalls(text.text, "call_");
      EXPECT_TRUE(parsed.ok()) << "'" << text.text << "': " << parsed.status();
      if (parsed.ok()) outputs.push_back(*parsed);
    }
    return outputs;
  }

  std::unique_ptr<model::Tokenizer> tokenizer_;
  std::unique_ptr<grammar::GrammarCompiler> compiler_;
  std::vector<ToolDefinition> tools_;
};

TEST_F(ForcedToolCallDecodeTest, RequiredGivesCallsOfTheTools) {
  int multi_call_outputs = 0;
  for (const ParsedToolCalls& parsed : Decode({ToolChoice::kRequired, ""}, true, 20)) {
    EXPECT_EQ(parsed.content, "");
    ASSERT_GE(parsed.tool_calls.size(), 1u);
    multi_call_outputs += parsed.tool_calls.size() > 1;
    for (const ToolCall& call : parsed.tool_calls) {
      Value arguments = Json(call.arguments);
      const auto& fields = arguments.struct_value().fields();
      if (call.name == "get_weather") {
        EXPECT_EQ(fields.size(), 1u) << call.arguments;
        EXPECT_TRUE(fields.contains("city")) << call.arguments;
      } else {
        ASSERT_EQ(call.name, "add");
        EXPECT_EQ(fields.size(), 2u) << call.arguments;
        EXPECT_LE(fields.at("a").number_value(), 9) << call.arguments;
      }
    }
  }
  EXPECT_GT(multi_call_outputs, 0) << "parallel calls never came up";
}

TEST_F(ForcedToolCallDecodeTest, ANamedFunctionGivesExactlyOneCallOfIt) {
  for (const ParsedToolCalls& parsed : Decode({ToolChoice::kNamed, "add"}, true, 10)) {
    ASSERT_EQ(parsed.tool_calls.size(), 1u);
    EXPECT_EQ(parsed.tool_calls[0].name, "add");
  }
}

TEST_F(ForcedToolCallDecodeTest, NoParallelCallsGivesOneCall) {
  for (const ParsedToolCalls& parsed : Decode({ToolChoice::kRequired, ""}, false, 10)) {
    EXPECT_EQ(parsed.tool_calls.size(), 1u);
  }
}

}  // namespace
}  // namespace splitspec::coordinator::http

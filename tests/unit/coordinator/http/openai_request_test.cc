// The OpenAI request schema: every parameter, wrong types naming the field,
// unsupported options refused, and the mapping to a SubmitRequest.
#include "coordinator/http/openai_request.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::coordinator::http {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

CompletionRequest ParseOk(const std::string& json,
                          CompletionRequest::Kind kind = CompletionRequest::kCompletion) {
  absl::StatusOr<CompletionRequest> r = ParseCompletionRequest(json, kind);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : CompletionRequest{};
}

// The error's message and param.
std::pair<std::string, std::string> ParseError(
    const std::string& json, CompletionRequest::Kind kind = CompletionRequest::kCompletion) {
  absl::StatusOr<CompletionRequest> r = ParseCompletionRequest(json, kind);
  EXPECT_FALSE(r.ok()) << json;
  if (r.ok()) return {};
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return {std::string(r.status().message()), ParamOf(r.status())};
}

TEST(OpenAiRequestTest, ReadsEveryParameter) {
  const CompletionRequest r =
      ParseOk(R"({"model":"m","prompt":"Hello","max_tokens":7,"temperature":0.5,
      "top_p":0.9,"top_k":40,"min_p":0.05,"seed":1234,"stop":["\n","END"],"n":1,"stream":true,
      "stream_options":{"include_usage":true},"user":"ignored","frequency_penalty":0,"drafter":"none"})");
  EXPECT_EQ(r.kind, CompletionRequest::kCompletion);
  EXPECT_EQ(r.model, "m");
  EXPECT_EQ(r.prompt_text, "Hello");
  EXPECT_EQ(r.max_tokens, 7u);
  EXPECT_FLOAT_EQ(r.temperature, 0.5f);
  EXPECT_FLOAT_EQ(r.top_p, 0.9f);
  EXPECT_EQ(r.top_k, 40);
  EXPECT_FLOAT_EQ(r.min_p, 0.05f);
  EXPECT_EQ(r.seed, 1234u);
  EXPECT_THAT(r.stop, ElementsAre("\n", "END"));
  EXPECT_TRUE(r.stream);
  EXPECT_TRUE(r.include_usage);
  EXPECT_EQ(r.drafter, "none");
}

// Before, every number went through protobuf's double: 2^53 + 1 became 2^53, and a seed
// past int64 was read as whatever the double held.
TEST(OpenAiRequestTest, IntegersAreReadFromTheirTextExactly) {
  EXPECT_EQ(ParseOk(R"({"prompt":"x","seed":9007199254740993})").seed, 9007199254740993u);
  EXPECT_EQ(ParseOk(R"({"prompt":"x","seed":9223372036854775807})").seed, 9223372036854775807u);
  EXPECT_EQ(ParseOk(R"({"prompt":"x","\u0073eed":9007199254740995})").seed, 9007199254740995u);
  EXPECT_EQ(ParseOk(R"({"prompt":"x","seed":-1})").seed, UINT64_MAX);  // int64 -1, wrapped
  EXPECT_EQ(ParseOk(R"({"prompt":"x","seed":1e3})").seed, 1000u);      // integral, within 2^53
  EXPECT_EQ(ParseError(R"({"prompt":"x","seed":9223372036854775808})"),
            std::make_pair(std::string("'seed' is out of range: 9223372036854775808 is not in "
                                       "[-9223372036854775808, 9223372036854775807]"),
                           std::string("seed")));
  EXPECT_EQ(ParseError(R"({"prompt":"x","max_tokens":18446744073709551617})").first,
            "'max_tokens' is out of range: 18446744073709551617 is not in "
            "[-9223372036854775808, 9223372036854775807]");
  EXPECT_EQ(ParseError(R"({"prompt":"x","max_tokens":4294967296})").first,
            "'max_tokens' must be at most 4294967295, got 4294967296");
  EXPECT_EQ(ParseError(R"({"prompt":"x","n":9007199254740993})").first,
            "'n' must be in [1, 64], got 9007199254740993");
  EXPECT_EQ(ParseError(R"({"prompt":"x","top_k":9007199254740993})").first,
            "'top_k' must be -1 (off), 0 (off) or positive, got 9007199254740993");
  // A repeated name is refused by the JSON parser, so no literal can stand for another value.
  EXPECT_THAT(ParseError(R"({"prompt":"x","seed":1,"seed":9007199254740993})").first,
              HasSubstr("Repeated map key: 'seed'"));
  // A token id is an int32: past 2^53 it is refused (read through the double, exact below).
  EXPECT_EQ(ParseError(R"({"prompt":[9007199254740993]})").second, "prompt");
}

// The seed reaches the SubmitRequest (the sampler's SamplingParams) as itself.
TEST(OpenAiRequestTest, ALargeSeedReachesTheSubmitRequestAsItself) {
  const CompletionRequest r = ParseOk(R"({"prompt":"x","seed":9007199254740993})");
  const proto::SubmitRequest submit = MakeSubmitRequest(r, {1, 2}, "req-1", {});
  EXPECT_EQ(submit.params().seed(), 9007199254740993u);
}

TEST(OpenAiRequestTest, DefaultsAndNullsMeanNotGiven) {
  const CompletionRequest r =
      ParseOk(R"({"prompt":"x","temperature":null,"stop":null,"seed":null})");
  EXPECT_EQ(r.max_tokens, 0u);
  EXPECT_FLOAT_EQ(r.temperature, 1.0f);
  EXPECT_FLOAT_EQ(r.top_p, 1.0f);
  EXPECT_EQ(r.top_k, 0);
  EXPECT_FALSE(r.seed.has_value());
  EXPECT_TRUE(r.stop.empty());
  EXPECT_FALSE(r.stream);
}

TEST(OpenAiRequestTest, PromptFormsAndSingleStop) {
  EXPECT_THAT(ParseOk(R"({"prompt":[1,2,300]})").prompt_tokens, ElementsAre(1, 2, 300));
  EXPECT_EQ(ParseOk(R"({"prompt":["only one"]})").prompt_text, "only one");
  EXPECT_THAT(ParseOk(R"({"prompt":"x","stop":"##"})").stop, ElementsAre("##"));
  EXPECT_EQ(ParseOk(R"({"prompt":"x","top_k":-1})").top_k, 0);
  EXPECT_EQ(ParseOk(R"({"prompt":"x","max_completion_tokens":3})").max_tokens, 3u);
}

TEST(OpenAiRequestTest, ChatMessagesWithStringAndPartsContent) {
  const CompletionRequest r = ParseOk(R"({"messages":[{"role":"developer","content":"Be brief."},
      {"role":"user","content":[{"type":"text","text":"Hi "},{"type":"text","text":"there"}]},
      {"role":"assistant","content":null}]})",
                                      CompletionRequest::kChat);
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[0].role, "system");
  EXPECT_EQ(r.messages[0].content, "Be brief.");
  EXPECT_EQ(r.messages[1].content, "Hi there");
  EXPECT_EQ(r.messages[2].role, "assistant");
  EXPECT_EQ(r.messages[2].content, "");
}

TEST(OpenAiRequestTest, WrongTypesNameTheField) {
  EXPECT_EQ(ParseError(R"({"prompt":"x","temperature":"hot"})"),
            std::make_pair(std::string("'temperature' must be a number, got a string"),
                           std::string("temperature")));
  EXPECT_EQ(ParseError(R"({"prompt":"x","max_tokens":2.5})"),
            std::make_pair(std::string("'max_tokens' must be an integer, got 2.5"),
                           std::string("max_tokens")));
  EXPECT_EQ(ParseError(R"({"prompt":"x","stream":"yes"})").second, "stream");
  EXPECT_EQ(ParseError(R"({"prompt":"x","stop":5})").first,
            "'stop' must be a string or an array of strings, got a number");
  EXPECT_EQ(ParseError(R"({"prompt":"x","stop":["a",1]})").first,
            "'stop' must be a string, got a number");
  EXPECT_EQ(ParseError(R"({"prompt":"x","seed":true})").first,
            "'seed' must be an integer, got a boolean");
  EXPECT_EQ(ParseError(R"({"prompt":"x","top_k":"5"})").second, "top_k");
  EXPECT_EQ(ParseError(R"({"prompt":"x","model":3})").first,
            "'model' must be a string, got a number");
  EXPECT_EQ(ParseError(R"({"prompt":"x","drafter":[]})").first,
            "'drafter' must be a string, got an array");
  EXPECT_EQ(ParseError(R"({"prompt":{"a":1}})").second, "prompt");
  EXPECT_EQ(ParseError(R"({"prompt":"x","stream_options":{"include_usage":1}})").second,
            "stream_options.include_usage");
  EXPECT_EQ(ParseError(R"({"messages":"hi"})", CompletionRequest::kChat).first,
            "'messages' must be an array, got a string");
  EXPECT_EQ(
      ParseError(R"({"messages":[{"role":"user","content":7}]})", CompletionRequest::kChat).second,
      "messages[0].content");
  EXPECT_EQ(ParseError(R"({"messages":[{"content":"x"}]})", CompletionRequest::kChat).first,
            "'messages[0].role' is required");
}

TEST(OpenAiRequestTest, OutOfRangeValuesNameTheField) {
  EXPECT_EQ(ParseError(R"({"prompt":"x","temperature":2.5})").first,
            "'temperature' must be in [0, 2], got 2.5");
  EXPECT_EQ(ParseError(R"({"prompt":"x","top_p":0})").first, "'top_p' must be in (0, 1], got 0");
  EXPECT_EQ(ParseError(R"({"prompt":"x","max_tokens":0})").first,
            "'max_tokens' must be at least 1, got 0");
  EXPECT_EQ(ParseError(R"({"prompt":"x","top_k":-2})").second, "top_k");
  EXPECT_EQ(ParseError(R"({"prompt":"x","stop":[""]})").first,
            "'stop' must not contain an empty string");
  EXPECT_EQ(ParseError(R"({"prompt":[1,-3]})").first,
            "'prompt' token id -3 at index 1 is negative or too large");
  EXPECT_EQ(ParseError(R"({"prompt":""})").first, "'prompt' must not be empty");
  EXPECT_EQ(ParseError(R"({"max_tokens":3})").first, "'prompt' is required");
}

TEST(OpenAiRequestTest, UnsupportedOptionsAreRefusedNotIgnored) {
  EXPECT_EQ(ParseError(R"({"prompt":"x","best_of":2})").second, "best_of");
  EXPECT_EQ(ParseError(R"({"messages":[{"role":"user","content":"x"}],"echo":true})",
                       CompletionRequest::kChat),
            std::make_pair(
                std::string("'echo' is a /v1/completions parameter; chat completions have no echo"),
                std::string("echo")));
  EXPECT_EQ(ParseError(R"({"prompt":"x","echo":1})").second, "echo");
  EXPECT_EQ(ParseError(R"({"prompt":[[1,2],[3]]})").second, "prompt");
  ParseOk(R"({"prompt":"x","n":1,"best_of":1,"logprobs":null,"echo":false})");
  ParseOk(R"({"prompt":"x","logprobs":0})");
}

TEST(OpenAiRequestTest, AnUnknownFieldIsRefusedByNameAsOpenAiDoes) {
  EXPECT_EQ(ParseError(R"({"prompt":"x","temprature":0.5})"),
            std::make_pair(std::string("Unrecognized request argument supplied: temprature"),
                           std::string("temprature")));
  // The first unknown field in name order, whatever the body's order.
  EXPECT_EQ(ParseError(R"({"zeta":1,"prompt":"x","alpha":2})").second, "alpha");
  EXPECT_EQ(ParseError(R"({"prompt":"x","stream_options":{"include_usage":true,"x":1}})"),
            std::make_pair(std::string("Unrecognized request argument supplied: stream_options.x"),
                           std::string("stream_options.x")));
  EXPECT_EQ(ParseError(R"({"messages":[{"role":"user","content":"x","mood":"ok"}]})",
                       CompletionRequest::kChat)
                .first,
            "Unrecognized request argument supplied: messages[0].mood");
  EXPECT_EQ(ParseError(R"({"messages":[{"role":"user","content":"x","name":"bob"}]})",
                       CompletionRequest::kChat)
                .second,
            "messages[0].name");
  // The other endpoint's field is named as such.
  EXPECT_EQ(ParseError(R"({"prompt":"x","messages":[]})").first,
            "'messages' is a /v1/chat/completions parameter, not a completions one");
  EXPECT_EQ(ParseError(R"({"messages":[{"role":"user","content":"x"}],"prompt":"x"})",
                       CompletionRequest::kChat)
                .second,
            "prompt");
  // user is OpenAI's end-user tag: accepted, never changes the output.
  ParseOk(R"({"prompt":"x","user":"u-1"})");
}

TEST(OpenAiRequestTest, KnownButNotHonouredFieldsAreRefusedByName) {
  const std::string chat = R"({"messages":[{"role":"user","content":"x"}],)";
  for (const char* field : {"functions", "function_call", "guided_json", "guided_regex",
                            "guided_choice", "guided_grammar"}) {
    const auto [message, param] =
        ParseError(chat + "\"" + field + R"(":{"type":"json_object"}})", CompletionRequest::kChat);
    EXPECT_EQ(param, field);
    EXPECT_THAT(message, HasSubstr(absl::StrCat("'", field, "' is not supported")));
  }
  EXPECT_EQ(ParseError(R"({"prompt":"x","suffix":"end"})").second, "suffix");
  // Null and the no-op value lose nothing: accepted.
  ParseOk(chat + R"("response_format":null})", CompletionRequest::kChat);
}

TEST(OpenAiRequestTest, LogprobsAreReadPerEndpointAndGoOnTheWire) {
  const std::string chat = R"({"messages":[{"role":"user","content":"x"}],)";
  EXPECT_FALSE(ParseOk(chat + R"("logprobs":false})", CompletionRequest::kChat).logprobs);
  EXPECT_EQ(ParseOk(chat + R"("logprobs":true})", CompletionRequest::kChat).logprobs, 0);
  const CompletionRequest top =
      ParseOk(chat + R"("logprobs":true,"top_logprobs":20})", CompletionRequest::kChat);
  EXPECT_EQ(top.logprobs, 20);
  proto::SubmitRequest submit = MakeSubmitRequest(top, {1, 2}, "r", {});
  EXPECT_TRUE(submit.params().has_logprobs());
  EXPECT_EQ(submit.params().logprobs(), 20u);
  EXPECT_FALSE(
      MakeSubmitRequest(ParseOk(R"({"prompt":"x"})"), {1}, "r", {}).params().has_logprobs());
  EXPECT_EQ(ParseError(chat + R"("top_logprobs":2})", CompletionRequest::kChat),
            std::make_pair(std::string("'top_logprobs' needs \"logprobs\": true"),
                           std::string("top_logprobs")));
  EXPECT_EQ(
      ParseError(chat + R"("logprobs":true,"top_logprobs":21})", CompletionRequest::kChat).first,
      "'top_logprobs' must be in [0, 20], got 21");
  EXPECT_FALSE(ParseOk(chat + R"("top_logprobs":0})", CompletionRequest::kChat).logprobs);
  EXPECT_EQ(ParseError(chat + R"("logprobs":3})", CompletionRequest::kChat).first,
            "'logprobs' must be a boolean (chat completions), got a number");
  // Completions: an integer, up to 20 (vLLM's limit, past OpenAI's 5).
  EXPECT_EQ(ParseOk(R"({"prompt":"x","logprobs":5})").logprobs, 5);
  EXPECT_EQ(ParseOk(R"({"prompt":"x","logprobs":0})").logprobs, 0);
  EXPECT_FALSE(ParseOk(R"({"prompt":"x","logprobs":null})").logprobs);
  EXPECT_FALSE(ParseOk(R"({"prompt":"x","logprobs":false})").logprobs);
  EXPECT_EQ(ParseError(R"({"prompt":"x","logprobs":21})").first,
            "'logprobs' must be in [0, 20], got 21");
  EXPECT_EQ(ParseError(R"({"prompt":"x","logprobs":true})").second, "logprobs");
  EXPECT_EQ(ParseError(R"({"prompt":"x","logprobs":1,"echo":true})").first,
            "'logprobs' with \"echo\": true would need the prompt's log probabilities, which this "
            "server does not compute; ask without echo");
  EXPECT_EQ(ParseError(R"({"prompt":"x","top_logprobs":2})").first,
            "'top_logprobs' is a /v1/chat/completions parameter, not a completions one");
}

TEST(OpenAiRequestTest, NChoicesAreReadWithinTheLimit) {
  EXPECT_EQ(ParseOk(R"({"prompt":"x"})").n, 1);
  EXPECT_EQ(ParseOk(R"({"prompt":"x","n":3})").n, 3);
  EXPECT_EQ(ParseError(R"({"prompt":"x","n":0})"),
            std::make_pair(std::string("'n' must be in [1, 64], got 0"), std::string("n")));
  EXPECT_EQ(ParseError(R"({"prompt":"x","n":65})").second, "n");
}

TEST(OpenAiRequestTest, ResponseFormatAndStructuredOutputsBecomeTheGrammarOnTheWire) {
  const std::string chat = R"({"messages":[{"role":"user","content":"x"}],)";
  EXPECT_FALSE(ParseOk(chat + R"("response_format":{"type":"text"}})", CompletionRequest::kChat)
                   .grammar.has_value());
  const CompletionRequest object =
      ParseOk(chat + R"("response_format":{"type":"json_object"}})", CompletionRequest::kChat);
  ASSERT_TRUE(object.grammar.has_value());
  EXPECT_EQ(object.grammar->kind, grammar::GrammarKind::kJsonObject);

  const CompletionRequest schema = ParseOk(
      chat + R"("response_format":{"type":"json_schema","json_schema":{"name":"n","strict":true,)"
             R"("schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}})",
      CompletionRequest::kChat);
  ASSERT_TRUE(schema.grammar.has_value());
  EXPECT_EQ(schema.grammar->kind, grammar::GrammarKind::kJsonSchema);
  EXPECT_TRUE(schema.grammar->strict);
  EXPECT_THAT(schema.grammar->text, HasSubstr(R"("properties":{"a":{"type":"integer"}})"));
  const proto::SubmitRequest submit = MakeSubmitRequest(schema, {1, 2}, "r", {0}, {});
  const proto::GrammarConstraint& wire = submit.params().processors().grammar();
  EXPECT_EQ(wire.kind(), "json_schema");
  EXPECT_EQ(wire.text(), schema.grammar->text);
  EXPECT_TRUE(wire.strict());

  const CompletionRequest choice = ParseOk(R"({"prompt":"x","structured_outputs":{"choice":["a","b"]}})");
  ASSERT_TRUE(choice.grammar.has_value());
  EXPECT_EQ(choice.grammar->choices, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(ParseOk(R"({"prompt":"x","structured_outputs":{"regex":"[0-9]+"}})").grammar->kind,
            grammar::GrammarKind::kRegex);
  EXPECT_EQ(ParseOk(R"({"prompt":"x","structured_outputs":{"grammar":"root ::= \"a\""}})")
                .grammar->kind,
            grammar::GrammarKind::kEbnf);
  EXPECT_EQ(ParseOk(R"({"prompt":"x","structured_outputs":{"json":{"type":"string"}}})")
                .grammar->text,
            R"({"type":"string"})");

  // The schema's text is the body's, property order and all (the order the
  // grammar generates them in; a Struct would forget it), whatever follows it.
  const CompletionRequest ordered = ParseOk(
      chat + R"("response_format":{"json_schema":{"schema": {"type":"object","properties":)"
             R"({"zeta":{"type":"string"},"alpha":{"type":"array","items":{"enum":["}",",\""]}}}},)"
             R"("strict":false},"type":"json_schema"},"max_tokens":5})",
      CompletionRequest::kChat);
  ASSERT_TRUE(ordered.grammar.has_value());
  EXPECT_EQ(ordered.grammar->text,
            R"({"type":"object","properties":{"zeta":{"type":"string"},"alpha":{"type":"array",)"
            R"("items":{"enum":["}",",\""]}}}})");
  EXPECT_FALSE(ordered.grammar->strict);

  // Errors name the field.
  EXPECT_EQ(ParseError(chat + R"("response_format":{"type":"yaml"}})", CompletionRequest::kChat)
                .second,
            "response_format.type");
  EXPECT_EQ(ParseError(chat + R"("response_format":{"type":"json_schema"}})",
                       CompletionRequest::kChat)
                .second,
            "response_format.json_schema");
  EXPECT_EQ(ParseError(chat + R"("response_format":{"type":"json_schema","json_schema":{"name":"n"}}})",
                       CompletionRequest::kChat)
                .second,
            "response_format.json_schema.schema");
  EXPECT_EQ(ParseError(R"({"prompt":"x","structured_outputs":{"regex":"a","choice":["a"]}})").second,
            "structured_outputs");
  EXPECT_EQ(ParseError(R"({"prompt":"x","structured_outputs":{"jsonn":{}}})").first,
            "Unrecognized request argument supplied: structured_outputs.jsonn");
  // response_format is a chat parameter (as OpenAI's).
  EXPECT_EQ(ParseError(R"({"prompt":"x","response_format":{"type":"json_object"}})").second,
            "response_format");
}

TEST(OpenAiRequestTest, EchoIsReadForCompletions) {
  EXPECT_FALSE(ParseOk(R"({"prompt":"x"})").echo);
  EXPECT_TRUE(ParseOk(R"({"prompt":"x","echo":true})").echo);
  EXPECT_FALSE(ParseOk(R"({"prompt":"x","echo":false})").echo);
}

TEST(OpenAiRequestTest, MalformedJsonGivesTheParsersReason) {
  const auto [message, param] = ParseError(R"({"prompt": "x",)");
  EXPECT_THAT(message, HasSubstr("malformed JSON body: "));
  EXPECT_GT(message.size(), std::string("malformed JSON body: ").size());
  EXPECT_EQ(param, "");
  EXPECT_EQ(ParseError("[1,2]").first, "the JSON body must be an object, got an array");
}

TEST(OpenAiRequestTest, StrictJsonRefusesTrailingCommasDeepNestingAndInvalidUtf8) {
  EXPECT_EQ(ParseError(R"({"prompt":"x","max_tokens":5,})").first,
            "malformed JSON body: trailing comma at byte 29");
  EXPECT_EQ(ParseError(R"({"prompt":"x","stop":["a",]})").first,
            "malformed JSON body: trailing comma at byte 26");
  const std::string deep =
      R"({"prompt":)" + std::string(100000, '[') + std::string(100000, ']') + "}";
  EXPECT_EQ(ParseError(deep).first,
            "JSON body nests deeper than the limit of 64 arrays and objects at byte 73");
  EXPECT_EQ(ParseError("{\"prompt\":\"a\xff\"}").first,
            "malformed JSON body: invalid UTF-8 in a string at byte 12");
}

TEST(OpenAiRequestTest, MakeSubmitRequestCarriesEveryParameter) {
  CompletionRequest r =
      ParseOk(R"({"prompt":"x","max_tokens":9,"temperature":0.7,"top_p":0.8,"top_k":5,
      "min_p":0.1,"seed":42,"stop":["a"],"drafter":"ngram"})");
  const proto::SubmitRequest submit =
      MakeSubmitRequest(r, std::vector<int32_t>{4, 5, 6}, "req-7", {0, 2});
  EXPECT_EQ(submit.request_id(), "req-7");
  EXPECT_THAT(submit.prompt_tokens(), ElementsAre(4, 5, 6));
  EXPECT_FLOAT_EQ(submit.params().temperature(), 0.7f);
  EXPECT_FLOAT_EQ(submit.params().top_p(), 0.8f);
  EXPECT_EQ(submit.params().top_k(), 5);
  EXPECT_FLOAT_EQ(submit.params().min_p(), 0.1f);
  EXPECT_EQ(submit.params().seed(), 42u);
  EXPECT_EQ(submit.params().max_tokens(), 9u);
  EXPECT_THAT(submit.params().stop(), ElementsAre("a"));
  EXPECT_THAT(submit.params().stop_token_ids(), ElementsAre(0, 2));
  EXPECT_EQ(submit.drafter(), "ngram");
  EXPECT_EQ(submit.verify_mode(), proto::VERIFY_MODE_UNSPECIFIED);
  EXPECT_FALSE(submit.params().has_processors());  // none given: none on the wire
}

TEST(OpenAiRequestTest, PenaltiesAndLogitBiasReachTheSubmitRequest) {
  const CompletionRequest r = ParseOk(
      R"({"prompt":"x","presence_penalty":0.5,"frequency_penalty":-1,"repetition_penalty":1.3,
      "logit_bias":{"50256":-100,"7":2.5}})");
  EXPECT_FLOAT_EQ(r.presence_penalty, 0.5f);
  EXPECT_FLOAT_EQ(r.frequency_penalty, -1.0f);
  EXPECT_FLOAT_EQ(r.repetition_penalty, 1.3f);
  EXPECT_THAT(r.logit_bias, ElementsAre(std::make_pair(7, 2.5f), std::make_pair(50256, -100.0f)));
  const proto::SubmitRequest submit = MakeSubmitRequest(r, std::vector<int32_t>{1}, "r", {});
  const proto::LogitsProcessors& processors = submit.params().processors();
  EXPECT_FLOAT_EQ(processors.presence_penalty(), 0.5f);
  EXPECT_FLOAT_EQ(processors.frequency_penalty(), -1.0f);
  EXPECT_FLOAT_EQ(processors.repetition_penalty(), 1.3f);
  EXPECT_EQ(processors.logit_bias().size(), 2u);
  EXPECT_FLOAT_EQ(processors.logit_bias().at(7), 2.5f);
  // Off values are accepted and put nothing on the wire.
  const CompletionRequest off =
      ParseOk(R"({"prompt":"x","presence_penalty":0,"frequency_penalty":0,"logit_bias":{}})");
  EXPECT_FALSE(MakeSubmitRequest(off, std::vector<int32_t>{1}, "r", {}).params().has_processors());
}

TEST(OpenAiRequestTest, BadPenaltiesAndBiasesAreRefusedByName) {
  EXPECT_EQ(ParseError(R"({"prompt":"x","presence_penalty":2.5})").first,
            "'presence_penalty' must be in [-2, 2], got 2.5");
  EXPECT_EQ(ParseError(R"({"prompt":"x","frequency_penalty":"a"})").second, "frequency_penalty");
  EXPECT_EQ(ParseError(R"({"prompt":"x","repetition_penalty":0})").second, "repetition_penalty");
  EXPECT_EQ(ParseError(R"({"prompt":"x","logit_bias":{"abc":1}})").first,
            "'logit_bias' keys must be token ids (non-negative integers), got 'abc'");
  EXPECT_EQ(ParseError(R"({"prompt":"x","logit_bias":{"5":101}})").first,
            "'logit_bias' bias of token 5 must be in [-100, 100], got 101");
  EXPECT_EQ(ParseError(R"({"prompt":"x","logit_bias":{"5":1,"05":2}})").first,
            "'logit_bias' names token 5 twice");
  EXPECT_EQ(ParseError(R"({"prompt":"x","logit_bias":[1]})").second, "logit_bias");
}

}  // namespace
}  // namespace splitspec::coordinator::http

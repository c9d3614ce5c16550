// The OpenAI response schema (exact JSON), SSE framing and the error mapping.
#include "coordinator/http/openai_response.h"

#include <cmath>

#include "absl/strings/str_replace.h"
#include "coordinator/http/json_writer.h"
#include "coordinator/http/sse.h"
#include "gtest/gtest.h"

namespace splitspec::coordinator::http {
namespace {

CompletionUsage Usage() {
  CompletionUsage usage{5, 3, {}};
  usage.stats.set_drafted(8);
  usage.stats.set_verified(4);
  usage.stats.set_accepted(3);
  usage.stats.set_steps(2);
  return usage;
}

constexpr char kUsageJson[] =
    R"("usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,"drafted_tokens":8,)"
    R"("verified_tokens":4,"accepted_tokens":3,"acceptance_rate":0.75,"steps":2})";

TEST(OpenAiResponseTest, TextCompletion) {
  const ResponseIdentity id{CompletionRequest::kCompletion, "cmpl-1", 1700000000, "tiny"};
  EXPECT_EQ(
      CompletionJson(id, "Hi \"you\"\n", "stop", Usage()),
      std::string(
          R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
          R"("choices":[{"index":0,"text":"Hi \"you\"\n","logprobs":null,"finish_reason":"stop"}],)") +
          kUsageJson + "}");
}

TEST(OpenAiResponseTest, ChatCompletion) {
  const ResponseIdentity id{CompletionRequest::kChat, "chatcmpl-1", 7, "tiny"};
  EXPECT_EQ(
      CompletionJson(id, "ok", "length", Usage()),
      std::string(
          R"({"id":"chatcmpl-1","object":"chat.completion","created":7,"model":"tiny",)"
          R"("choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"logprobs":null,)"
          R"("finish_reason":"length"}],)") +
          kUsageJson + "}");
}

TEST(OpenAiResponseTest, ChatChunksCarryRoleFirstAndFinishLast) {
  const ResponseIdentity id{CompletionRequest::kChat, "c", 7, "m"};
  EXPECT_EQ(
      CompletionChunkJson(id, "He", true, std::nullopt, std::nullopt),
      R"({"id":"c","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,)"
      R"("delta":{"role":"assistant","content":"He"},"logprobs":null,"finish_reason":null}]})");
  EXPECT_EQ(
      CompletionChunkJson(id, "", false, "stop", Usage()),
      std::string(
          R"({"id":"c","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,)"
          R"("delta":{},"logprobs":null,"finish_reason":"stop"}],)") +
          kUsageJson + "}");
}

TEST(OpenAiResponseTest, CompletionChunk) {
  const ResponseIdentity id{CompletionRequest::kCompletion, "c", 7, "m"};
  EXPECT_EQ(
      CompletionChunkJson(id, "x", true, std::nullopt, std::nullopt),
      R"({"id":"c","object":"text_completion","created":7,"model":"m","choices":[{"index":0,"text":"x",)"
      R"("logprobs":null,"finish_reason":null}]})");
}

TEST(OpenAiResponseTest, UsageOnlyChunkHasNoChoices) {
  const ResponseIdentity id{CompletionRequest::kChat, "c", 7, "m"};
  EXPECT_EQ(
      UsageChunkJson(id, Usage()),
      std::string(
          R"({"id":"c","object":"chat.completion.chunk","created":7,"model":"m","choices":[],)") +
          kUsageJson + "}");
}

TEST(OpenAiResponseTest, ErrorObjectAndModels) {
  EXPECT_EQ(
      ErrorJson(400, "'n' must be 1", "n"),
      R"({"error":{"message":"'n' must be 1","type":"invalid_request_error","param":"n","code":null}})");
  EXPECT_EQ(ErrorJson(429, "busy"),
            R"({"error":{"message":"busy","type":"rate_limit_error","param":null,"code":null}})");
  EXPECT_EQ(
      ModelsJson("tiny", 5),
      R"({"object":"list","data":[{"id":"tiny","object":"model","created":5,"owned_by":"splitspec"}]})");
}

TEST(OpenAiResponseTest, CoordinatorErrorsMapToHttpStatuses) {
  EXPECT_EQ(HttpStatusForError(proto::ERROR_CODE_INVALID_ARGUMENT), 400);
  EXPECT_EQ(HttpStatusForError(proto::ERROR_CODE_RESOURCE_EXHAUSTED), 429);
  EXPECT_EQ(HttpStatusForError(proto::ERROR_CODE_UNAVAILABLE), 503);
  EXPECT_EQ(HttpStatusForError(proto::ERROR_CODE_NOT_FOUND), 404);
  EXPECT_EQ(HttpStatusForError(proto::ERROR_CODE_INTERNAL), 500);
  EXPECT_EQ(FinishReasonName(proto::FINISH_REASON_STOP), "stop");
  EXPECT_EQ(FinishReasonName(proto::FINISH_REASON_LENGTH), "length");
}

TEST(JsonWriterTest, EscapesControlCharactersAndNests) {
  JsonWriter w;
  w.BeginObject().Key("a").BeginArray().Int(-1).Double(0.5).Bool(false).Null().EndArray();
  w.Key("s").String(std::string("\x01\t\\\"é", 6)).Key("inf").Double(1.0 / 0.0).EndObject();
  EXPECT_EQ(w.Take(), "{\"a\":[-1,0.5,false,null],\"s\":\"\\u0001\\t\\\\\\\"é\",\"inf\":null}");
}

TEST(SseTest, FramesEventsAndDone) {
  EXPECT_EQ(SseEvent(R"({"a":1})"), "data: {\"a\":1}\n\n");
  EXPECT_EQ(SseEvent("one\ntwo\r\nthree"), "data: one\ndata: two\ndata: three\n\n");
  EXPECT_EQ(SseDone(), "data: [DONE]\n\n");
}

// `json` with <e> standing for the two bytes of "é" (valid UTF-8 is written as is).
std::string WithE(const std::string& json) {
  return absl::StrReplaceAll(json, {{"<e>", "\xc3\xa9"}});
}

// Two tokens: "é" (two bytes, one character) and "!"; -inf is written -9999.0.
std::vector<TokenLogprobText> Entries() {
  return {{"\xc3\xa9", -0.25f, {{"\xc3\xa9", -0.25f}, {"e", -1.5f}}},
          {"!", -INFINITY, {{"?", -0.5f}, {"?", -0.75f}}}};
}

TEST(OpenAiResponseTest, ChatLogprobsHaveTokenLogprobBytesAndTopLogprobs) {
  const ResponseIdentity id{CompletionRequest::kChat, "chatcmpl-1", 1700000000, "tiny"};
  const std::vector<TokenLogprobText> entries = Entries();
  ResponseChoice choice;
  choice.index = 2;
  choice.text = "\xc3\xa9!";
  choice.logprobs = &entries;
  EXPECT_EQ(
      CompletionChunkJson(id, choice, false, std::nullopt, std::nullopt),
      WithE(
          R"({"id":"chatcmpl-1","object":"chat.completion.chunk","created":1700000000,"model":"tiny",)"
          R"("choices":[{"index":2,"delta":{"content":"<e>!"},"logprobs":{"content":[)"
          R"({"token":"<e>","logprob":-0.25,"bytes":[195,169],"top_logprobs":[)"
          R"({"token":"<e>","logprob":-0.25,"bytes":[195,169]},{"token":"e","logprob":-1.5,"bytes":[101]}]},)"
          R"({"token":"!","logprob":-9999,"bytes":[33],"top_logprobs":[)"
          R"({"token":"?","logprob":-0.5,"bytes":[63]},{"token":"?","logprob":-0.75,"bytes":[63]}]}],)"
          R"("refusal":null},"finish_reason":null}]})"));
}

TEST(OpenAiResponseTest, CompletionLogprobsHaveTheLegacyShapeWithCharacterOffsets) {
  const ResponseIdentity id{CompletionRequest::kCompletion, "cmpl-1", 1700000000, "tiny"};
  const std::vector<TokenLogprobText> entries = Entries();
  ResponseChoice first;
  first.text = "ab\xc3\xa9!";
  first.logprobs = &entries;
  first.text_offset = 2;  // after an echoed "ab"
  ResponseChoice second;
  second.index = 1;
  second.text = "x";
  EXPECT_EQ(
      CompletionJson(id, {first, second}, {"length", "stop"}, Usage()),
      WithE(
          std::string(
              R"({"id":"cmpl-1","object":"text_completion","created":1700000000,"model":"tiny",)"
              R"("choices":[{"index":0,"text":"ab<e>!","logprobs":{"tokens":["<e>","!"],)"
              R"("token_logprobs":[-0.25,-9999],"top_logprobs":[{"<e>":-0.25,"e":-1.5},{"?":-0.5}],)"
              R"("text_offset":[2,3]},"finish_reason":"length"},)"
              R"({"index":1,"text":"x","logprobs":null,"finish_reason":"stop"}],)") +
          kUsageJson + "}"));
}

}  // namespace
}  // namespace splitspec::coordinator::http

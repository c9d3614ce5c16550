// The HTTP front door end to end: an InProcessCluster (coordinator, target and
// n-gram draft worker as threads) on a tiny model, the FrontDoor on a free
// loopback port, and a real HTTP client over a socket. Greedy outputs are
// compared token for token with the same request sent through a RequestClient.
#include <unistd.h>

#include <atomic>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "coordinator/http/front_door.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "runtime/base/mutex.h"
#include "runtime/model/gguf_reader.h"
#include "runtime/model/transformer.h"
#include "runtime/net/request_client.h"
#include "runtime/spec/ngram_drafter.h"
#include "runtime/tokenizer/chat_template.h"
#include "runtime/tokenizer/detokenizer.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/testing/http_test_client.h"
#include "tests/testing/tiny_model.h"
#include "tools/cluster/in_process_cluster.h"

namespace splitspec::coordinator::http {
namespace {

using google::protobuf::Struct;
using google::protobuf::Value;

// Writes the tiny model with a ChatML chat template; returns its path.
std::string WriteModel(const std::string& name) {
  model::GgufWriter writer = model::MakeTinyChatModel();
  const std::string path =
      ::testing::TempDir() + "/" + std::to_string(::getpid()) + "-" + name + ".gguf";
  EXPECT_TRUE(writer.WriteFile(path).ok());
  return path;
}

Value ParseJson(const std::string& text) {
  Value value;
  EXPECT_TRUE(google::protobuf::util::JsonStringToMessage(text, &value).ok()) << text;
  return value;
}

const Value& Get(const Value& object, const std::string& key) {
  static const Value* const kNull = new Value();
  auto it = object.struct_value().fields().find(key);
  EXPECT_NE(it, object.struct_value().fields().end()) << "no key " << key;
  return it == object.struct_value().fields().end() ? *kNull : it->second;
}

const Value& Choice(const Value& response) {
  return Get(response, "choices").list_value().values(0);
}

// A cluster on the tiny model plus a front door in front of it.
struct Stack {
  std::string model_path;
  std::unique_ptr<model::Transformer> target;
  std::unique_ptr<spec::NgramDrafter> ngram;
  std::unique_ptr<tools::InProcessCluster> cluster;
  std::unique_ptr<FrontDoor> front_door;
  std::unique_ptr<model::Tokenizer> tokenizer;

  void Start(const std::string& name, tools::InProcessClusterOptions options,
             const std::string& api_key = "", spec::Drafter* drafter = nullptr) {
    model_path = WriteModel(name);
    auto loaded = model::Transformer::Load(model_path, {.threads = 1});
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    target = *std::move(loaded);
    ngram = std::make_unique<spec::NgramDrafter>(spec::NgramDrafterConfig{});
    options.target = target.get();
    options.drafter = drafter != nullptr ? drafter : ngram.get();
    auto started = tools::InProcessCluster::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    cluster = *std::move(started);
    ASSERT_NO_FATAL_FAILURE(StartFrontDoor(api_key, &front_door));
    auto file = model::GgufFile::Open(model_path);
    ASSERT_TRUE(file.ok());
    auto tok = model::LoadTokenizerFromGguf(**file);
    ASSERT_TRUE(tok.ok());
    tokenizer = std::make_unique<model::Tokenizer>(*std::move(tok));
  }

  void StartFrontDoor(const std::string& api_key, std::unique_ptr<FrontDoor>* out) {
    FrontDoorOptions options;
    options.http.port = 0;
    options.coordinator_endpoint = cluster->coordinator_endpoint();
    options.model_path = model_path;
    options.model_name = "tiny";
    options.api_key = api_key;
    auto started = FrontDoor::Start(options);
    ASSERT_TRUE(started.ok()) << started.status();
    *out = *std::move(started);
  }

  // What the cluster generates greedily for `prompt`, decoded, and the token count.
  // With guidance_scale != 1, `negative` is the unconditional prompt.
  std::pair<std::string, int> Expected(const std::vector<int32_t>& prompt, int max_tokens,
                                       float guidance_scale = 1.0f,
                                       const std::vector<int32_t>& negative = {}) {
    auto client = net::RequestClient::Connect(cluster->coordinator_endpoint());
    EXPECT_TRUE(client.ok());
    static std::atomic<int> counter{0};
    proto::SubmitRequest submit;
    submit.set_request_id(absl::StrCat("expected-", counter.fetch_add(1)));
    submit.mutable_prompt_tokens()->Assign(prompt.begin(), prompt.end());
    submit.mutable_params()->set_temperature(0.0f);
    submit.mutable_params()->set_top_p(1.0f);
    submit.mutable_params()->set_max_tokens(max_tokens);
    if (guidance_scale != 1.0f) {
      submit.mutable_params()->set_guidance_scale(guidance_scale);
      submit.mutable_params()->mutable_negative_prompt_tokens()->Assign(negative.begin(),
                                                                       negative.end());
    }
    for (int32_t id = 0; id < tokenizer->vocab_size(); ++id) {
      if (tokenizer->IsEndOfGeneration(id)) submit.mutable_params()->add_stop_token_ids(id);
    }
    auto result = (*client)->Generate(submit, absl::Minutes(2));
    EXPECT_TRUE(result.ok()) << result.status();
    // Decoded as a stream: bytes that never form a character become U+FFFD.
    model::StreamingDetokenizer detokenizer(tokenizer.get());
    std::string text;
    for (int32_t token : result->tokens) text += *detokenizer.Push(token);
    text += detokenizer.Finish();
    return {text, static_cast<int>(result->tokens.size())};
  }

  std::vector<int32_t> ChatPrompt(const std::string& user) {
    auto chat = model::ChatTemplate::FromSource(model::kTinyChatMlTemplate);
    EXPECT_TRUE(chat.ok());
    auto text = chat->Apply({{"user", user}}, true);
    EXPECT_TRUE(text.ok());
    return tokenizer->Encode(*text, {.add_special = false, .parse_special = true});
  }

  TestHttpResponse Post(const std::string& path, const std::string& body,
                        const std::string& headers = "") {
    auto response = HttpRequestOnce(front_door->port(), "POST", path, body, headers);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : TestHttpResponse{};
  }
  TestHttpResponse GetPath(const std::string& path, const std::string& headers = "",
                           FrontDoor* door = nullptr) {
    auto response =
        HttpRequestOnce((door ? door : front_door.get())->port(), "GET", path, "", headers);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : TestHttpResponse{};
  }
};

class HttpFrontDoorTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    stack_ = new Stack();
    tools::InProcessClusterOptions options;
    options.router.max_new_tokens =
        100;  // below the model's context, to see the coordinator refuse
    options.router.default_max_new_tokens = 64;
    stack_->Start("http-front-door", options);
  }
  static void TearDownTestSuite() { delete stack_; }
  void SetUp() override { ASSERT_NE(stack_->front_door, nullptr); }

  static Stack* stack_;
};

Stack* HttpFrontDoorTest::stack_ = nullptr;

constexpr int kMaxTokens = 16;

TEST_F(HttpFrontDoorTest, CompletionEqualsTheClusterOutputTokenForToken) {
  const std::string prompt = "Hello world, hello world, hello";
  const auto [expected, count] = stack_->Expected(
      stack_->tokenizer->Encode(prompt, {.add_special = true, .parse_special = true}), kMaxTokens);
  const TestHttpResponse response = stack_->Post(
      "/v1/completions", absl::StrCat(R"({"model":"tiny","prompt":")", prompt, R"(","max_tokens":)",
                                      kMaxTokens, R"(,"temperature":0})"));
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.Header("content-type"), "application/json");
  const Value body = ParseJson(response.body);
  EXPECT_EQ(Get(body, "object").string_value(), "text_completion");
  EXPECT_EQ(Get(body, "model").string_value(), "tiny");
  EXPECT_TRUE(absl::StartsWith(Get(body, "id").string_value(), "cmpl-"));
  EXPECT_EQ(Get(Choice(body), "text").string_value(), expected);
  EXPECT_EQ(Get(Choice(body), "finish_reason").string_value(),
            count == kMaxTokens ? "length" : "stop");
  const Value& usage = Get(body, "usage");
  EXPECT_EQ(Get(usage, "completion_tokens").number_value(), count);
  EXPECT_EQ(Get(usage, "prompt_tokens").number_value(),
            stack_->tokenizer->Encode(prompt, {.add_special = true, .parse_special = true}).size());
  EXPECT_EQ(
      Get(usage, "total_tokens").number_value(),
      Get(usage, "prompt_tokens").number_value() + Get(usage, "completion_tokens").number_value());
  EXPECT_GE(Get(usage, "verified_tokens").number_value(),
            Get(usage, "accepted_tokens").number_value());
  EXPECT_GT(Get(usage, "steps").number_value(), 0);
  EXPECT_GE(Get(usage, "acceptance_rate").number_value(), 0.0);
  EXPECT_LE(Get(usage, "acceptance_rate").number_value(), 1.0);
}

TEST_F(HttpFrontDoorTest, TokenIdPromptAndStreamGiveTheSameText) {
  const std::vector<int32_t> prompt = {10, 20, 30, 40, 10, 20, 30};
  const auto [expected, count] = stack_->Expected(prompt, kMaxTokens);
  const TestHttpResponse response = stack_->Post(
      "/v1/completions", absl::StrCat(R"({"prompt":[10,20,30,40,10,20,30],"max_tokens":)",
                                      kMaxTokens, R"(,"temperature":0,"stream":true})"));
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(response.Header("content-type"), "text/event-stream");
  EXPECT_EQ(response.Header("transfer-encoding"), "chunked");
  const std::vector<std::string> events = SseData(response.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Value chunk = ParseJson(events[i]);
    EXPECT_EQ(Get(chunk, "object").string_value(), "text_completion");
    text += Get(Choice(chunk), "text").string_value();
    const bool last = i + 2 == events.size();
    EXPECT_EQ(Get(Choice(chunk), "finish_reason").kind_case() == Value::kNullValue, !last)
        << events[i];
  }
  EXPECT_EQ(text, expected);
  const Value last = ParseJson(events[events.size() - 2]);
  EXPECT_EQ(Get(Get(last, "usage"), "completion_tokens").number_value(), count);
}

// echo: the prompt as sent (text verbatim, token ids decoded) comes first, in the whole
// completion and in the first chunk of a stream; the completion after it is unchanged.
TEST_F(HttpFrontDoorTest, EchoPutsThePromptBeforeTheCompletionStreamedOrNot) {
  const std::string prompt = "Hello world, hello world, hello";
  const auto [expected, count] = stack_->Expected(
      stack_->tokenizer->Encode(prompt, {.add_special = true, .parse_special = true}), kMaxTokens);
  const std::string body = absl::StrCat(R"({"prompt":")", prompt, R"(","max_tokens":)", kMaxTokens,
                                        R"(,"temperature":0,"echo":true)");
  const TestHttpResponse whole = stack_->Post("/v1/completions", body + "}");
  ASSERT_EQ(whole.status, 200) << whole.body;
  EXPECT_EQ(Get(Choice(ParseJson(whole.body)), "text").string_value(), prompt + expected);

  const TestHttpResponse streamed = stack_->Post("/v1/completions", body + R"(,"stream":true})");
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const std::vector<std::string> events = SseData(streamed.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_TRUE(absl::StartsWith(Get(Choice(ParseJson(events[0])), "text").string_value(), prompt))
      << events[0];
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i)
    text += Get(Choice(ParseJson(events[i])), "text").string_value();
  EXPECT_EQ(text, prompt + expected);

  const std::vector<int32_t> ids = {10, 20, 30, 40, 10, 20, 30};
  const auto [expected_ids, count_ids] = stack_->Expected(ids, kMaxTokens);
  const TestHttpResponse from_ids = stack_->Post(
      "/v1/completions", absl::StrCat(R"({"prompt":[10,20,30,40,10,20,30],"max_tokens":)",
                                      kMaxTokens, R"(,"temperature":0,"echo":true})"));
  ASSERT_EQ(from_ids.status, 200) << from_ids.body;
  EXPECT_EQ(Get(Choice(ParseJson(from_ids.body)), "text").string_value(),
            *stack_->tokenizer->Decode(ids) + expected_ids);
}

TEST_F(HttpFrontDoorTest, ChatUsesTheModelsTemplateStreamedOrNot) {
  const auto [expected, count] = stack_->Expected(stack_->ChatPrompt("Say hello"), kMaxTokens);
  const std::string request = absl::StrCat(
      R"({"model":"tiny","messages":[{"role":"user","content":"Say hello"}],"max_tokens":)",
      kMaxTokens, R"(,"temperature":0)");
  const TestHttpResponse whole = stack_->Post("/v1/chat/completions", request + "}");
  ASSERT_EQ(whole.status, 200) << whole.body;
  const Value body = ParseJson(whole.body);
  EXPECT_EQ(Get(body, "object").string_value(), "chat.completion");
  EXPECT_EQ(Get(Get(Choice(body), "message"), "role").string_value(), "assistant");
  EXPECT_EQ(Get(Get(Choice(body), "message"), "content").string_value(), expected);
  EXPECT_EQ(Get(Get(body, "usage"), "completion_tokens").number_value(), count);

  const TestHttpResponse streamed =
      stack_->Post("/v1/chat/completions", request + R"(,"stream":true})");
  ASSERT_EQ(streamed.status, 200) << streamed.body;
  const std::vector<std::string> events = SseData(streamed.body);
  ASSERT_GE(events.size(), 2u);
  EXPECT_EQ(events.back(), "[DONE]");
  std::string text;
  for (size_t i = 0; i + 1 < events.size(); ++i) {
    const Value chunk = ParseJson(events[i]);
    EXPECT_EQ(Get(chunk, "object").string_value(), "chat.completion.chunk");
    const Value& delta = Get(Choice(chunk), "delta");
    if (i == 0) {
      EXPECT_EQ(Get(delta, "role").string_value(), "assistant");
    }
    auto content = delta.struct_value().fields().find("content");
    if (content != delta.struct_value().fields().end()) text += content->second.string_value();
  }
  EXPECT_EQ(text, expected);
}

TEST_F(HttpFrontDoorTest, IncludeUsageSendsAUsageOnlyChunkLast) {
  const auto [expected, count] = stack_->Expected({10, 20, 30}, kMaxTokens);
  const TestHttpResponse response = stack_->Post(
      "/v1/completions",
      absl::StrCat(R"({"prompt":[10,20,30],"max_tokens":)", kMaxTokens,
                   R"(,"temperature":0,"stream":true,"stream_options":{"include_usage":true}})"));
  ASSERT_EQ(response.status, 200) << response.body;
  const std::vector<std::string> events = SseData(response.body);
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events.back(), "[DONE]");
  const Value usage_chunk = ParseJson(events[events.size() - 2]);
  EXPECT_EQ(Get(usage_chunk, "choices").list_value().values_size(), 0);
  EXPECT_EQ(Get(Get(usage_chunk, "usage"), "completion_tokens").number_value(), count);
  const Value finish_chunk = ParseJson(events[events.size() - 3]);
  EXPECT_TRUE(Get(Choice(finish_chunk), "finish_reason").has_string_value());
  EXPECT_EQ(finish_chunk.struct_value().fields().count("usage"), 0u);
}

TEST_F(HttpFrontDoorTest, StopStringCutsTheTextAndEndsTheRequest) {
  const std::vector<int32_t> prompt = {5, 6, 7, 5, 6, 7, 5, 6};
  const auto [expected, count] = stack_->Expected(prompt, 24);
  // A stop string from the second half of the greedy output: a character that
  // does not occur before (so the cut is not at the start), on a character boundary.
  auto char_end = [&](size_t at) {
    size_t end = at + 1;
    while (end < expected.size() && (static_cast<unsigned char>(expected[end]) & 0xC0) == 0x80)
      ++end;
    return end;
  };
  std::string stop;
  for (size_t at = expected.size() / 2; at < expected.size() && stop.empty(); at = char_end(at)) {
    if ((static_cast<unsigned char>(expected[at]) & 0xC0) == 0x80) continue;
    const std::string c = expected.substr(at, char_end(at) - at);
    if (expected.find(c) == at) stop = c;
  }
  if (stop.empty())
    stop =
        expected.substr(expected.size() / 2, char_end(expected.size() / 2) - expected.size() / 2);
  ASSERT_FALSE(stop.empty()) << "the greedy output is too short for this test: '" << expected
                             << "'";
  const std::string cut = expected.substr(0, expected.find(stop));
  Struct request;
  google::protobuf::util::JsonStringToMessage(
      R"({"prompt":[5,6,7,5,6,7,5,6],"max_tokens":24,"temperature":0})", &request);
  (*request.mutable_fields())["stop"].set_string_value(stop);
  for (bool stream : {false, true}) {
    (*request.mutable_fields())["stream"].set_bool_value(stream);
    std::string json;  // MessageToJsonString appends
    google::protobuf::util::MessageToJsonString(request, &json);
    const TestHttpResponse response = stack_->Post("/v1/completions", json);
    ASSERT_EQ(response.status, 200) << response.body;
    std::string text;
    std::string finish;
    if (!stream) {
      const Value body = ParseJson(response.body);
      text = Get(Choice(body), "text").string_value();
      finish = Get(Choice(body), "finish_reason").string_value();
    } else {
      const std::vector<std::string> events = SseData(response.body);
      ASSERT_GE(events.size(), 2u);
      for (size_t i = 0; i + 1 < events.size(); ++i) {
        const Value chunk = ParseJson(events[i]);
        text += Get(Choice(chunk), "text").string_value();
        if (Get(Choice(chunk), "finish_reason").has_string_value())
          finish = Get(Choice(chunk), "finish_reason").string_value();
      }
    }
    EXPECT_EQ(text, cut) << "stream=" << stream << " stop='" << stop << "'";
    EXPECT_EQ(finish, "stop");
  }
}

TEST_F(HttpFrontDoorTest, MalformedJsonIs400WithTheReason) {
  const TestHttpResponse response = stack_->Post("/v1/completions", R"({"prompt": "x",)");
  EXPECT_EQ(response.status, 400);
  const Value body = ParseJson(response.body);
  const Value& error = Get(body, "error");
  EXPECT_TRUE(absl::StartsWith(Get(error, "message").string_value(), "malformed JSON body: "))
      << Get(error, "message").string_value();
  EXPECT_EQ(Get(error, "type").string_value(), "invalid_request_error");
}

TEST_F(HttpFrontDoorTest, BadParametersAre400NamingTheField) {
  TestHttpResponse response = stack_->Post("/v1/completions", R"({"prompt":"x","n":65})");
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(Get(Get(ParseJson(response.body), "error"), "param").string_value(), "n");
  response = stack_->Post("/v1/chat/completions",
                          R"({"messages":[{"role":"user","content":"x"}],"temperature":"warm"})");
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(Get(Get(ParseJson(response.body), "error"), "message").string_value(),
            "'temperature' must be a number, got a string");
  response = stack_->Post("/v1/completions", R"({"prompt":"x","model":"gpt-4"})");
  EXPECT_EQ(response.status, 404);
  EXPECT_EQ(Get(Get(ParseJson(response.body), "error"), "param").string_value(), "model");
  EXPECT_EQ(Get(Get(ParseJson(response.body), "error"), "code").string_value(),
            "model_not_found");
  response = stack_->Post("/v1/completions", R"({"prompt":"x","max_tokenz":3})");
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(Get(Get(ParseJson(response.body), "error"), "message").string_value(),
            "Unrecognized request argument supplied: max_tokenz");
  response = stack_->Post("/v1/completions", R"({"prompt":"x","logit_bias":{"100000":1}})");
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(Get(Get(ParseJson(response.body), "error"), "param").string_value(), "logit_bias");
}

// Without --served-model-name the id is the GGUF's file name without .gguf.
TEST_F(HttpFrontDoorTest, TheServedModelNameDefaultsToTheFileStem) {
  FrontDoorOptions options;
  options.http.port = 0;
  options.coordinator_endpoint = stack_->cluster->coordinator_endpoint();
  options.model_path = stack_->model_path;
  auto door = FrontDoor::Start(options);
  ASSERT_TRUE(door.ok()) << door.status();
  const std::string stem = std::string(absl::StripSuffix(
      absl::string_view(stack_->model_path).substr(stack_->model_path.rfind('/') + 1), ".gguf"));
  EXPECT_EQ((*door)->model_name(), stem);
  const TestHttpResponse response = stack_->GetPath("/v1/models", "", door->get());
  ASSERT_EQ(response.status, 200);
  EXPECT_EQ(Get(Get(ParseJson(response.body), "data").list_value().values(0), "id").string_value(),
            stem);
}

// Classifier-free guidance through the front door: the same tokens as the guided
// request sent to the cluster directly, usage's guidance object, /metrics' counters.
TEST_F(HttpFrontDoorTest, GuidedCompletionEqualsTheClusterOutputAndIsCounted) {
  const std::string prompt = "Hello world, hello world, hello";
  const std::vector<int32_t> negative =
      stack_->tokenizer->Encode("world", {.add_special = true, .parse_special = true});
  const auto [expected, count] = stack_->Expected(
      stack_->tokenizer->Encode(prompt, {.add_special = true, .parse_special = true}), kMaxTokens,
      3.0f, negative);
  const auto [unguided, unguided_count] = stack_->Expected(
      stack_->tokenizer->Encode(prompt, {.add_special = true, .parse_special = true}), kMaxTokens);
  ASSERT_NE(expected, unguided) << "guidance must change this output, or the test proves nothing";
  const TestHttpResponse response = stack_->Post(
      "/v1/completions",
      absl::StrCat(R"({"prompt":")", prompt, R"(","max_tokens":)", kMaxTokens,
                   R"(,"temperature":0,"guidance_scale":3,"negative_prompt":"world"})"));
  ASSERT_EQ(response.status, 200) << response.body;
  const Value body = ParseJson(response.body);
  EXPECT_EQ(Get(Choice(body), "text").string_value(), expected);
  const Value& guidance = Get(Get(body, "usage"), "guidance");
  EXPECT_EQ(Get(guidance, "scale").number_value(), 3.0);
  EXPECT_EQ(Get(guidance, "unconditional_prompt_tokens").number_value(), negative.size());
  // The companion was fed its prompt and every generated token but the last.
  EXPECT_GE(Get(guidance, "extra_forward_tokens").number_value(), negative.size() + count - 1);
  const std::string metrics = stack_->GetPath("/metrics").body;
  EXPECT_TRUE(absl::StrContains(metrics, "splitspec_guided_requests_total ")) << metrics;
  EXPECT_FALSE(absl::StrContains(metrics, "splitspec_guided_requests_total 0\n")) << metrics;
  EXPECT_FALSE(absl::StrContains(metrics, "splitspec_guidance_forward_tokens_total 0\n"))
      << metrics;
}

TEST_F(HttpFrontDoorTest, GuidedChatWithoutNegativeUsesTheEmptyConversation) {
  auto chat = model::ChatTemplate::FromSource(model::kTinyChatMlTemplate);
  ASSERT_TRUE(chat.ok());
  std::vector<int32_t> unconditional =
      model::EncodeChat(*stack_->tokenizer, chat->RenderEmptyConversation());
  const int32_t bos = stack_->tokenizer->bos_id();
  if (bos >= 0 && (unconditional.empty() || unconditional.front() != bos))
    unconditional.insert(unconditional.begin(), bos);
  const auto [expected, count] =
      stack_->Expected(stack_->ChatPrompt("hello"), kMaxTokens, 0.5f, unconditional);
  ASSERT_NE(expected, stack_->Expected(stack_->ChatPrompt("hello"), kMaxTokens).first)
      << "guidance must change this output, or the test proves nothing";
  const TestHttpResponse response = stack_->Post(
      "/v1/chat/completions",
      absl::StrCat(R"({"messages":[{"role":"user","content":"hello"}],"max_tokens":)", kMaxTokens,
                   R"(,"temperature":0,"guidance_scale":0.5})"));
  ASSERT_EQ(response.status, 200) << response.body;
  const Value body = ParseJson(response.body);
  EXPECT_EQ(Get(Get(Choice(body), "message"), "content").string_value(), expected);
  EXPECT_EQ(Get(Get(Get(body, "usage"), "guidance"), "unconditional_prompt_tokens").number_value(),
            unconditional.size());
}

TEST_F(HttpFrontDoorTest, BadGuidanceIs400NamingTheField) {
  TestHttpResponse response =
      stack_->Post("/v1/completions", R"({"prompt":"x","guidance_scale":"strong"})");
  EXPECT_EQ(response.status, 400);
  EXPECT_EQ(Get(Get(ParseJson(response.body), "error"), "param").string_value(),
            "guidance_scale");
  response = stack_->Post("/v1/chat/completions",
                          R"({"messages":[{"role":"user","content":"x"}],"guidance_scale":2,
                              "negative_messages":[{"role":"robot","content":"x"}]})");
  EXPECT_EQ(response.status, 400) << response.body;
  EXPECT_EQ(Get(Get(ParseJson(response.body), "error"), "param").string_value(),
            "negative_messages");
}

TEST_F(HttpFrontDoorTest, PromptOverTheContextIs400) {
  std::vector<std::string> ids(600, "65");
  const TestHttpResponse response = stack_->Post(
      "/v1/completions", absl::StrCat(R"({"prompt":[)", absl::StrJoin(ids, ","), "]}"));
  EXPECT_EQ(response.status, 400);
  EXPECT_TRUE(
      absl::StrContains(Get(Get(ParseJson(response.body), "error"), "message").string_value(),
                        "maximum context length is 512 tokens; the request has 600 prompt tokens"))
      << response.body;
}

TEST_F(HttpFrontDoorTest, CoordinatorRefusalMapsTo400) {
  // Within the model's context but over the coordinator's max_new_tokens (100 here).
  const TestHttpResponse response =
      stack_->Post("/v1/completions", R"({"prompt":[1,2],"max_tokens":200})");
  EXPECT_EQ(response.status, 400) << response.body;
  EXPECT_EQ(Get(Get(ParseJson(response.body), "error"), "message").string_value(),
            "max_tokens 200 exceeds the limit 100");
}

TEST_F(HttpFrontDoorTest, ModelsHealthAndMetrics) {
  TestHttpResponse response = stack_->GetPath("/v1/models");
  ASSERT_EQ(response.status, 200);
  EXPECT_EQ(Get(Get(ParseJson(response.body), "data").list_value().values(0), "id").string_value(),
            "tiny");
  response = stack_->GetPath("/health");
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.body, R"({"status":"ok","target_workers_alive":1,"draft_workers_alive":1})");
  response = stack_->GetPath("/metrics");
  ASSERT_EQ(response.status, 200);
  EXPECT_TRUE(absl::StartsWith(response.Header("content-type"), "text/plain; version=0.0.4"));
  EXPECT_TRUE(absl::StrContains(response.body, "splitspec_coordinator_up 1\n")) << response.body;
  EXPECT_TRUE(absl::StrContains(response.body, "role=\"target\",state=\"alive\"} 1\n"))
      << response.body;
  EXPECT_TRUE(absl::StrContains(response.body, "role=\"draft\",state=\"alive\"} 1\n"))
      << response.body;
  EXPECT_TRUE(absl::StrContains(response.body, "splitspec_time_to_first_token_seconds_count"));
}

TEST_F(HttpFrontDoorTest, UnknownRoutesAndMethods) {
  TestHttpResponse response = stack_->GetPath("/v2/nothing");
  EXPECT_EQ(response.status, 404);
  EXPECT_EQ(Get(Get(ParseJson(response.body), "error"), "message").string_value(),
            "no route for GET /v2/nothing");
  response = stack_->GetPath("/v1/completions");
  EXPECT_EQ(response.status, 405);
  EXPECT_EQ(response.Header("allow"), "POST");
}

TEST_F(HttpFrontDoorTest, ApiKeyGuardsTheV1Routes) {
  std::unique_ptr<FrontDoor> guarded;
  ASSERT_NO_FATAL_FAILURE(stack_->StartFrontDoor("s3cret", &guarded));
  EXPECT_EQ(stack_->GetPath("/v1/models", "", guarded.get()).status, 401);
  EXPECT_EQ(stack_->GetPath("/v1/models", "Authorization: Bearer wrong\r\n", guarded.get()).status,
            401);
  EXPECT_EQ(stack_->GetPath("/v1/models", "Authorization: Bearer s3cret\r\n", guarded.get()).status,
            200);
  EXPECT_EQ(stack_->GetPath("/health", "", guarded.get()).status, 200);
}

TEST_F(HttpFrontDoorTest, AdminDrainRefusalsMapToHttpStatuses) {
  TestHttpResponse response = stack_->Post("/admin/drain", "{not json");
  EXPECT_EQ(response.status, 400) << response.body;
  EXPECT_TRUE(absl::StrContains(response.body, "malformed drain request")) << response.body;
  response = stack_->Post("/admin/drain", "{}");
  EXPECT_EQ(response.status, 400) << response.body;
  EXPECT_TRUE(absl::StrContains(response.body, "names no worker")) << response.body;
  response = stack_->Post("/admin/drain", R"({"worker_ids":[999]})");
  EXPECT_EQ(response.status, 404) << response.body;
  EXPECT_TRUE(absl::StrContains(response.body, "999")) << response.body;
  response = stack_->Post("/admin/drain", R"({"role":"ROLE_TARGET_WORKER","count":2})");
  EXPECT_EQ(response.status, 409) << response.body;
  EXPECT_TRUE(absl::StrContains(response.body, "DrainRequest.count 2")) << response.body;
  EXPECT_EQ(stack_->GetPath("/admin/drain").status, 405);
  std::unique_ptr<FrontDoor> guarded;
  ASSERT_NO_FATAL_FAILURE(stack_->StartFrontDoor("s3cret", &guarded));
  auto unauthorized =
      HttpRequestOnce(guarded->port(), "POST", "/admin/drain", R"({"worker_ids":[999]})");
  ASSERT_TRUE(unauthorized.ok());
  EXPECT_EQ(unauthorized->status, 401);
}

// Its own cluster: the drained draft worker is gone for good afterwards.
TEST(HttpFrontDoorAdminTest, DrainingTheDraftWorkerKeepsServing) {
  Stack stack;
  ASSERT_NO_FATAL_FAILURE(stack.Start("http-front-door-drain", tools::InProcessClusterOptions{}));
  const std::pair<std::string, int> expected = stack.Expected({5, 6, 7}, kMaxTokens);
  TestHttpResponse response =
      stack.Post("/admin/drain", R"({"role":"ROLE_DRAFT_WORKER","count":1,"reason":"test"})");
  ASSERT_EQ(response.status, 200) << response.body;
  const Value reply = ParseJson(response.body);
  EXPECT_EQ(Get(reply, "worker_ids").list_value().values_size(), 1) << response.body;
  // The draft worker leaves; the target then decodes alone, with the same greedy output.
  bool left = false;
  for (int i = 0; i < 500 && !left; ++i) {
    left = absl::StrContains(stack.GetPath("/metrics").body, "role=\"draft\",state=\"left\"}");
    if (!left) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  EXPECT_TRUE(left) << stack.GetPath("/metrics").body;
  response = stack.Post(
      "/v1/completions",
      absl::StrCat(R"({"prompt":[5,6,7],"temperature":0,"max_tokens":)", kMaxTokens, "}"));
  ASSERT_EQ(response.status, 200) << response.body;
  EXPECT_EQ(Get(Choice(ParseJson(response.body)), "text").string_value(), expected.first);
}

TEST(HttpFrontDoorHealthTest, NoTargetWorkerMeans503) {
  CoordinatorOptions options;
  options.control_endpoint = "inproc://http-front-door-empty";
  auto service = CoordinatorService::Create(options);
  ASSERT_TRUE(service.ok()) << service.status();
  std::atomic<bool> stop{false};
  std::thread thread([&] { (void)(*service)->Run(stop); });
  FrontDoorOptions front_options;
  front_options.http.port = 0;
  front_options.coordinator_endpoint = options.control_endpoint;
  front_options.model_path = WriteModel("http-front-door-empty");
  auto front_door = FrontDoor::Start(front_options);
  ASSERT_TRUE(front_door.ok()) << front_door.status();
  auto response = HttpRequestOnce((*front_door)->port(), "GET", "/health");
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->status, 503);
  EXPECT_EQ(response->Header("retry-after"), "1");
  EXPECT_EQ(Get(Get(ParseJson(response->body), "error"), "message").string_value(),
            "no target worker is alive");
  front_door->reset();
  stop.store(true);
  thread.join();
}

// A drafter whose Propose blocks until Open(), then proposes nothing: the
// draft worker stays alive (its heartbeats run on their own thread) but sends
// no blocks, so a target that waits an hour for blocks holds its request.
class GateDrafter : public spec::Drafter {
 public:
  absl::string_view name() const override { return "gate"; }
  absl::Status Start(const std::string&, absl::Span<const int32_t>) override {
    return absl::OkStatus();
  }
  absl::Status Truncate(const std::string&, int64_t) override { return absl::OkStatus(); }
  void Release(const std::string&) override {}
  absl::Status Propose(absl::Span<spec::DraftRequest> batch) override {
    MutexLock lock(&mu_);
    while (!open_) cv_.Wait(&mu_);
    for (spec::DraftRequest& request : batch) request.tokens.clear();
    return absl::OkStatus();
  }
  void Open() {
    MutexLock lock(&mu_);
    open_ = true;
    cv_.NotifyAll();
  }

 private:
  Mutex mu_;
  CondVar cv_;
  bool open_ ABSL_GUARDED_BY(mu_) = false;
};

// The request stays in flight until cancelled (see GateDrafter). The target
// serves one request at a time: a follow-up succeeds only if the cancellation
// released the first request's slot and KV at the target.
TEST(HttpFrontDoorDisconnectTest, ClientDisconnectCancelsAndFreesTheTarget) {
  GateDrafter gate;
  tools::InProcessClusterOptions options;
  options.target_engine.max_requests = 1;
  options.target_engine.block_wait = absl::Hours(1);
  Stack stack;
  ASSERT_NO_FATAL_FAILURE(stack.Start("http-front-door-disconnect", options, "", &gate));
  struct OpenAtExit {
    GateDrafter* gate;
    ~OpenAtExit() { gate->Open(); }  // before the cluster stops: the draft thread must return
  } open_at_exit{&gate};

  auto connection = TestHttpConnection::Connect(stack.front_door->port());
  ASSERT_TRUE(connection.ok());
  const std::string body = R"({"prompt":[10,20,30],"max_tokens":64,"temperature":0,"stream":true})";
  ASSERT_TRUE((*connection)
                  ->Send(absl::StrCat(
                      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(),
                      "\r\n\r\n", body))
                  .ok());
  // Wait until the first request holds the target: requests are parsed on a pool, so a probe
  // sent now could otherwise reach the target first and take the slot (the stream then gets 429).
  std::string running;
  for (int attempt = 0; attempt < 2000; ++attempt) {
    running = stack.GetPath("/metrics").body;
    if (absl::StrContains(running, "splitspec_num_requests_running 1\n")) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_TRUE(absl::StrContains(running, "splitspec_num_requests_running 1\n")) << running;
  // Once the first request holds the target, a second one is refused (429).
  TestHttpResponse busy;
  for (int attempt = 0; attempt < 2000; ++attempt) {
    busy = stack.Post("/v1/completions",
                      R"({"prompt":[1,2],"max_tokens":2,"temperature":0,"drafter":"none"})");
    if (busy.status != 200) break;
  }
  ASSERT_EQ(busy.status, 429) << busy.body;
  EXPECT_FALSE(busy.Header("retry-after").empty());

  connection->reset();  // the client goes away mid-request
  std::string metrics;
  do {
    metrics = stack.GetPath("/metrics").body;
  } while (!absl::StrContains(metrics, "splitspec_requests_total{outcome=\"cancelled\"} 1\n"));
  EXPECT_TRUE(absl::StrContains(metrics, "splitspec_num_requests_running 0\n")) << metrics;

  const TestHttpResponse after = stack.Post(
      "/v1/completions", R"({"prompt":[1,2],"max_tokens":2,"temperature":0,"drafter":"none"})");
  EXPECT_EQ(after.status, 200) << after.body;
}

// A front door that shuts down (the coordinator got SIGTERM) ends a request in
// flight with an OpenAI-shaped error, never by just closing the connection.
TEST(HttpFrontDoorShutdownTest, AnOpenRequestEndsWithAnErrorNotACut) {
  GateDrafter gate;
  tools::InProcessClusterOptions options;
  options.target_engine.block_wait = absl::Hours(1);
  Stack stack;
  ASSERT_NO_FATAL_FAILURE(stack.Start("http-front-door-shutdown", options, "", &gate));
  struct OpenAtExit {
    GateDrafter* gate;
    ~OpenAtExit() { gate->Open(); }
  } open_at_exit{&gate};
  auto connection = TestHttpConnection::Connect(stack.front_door->port());
  ASSERT_TRUE(connection.ok());
  const std::string body = R"({"prompt":[10,20,30],"max_tokens":64,"temperature":0,"stream":true})";
  ASSERT_TRUE((*connection)
                  ->Send(absl::StrCat(
                      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(),
                      "\r\n\r\n", body))
                  .ok());
  std::string running;
  for (int attempt = 0; attempt < 2000; ++attempt) {
    running = stack.GetPath("/metrics").body;
    if (absl::StrContains(running, "splitspec_num_requests_running 1\n")) break;
    absl::SleepFor(absl::Milliseconds(5));
  }
  ASSERT_TRUE(absl::StrContains(running, "splitspec_num_requests_running 1\n")) << running;

  stack.front_door.reset();
  absl::StatusOr<TestHttpResponse> response = (*connection)->ReadResponse();
  ASSERT_TRUE(response.ok()) << "the connection was cut: " << response.status();
  // Before any token: a 503 JSON error; after the stream began: an SSE error event.
  std::string error_json = response->body;
  if (response->status == 200) {
    const std::vector<std::string> events = SseData(response->body);
    ASSERT_GE(events.size(), 2u) << response->body;
    EXPECT_EQ(events.back(), "[DONE]");
    error_json = events[events.size() - 2];
  } else {
    EXPECT_EQ(response->status, 503) << response->body;
  }
  const Value error = Get(ParseJson(error_json), "error");
  EXPECT_TRUE(absl::StrContains(Get(error, "message").string_value(), "shutting down"))
      << error_json;
}

}  // namespace
}  // namespace splitspec::coordinator::http

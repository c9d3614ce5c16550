#include "tests/integration/http_stream_load.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "google/protobuf/struct.pb.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "runtime/model/transformer.h"
#include "runtime/tokenizer/detokenizer.h"
#include "runtime/tokenizer/tokenizer_gguf.h"
#include "tests/integration/plain_greedy.h"
#include "tests/testing/http_test_client.h"

namespace splitspec::testing {

using coordinator::http::TestHttpConnection;
using coordinator::http::TestHttpResponse;

int FreeLoopbackPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return 0;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

StreamOutcome StreamCompletion(int port, const std::vector<int32_t>& prompt, int max_tokens) {
  StreamOutcome outcome;
  auto connection = TestHttpConnection::Connect(port);
  if (!connection.ok()) return {.failure = std::string(connection.status().message())};
  const std::string body =
      absl::StrCat(R"({"prompt":[)", absl::StrJoin(prompt, ","), R"(],"max_tokens":)", max_tokens,
                   R"(,"temperature":0,"stream":true})");
  absl::Status sent = (*connection)
                          ->Send(absl::StrCat("POST /v1/completions HTTP/1.1\r\nHost: x\r\n"
                                              "Content-Length: ",
                                              body.size(), "\r\n\r\n", body));
  if (!sent.ok()) return {.failure = std::string(sent.message())};
  absl::StatusOr<TestHttpResponse> response = (*connection)->ReadResponse();
  if (!response.ok()) return {.failure = absl::StrCat("cut: ", response.status().message())};
  if (response->status != 200)
    return {.failure = absl::StrCat("HTTP ", response->status, ": ", response->body)};
  const std::vector<std::string> events = coordinator::http::SseData(response->body);
  bool finished = false;
  for (const std::string& event : events) {
    if (event == "[DONE]") continue;
    google::protobuf::Value value;
    if (!google::protobuf::util::JsonStringToMessage(event, &value).ok())
      return {.failure = absl::StrCat("not JSON: ", event)};
    const auto& fields = value.struct_value().fields();
    if (fields.contains("error")) return {.failure = absl::StrCat("error event: ", event)};
    const auto& choice = fields.at("choices").list_value().values(0).struct_value().fields();
    outcome.text += choice.at("text").string_value();
    finished |= choice.at("finish_reason").has_string_value();
  }
  if (events.empty() || events.back() != "[DONE]" || !finished)
    return {.failure = absl::StrCat("stream ended without a finish and [DONE]: ", response->body)};
  outcome.completed = true;
  return outcome;
}

std::vector<std::string> PlainGreedyTexts(const std::string& model_path,
                                          const std::vector<std::vector<int32_t>>& prompts,
                                          int max_tokens, model::DeviceSpec device) {
  std::vector<std::string> texts;
  auto reference = model::Transformer::Load(model_path, {.threads = 1, .device = device});
  EXPECT_TRUE(reference.ok()) << reference.status();
  if (!reference.ok()) return texts;
  auto tokenizer = model::LoadTokenizerFromGguf((*reference)->file());
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  if (!tokenizer.ok()) return texts;
  for (const std::vector<int32_t>& prompt : prompts) {
    model::StreamingDetokenizer detokenizer(&*tokenizer);
    std::string text;
    for (int32_t token : PlainGreedy(**reference, prompt, max_tokens)) {
      if (tokenizer->IsEndOfGeneration(token)) break;
      text += *detokenizer.Push(token);
    }
    texts.push_back(text + detokenizer.Finish());
  }
  return texts;
}

StreamingLoad::StreamingLoad(int port, std::vector<std::vector<int32_t>> prompts,
                             std::vector<std::string> expected, int max_tokens)
    : port_(port),
      prompts_(std::move(prompts)),
      expected_(std::move(expected)),
      max_tokens_(max_tokens) {}

void StreamingLoad::Start(int clients) {
  for (int c = 0; c < clients; ++c) {
    threads_.emplace_back([this, c] {
      for (int i = c; !stop_.load() && i < 10000; i += 7) {
        const size_t p = static_cast<size_t>(i) % prompts_.size();
        StreamOutcome outcome = StreamCompletion(port_, prompts_[p], max_tokens_);
        std::lock_guard<std::mutex> lock(mu_);
        if (outcome.completed && outcome.text == expected_[p]) {
          ++exact_;
        } else {
          failures_.push_back(absl::StrCat(
              "prompt ", p, ": ",
              outcome.completed
                  ? absl::StrCat("text '", outcome.text, "' != plain greedy '", expected_[p], "'")
                  : outcome.failure));
        }
      }
    });
  }
}

void StreamingLoad::Stop() {
  stop_.store(true);
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

int StreamingLoad::exact() {
  std::lock_guard<std::mutex> lock(mu_);
  return exact_;
}

std::vector<std::string> StreamingLoad::failures() {
  std::lock_guard<std::mutex> lock(mu_);
  return failures_;
}

bool StreamingLoad::WaitForMore(int more) {
  const int goal = exact() + more;
  for (int attempt = 0; attempt < 1200 && exact() < goal; ++attempt)
    absl::SleepFor(absl::Milliseconds(100));
  return exact() >= goal;
}

}  // namespace splitspec::testing

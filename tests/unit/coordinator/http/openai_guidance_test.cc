// The classifier-free guidance extension of the OpenAI request schema:
// guidance_scale, negative_prompt and (chat) negative_messages, errors naming the
// field, and their mapping onto the SubmitRequest.
#include "coordinator/http/openai_request.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::coordinator::http {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::pair<std::string, std::string> ParseError(const std::string& json,
                                               CompletionRequest::Kind kind) {
  absl::StatusOr<CompletionRequest> r = ParseCompletionRequest(json, kind);
  EXPECT_FALSE(r.ok()) << json;
  if (r.ok()) return {};
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  return {std::string(r.status().message()), ParamOf(r.status())};
}

TEST(OpenAiGuidanceTest, ReadsScaleAndNegativePrompts) {
  absl::StatusOr<CompletionRequest> r = ParseCompletionRequest(
      R"({"prompt":"a cat","guidance_scale":1.5,"negative_prompt":"a dog"})",
      CompletionRequest::kCompletion);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FLOAT_EQ(r->guidance_scale, 1.5f);
  EXPECT_EQ(r->negative_prompt, "a dog");
  r = ParseCompletionRequest(
      R"({"messages":[{"role":"user","content":"hi"}],"guidance_scale":3,
          "negative_messages":[{"role":"system","content":"be rude"},
                               {"role":"user","content":[{"type":"text","text":"hi"}]}]})",
      CompletionRequest::kChat);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->negative_messages.size(), 2u);
  EXPECT_EQ(r->negative_messages[0].role, "system");
  EXPECT_EQ(r->negative_messages[1].content, "hi");
  r = ParseCompletionRequest(R"({"prompt":"x"})", CompletionRequest::kCompletion);
  ASSERT_TRUE(r.ok());
  EXPECT_FLOAT_EQ(r->guidance_scale, 1.0f) << "absent = off";
}

TEST(OpenAiGuidanceTest, BadValuesNameTheField) {
  const auto kCompletion = CompletionRequest::kCompletion;
  const auto kChat = CompletionRequest::kChat;
  auto [message, param] = ParseError(R"({"prompt":"x","guidance_scale":"2"})", kCompletion);
  EXPECT_EQ(param, "guidance_scale");
  EXPECT_THAT(message, HasSubstr("must be a number, got a string"));
  std::tie(message, param) = ParseError(R"({"prompt":"x","guidance_scale":-1})", kCompletion);
  EXPECT_EQ(param, "guidance_scale");
  EXPECT_THAT(message, HasSubstr("must be in [0, 100], got -1"));
  std::tie(message, param) = ParseError(R"({"prompt":"x","guidance_scale":101})", kCompletion);
  EXPECT_EQ(param, "guidance_scale");
  std::tie(message, param) =
      ParseError(R"({"prompt":"x","guidance_scale":2,"negative_prompt":[1,2]})", kCompletion);
  EXPECT_EQ(param, "negative_prompt");
  std::tie(message, param) = ParseError(R"({"prompt":"x","negative_prompt":"y"})", kCompletion);
  EXPECT_EQ(param, "negative_prompt");
  EXPECT_THAT(message, HasSubstr("needs guidance_scale other than 1"));
  std::tie(message, param) = ParseError(
      R"({"prompt":"x","guidance_scale":2,"negative_messages":[{"role":"user"}]})", kCompletion);
  EXPECT_EQ(param, "negative_messages");
  const std::string chat = R"({"messages":[{"role":"user","content":"hi"}],"guidance_scale":2,)";
  std::tie(message, param) = ParseError(chat + R"("negative_messages":[]})", kChat);
  EXPECT_EQ(param, "negative_messages");
  EXPECT_THAT(message, HasSubstr("must not be empty"));
  std::tie(message, param) = ParseError(chat + R"("negative_messages":[{"content":"x"}]})", kChat);
  EXPECT_EQ(param, "negative_messages[0].role");
  std::tie(message, param) = ParseError(
      chat + R"("negative_prompt":"a","negative_messages":[{"role":"user","content":"b"}]})",
      kChat);
  EXPECT_EQ(param, "negative_messages");
  EXPECT_THAT(message, HasSubstr("cannot both be given"));
}

TEST(OpenAiGuidanceTest, SubmitCarriesScaleAndUnconditionalPromptOnlyWhenGuided) {
  CompletionRequest request;
  request.prompt_text = "x";
  request.guidance_scale = 2.5f;
  const std::vector<int32_t> prompt = {1, 2}, negative = {0, 7};
  proto::SubmitRequest submit = MakeSubmitRequest(request, prompt, "r", {}, negative);
  ASSERT_TRUE(submit.params().has_guidance_scale());
  EXPECT_FLOAT_EQ(submit.params().guidance_scale(), 2.5f);
  EXPECT_THAT(submit.params().negative_prompt_tokens(), ElementsAre(0, 7));
  request.guidance_scale = 1.0f;
  submit = MakeSubmitRequest(request, prompt, "r", {}, negative);
  EXPECT_FALSE(submit.params().has_guidance_scale());
  EXPECT_TRUE(submit.params().negative_prompt_tokens().empty());
}

}  // namespace
}  // namespace splitspec::coordinator::http

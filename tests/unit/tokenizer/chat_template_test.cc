#include "runtime/tokenizer/chat_template.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace splitspec::model {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// SmolLM2-135M-Instruct's template, as stored in its GGUF (real newlines).
constexpr char kSmolLM2Template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

// Qwen2-Instruct's template, here with Jinja escapes (backslash-n) in the literals.
constexpr char kQwen2Template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

// Plain ChatML without a default system prompt.
constexpr char kPlainChatMLTemplate[] =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content']"
    " + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|im_start|>assistant\n' }}{% endif %}";

constexpr char kLlama3Template[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}"
    "{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}";

ChatTemplate Make(std::string_view source, std::string bos = "") {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(source, std::move(bos));
  EXPECT_TRUE(t.ok()) << t.status();
  return std::move(t).value();
}

TEST(ChatTemplateTest, SmolLM2InsertsItsDefaultSystemPrompt) {
  ChatTemplate t = Make(kSmolLM2Template);
  EXPECT_EQ(t.format(), ChatTemplateFormat::kChatML);
  EXPECT_EQ(*t.Apply({{"user", "Hi there"}}, /*add_generation_prompt=*/true),
            "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
            "Face<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, SmolLM2KeepsAGivenSystemPrompt) {
  ChatTemplate t = Make(kSmolLM2Template);
  EXPECT_EQ(*t.Apply({{"system", "Be brief."}, {"user", "2+2?"}, {"assistant", "4"}},
                     /*add_generation_prompt=*/false),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n2+2?<|im_end|>\n"
            "<|im_start|>assistant\n4<|im_end|>\n");
}

TEST(ChatTemplateTest, Qwen2LiteralsWithJinjaEscapesAreUnderstood) {
  ChatTemplate t = Make(kQwen2Template);
  ASSERT_TRUE(t.default_system_prompt().has_value());
  EXPECT_EQ(*t.default_system_prompt(), "You are a helpful assistant.");
  EXPECT_EQ(*t.Apply({{"user", "Hello"}}, true),
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n");
}

TEST(ChatTemplateTest, PlainChatMLHasNoDefaultSystemPrompt) {
  ChatTemplate t = Make(kPlainChatMLTemplate);
  EXPECT_FALSE(t.default_system_prompt().has_value());
  EXPECT_EQ(*t.Apply({{"user", "Hi"}}, false), "<|im_start|>user\nHi<|im_end|>\n");
}

TEST(ChatTemplateTest, Llama3UsesHeadersBosAndTrimsContent) {
  ChatTemplate t = Make(kLlama3Template, "<|begin_of_text|>");
  EXPECT_EQ(t.format(), ChatTemplateFormat::kLlama3);
  EXPECT_EQ(*t.Apply({{"system", "  Be nice.\n"}, {"user", "Hi"}}, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe nice.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatTemplateTest, RefusesUnrecognizedTemplates) {
  absl::StatusOr<ChatTemplate> t = ChatTemplate::FromSource(
      "{% for message in messages %}[INST] {{ message['content'] }} [/INST]{% endfor %}");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kUnimplemented);
  EXPECT_THAT(t.status().message(), HasSubstr("unrecognized chat template"));
  EXPECT_THAT(t.status().message(), HasSubstr("[INST]"));

  t = ChatTemplate::FromSource(
      "<|start_header_id|><|end_header_id|><|eot_id|>Cutting Knowledge Date: December 2023");
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(t.status().message(), HasSubstr("Llama 3.1+"));

  t = ChatTemplate::FromSource("");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
}

TEST(ChatTemplateTest, RefusesBadMessages) {
  ChatTemplate t = Make(kSmolLM2Template);
  EXPECT_THAT(t.Apply({}, true).status().message(), HasSubstr("no messages"));
  absl::StatusOr<std::string> out = t.Apply({{"user", "a"}, {"tool", "{}"}}, true);
  ASSERT_FALSE(out.ok());
  EXPECT_THAT(out.status().message(), HasSubstr("message 1 has role 'tool'"));
}

TEST(JinjaStringLiteralsTest, ReadsQuotedStringsInsideTagsOnly) {
  EXPECT_THAT(JinjaStringLiterals("outside 'no' {{ 'a\\n' + \"b\\\"c\" }} {% if x == 'd' %}"),
              ElementsAre("a\n", "b\"c", "d"));
}

}  // namespace
}  // namespace splitspec::model

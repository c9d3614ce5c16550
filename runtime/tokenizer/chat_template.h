// Chat prompt formatting chosen from a model's `tokenizer.chat_template`.
//
//   ASSIGN_OR_RETURN(ChatTemplate chat,
//                    ChatTemplate::FromSource(tok.chat_template(), tok.TokenText(tok.bos_id())));
//   ASSIGN_OR_RETURN(std::string prompt,
//                    chat.Apply({{"user", "Hi"}}, /*add_generation_prompt=*/true));
//   std::vector<TokenId> ids = tok.Encode(prompt, {.add_special = false, .parse_special = true});
//
// There is no Jinja engine: the template source is recognized by signature as
// one of the formats below and rendered by code that reproduces what that
// template outputs; anything else is refused, never guessed.
//
//   kChatML  (SmolLM2, Qwen2, Qwen2.5, ...): per message
//              "<|im_start|>" role "\n" content "<|im_end|>\n",
//            generation prompt "<|im_start|>assistant\n". When the template
//            carries a default system prompt (a string literal
//            "<|im_start|>system\n...<|im_end|>\n", as SmolLM2's "You are a
//            helpful AI assistant named SmolLM, trained by Hugging Face" and
//            Qwen's), that system turn is emitted first whenever the first
//            message is not a system message.
//   kLlama3  (Llama 3 / 3-Instruct): BOS text (when the template uses
//            bos_token), then per message
//              "<|start_header_id|>" role "<|end_header_id|>\n\n" trim(content) "<|eot_id|>",
//            generation prompt "<|start_header_id|>assistant<|end_header_id|>\n\n".
//            Llama 3.1+ templates (date/tool preamble) are refused.
//
// The result contains special-token text: encode it with parse_special = true
// and add_special = false (the template already placed BOS where it wants it).
//
// Thread safety: immutable; Apply may be called concurrently.
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_CHAT_TEMPLATE_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_CHAT_TEMPLATE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace splitspec::model {

struct ChatMessage {
  std::string role;     // "system", "user" or "assistant"
  std::string content;
};

enum class ChatTemplateFormat { kChatML, kLlama3 };

class ChatTemplate {
 public:
  // Recognizes `source`. `bos_text` is the text of the BOS token (used when
  // the template prints bos_token).
  // Errors: NotFound when `source` is empty (the model has no chat template);
  // Unimplemented naming the family and quoting the start of the template
  // when it is not one of the formats above.
  static absl::StatusOr<ChatTemplate> FromSource(std::string_view source,
                                                 std::string bos_text = "");

  // Renders `messages`. Errors: InvalidArgument for an empty list, an empty
  // role, or a role other than system/user/assistant (naming it and its index).
  absl::StatusOr<std::string> Apply(absl::Span<const ChatMessage> messages,
                                    bool add_generation_prompt) const;

  ChatTemplateFormat format() const { return format_; }
  // The ChatML default system prompt, if the template has one.
  const std::optional<std::string>& default_system_prompt() const { return default_system_; }

 private:
  ChatTemplate(ChatTemplateFormat format, std::optional<std::string> default_system,
               std::string bos_text)
      : format_(format), default_system_(std::move(default_system)), bos_text_(std::move(bos_text)) {}

  std::string ApplyChatML(absl::Span<const ChatMessage> messages, bool add_generation_prompt) const;
  std::string ApplyLlama3(absl::Span<const ChatMessage> messages, bool add_generation_prompt) const;

  ChatTemplateFormat format_;
  std::optional<std::string> default_system_;
  std::string bos_text_;  // empty when the template does not print bos_token
};

// The string literals of a Jinja template, in order, with escapes (\n, \t,
// \\, \', \") resolved. Only literals inside {{ }} and {% %} tags count.
std::vector<std::string> JinjaStringLiterals(std::string_view source);

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_CHAT_TEMPLATE_H_

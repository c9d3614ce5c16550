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
// Apply's result contains special-token text, and so may the messages: for a
// model's input use Render + EncodeChat, which encode only the template's own
// markers ("<|im_start|>", "<|im_end|>", BOS, ...) as special tokens and every
// message's content (and role) as plain text, as OpenAI's API does: a user who
// writes "<|im_end|>" gets those characters, not a forged turn boundary.
//
//   ASSIGN_OR_RETURN(std::vector<ChatSegment> segments, chat.Render(messages, true));
//   std::vector<TokenId> ids = EncodeChat(tok, segments);
//
// For messages without special-token text, EncodeChat gives exactly
// tok.Encode(Apply(...), {.add_special = false, .parse_special = true}): the
// tokenizer splits at special tokens either way and encodes the text between
// them alone.
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
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::model {

struct ChatMessage {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

// A piece of a rendered chat: a template marker (special-token text) or the
// plain text between two markers (adjacent plain pieces are merged).
struct ChatSegment {
  std::string text;
  bool marker = false;
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
  // The same rendering as segments; Apply is their concatenation. Same errors.
  absl::StatusOr<std::vector<ChatSegment>> Render(absl::Span<const ChatMessage> messages,
                                                  bool add_generation_prompt) const;

  // What the template renders for a conversation with no messages and the
  // generation prompt: the unconditional prompt of classifier-free guidance on
  // chat. (No default system prompt: the templates add it only before a first
  // message.)
  std::vector<ChatSegment> RenderEmptyConversation() const;

  ChatTemplateFormat format() const { return format_; }
  // The ChatML default system prompt, if the template has one.
  const std::optional<std::string>& default_system_prompt() const { return default_system_; }

 private:
  ChatTemplate(ChatTemplateFormat format, std::optional<std::string> default_system,
               std::string bos_text)
      : format_(format),
        default_system_(std::move(default_system)),
        bos_text_(std::move(bos_text)) {}

  class SegmentBuilder {
   public:
    SegmentBuilder& Marker(std::string_view text);
    SegmentBuilder& Text(std::string_view text);
    std::vector<ChatSegment> Take() { return std::move(segments_); }

   private:
    SegmentBuilder& Append(std::string_view text, bool marker);
    std::vector<ChatSegment> segments_;
  };

  void RenderChatML(absl::Span<const ChatMessage> messages, bool add_generation_prompt,
                    SegmentBuilder& out) const;
  void RenderLlama3(absl::Span<const ChatMessage> messages, bool add_generation_prompt,
                    SegmentBuilder& out) const;

  ChatTemplateFormat format_;
  std::optional<std::string> default_system_;
  std::string bos_text_;  // empty when the template does not print bos_token
};

// Encodes Render's segments: markers with parse_special, text without it;
// add_special is off (the template placed BOS where it wants it).
std::vector<TokenId> EncodeChat(const Tokenizer& tokenizer, absl::Span<const ChatSegment> segments);

// The string literals of a Jinja template, in order, with escapes (\n, \t,
// \\, \', \") resolved. Only literals inside {{ }} and {% %} tags count.
std::vector<std::string> JinjaStringLiterals(std::string_view source);

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_CHAT_TEMPLATE_H_

#include "runtime/tokenizer/chat_template.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/tokenizer.h"
#include "runtime/tokenizer/tokenizer_internal.h"
#include "runtime/tokenizer/unicode.h"

namespace splitspec::model {
namespace {

using tokenizer_internal::Contains;

constexpr std::string_view kImStart = "<|im_start|>";
constexpr std::string_view kImEnd = "<|im_end|>";
constexpr std::string_view kChatMLSystemPrefix = "<|im_start|>system\n";
constexpr std::string_view kChatMLAssistantPrompt = "<|im_start|>assistant\n";
constexpr std::string_view kStartHeader = "<|start_header_id|>";
constexpr std::string_view kEndHeader = "<|end_header_id|>";
constexpr std::string_view kEotId = "<|eot_id|>";

bool ContainsAny(std::string_view s, std::initializer_list<std::string_view> needles) {
  for (std::string_view n : needles) {
    if (tokenizer_internal::Contains(s, n)) return true;
  }
  return false;
}

// Reads the quoted literal starting at source[*pos] (a quote); advances *pos
// past the closing quote.
std::string ReadLiteral(std::string_view source, size_t* pos) {
  const char quote = source[*pos];
  std::string out;
  size_t i = *pos + 1;
  for (; i < source.size() && source[i] != quote; ++i) {
    if (source[i] != '\\' || i + 1 >= source.size()) {
      out.push_back(source[i]);
      continue;
    }
    const char e = source[++i];
    switch (e) {
      case 'n':
        out.push_back('\n');
        break;
      case 't':
        out.push_back('\t');
        break;
      case 'r':
        out.push_back('\r');
        break;
      default:
        out.push_back(e);
        break;  // \\, \', \" and anything else
    }
  }
  *pos = i + 1;
  return out;
}

std::string Quote(std::string_view source) {
  std::string head(source.substr(0, 80));
  return absl::StrCat("'", head, source.size() > 80 ? "...'" : "'");
}

// Text of the default system turn: a literal "<|im_start|>system\n...<|im_end|>".
std::optional<std::string> FindChatMLDefaultSystem(const std::vector<std::string>& literals) {
  for (const std::string& lit : literals) {
    if (!std::string_view(lit).starts_with(kChatMLSystemPrefix)) continue;
    const size_t end = lit.find(kImEnd, kChatMLSystemPrefix.size());
    if (end == std::string::npos) continue;
    return lit.substr(kChatMLSystemPrefix.size(), end - kChatMLSystemPrefix.size());
  }
  return std::nullopt;
}

bool HasLiteral(const std::vector<std::string>& literals, std::string_view needle) {
  for (const std::string& lit : literals) {
    if (tokenizer_internal::Contains(lit, needle)) return true;
  }
  return false;
}

// Jinja's `trim` (Python's str.strip()): drops leading and trailing whitespace.
std::string_view Trim(std::string_view s) {
  const std::vector<uint32_t> cps = unicode::DecodeUtf8Lenient(s);
  size_t lead = 0;
  size_t lead_bytes = 0;
  while (lead < cps.size() && unicode::Flags(cps[lead]).is_whitespace()) {
    lead_bytes += unicode::EncodeUtf8(cps[lead]).size();
    ++lead;
  }
  size_t trail_bytes = 0;
  for (size_t k = cps.size(); k > lead && unicode::Flags(cps[k - 1]).is_whitespace(); --k) {
    trail_bytes += unicode::EncodeUtf8(cps[k - 1]).size();
  }
  return s.substr(lead_bytes, s.size() - lead_bytes - trail_bytes);
}

}  // namespace

std::vector<std::string> JinjaStringLiterals(std::string_view source) {
  std::vector<std::string> literals;
  bool in_tag = false;
  size_t i = 0;
  while (i < source.size()) {
    if (!in_tag) {
      if (i + 1 < source.size() && source[i] == '{' &&
          (source[i + 1] == '{' || source[i + 1] == '%')) {
        in_tag = true;
        i += 2;
      } else {
        ++i;
      }
      continue;
    }
    const char c = source[i];
    if (c == '\'' || c == '"') {
      literals.push_back(ReadLiteral(source, &i));
    } else if (i + 1 < source.size() && (c == '}' || c == '%') && source[i + 1] == '}') {
      in_tag = false;
      i += 2;
    } else {
      ++i;
    }
  }
  return literals;
}

absl::StatusOr<ChatTemplate> ChatTemplate::FromSource(std::string_view source,
                                                      std::string bos_text) {
  if (source.empty()) {
    return absl::NotFoundError("the model has no chat template (tokenizer.chat_template)");
  }
  const std::vector<std::string> literals = JinjaStringLiterals(source);
  const bool uses_role =
      ContainsAny(source, {"message['role']", "message.role", "message[\"role\"]"});
  const bool uses_content =
      ContainsAny(source, {"message['content']", "message.content", "message[\"content\"]"});

  if (Contains(source, kImStart) && Contains(source, kImEnd) && uses_role && uses_content &&
      HasLiteral(literals, kChatMLAssistantPrompt)) {
    return ChatTemplate(ChatTemplateFormat::kChatML, FindChatMLDefaultSystem(literals), "");
  }
  if (Contains(source, kStartHeader) && Contains(source, kEndHeader) && Contains(source, kEotId)) {
    if (ContainsAny(source, {"Cutting Knowledge Date", "tools", "ipython"})) {
      return absl::UnimplementedError(absl::StrCat(
          "Llama 3.1+ chat template (date/tool preamble) is not supported: ", Quote(source)));
    }
    if (!uses_role || !uses_content || !HasLiteral(literals, "<|start_header_id|>assistant")) {
      return absl::UnimplementedError(
          absl::StrCat("unrecognized Llama-3-style chat template: ", Quote(source)));
    }
    std::string bos = Contains(source, "bos_token") ? std::move(bos_text) : "";
    return ChatTemplate(ChatTemplateFormat::kLlama3, std::nullopt, std::move(bos));
  }
  return absl::UnimplementedError(
      absl::StrCat("unrecognized chat template (supported: ChatML, Llama 3): ", Quote(source)));
}

absl::StatusOr<std::string> ChatTemplate::Apply(absl::Span<const ChatMessage> messages,
                                                bool add_generation_prompt) const {
  absl::StatusOr<std::vector<ChatSegment>> segments = Render(messages, add_generation_prompt);
  if (!segments.ok()) return segments.status();
  std::string out;
  for (const ChatSegment& segment : *segments) out.append(segment.text);
  return out;
}

absl::StatusOr<std::vector<ChatSegment>> ChatTemplate::Render(
    absl::Span<const ChatMessage> messages, bool add_generation_prompt) const {
  if (messages.empty()) return absl::InvalidArgumentError("chat has no messages");
  for (size_t i = 0; i < messages.size(); ++i) {
    const std::string& role = messages[i].role;
    if (role != "system" && role != "user" && role != "assistant") {
      return absl::InvalidArgumentError(absl::StrCat("message ", i, " has role '", role,
                                                     "'; supported: system, user, assistant"));
    }
  }
  SegmentBuilder out;
  if (format_ == ChatTemplateFormat::kChatML) {
    RenderChatML(messages, add_generation_prompt, out);
  } else {
    RenderLlama3(messages, add_generation_prompt, out);
  }
  return out.Take();
}

std::vector<ChatSegment> ChatTemplate::RenderEmptyConversation() const {
  SegmentBuilder out;
  if (format_ == ChatTemplateFormat::kChatML) {
    out.Marker(kImStart).Text("assistant\n");
  } else {
    out.Marker(bos_text_);
    out.Marker(kStartHeader).Text("assistant").Marker(kEndHeader).Text("\n\n");
  }
  return out.Take();
}

void ChatTemplate::RenderChatML(absl::Span<const ChatMessage> messages, bool add_generation_prompt,
                                SegmentBuilder& out) const {
  if (default_system_.has_value() && messages[0].role != "system") {
    out.Marker(kImStart).Text("system\n").Text(*default_system_).Marker(kImEnd).Text("\n");
  }
  for (const ChatMessage& m : messages) {
    out.Marker(kImStart).Text(m.role).Text("\n").Text(m.content).Marker(kImEnd).Text("\n");
  }
  if (add_generation_prompt) out.Marker(kImStart).Text("assistant\n");
}

void ChatTemplate::RenderLlama3(absl::Span<const ChatMessage> messages, bool add_generation_prompt,
                                SegmentBuilder& out) const {
  out.Marker(bos_text_);
  for (const ChatMessage& m : messages) {
    out.Marker(kStartHeader).Text(m.role).Marker(kEndHeader).Text("\n\n");
    out.Text(Trim(m.content)).Marker(kEotId);
  }
  if (add_generation_prompt)
    out.Marker(kStartHeader).Text("assistant").Marker(kEndHeader).Text("\n\n");
}

ChatTemplate::SegmentBuilder& ChatTemplate::SegmentBuilder::Marker(std::string_view text) {
  return Append(text, /*marker=*/true);
}

ChatTemplate::SegmentBuilder& ChatTemplate::SegmentBuilder::Text(std::string_view text) {
  return Append(text, /*marker=*/false);
}

ChatTemplate::SegmentBuilder& ChatTemplate::SegmentBuilder::Append(std::string_view text,
                                                                   bool marker) {
  if (text.empty()) return *this;
  if (!marker && !segments_.empty() && !segments_.back().marker) {
    segments_.back().text.append(text);  // one plain span between two markers
  } else {
    segments_.push_back({std::string(text), marker});
  }
  return *this;
}

std::vector<TokenId> EncodeChat(const Tokenizer& tokenizer,
                                absl::Span<const ChatSegment> segments) {
  std::vector<TokenId> ids;
  for (const ChatSegment& segment : segments) {
    const std::vector<TokenId> part =
        tokenizer.Encode(segment.text, {.add_special = false, .parse_special = segment.marker});
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

}  // namespace splitspec::model

#include "coordinator/http/tool_call_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"

namespace splitspec::coordinator::http {
namespace {

constexpr absl::string_view kHermesOpen = "<tool_call>";
constexpr absl::string_view kHermesClose = "</tool_call>";
constexpr absl::string_view kLlama3PythonTag = "<|python_tag|>";
constexpr size_t kNone = absl::string_view::npos;

// The length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t PartialMarkerSuffix(absl::string_view text, absl::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (absl::EndsWith(text, marker.substr(0, n))) return n;
  }
  return 0;
}

size_t SkipSpace(absl::string_view text, size_t pos) {
  while (pos < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[pos]))) ++pos;
  return pos;
}

// One past the closing quote of the JSON string opening at text[pos]; kNone if not closed yet.
size_t StringEnd(absl::string_view text, size_t pos) {
  for (size_t i = pos + 1; i < text.size(); ++i) {
    if (text[i] == '\\') {
      ++i;
    } else if (text[i] == '"') {
      return i + 1;
    }
  }
  return kNone;
}

// One past the bracket closing the object or array opening at text[pos]; kNone if not closed yet.
size_t ContainerEnd(absl::string_view text, size_t pos) {
  int depth = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '"') {
      i = StringEnd(text, i);
      if (i == kNone) return kNone;
      --i;
    } else if (c == '{' || c == '[') {
      ++depth;
    } else if ((c == '}' || c == ']') && --depth == 0) {
      return i + 1;
    }
  }
  return kNone;
}

// The calls begun in `text` from pos, objects separated by `separator` ("{..} ; {..}"): each
// from its '{' to its end, the last one possibly unfinished.
std::vector<absl::string_view> SeparatedCalls(absl::string_view text, size_t pos, char separator) {
  std::vector<absl::string_view> calls;
  while (pos < text.size() && text[pos] == '{') {
    const size_t end = ContainerEnd(text, pos);
    if (end == kNone) {
      calls.push_back(text.substr(pos));
      break;
    }
    calls.push_back(text.substr(pos, end - pos));
    pos = SkipSpace(text, end);
    if (pos >= text.size() || text[pos] != separator) break;
    pos = SkipSpace(text, pos + 1);
  }
  return calls;
}

// What of a call is sure from its text so far (`call` starts at its '{').
struct CallPrefix {
  bool named = false;  // it opens with a whole "name" member
  std::string name;
  absl::string_view arguments;  // the raw object / array value written so far
  bool arguments_done = false;  // that value is whole (or there is none to stream)
};

CallPrefix ReadCallPrefix(absl::string_view call, absl::Span<const absl::string_view> keys) {
  CallPrefix prefix;
  // The JSON string at `pos` (whole, without escapes) and the position after it and ws.
  auto read_string = [&](size_t& pos, absl::string_view* out) {
    if (pos >= call.size() || call[pos] != '"') return false;
    const size_t end = StringEnd(call, pos);
    if (end == kNone) return false;
    *out = call.substr(pos + 1, end - pos - 2);
    if (absl::StrContains(*out, '\\')) return false;
    pos = SkipSpace(call, end);
    return true;
  };
  auto read_colon = [&](size_t& pos) {
    if (pos >= call.size() || call[pos] != ':') return false;
    pos = SkipSpace(call, pos + 1);
    return true;
  };
  size_t pos = SkipSpace(call, 1);
  absl::string_view key, name;
  if (!read_string(pos, &key) || key != "name" || !read_colon(pos) ||
      !read_string(pos, &name) || name.empty()) {
    return prefix;
  }
  prefix.named = true;
  prefix.name = std::string(name);
  if (pos >= call.size() || call[pos] != ',') {
    prefix.arguments_done = pos < call.size();  // '}': no arguments ("{}" at Finish)
    return prefix;
  }
  pos = SkipSpace(call, pos + 1);
  if (!read_string(pos, &key) || std::find(keys.begin(), keys.end(), key) == keys.end() ||
      !read_colon(pos) || pos >= call.size() || (call[pos] != '{' && call[pos] != '[')) {
    return prefix;
  }
  const size_t end = ContainerEnd(call, pos);
  prefix.arguments = call.substr(pos, end == kNone ? kNone : end - pos);
  prefix.arguments_done = end != kNone;
  return prefix;
}

}  // namespace

ToolCallStream::ToolCallStream(const ToolPlan& plan, std::string id_prefix)
    : plan_(plan), id_prefix_(std::move(id_prefix)) {}

size_t ToolCallStream::SafeContentLength() const {
  if (!plan_.parse) return text_.size();
  if (plan_.forced) return 0;
  const absl::string_view text = text_;
  if (plan_.format == ToolCallFormat::kLlama3Json) {
    const absl::string_view rest = absl::StripLeadingAsciiWhitespace(text);
    const bool may_be_call = rest.empty() || absl::StartsWith(rest, "{") ||
                             absl::StartsWith(rest, kLlama3PythonTag) ||
                             absl::StartsWith(kLlama3PythonTag, rest);
    return may_be_call ? 0 : text.size();
  }
  const size_t open = text.find(kHermesOpen);
  size_t safe = open != absl::string_view::npos
                    ? open
                    : text.size() - PartialMarkerSuffix(text, kHermesOpen);
  while (safe > 0 && absl::ascii_isspace(static_cast<unsigned char>(text[safe - 1]))) --safe;
  return safe;
}

ToolCallStream::Piece ToolCallStream::Push(absl::string_view delta) {
  text_.append(delta.data(), delta.size());
  Piece piece;
  const size_t safe = SafeContentLength();
  if (safe > sent_) {
    piece.content = text_.substr(sent_, safe - sent_);
    sent_ = safe;
  }
  if (plan_.parse) StreamCalls(&piece.calls);
  return piece;
}

void ToolCallStream::StreamCalls(std::vector<ToolCallDelta>* out) {
  // The calls begun so far, as the parser of the plan will read them.
  const absl::string_view text = text_;
  std::vector<absl::string_view> calls;
  // The member of a call holding its arguments (ReadCall's in tool_calls.cc).
  static constexpr absl::string_view kArguments[] = {"arguments"};
  static constexpr absl::string_view kLlama3Arguments[] = {"parameters", "arguments"};
  absl::Span<const absl::string_view> keys = kArguments;
  if (plan_.forced) {
    const size_t open = SkipSpace(text, 0);
    if (open < text.size() && text[open] == '[') calls = SeparatedCalls(text, SkipSpace(text, open + 1), ',');
  } else if (plan_.format == ToolCallFormat::kLlama3Json) {
    keys = kLlama3Arguments;
    size_t pos = SkipSpace(text, 0);
    if (absl::StartsWith(text.substr(pos), kLlama3PythonTag)) {
      pos = SkipSpace(text, pos + kLlama3PythonTag.size());
    }
    calls = SeparatedCalls(text, pos, ';');
  } else {
    for (size_t open = text.find(kHermesOpen); open != kNone;) {
      const size_t body = SkipSpace(text, open + kHermesOpen.size());
      const size_t close = text.find(kHermesClose, body);
      absl::string_view inner = text.substr(body, close == kNone ? kNone : close - body);
      // A close tag may be arriving: its first bytes are not the call's.
      if (close == kNone) inner.remove_suffix(PartialMarkerSuffix(inner, kHermesClose));
      if (inner.empty() || inner[0] != '{') break;
      calls.push_back(inner);
      if (close == kNone) break;
      open = text.find(kHermesOpen, close + kHermesClose.size());
    }
  }
  if (!plan_.parallel_tool_calls && calls.size() > 1) calls.resize(1);
  for (size_t i = 0; i < calls.size() && i <= streamed_.size(); ++i) {
    const CallPrefix call = ReadCallPrefix(calls[i], keys);
    if (!call.named) return;
    const int index = static_cast<int>(i);
    if (i == streamed_.size()) {
      streamed_.push_back({call.name, ""});
      out->push_back({index, absl::StrCat(id_prefix_, i), call.name, ""});
    }
    StreamedCall& streamed = streamed_[i];
    if (streamed.name != call.name) return;  // cannot happen: the text only grows
    if (call.arguments.size() > streamed.arguments.size() &&
        absl::StartsWith(call.arguments, streamed.arguments)) {
      out->push_back({index, "", "", std::string(call.arguments.substr(streamed.arguments.size()))});
      streamed.arguments = std::string(call.arguments);
    }
    if (!call.arguments_done) return;  // the next call waits for this one's end
  }
}

std::vector<ToolCallDelta> ToolCallStream::CallTail(const std::vector<ToolCall>& calls) const {
  if (streamed_.size() > calls.size()) return {};
  for (size_t i = 0; i < streamed_.size(); ++i) {
    if (calls[i].name != streamed_[i].name ||
        !absl::StartsWith(calls[i].arguments, streamed_[i].arguments)) {
      return {};
    }
  }
  std::vector<ToolCallDelta> tail;
  for (size_t i = 0; i < calls.size(); ++i) {
    const int index = static_cast<int>(i);
    size_t sent = 0;
    if (i < streamed_.size()) {
      sent = streamed_[i].arguments.size();
    } else {
      tail.push_back({index, calls[i].id, calls[i].name, ""});
    }
    if (calls[i].arguments.size() > sent) {
      tail.push_back({index, "", "", calls[i].arguments.substr(sent)});
    }
  }
  return tail;
}

ToolCallStream::Result ToolCallStream::Finish(absl::string_view tail,
                                              absl::string_view finish_reason) {
  text_.append(tail.data(), tail.size());
  ParsedToolCalls parsed;
  if (!plan_.parse) {
    parsed.content = text_;
  } else if (plan_.forced) {
    absl::StatusOr<ParsedToolCalls> calls = ParseForcedToolCalls(text_, id_prefix_);
    if (calls.ok()) {
      parsed = *std::move(calls);
    } else {
      parsed.content = text_;  // not a complete array (cut by max_tokens): the text, as it is
    }
  } else {
    parsed = ParseToolCalls(plan_.format, text_, id_prefix_);
    if (!plan_.parallel_tool_calls && parsed.tool_calls.size() > 1) parsed.tool_calls.resize(1);
  }
  Result result;
  // What Push passed on is a prefix of the content (header comment).
  result.content_tail = sent_ <= parsed.content.size() ? parsed.content.substr(sent_) : "";
  result.content = std::move(parsed.content);
  result.tool_calls = std::move(parsed.tool_calls);
  result.call_tail = CallTail(result.tool_calls);
  result.finish_reason =
      result.tool_calls.empty() ? std::string(finish_reason) : std::string("tool_calls");
  sent_ = text_.size();
  return result;
}

}  // namespace splitspec::coordinator::http

#include "coordinator/http/tool_call_stream.h"

#include <algorithm>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"

namespace splitspec::coordinator::http {
namespace {

constexpr absl::string_view kHermesOpen = "<tool_call>";
constexpr absl::string_view kLlama3PythonTag = "<|python_tag|>";

// The length of the longest suffix of `text` that is a proper prefix of `marker`.
size_t PartialMarkerSuffix(absl::string_view text, absl::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (absl::EndsWith(text, marker.substr(0, n))) return n;
  }
  return 0;
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

std::string ToolCallStream::Push(absl::string_view delta) {
  text_.append(delta.data(), delta.size());
  const size_t safe = SafeContentLength();
  if (safe <= sent_) return std::string();
  std::string out = text_.substr(sent_, safe - sent_);
  sent_ = safe;
  return out;
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
  result.finish_reason =
      result.tool_calls.empty() ? std::string(finish_reason) : std::string("tool_calls");
  sent_ = text_.size();
  return result;
}

}  // namespace splitspec::coordinator::http

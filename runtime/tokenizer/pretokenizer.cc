#include "runtime/tokenizer/pretokenizer.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "runtime/tokenizer/tokenizer_internal.h"
#include "runtime/tokenizer/unicode.h"

namespace splitspec::model {
namespace {

// A view of one segment [begin, end) of the code points; reads outside the
// segment see "no character" (code point kNone, empty flags), which is how a
// regex sees the end of its subject.
class Segment {
 public:
  static constexpr uint32_t kNone = 0xFFFFFFFF;

  Segment(const std::vector<uint32_t>& cps, size_t begin, size_t end)
      : cps_(cps), begin_(begin), end_(end) {}

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  uint32_t At(size_t i) const { return InRange(i) ? cps_[i] : kNone; }
  CodepointFlags FlagsAt(size_t i) const {
    return InRange(i) ? unicode::Flags(cps_[i]) : CodepointFlags();
  }
  // [^\s\p{L}\p{N}]: any character that is not whitespace, letter or number.
  bool IsOther(size_t i) const {
    const CodepointFlags f = FlagsAt(i);
    return f.defined() && !f.is_whitespace() && !f.is_letter() && !f.is_number();
  }
  bool IsNewline(size_t i) const { return At(i) == '\r' || At(i) == '\n'; }

 private:
  bool InRange(size_t i) const { return i >= begin_ && i < end_; }

  const std::vector<uint32_t>& cps_;
  size_t begin_;
  size_t end_;
};

uint32_t AsciiLower(uint32_t c) { return (c >= 'A' && c <= 'Z') ? c + ('a' - 'A') : c; }

// 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive. Returns the match length.
size_t MatchContraction(const Segment& s, size_t pos, bool ignore_case) {
  if (s.At(pos) != '\'') return 0;
  auto norm = [&](size_t i) { return ignore_case ? AsciiLower(s.At(i)) : s.At(i); };
  const uint32_t c1 = norm(pos + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  const uint32_t c2 = norm(pos + 2);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

// Length of the whitespace run starting at pos.
size_t WhitespaceRun(const Segment& s, size_t pos) {
  size_t n = 0;
  while (s.FlagsAt(pos + n).is_whitespace()) ++n;
  return n;
}

// \s+(?!\S)|\s+ given a run of n >= 1 whitespace characters at pos: the run
// minus its last character when a non-space follows (that character then
// starts the next word), else the whole run.
size_t MatchTrailingWhitespace(const Segment& s, size_t pos, size_t n) {
  if (n > 1 && pos + n < s.end()) return n - 1;
  return n;
}

// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t MatchGpt2(const Segment& s, size_t pos) {
  if (size_t n = MatchContraction(s, pos, /*ignore_case=*/false)) return n;
  const size_t body = pos + (s.At(pos) == ' ' ? 1 : 0);
  const CodepointFlags f = s.FlagsAt(body);
  size_t end = body;
  if (f.is_letter()) {
    while (s.FlagsAt(end).is_letter()) ++end;
    return end - pos;
  }
  if (f.is_number()) {
    while (s.FlagsAt(end).is_number()) ++end;
    return end - pos;
  }
  if (s.IsOther(body)) {
    while (s.IsOther(end)) ++end;
    return end - pos;
  }
  if (size_t n = WhitespaceRun(s, pos)) return MatchTrailingWhitespace(s, pos, n);
  return 1;  // unreachable for defined characters; keeps progress guaranteed
}

// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max_digits}|
//  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
size_t MatchLlama3(const Segment& s, size_t pos, size_t max_digits) {
  if (size_t n = MatchContraction(s, pos, /*ignore_case=*/true)) return n;
  const CodepointFlags f = s.FlagsAt(pos);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (!s.IsNewline(pos) && !f.is_number() && (f.is_letter() || s.FlagsAt(pos + 1).is_letter())) {
    size_t end = pos + 1;
    while (s.FlagsAt(end).is_letter()) ++end;
    return end - pos;
  }
  // \p{N}{1,max_digits}
  if (f.is_number()) {
    size_t end = pos;
    while (end - pos < max_digits && s.FlagsAt(end).is_number()) ++end;
    return end - pos;
  }
  // ?[^\s\p{L}\p{N}]+[\r\n]*
  const size_t body = pos + (s.At(pos) == ' ' ? 1 : 0);
  if (s.IsOther(body)) {
    size_t end = body;
    while (s.IsOther(end)) ++end;
    while (s.IsNewline(end)) ++end;
    return end - pos;
  }
  const size_t n = WhitespaceRun(s, pos);
  // \s*[\r\n]+: up to and including the last newline of the run.
  for (size_t k = n; k > 0; --k) {
    if (s.IsNewline(pos + k - 1)) return k;
  }
  if (n > 0) return MatchTrailingWhitespace(s, pos, n);
  return 1;
}

// Appends the word lengths of segment [begin, end) split by `match`.
template <typename Matcher>
void SplitSegment(const std::vector<uint32_t>& cps, size_t begin, size_t end, Matcher match,
                  std::vector<size_t>* lengths) {
  const Segment s(cps, begin, end);
  size_t pos = begin;
  while (pos < end) {
    const size_t n = match(s, pos);
    lengths->push_back(n);
    pos += n;
  }
}

// Cuts every \p{N} code point out as its own segment, then splits the text
// between them with the GPT-2 matcher.
void SplitSmolLM(const std::vector<uint32_t>& cps, std::vector<size_t>* lengths) {
  size_t start = 0;
  for (size_t i = 0; i <= cps.size(); ++i) {
    const bool at_end = i == cps.size();
    if (!at_end && !unicode::Flags(cps[i]).is_number()) continue;
    SplitSegment(cps, start, i, MatchGpt2, lengths);
    if (!at_end) lengths->push_back(1);
    start = i + 1;
  }
}

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizer::FromName(std::string_view name) {
  if (name == "gpt2" || name == "gpt-2") return PreTokenizer(PreTokenizerKind::kGpt2);
  if (name == "llama3" || name == "llama-bpe" || name == "llama-v3") {
    return PreTokenizer(PreTokenizerKind::kLlama3);
  }
  if (name == "qwen2") return PreTokenizer(PreTokenizerKind::kQwen2);
  if (name == "smollm" || name == "starcoder") return PreTokenizer(PreTokenizerKind::kSmolLM);
  return absl::InvalidArgumentError(absl::StrCat(
      "unsupported pre-tokenizer '", tokenizer_internal::AV(name),
      "' (tokenizer.ggml.pre); supported: gpt2, gpt-2, llama3, llama-bpe, llama-v3, qwen2, "
      "smollm, starcoder"));
}

std::string_view PreTokenizer::name() const {
  switch (kind_) {
    case PreTokenizerKind::kGpt2:
      return "gpt2";
    case PreTokenizerKind::kLlama3:
      return "llama3";
    case PreTokenizerKind::kQwen2:
      return "qwen2";
    case PreTokenizerKind::kSmolLM:
      return "smollm";
  }
  return "unknown";
}

std::vector<size_t> PreTokenizer::SplitCodepoints(const std::vector<uint32_t>& cps) const {
  std::vector<size_t> lengths;
  switch (kind_) {
    case PreTokenizerKind::kGpt2:
      SplitSegment(cps, 0, cps.size(), MatchGpt2, &lengths);
      break;
    case PreTokenizerKind::kLlama3:
      SplitSegment(
          cps, 0, cps.size(), [](const Segment& s, size_t pos) { return MatchLlama3(s, pos, 3); },
          &lengths);
      break;
    case PreTokenizerKind::kQwen2:
      SplitSegment(
          cps, 0, cps.size(), [](const Segment& s, size_t pos) { return MatchLlama3(s, pos, 1); },
          &lengths);
      break;
    case PreTokenizerKind::kSmolLM:
      SplitSmolLM(cps, &lengths);
      break;
  }
  return lengths;
}

std::vector<std::string> PreTokenizer::Split(std::string_view text) const {
  const std::vector<uint32_t> cps = unicode::DecodeUtf8Lenient(text);
  const std::vector<size_t> lengths = SplitCodepoints(cps);
  std::vector<std::string> words;
  words.reserve(lengths.size());
  size_t pos = 0;
  for (size_t n : lengths) {
    std::string word;
    for (size_t i = pos; i < pos + n; ++i) unicode::AppendUtf8(cps[i], &word);
    words.push_back(std::move(word));
    pos += n;
  }
  return words;
}

}  // namespace splitspec::model

#include "runtime/tokenizer/unicode.h"

#include <algorithm>

namespace splitspec::model::unicode {
namespace {

bool IsContinuation(uint8_t b) { return (b & 0xC0) == 0x80; }

}  // namespace

CodepointFlags Flags(uint32_t cp) {
  if (cp > kMaxCodepoint) return CodepointFlags();
  const auto* begin = unicode_internal::kCodepointRanges;
  const auto* end = begin + unicode_internal::kNumCodepointRanges;
  // The last range whose start is <= cp.
  const auto* it = std::upper_bound(
      begin, end, cp,
      [](uint32_t value, const unicode_internal::CodepointRange& r) { return value < r.start; });
  return CodepointFlags((it - 1)->flags);
}

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp > kMaxCodepoint) cp = kReplacementCharacter;
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

std::string EncodeUtf8(uint32_t cp) {
  std::string out;
  AppendUtf8(cp, &out);
  return out;
}

size_t Utf8SequenceLength(uint8_t b) {
  if (b < 0xC0) return 1;
  if (b < 0xE0) return 2;
  if (b < 0xF0) return 3;
  if (b < 0xF8) return 4;
  return 1;
}

std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text) {
  std::vector<uint32_t> out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const uint8_t b = static_cast<uint8_t>(text[i]);
    if (b < 0x80) {
      out.push_back(b);
      ++i;
      continue;
    }
    const size_t n = (b >= 0xC0 && b < 0xF8) ? Utf8SequenceLength(b) : 0;
    bool ok = n > 0 && i + n <= text.size();
    for (size_t k = 1; ok && k < n; ++k) {
      ok = IsContinuation(static_cast<uint8_t>(text[i + k]));
    }
    if (!ok) {
      out.push_back(kReplacementCharacter);
      ++i;
      continue;
    }
    uint32_t cp = b & (0x7F >> n);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<uint8_t>(text[i + k]) & 0x3F);
    out.push_back(cp > kMaxCodepoint ? kReplacementCharacter : cp);
    i += n;
  }
  return out;
}

}  // namespace splitspec::model::unicode

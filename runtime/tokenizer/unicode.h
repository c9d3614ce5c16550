// UTF-8 and Unicode category helpers for the tokenizers.
//
//   std::vector<uint32_t> cps = unicode::DecodeUtf8Lenient(text);
//   if (unicode::Flags(cps[0]).is_letter()) ...
//   std::string s = unicode::EncodeUtf8(0x1F600);
//
// Category flags come from a generated table (unicode_data.cc, made by
// unicode_data_gen.py from the Unicode data of Python's `regex` module), so that
// \p{L}, \p{N} and \s mean here what they mean in the HF tokenizer regexes.
//
// Thread safety: every function is pure; the table is constant.
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_UNICODE_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_UNICODE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/base/utf8.h"

namespace splitspec::model {

// Category flags of one code point. A code point has exactly one of the
// general-category bits (N, L, Z, M, P, S, C); whitespace is an extra bit.
class CodepointFlags {
 public:
  static constexpr uint8_t kNumber = 0x01;       // \p{N}
  static constexpr uint8_t kLetter = 0x02;       // \p{L}
  static constexpr uint8_t kSeparator = 0x04;    // \p{Z}
  static constexpr uint8_t kMark = 0x08;         // \p{M}
  static constexpr uint8_t kPunctuation = 0x10;  // \p{P}
  static constexpr uint8_t kSymbol = 0x20;       // \p{S}
  static constexpr uint8_t kControl = 0x40;      // \p{C}, including unassigned
  static constexpr uint8_t kWhitespace = 0x80;   // \s (the White_Space property)

  constexpr CodepointFlags() = default;
  constexpr explicit CodepointFlags(uint8_t bits) : bits_(bits) {}

  bool is_number() const { return bits_ & kNumber; }
  bool is_letter() const { return bits_ & kLetter; }
  bool is_whitespace() const { return bits_ & kWhitespace; }
  bool is_punctuation() const { return bits_ & kPunctuation; }
  bool is_symbol() const { return bits_ & kSymbol; }
  // False only for "no code point" (outside the text being matched).
  bool defined() const { return bits_ != 0; }
  uint8_t bits() const { return bits_; }

 private:
  uint8_t bits_ = 0;
};

namespace unicode {

inline constexpr uint32_t kReplacementCharacter = 0xFFFD;
inline constexpr uint32_t kMaxCodepoint = 0x10FFFF;

// Flags of `cp`; empty flags (defined() == false) for cp > U+10FFFF.
CodepointFlags Flags(uint32_t cp);

// Appends the UTF-8 encoding of `cp`. REQUIRES: cp <= U+10FFFF (larger values
// are written as U+FFFD).
void AppendUtf8(uint32_t cp, std::string* out);
std::string EncodeUtf8(uint32_t cp);

// Number of bytes of the UTF-8 sequence announced by lead byte `b` (1 for ASCII
// and for bytes that cannot start a sequence).
size_t Utf8SequenceLength(uint8_t b);

// Decodes UTF-8 the way llama.cpp does, so token ids agree on malformed input:
// a lead byte whose continuation bytes are missing or wrong, and a stray
// continuation byte, each become one U+FFFD and decoding resumes at the next
// byte. Overlong forms are not rejected. Values above U+10FFFF become U+FFFD.
std::vector<uint32_t> DecodeUtf8Lenient(std::string_view text);

// Strict checks: the project's one UTF-8 validator (runtime/base/utf8.h):
// ScanUtf8Char tells a whole character (kValid), a prefix waiting for more
// bytes (kIncomplete) and bytes that can never be valid (kInvalid);
// IsValidUtf8 checks a whole text.
using ::splitspec::IsValidUtf8;
using ::splitspec::ScanUtf8Char;
using ::splitspec::Utf8Scan;

}  // namespace unicode

namespace unicode_internal {
struct CodepointRange {
  uint32_t start;
  uint8_t flags;
};
extern const CodepointRange kCodepointRanges[];
extern const int kNumCodepointRanges;
}  // namespace unicode_internal

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_UNICODE_H_

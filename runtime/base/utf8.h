// The one strict UTF-8 validator (RFC 3629; the Unicode standard's table 3-7
// of well-formed byte sequences): every byte sequence is a whole character in
// shortest form, no UTF-16 surrogate (U+D800..U+DFFF), nothing above U+10FFFF.
// The JSON guard, JSON string quoting, the TOML parser and the tokenizers'
// strict checks all use it.
//
//   size_t n = 0;
//   switch (ScanUtf8Char(bytes, &n)) { ... }      // a stream: kIncomplete waits for more
//   if (ValidUtf8Length(text, pos) == 0) ...       // a whole text: truncated is invalid
//   if (!IsValidUtf8(text)) ...
//
// (The tokenizers' llama.cpp-compatible lenient decoding, which must agree
// with llama.cpp on malformed input, is not a validator and stays in
// runtime/tokenizer/unicode.h.)
//
// The text is a std::string_view (Debian's Abseil keeps absl::string_view a
// type of its own): callers holding an absl::string_view pass
// std::string_view(s.data(), s.size()).
//
// Thread safety: pure functions.
#ifndef SPLITSPEC_RUNTIME_BASE_UTF8_H_
#define SPLITSPEC_RUNTIME_BASE_UTF8_H_

#include <cstddef>
#include <string_view>

namespace splitspec {

// The character at the start of `bytes`:
//   kValid:      a whole well-formed character, *length (1 to 4) bytes long;
//   kIncomplete: every byte present could begin a well-formed character, but
//                bytes are missing (*length == bytes.size());
//   kInvalid:    no well-formed character starts with these bytes (a stray
//                continuation byte, C0, C1, F5..FF, an overlong or surrogate
//                prefix, above U+10FFFF, a missing continuation byte);
//                *length == 1, the byte to skip or replace.
// REQUIRES: !bytes.empty().
enum class Utf8Scan { kValid, kIncomplete, kInvalid };
Utf8Scan ScanUtf8Char(std::string_view bytes, size_t* length);

// The length (1 to 4) of the well-formed character at text[pos], or 0 when
// none starts there (truncated at the end of `text` included).
// REQUIRES: pos < text.size().
size_t ValidUtf8Length(std::string_view text, size_t pos);

// True if `bytes` is entirely well-formed UTF-8.
bool IsValidUtf8(std::string_view bytes);

}  // namespace splitspec

#endif  // SPLITSPEC_RUNTIME_BASE_UTF8_H_

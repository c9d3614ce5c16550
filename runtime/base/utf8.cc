#include "runtime/base/utf8.h"

#include <cstdint>

namespace splitspec {

Utf8Scan ScanUtf8Char(std::string_view bytes, size_t* length) {
  const uint8_t lead = static_cast<uint8_t>(bytes[0]);
  *length = 1;
  if (lead < 0x80) return Utf8Scan::kValid;
  // Table 3-7: the lead byte fixes the length and the range of the second
  // byte (which rules out overlongs, surrogates and values above U+10FFFF);
  // every later byte is a plain continuation byte, 80..BF.
  size_t n = 0;
  uint8_t second_low = 0x80, second_high = 0xBF;
  if (lead >= 0xC2 && lead <= 0xDF) {
    n = 2;
  } else if (lead >= 0xE0 && lead <= 0xEF) {
    n = 3;
    if (lead == 0xE0) second_low = 0xA0;   // below: overlong
    if (lead == 0xED) second_high = 0x9F;  // above: a surrogate
  } else if (lead >= 0xF0 && lead <= 0xF4) {
    n = 4;
    if (lead == 0xF0) second_low = 0x90;   // below: overlong
    if (lead == 0xF4) second_high = 0x8F;  // above: past U+10FFFF
  } else {
    return Utf8Scan::kInvalid;  // 80..BF (a continuation), C0/C1 (overlong), F5..FF
  }
  for (size_t k = 1; k < n; ++k) {
    if (k >= bytes.size()) {
      *length = bytes.size();
      return Utf8Scan::kIncomplete;
    }
    const uint8_t b = static_cast<uint8_t>(bytes[k]);
    const bool fits = k == 1 ? (b >= second_low && b <= second_high) : (b & 0xC0) == 0x80;
    if (!fits) return Utf8Scan::kInvalid;
  }
  *length = n;
  return Utf8Scan::kValid;
}

size_t ValidUtf8Length(std::string_view text, size_t pos) {
  size_t length = 0;
  return ScanUtf8Char(text.substr(pos), &length) == Utf8Scan::kValid ? length : 0;
}

bool IsValidUtf8(std::string_view bytes) {
  for (size_t i = 0; i < bytes.size();) {
    const size_t n = ValidUtf8Length(bytes, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

}  // namespace splitspec

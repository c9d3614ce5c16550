// JsonQuote (runtime/base/json_string.h): valid JSON for any bytes.
#include "runtime/base/json_string.h"

#include <cstdint>
#include <random>
#include <string>

#include "gtest/gtest.h"

namespace splitspec {
namespace {

// An independent check that `s` is valid UTF-8 (RFC 3629), by decoding each
// code point and checking it against the shortest form, the surrogates and
// U+10FFFF.
bool IsValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    size_t n;
    uint32_t cp;
    if (c < 0x80) {
      n = 1;
      cp = c;
    } else if ((c & 0xE0) == 0xC0) {
      n = 2;
      cp = c & 0x1F;
    } else if ((c & 0xF0) == 0xE0) {
      n = 3;
      cp = c & 0x0F;
    } else if ((c & 0xF8) == 0xF0) {
      n = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (b & 0x3F);
    }
    const uint32_t shortest[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < shortest[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

// True when `quoted` is one JSON string token (RFC 8259 section 7): quotes
// around unescaped characters >= 0x20 other than '"' and '\\', and escapes.
bool IsJsonString(const std::string& quoted) {
  if (quoted.size() < 2 || quoted.front() != '"' || quoted.back() != '"') return false;
  if (!IsValidUtf8(quoted)) return false;
  for (size_t i = 1; i + 1 < quoted.size(); ++i) {
    const auto c = static_cast<unsigned char>(quoted[i]);
    if (c < 0x20 || c == '"') return false;
    if (c != '\\') continue;
    if (i + 2 >= quoted.size()) return false;
    const char e = quoted[++i];
    if (e == 'u') {
      if (i + 4 >= quoted.size()) return false;
      for (int k = 1; k <= 4; ++k) {
        if (!std::isxdigit(static_cast<unsigned char>(quoted[i + k]))) return false;
      }
      i += 4;
    } else if (std::string("\"\\/bfnrt").find(e) == std::string::npos) {
      return false;
    }
  }
  return true;
}

TEST(JsonQuoteTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(JsonQuote("plain"), "\"plain\"");
  EXPECT_EQ(JsonQuote(""), "\"\"");
  EXPECT_EQ(JsonQuote("a\"b\\c"), "\"a\\\"b\\\\c\"");
  EXPECT_EQ(JsonQuote("\b\f\n\r\t"), "\"\\b\\f\\n\\r\\t\"");
  EXPECT_EQ(JsonQuote(std::string("\x01\x1f", 2)), "\"\\u0001\\u001f\"");
  EXPECT_EQ(JsonQuote(std::string("a\0b", 3)), "\"a\\u0000b\"");
  EXPECT_EQ(JsonQuote("\x7f"), "\"\x7f\"");  // DEL is valid unescaped
}

TEST(JsonQuoteTest, ValidUtf8PassesThrough) {
  for (const std::string s : {"caf\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xef\xbf\xbf",
                              "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf", "\xee\x80\x80"}) {
    EXPECT_EQ(JsonQuote(s), "\"" + s + "\"") << s;
  }
}

TEST(JsonQuoteTest, InvalidUtf8BecomesReplacementCharacters) {
  EXPECT_EQ(JsonQuote("a\x80z"), "\"a\\ufffdz\"");                    // lone continuation
  EXPECT_EQ(JsonQuote("\xc0\xaf"), "\"\\ufffd\\ufffd\"");             // overlong '/'
  EXPECT_EQ(JsonQuote("\xe0\x80\xaf"), "\"\\ufffd\\ufffd\\ufffd\"");  // overlong, 3 bytes
  EXPECT_EQ(JsonQuote("\xed\xa0\x80"), "\"\\ufffd\\ufffd\\ufffd\"");  // surrogate U+D800
  EXPECT_EQ(JsonQuote("\xf4\x90\x80\x80"), "\"\\ufffd\\ufffd\\ufffd\\ufffd\"");  // > U+10FFFF
  EXPECT_EQ(JsonQuote("\xf5"), "\"\\ufffd\"");
  EXPECT_EQ(JsonQuote("\xe2\x82"), "\"\\ufffd\\ufffd\"");  // truncated euro sign
  EXPECT_EQ(JsonQuote("\xe2\x82x"), "\"\\ufffd\\ufffdx\"");
  EXPECT_EQ(JsonQuote("\xff\"\xfe"), "\"\\ufffd\\\"\\ufffd\"");
}

// Any bytes at all give one valid JSON string token, and valid UTF-8 input
// without special characters is kept byte for byte.
TEST(JsonQuoteTest, RandomBytesAlwaysGiveValidJson) {
  std::mt19937 rng(20261124);
  std::uniform_int_distribution<int> byte(0, 255), length(0, 24);
  for (int trial = 0; trial < 20000; ++trial) {
    std::string s(length(rng), '\0');
    for (char& c : s) c = static_cast<char>(byte(rng));
    const std::string quoted = JsonQuote(s);
    ASSERT_TRUE(IsJsonString(quoted)) << "trial " << trial;
    bool plain = IsValidUtf8(s);
    for (char c : s) {
      plain = plain && static_cast<unsigned char>(c) >= 0x20 && c != '"' && c != '\\';
    }
    if (plain) {
      EXPECT_EQ(quoted, "\"" + s + "\"");
    }
  }
}

}  // namespace
}  // namespace splitspec

// The one UTF-8 validator (runtime/base/utf8.h), against a reference written
// from the definition (decode the bits, then refuse overlongs, surrogates and
// values past U+10FFFF) over every 1-, 2- and 3-byte sequence and the 4-byte
// sequences' lead and second bytes.
#include "runtime/base/utf8.h"

#include <cstdint>
#include <string>

#include "gtest/gtest.h"

namespace splitspec {
namespace {

// The well-formed length of the whole of `s` as one character, or 0.
size_t ReferenceLength(const std::string& s) {
  const uint8_t lead = static_cast<uint8_t>(s[0]);
  size_t n = 0;
  uint32_t cp = 0;
  if (lead < 0x80) return s.size() == 1 ? 1 : 0;
  if ((lead & 0xE0) == 0xC0) {
    n = 2;
    cp = lead & 0x1F;
  } else if ((lead & 0xF0) == 0xE0) {
    n = 3;
    cp = lead & 0x0F;
  } else if ((lead & 0xF8) == 0xF0) {
    n = 4;
    cp = lead & 0x07;
  } else {
    return 0;
  }
  if (s.size() != n) return 0;
  for (size_t k = 1; k < n; ++k) {
    const uint8_t b = static_cast<uint8_t>(s[k]);
    if ((b & 0xC0) != 0x80) return 0;
    cp = (cp << 6) | (b & 0x3F);
  }
  const uint32_t shortest = n == 2 ? 0x80 : n == 3 ? 0x800 : 0x10000;
  if (cp < shortest || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 0;
  return n;
}

std::string Bytes(std::initializer_list<int> bytes) {
  std::string s;
  for (int b : bytes) s.push_back(static_cast<char>(b));
  return s;
}

TEST(Utf8Test, AgreesWithTheDefinitionOnEveryShortSequence) {
  std::string s;
  for (int a = 0; a < 256; ++a) {
    s = Bytes({a});
    const size_t want = ReferenceLength(s);
    EXPECT_EQ(ValidUtf8Length(s, 0), want) << a;
    for (int b = 0; b < 256; ++b) {
      s = Bytes({a, b});
      if (ReferenceLength(s.substr(0, 1)) == 1) continue;  // ASCII then anything
      ASSERT_EQ(ValidUtf8Length(s, 0), ReferenceLength(s)) << a << " " << b;
      for (int c = 0; c < 256; ++c) {
        s = Bytes({a, b, c});
        const size_t got = ValidUtf8Length(s, 0);
        // A valid 2-byte character followed by a third byte is 2 long.
        const size_t ref = ReferenceLength(s) != 0 ? 3 : ReferenceLength(s.substr(0, 2));
        ASSERT_EQ(got, ref) << a << " " << b << " " << c;
      }
    }
  }
}

TEST(Utf8Test, FourByteSequencesAtEveryLeadAndSecondByte) {
  for (int a = 0xF0; a < 0x100; ++a) {
    for (int b = 0; b < 256; ++b) {
      for (int c : {0x80, 0xBF, 0x41}) {
        for (int d : {0x80, 0xBF, 0xC0}) {
          const std::string s = Bytes({a, b, c, d});
          ASSERT_EQ(ValidUtf8Length(s, 0), ReferenceLength(s)) << a << " " << b << " " << c;
        }
      }
    }
  }
}

TEST(Utf8Test, NamedCases) {
  EXPECT_EQ(ValidUtf8Length("a", 0), 1u);
  EXPECT_EQ(ValidUtf8Length("\xC3\xA9", 0), 2u);          // é
  EXPECT_EQ(ValidUtf8Length("\xE2\x82\xAC", 0), 3u);      // €
  EXPECT_EQ(ValidUtf8Length("\xF0\x9F\x98\x80", 0), 4u);  // 😀
  EXPECT_EQ(ValidUtf8Length("\xF4\x8F\xBF\xBF", 0), 4u);  // U+10FFFF, the last
  EXPECT_EQ(ValidUtf8Length("\xEF\xBF\xBF", 0), 3u);      // U+FFFF
  // Overlong forms of '/', U+07FF and U+FFFF.
  EXPECT_EQ(ValidUtf8Length("\xC0\xAF", 0), 0u);
  EXPECT_EQ(ValidUtf8Length("\xC1\xBF", 0), 0u);
  EXPECT_EQ(ValidUtf8Length("\xE0\x9F\xBF", 0), 0u);
  EXPECT_EQ(ValidUtf8Length("\xF0\x8F\xBF\xBF", 0), 0u);
  // Surrogates, alone and as a CESU-8 pair.
  EXPECT_EQ(ValidUtf8Length("\xED\xA0\x80", 0), 0u);
  EXPECT_EQ(ValidUtf8Length("\xED\xBF\xBF", 0), 0u);
  EXPECT_FALSE(IsValidUtf8("\xED\xA0\xBD\xED\xB8\x80"));
  // Above U+10FFFF.
  EXPECT_EQ(ValidUtf8Length("\xF4\x90\x80\x80", 0), 0u);
  EXPECT_EQ(ValidUtf8Length("\xF5\x80\x80\x80", 0), 0u);
  EXPECT_EQ(ValidUtf8Length("\xFF", 0), 0u);
  // Truncated, at the end and before another character.
  EXPECT_EQ(ValidUtf8Length("\xE2\x82", 0), 0u);
  EXPECT_EQ(ValidUtf8Length("\xF0\x9F\x98", 0), 0u);
  EXPECT_EQ(ValidUtf8Length("\xE2\x82z", 0), 0u);
  EXPECT_EQ(ValidUtf8Length("\x80", 0), 0u);  // a stray continuation byte
  EXPECT_TRUE(IsValidUtf8(""));
  EXPECT_TRUE(IsValidUtf8("plain \xC3\xA9t\xC3\xA9 \xF0\x9F\x98\x80"));
  EXPECT_FALSE(IsValidUtf8("ok\xE2\x82"));
  EXPECT_EQ(ValidUtf8Length("x\xC3\xA9", 1), 2u);  // at an offset
}

TEST(Utf8Test, ScanTellsIncompleteFromInvalid) {
  size_t n = 0;
  EXPECT_EQ(ScanUtf8Char("\xF0\x9F\x98\x80", &n), Utf8Scan::kValid);
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(ScanUtf8Char("\xF0\x9F", &n), Utf8Scan::kIncomplete);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(ScanUtf8Char("\xE2", &n), Utf8Scan::kIncomplete);
  EXPECT_EQ(n, 1u);
  // A prefix that can never complete is invalid at once, not incomplete.
  EXPECT_EQ(ScanUtf8Char("\xED\xA0", &n), Utf8Scan::kInvalid);  // surrogate prefix
  EXPECT_EQ(n, 1u);
  EXPECT_EQ(ScanUtf8Char("\xE0\x80", &n), Utf8Scan::kInvalid);  // overlong prefix
  EXPECT_EQ(ScanUtf8Char("\xF4\x90", &n), Utf8Scan::kInvalid);  // past U+10FFFF
  EXPECT_EQ(ScanUtf8Char("\xF0\x41", &n), Utf8Scan::kInvalid);
  EXPECT_EQ(ScanUtf8Char("\xC0", &n), Utf8Scan::kInvalid);
}

}  // namespace
}  // namespace splitspec

#include "runtime/tokenizer/unicode.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "runtime/tokenizer/bpe_byte_encoding.h"

namespace splitspec::model {
namespace {

using ::testing::ElementsAre;

TEST(UnicodeTest, FlagsClassifyLettersNumbersAndWhitespace) {
  EXPECT_TRUE(unicode::Flags('a').is_letter());
  EXPECT_TRUE(unicode::Flags(0x00E9).is_letter());  // é
  EXPECT_TRUE(unicode::Flags(0x4E16).is_letter());  // 世 (Lo)
  EXPECT_TRUE(unicode::Flags('7').is_number());
  EXPECT_TRUE(unicode::Flags(0x0663).is_number());  // Arabic-Indic three
  EXPECT_TRUE(unicode::Flags(0x216B).is_number());  // Roman numeral twelve (Nl)
  EXPECT_TRUE(unicode::Flags(0x00BD).is_number());  // ½ (No)
  EXPECT_TRUE(unicode::Flags(' ').is_whitespace());
  EXPECT_TRUE(unicode::Flags('\n').is_whitespace());
  EXPECT_TRUE(unicode::Flags(0x00A0).is_whitespace());   // no-break space
  EXPECT_TRUE(unicode::Flags(0x3000).is_whitespace());   // ideographic space
  EXPECT_FALSE(unicode::Flags(0x200B).is_whitespace());  // zero width space is Cf
  EXPECT_FALSE(unicode::Flags(0x1C).is_whitespace());    // not White_Space
  EXPECT_TRUE(unicode::Flags('!').is_punctuation());
  EXPECT_TRUE(unicode::Flags('$').is_symbol());
  EXPECT_TRUE(unicode::Flags(0x1F600).is_symbol());  // 😀
  EXPECT_TRUE(unicode::Flags(0x0378).defined());     // unassigned counts as \p{C}
  EXPECT_FALSE(unicode::Flags(0x110000).defined());
}

TEST(UnicodeTest, EncodeDecodeRoundTripsAllPlanes) {
  for (uint32_t cp : {0x24u, 0xA2u, 0x939u, 0x20ACu, 0xD55Cu, 0x10348u, 0x1F44Bu, 0x10FFFFu}) {
    const std::string s = unicode::EncodeUtf8(cp);
    EXPECT_THAT(unicode::DecodeUtf8Lenient(s), ElementsAre(cp)) << std::hex << cp;
    EXPECT_TRUE(unicode::IsValidUtf8(s));
  }
  EXPECT_EQ(unicode::EncodeUtf8(0x20AC), "\xE2\x82\xAC");
}

TEST(UnicodeTest, LenientDecodeReplacesEachBadByte) {
  // Stray continuation, truncated 3-byte sequence followed by ASCII, bad lead.
  EXPECT_THAT(unicode::DecodeUtf8Lenient("a\x80"
                                         "b"),
              ElementsAre('a', 0xFFFD, 'b'));
  EXPECT_THAT(unicode::DecodeUtf8Lenient("\xE2\x82z"), ElementsAre(0xFFFD, 0xFFFD, 'z'));
  EXPECT_THAT(unicode::DecodeUtf8Lenient("\xFF"), ElementsAre(0xFFFD));
  EXPECT_THAT(unicode::DecodeUtf8Lenient("\xF0\x9F\x98"), ElementsAre(0xFFFD, 0xFFFD, 0xFFFD));
}

TEST(UnicodeTest, ScanUtf8CharTellsIncompleteFromInvalid) {
  size_t n = 0;
  EXPECT_EQ(unicode::ScanUtf8Char("\xF0\x9F\x98\x80", &n), unicode::Utf8Scan::kValid);
  EXPECT_EQ(n, 4u);
  EXPECT_EQ(unicode::ScanUtf8Char("\xF0\x9F", &n), unicode::Utf8Scan::kIncomplete);
  EXPECT_EQ(n, 2u);
  EXPECT_EQ(unicode::ScanUtf8Char("\xF0\x41", &n), unicode::Utf8Scan::kInvalid);
  EXPECT_EQ(unicode::ScanUtf8Char("\xC0\x80", &n), unicode::Utf8Scan::kInvalid);      // overlong
  EXPECT_EQ(unicode::ScanUtf8Char("\xED\xA0\x80", &n), unicode::Utf8Scan::kInvalid);  // surrogate
  EXPECT_EQ(unicode::ScanUtf8Char("\x80", &n), unicode::Utf8Scan::kInvalid);
  EXPECT_FALSE(unicode::IsValidUtf8("ok\xE2\x82"));
}

TEST(BpeByteEncodingTest, MapsBytesAsGpt2Does) {
  EXPECT_EQ(BpeByteToCodepoint('A'), 'A');
  EXPECT_EQ(BpeByteToCodepoint(' '), 0x120u);   // Ġ
  EXPECT_EQ(BpeByteToCodepoint('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(BpeByteToCodepoint(0x00), 0x100u);
  EXPECT_EQ(BpeByteToCodepoint(0xAD), 0x143u);  // the last of the 68 remapped bytes
  EXPECT_EQ(BytesToBpeText(" hello\n"), "\xC4\xA0hello\xC4\x8A");
}

TEST(BpeByteEncodingTest, AllBytesRoundTrip) {
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  std::string back;
  ASSERT_TRUE(BpeTextToBytes(BytesToBpeText(all), &back));
  EXPECT_EQ(back, all);
  std::string out;
  EXPECT_FALSE(BpeTextToBytes("\xE4\xB8\x96", &out));  // 世 stands for no byte
}

}  // namespace
}  // namespace splitspec::model

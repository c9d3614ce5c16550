#include "runtime/tokenizer/bpe_byte_encoding.h"

#include <array>
#include <vector>

#include "runtime/tokenizer/unicode.h"

namespace splitspec::model {
namespace {

bool IsPrintableLatin1(int b) {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

struct ByteTables {
  std::array<uint32_t, 256> byte_to_cp;
  std::array<std::string, 256> byte_to_utf8;
  // Code points used are < 0x144; -1 marks "no byte".
  std::array<int16_t, 0x200> cp_to_byte;

  ByteTables() {
    cp_to_byte.fill(-1);
    uint32_t next_extra = 0x100;
    for (int b = 0; b < 256; ++b) {
      const uint32_t cp = IsPrintableLatin1(b) ? static_cast<uint32_t>(b) : next_extra++;
      byte_to_cp[b] = cp;
      byte_to_utf8[b] = unicode::EncodeUtf8(cp);
      cp_to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteTables& Tables() {
  static const ByteTables* tables = new ByteTables();
  return *tables;
}

}  // namespace

uint32_t BpeByteToCodepoint(uint8_t byte) { return Tables().byte_to_cp[byte]; }

void AppendBpeText(std::string_view bytes, std::string* out) {
  const ByteTables& t = Tables();
  for (char c : bytes) out->append(t.byte_to_utf8[static_cast<uint8_t>(c)]);
}

std::string BytesToBpeText(std::string_view bytes) {
  std::string out;
  out.reserve(bytes.size() * 2);
  AppendBpeText(bytes, &out);
  return out;
}

bool BpeTextToBytes(std::string_view text, std::string* out) {
  const ByteTables& t = Tables();
  size_t i = 0;
  while (i < text.size()) {
    size_t n = 0;
    if (unicode::ScanUtf8Char(text.substr(i), &n) != unicode::Utf8Scan::kValid) return false;
    const std::vector<uint32_t> cp = unicode::DecodeUtf8Lenient(text.substr(i, n));
    if (cp[0] >= t.cp_to_byte.size() || t.cp_to_byte[cp[0]] < 0) return false;
    out->push_back(static_cast<char>(t.cp_to_byte[cp[0]]));
    i += n;
  }
  return true;
}

}  // namespace splitspec::model

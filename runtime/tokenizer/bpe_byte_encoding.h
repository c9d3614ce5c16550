// GPT-2's byte-level encoding: every byte 0..255 is shown as one printable code
// point, so that BPE vocabularies can store arbitrary bytes as text.
//
// Bytes that are printable Latin-1 ('!'..'~', '¡'..'¬', '®'..'ÿ') map to the
// code point of the same value; the other 68 bytes (controls, space, 0x7F-0xA0,
// 0xAD) map, in increasing order, to U+0100, U+0101, ... (so ' ' becomes 'Ġ'
// U+0120 and '\n' becomes 'Ċ' U+010A).
//
//   std::string word = BytesToBpeText(" hello");   // "Ġhello"
//   std::string bytes;
//   BpeTextToBytes("Ġhello", &bytes);             // " hello"
//
// Thread safety: pure functions over constant tables.
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_BPE_BYTE_ENCODING_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_BPE_BYTE_ENCODING_H_

#include <cstdint>
#include <string>
#include <string_view>

namespace splitspec::model {

// Code point that stands for `byte`.
uint32_t BpeByteToCodepoint(uint8_t byte);

// Appends the byte-level text of `bytes` (each byte as the UTF-8 of its code point).
void AppendBpeText(std::string_view bytes, std::string* out);
std::string BytesToBpeText(std::string_view bytes);

// Appends the bytes that byte-level text `text` stands for. Returns false (and
// appends nothing more) at the first code point that stands for no byte, or at
// malformed UTF-8.
bool BpeTextToBytes(std::string_view text, std::string* out);

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_BPE_BYTE_ENCODING_H_

// In-memory vocabularies for tokenizer tests (no model file needed).
#ifndef SPLITSPEC_TESTS_UNIT_TOKENIZER_TOKENIZER_TEST_UTIL_H_
#define SPLITSPEC_TESTS_UNIT_TOKENIZER_TOKENIZER_TEST_UTIL_H_

#include <string>
#include <utility>
#include <vector>

#include "runtime/tokenizer/bpe_byte_encoding.h"
#include "runtime/tokenizer/tokenizer_vocab.h"

namespace splitspec::model::testing {

// Byte-level BPE vocabulary: ids 0..255 are the 256 single bytes (id == byte),
// then one token per merge (in merge order), then `specials` as control
// tokens. Merges are given as raw byte strings, e.g. {" ", "t"}; they are
// written in byte-level text ("Ġ t").
inline TokenizerVocab MakeByteLevelVocab(
    const std::vector<std::pair<std::string, std::string>>& merges, const std::string& pre,
    const std::vector<std::string>& specials = {}) {
  TokenizerVocab v;
  v.model = "gpt2";
  v.pre = pre;
  for (int b = 0; b < 256; ++b) v.tokens.push_back(BytesToBpeText(std::string(1, char(b))));
  for (const auto& [left, right] : merges) {
    v.merges.push_back(BytesToBpeText(left) + " " + BytesToBpeText(right));
    v.tokens.push_back(BytesToBpeText(left + right));
  }
  v.token_types.assign(v.tokens.size(), TokenType::kNormal);
  for (const std::string& s : specials) {
    v.tokens.push_back(s);
    v.token_types.push_back(TokenType::kControl);
  }
  return v;
}

// Id of the first token with text `text` in `v`, or kNoToken.
inline TokenId IdOf(const TokenizerVocab& v, const std::string& text) {
  for (size_t i = 0; i < v.tokens.size(); ++i) {
    if (v.tokens[i] == text) return static_cast<TokenId>(i);
  }
  return kNoToken;
}

}  // namespace splitspec::model::testing

#endif  // SPLITSPEC_TESTS_UNIT_TOKENIZER_TOKENIZER_TEST_UTIL_H_

// Cuts special tokens (chat markers such as "<|im_start|>") out of raw text
// before the text is tokenized, so that merging never produces them.
//
//   SpecialTokenSplitter splitter(vocab.tokens, vocab.token_types);
//   for (const TextFragment& f : splitter.Split(text, /*parse_special=*/true)) {
//     if (f.is_token()) ids.push_back(f.token); else model.Encode(f.text(text), &ids);
//   }
//
// Which tokens are cut: user-defined tokens always; control and unknown tokens
// only when parse_special is true (otherwise their text is ordinary text).
// Order, as in llama.cpp: tokens are taken longest text first (ties: lower id
// first), and each cuts every occurrence (left to right, non-overlapping) out of
// the text fragments the longer tokens left behind.
//
// Thread safety: immutable after construction; Split may be called concurrently.
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_SPECIAL_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_SPECIAL_H_

#include <string>
#include <string_view>
#include <vector>

#include "runtime/tokenizer/tokenizer_vocab.h"

namespace splitspec::model {

// Either a special token or a span [offset, offset+length) of the input text.
struct TextFragment {
  TokenId token = kNoToken;  // kNoToken for text
  size_t offset = 0;
  size_t length = 0;

  bool is_token() const { return token != kNoToken; }
  std::string_view text(std::string_view input) const { return input.substr(offset, length); }
};

class SpecialTokenSplitter {
 public:
  // `types` empty means every token is normal (then nothing is ever cut).
  SpecialTokenSplitter(const std::vector<std::string>& tokens, const std::vector<TokenType>& types);

  // Fragments in text order; text fragments are never empty. Empty input gives
  // no fragments.
  std::vector<TextFragment> Split(std::string_view text, bool parse_special) const;

 private:
  struct Special {
    TokenId id;
    std::string text;
    bool always;  // user-defined: cut even without parse_special
  };
  std::vector<Special> specials_;  // longest text first
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_SPECIAL_H_

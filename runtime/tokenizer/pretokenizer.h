// Pre-tokenizers of byte-level BPE vocabularies: split text into "words" before
// BPE merges run inside each word, as the HF tokenizer regex of each model does.
//
//   ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::FromName("smollm"));
//   std::vector<std::string> words = pre.Split("Hello world 42");
//   // {"Hello", " world", " ", "4", "2"}
//
// Supported names (the GGUF key `tokenizer.ggml.pre`) and the split each means:
//   gpt2, gpt-2        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3, llama-bpe, llama-v3
//                      (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//                       ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2              as llama3 but \p{N} (one digit per word)
//   smollm, starcoder  first every \p{N} code point is cut out on its own, then the
//                      gpt2 split runs on the text between them
// The regexes are implemented by hand-written matchers (std::regex cannot do
// \p{L}); alternatives are tried in order at each position, as a backtracking
// regex engine does. Matching is on code points; malformed UTF-8 is decoded
// leniently (each bad byte becomes U+FFFD, see unicode::DecodeUtf8Lenient), so
// the words are valid UTF-8 and their concatenation equals the input exactly
// when the input is valid UTF-8.
//
// Thread safety: a PreTokenizer is immutable; Split may be called concurrently.
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_PRETOKENIZER_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_PRETOKENIZER_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace splitspec::model {

enum class PreTokenizerKind {
  kGpt2,
  kLlama3,
  kQwen2,
  kSmolLM,
};

class PreTokenizer {
 public:
  // Errors: InvalidArgument naming `name` and listing the supported names.
  static absl::StatusOr<PreTokenizer> FromName(std::string_view name);
  explicit PreTokenizer(PreTokenizerKind kind) : kind_(kind) {}

  PreTokenizerKind kind() const { return kind_; }
  // Canonical name of the kind ("gpt2", "llama3", "qwen2", "smollm").
  std::string_view name() const;
  // llama.cpp's `ignore_merges` for this pre-tokenizer: a word that is itself a
  // vocabulary token is emitted whole without running merges (Llama 3).
  bool ignore_merges() const { return kind_ == PreTokenizerKind::kLlama3; }

  // Splits `text` into words; empty input gives no words.
  std::vector<std::string> Split(std::string_view text) const;

  // Word lengths in code points over `cps` (exposed for tests and callers that
  // already hold code points). The lengths sum to cps.size().
  std::vector<size_t> SplitCodepoints(const std::vector<uint32_t>& cps) const;

 private:
  PreTokenizerKind kind_;
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_PRETOKENIZER_H_

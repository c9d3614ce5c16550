// The plain description of a tokenizer, as GGUF metadata carries it
// (`tokenizer.ggml.*`, `tokenizer.chat_template`). Tokenizer::Create builds a
// tokenizer from it; LoadTokenizerFromGguf fills it from a file; tests fill it
// by hand.
//
//   TokenizerVocab v;
//   v.model = "gpt2";
//   v.pre = "smollm";
//   v.tokens = {...};
//   v.merges = {"Ġ t", ...};
//   ASSIGN_OR_RETURN(Tokenizer tok, Tokenizer::Create(std::move(v)));
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_VOCAB_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_VOCAB_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace splitspec::model {

using TokenId = int32_t;
inline constexpr TokenId kNoToken = -1;

// Token types as numbered in GGUF `tokenizer.ggml.token_type` (SentencePiece's).
enum class TokenType : int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,      // e.g. <|im_start|>; parsed from text only with parse_special
  kUserDefined = 4,  // always parsed from text as a whole token
  kUnused = 5,
  kByte = 6,  // SentencePiece byte-fallback tokens <0x00>..<0xFF>
};

struct TokenizerVocab {
  // `tokenizer.ggml.model`: "gpt2" (byte-level BPE) or "llama" (SentencePiece).
  std::string model;
  // `tokenizer.ggml.pre`: the pre-tokenizer of a "gpt2" vocabulary (see
  // pretokenizer.h for the supported names). Ignored for "llama".
  std::string pre;
  // Token texts, indexed by id. Must not be empty.
  std::vector<std::string> tokens;
  // Merge scores ("llama"); empty means all 0. Else one per token.
  std::vector<float> scores;
  // Empty means all kNormal. Else one per token.
  std::vector<TokenType> token_types;
  // BPE merges in rank order, "left right" ("gpt2"; may be empty: then every
  // byte is its own token).
  std::vector<std::string> merges;

  // Special token ids; kNoToken when the model has none.
  TokenId bos_id = kNoToken;
  TokenId eos_id = kNoToken;
  TokenId unk_id = kNoToken;
  TokenId pad_id = kNoToken;
  TokenId eot_id = kNoToken;  // `tokenizer.ggml.eot_token_id`

  // Whether Encode(add_special=true) prepends BOS / appends EOS. nullopt means
  // the model's default: BOS for "llama" and for the llama3 pre-tokenizer, no
  // EOS.
  std::optional<bool> add_bos;
  std::optional<bool> add_eos;
  // SentencePiece only: prepend a space to the text (and to text that follows
  // a special token). nullopt means true.
  std::optional<bool> add_space_prefix;

  // `tokenizer.chat_template` (Jinja source); empty when the file has none.
  std::string chat_template;

  // Checks sizes and ids: OK, or InvalidArgument naming the field at fault
  // (e.g. "bos_id 70000 out of range [0, 49152)").
  absl::Status Validate() const;
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_VOCAB_H_

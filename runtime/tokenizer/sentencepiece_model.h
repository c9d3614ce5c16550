// SentencePiece-style (BPE by score) tokenization of the "llama" GGUF
// vocabularies (Llama 1/2, Mistral, TinyLlama), over one fragment of plain text.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<SentencePieceModel> spm, SentencePieceModel::Create(vocab));
//   std::vector<TokenId> ids;
//   spm->Encode("▁Hello▁world", &ids);   // spaces already escaped to U+2581
//
// The caller (Tokenizer) prepends the space prefix and replaces ' ' with "▁".
// Encode splits the text into UTF-8 characters, then repeatedly joins the
// adjacent pair whose concatenation is a vocabulary token with the highest
// score (leftmost among equal scores), as llama.cpp and SentencePiece's BPE
// do. A character left over that is not a token becomes its byte tokens
// <0xNN> when the vocabulary has them (byte fallback), else the token whose
// text is that single byte, else the unknown token (one per character).
//
// Thread safety: immutable after Create; Encode may be called concurrently.
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_SENTENCEPIECE_MODEL_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_SENTENCEPIECE_MODEL_H_

#include <array>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/tokenizer/tokenizer_vocab.h"

namespace splitspec::model {

class SentencePieceModel {
 public:
  // REQUIRES: vocab.Validate() is OK and vocab.model == "llama".
  // Errors: InvalidArgument when the vocabulary has neither byte tokens for
  // every byte nor an unknown token (some text could then not be encoded).
  static absl::StatusOr<std::unique_ptr<SentencePieceModel>> Create(const TokenizerVocab& vocab);

  // Appends the tokens of `text` (already escaped) to `out`.
  void Encode(std::string_view text, std::vector<TokenId>* out) const;

  // True when all 256 <0xNN> byte tokens exist.
  bool has_byte_fallback() const { return has_byte_fallback_; }

 private:
  SentencePieceModel() = default;
  void EmitUnknownPiece(std::string_view piece, std::vector<TokenId>* out) const;

  absl::flat_hash_map<std::string, TokenId> token_ids_;
  std::vector<float> scores_;
  std::array<TokenId, 256> byte_tokens_{};  // <0xNN>, else the 1-byte token, else kNoToken
  bool has_byte_fallback_ = false;
  TokenId unk_id_ = kNoToken;
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_SENTENCEPIECE_MODEL_H_

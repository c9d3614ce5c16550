// Text <-> token ids for the models splitspec serves: byte-level BPE ("gpt2"
// vocabularies: SmolLM2, Llama 3, Qwen2) and SentencePiece ("llama"
// vocabularies: Llama 2, Mistral), built from GGUF metadata.
//
//   ASSIGN_OR_RETURN(Tokenizer tok, LoadTokenizerFromGguf(*gguf));  // tokenizer_gguf.h
//   std::vector<TokenId> ids = tok.Encode("<|im_start|>user\nHi<|im_end|>\n",
//                                         {.add_special = false, .parse_special = true});
//   ASSIGN_OR_RETURN(std::string text, tok.Decode(ids));
//
// Encode never fails: malformed UTF-8 is tokenized as U+FFFD per bad byte
// (like llama.cpp), so ids always come back. For valid UTF-8 without special
// tokens, Decode(Encode(s, {.add_special = false})) == s for BPE vocabularies,
// and for SentencePiece ones whose pieces cover the text (byte fallback or no
// unknown characters).
//
// Special tokens: see tokenizer_special.h. Decode renders control tokens as
// nothing unless DecodeOptions::render_special; user-defined tokens always as
// their text. Decode does not "clean up tokenization spaces".
//
// Thread safety: a Tokenizer is immutable after Create (the BPE word cache has
// its own lock); every const method may be called concurrently. Move-only.
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/tokenizer/tokenizer_special.h"
#include "runtime/tokenizer/tokenizer_vocab.h"

namespace splitspec::model {

class BpeModel;
class SentencePieceModel;

struct EncodeOptions {
  // Prepend BOS / append EOS as the vocabulary asks (add_bos / add_eos).
  bool add_special = true;
  // Text equal to a control token (e.g. "<|im_start|>") becomes that token.
  bool parse_special = false;
  // SentencePiece vocabularies that prefix a space (adds_space_prefix()): do so.
  // false when the text continues text tokenized before (re-tokenizing the tail
  // of a sequence), whose pieces then cover exactly the given bytes.
  bool space_prefix = true;
};

struct DecodeOptions {
  // Control and unknown tokens appear as their text (else as nothing).
  bool render_special = false;
  // SentencePiece vocabularies with a space prefix: drop the leading space of
  // the first piece that has text (the space Encode prepended).
  bool strip_space_prefix = true;
};

class Tokenizer {
 public:
  // Errors: InvalidArgument from vocab.Validate(), for an unsupported model or
  // pre-tokenizer (naming it), or a malformed merge.
  static absl::StatusOr<Tokenizer> Create(TokenizerVocab vocab);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  std::vector<TokenId> Encode(std::string_view text, const EncodeOptions& options = {}) const;

  // The bytes of `ids`. The result may end inside a UTF-8 character (use
  // StreamingDetokenizer for incremental, always-valid output).
  // Errors: InvalidArgument naming the first id outside [0, vocab_size()).
  absl::StatusOr<std::string> Decode(absl::Span<const TokenId> ids,
                                     const DecodeOptions& options = {}) const;

  // The bytes one token stands for (no space-prefix stripping).
  // Errors: InvalidArgument naming an id outside [0, vocab_size()).
  absl::StatusOr<std::string_view> Piece(TokenId id, bool render_special = false) const;

  int32_t vocab_size() const { return static_cast<int32_t>(texts_.size()); }
  bool is_sentencepiece() const { return spm_ != nullptr; }
  // True when Encode prepends a space to plain text (SentencePiece).
  bool adds_space_prefix() const { return add_space_prefix_; }
  bool adds_bos() const { return add_bos_; }
  bool adds_eos() const { return add_eos_; }

  TokenId bos_id() const { return bos_id_; }
  TokenId eos_id() const { return eos_id_; }
  TokenId unk_id() const { return unk_id_; }
  TokenId pad_id() const { return pad_id_; }
  // True for tokens that end generation: EOS, EOT, and control tokens whose
  // text is a known end-of-turn marker (<|im_end|>, <|eot_id|>, <|endoftext|>,
  // <|end_of_text|>, <|eom_id|>, <end_of_turn>, <|end|>).
  bool IsEndOfGeneration(TokenId id) const { return eog_ids_.contains(id); }

  // REQUIRES: 0 <= id < vocab_size().
  const std::string& TokenText(TokenId id) const { return texts_[id]; }
  TokenType token_type(TokenId id) const { return types_[id]; }
  // Control, user-defined or unknown.
  bool IsSpecial(TokenId id) const;

  // The `tokenizer.chat_template` source; empty if the model has none.
  const std::string& chat_template() const { return chat_template_; }

 private:
  Tokenizer();
  void EncodeText(std::string_view text, std::vector<TokenId>* out) const;
  void BuildPieces();

  std::vector<std::string> texts_;
  std::vector<TokenType> types_;
  std::vector<std::string> pieces_;  // bytes per token, special tokens as their text
  std::unique_ptr<SpecialTokenSplitter> splitter_;
  std::unique_ptr<BpeModel> bpe_;
  std::unique_ptr<SentencePieceModel> spm_;
  TokenId bos_id_ = kNoToken;
  TokenId eos_id_ = kNoToken;
  TokenId unk_id_ = kNoToken;
  TokenId pad_id_ = kNoToken;
  bool add_bos_ = false;
  bool add_eos_ = false;
  bool add_space_prefix_ = false;
  absl::flat_hash_set<TokenId> eog_ids_;
  std::string chat_template_;
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_TOKENIZER_H_

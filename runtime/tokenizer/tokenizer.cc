#include "runtime/tokenizer/tokenizer.h"

#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "runtime/base/status_macros.h"
#include "runtime/tokenizer/bpe_byte_encoding.h"
#include "runtime/tokenizer/bpe_model.h"
#include "runtime/tokenizer/sentencepiece_model.h"
#include "runtime/tokenizer/tokenizer_internal.h"

namespace splitspec::model {
namespace {

constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK

// Texts of control tokens that end a turn in the chat formats we know.
constexpr std::string_view kEndOfTurnTexts[] = {
    "<|im_end|>", "<|eot_id|>",    "<|endoftext|>", "<|end_of_text|>",
    "<|eom_id|>", "<end_of_turn>", "<|end|>",
};

// "<0x0A>" -> 0x0A; -1 if `text` is not of that form.
int ParseByteToken(std::string_view text) {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return -1;
  char hex[3] = {text[3], text[4], 0};
  char* end = nullptr;
  const long value = std::strtol(hex, &end, 16);
  return end == hex + 2 ? static_cast<int>(value) : -1;
}

bool IsSpecialType(TokenType t) {
  return t == TokenType::kControl || t == TokenType::kUnknown || t == TokenType::kUserDefined;
}

}  // namespace

Tokenizer::Tokenizer() = default;
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

absl::StatusOr<Tokenizer> Tokenizer::Create(TokenizerVocab vocab) {
  RETURN_IF_ERROR(vocab.Validate());
  Tokenizer tok;
  const bool spm = vocab.model == "llama";
  if (spm) {
    ASSIGN_OR_RETURN(tok.spm_, SentencePieceModel::Create(vocab));
  } else {
    ASSIGN_OR_RETURN(tok.bpe_, BpeModel::Create(vocab));
  }
  const bool llama3 = !spm && tok.bpe_->pre_tokenizer().kind() == PreTokenizerKind::kLlama3;
  tok.add_bos_ = vocab.add_bos.value_or(spm || llama3);
  tok.add_eos_ = vocab.add_eos.value_or(false);
  tok.add_space_prefix_ = spm && vocab.add_space_prefix.value_or(true);
  if (tok.add_bos_ && vocab.bos_id == kNoToken) {
    return absl::InvalidArgumentError("tokenizer adds BOS but has no bos_id");
  }
  if (tok.add_eos_ && vocab.eos_id == kNoToken) {
    return absl::InvalidArgumentError("tokenizer adds EOS but has no eos_id");
  }
  tok.bos_id_ = vocab.bos_id;
  tok.eos_id_ = vocab.eos_id;
  tok.unk_id_ = vocab.unk_id;
  tok.pad_id_ = vocab.pad_id;
  if (vocab.token_types.empty()) {
    vocab.token_types.assign(vocab.tokens.size(), TokenType::kNormal);
  }
  tok.splitter_ = std::make_unique<SpecialTokenSplitter>(vocab.tokens, vocab.token_types);
  tok.texts_ = std::move(vocab.tokens);
  tok.types_ = std::move(vocab.token_types);
  tok.chat_template_ = std::move(vocab.chat_template);
  for (TokenId id : {vocab.eos_id, vocab.eot_id}) {
    if (id != kNoToken) tok.eog_ids_.insert(id);
  }
  for (TokenId id = 0; id < tok.vocab_size(); ++id) {
    if (tok.types_[id] != TokenType::kControl) continue;
    for (std::string_view eot : kEndOfTurnTexts) {
      if (tok.texts_[id] == eot) tok.eog_ids_.insert(id);
    }
  }
  tok.BuildPieces();
  return tok;
}

void Tokenizer::BuildPieces() {
  pieces_.resize(texts_.size());
  for (size_t id = 0; id < texts_.size(); ++id) {
    const std::string& text = texts_[id];
    std::string& piece = pieces_[id];
    switch (types_[id]) {
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined:
        piece = text;
        break;
      case TokenType::kNormal:
        if (spm_) {
          piece = absl::StrReplaceAll(text, {{tokenizer_internal::AV(kSpmSpace), " "}});
        } else if (!BpeTextToBytes(text, &piece)) {
          piece = text;  // not byte-level text: shown as written
        }
        break;
      case TokenType::kByte: {
        const int byte = spm_ ? ParseByteToken(text) : -1;
        if (byte >= 0) piece.assign(1, static_cast<char>(byte));
        break;
      }
      case TokenType::kUnused:
      case TokenType::kUndefined:
        break;
    }
  }
}

bool Tokenizer::IsSpecial(TokenId id) const { return IsSpecialType(types_[id]); }

void Tokenizer::EncodeText(std::string_view text, std::vector<TokenId>* out) const {
  if (bpe_) {
    bpe_->Encode(text, out);
    return;
  }
  std::string escaped =
      absl::StrReplaceAll(tokenizer_internal::AV(text), {{" ", tokenizer_internal::AV(kSpmSpace)}});
  spm_->Encode(escaped, out);
}

std::vector<TokenId> Tokenizer::Encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<TokenId> out;
  if (options.add_special && add_bos_) out.push_back(bos_id_);
  bool after_special = true;  // SentencePiece: a space prefix starts the text
  for (const TextFragment& f : splitter_->Split(text, options.parse_special)) {
    if (f.is_token()) {
      out.push_back(f.token);
      after_special = true;
      continue;
    }
    if (add_space_prefix_ && options.space_prefix && after_special) {
      EncodeText(absl::StrCat(" ", tokenizer_internal::AV(f.text(text))), &out);
    } else {
      EncodeText(f.text(text), &out);
    }
    after_special = false;
  }
  if (options.add_special && add_eos_) out.push_back(eos_id_);
  return out;
}

absl::StatusOr<std::string_view> Tokenizer::Piece(TokenId id, bool render_special) const {
  if (id < 0 || id >= vocab_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("token id ", id, " out of range [0, ", vocab_size(), ")"));
  }
  const TokenType t = types_[id];
  if (!render_special && (t == TokenType::kControl || t == TokenType::kUnknown)) return "";
  return std::string_view(pieces_[id]);
}

absl::StatusOr<std::string> Tokenizer::Decode(absl::Span<const TokenId> ids,
                                              const DecodeOptions& options) const {
  std::string out;
  bool strip = add_space_prefix_ && options.strip_space_prefix;
  for (TokenId id : ids) {
    ASSIGN_OR_RETURN(std::string_view piece, Piece(id, options.render_special));
    if (strip && !piece.empty()) {
      if (piece[0] == ' ') piece.remove_prefix(1);
      strip = false;
    }
    out.append(piece);
  }
  return out;
}

}  // namespace splitspec::model

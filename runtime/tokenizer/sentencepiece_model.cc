#include "runtime/tokenizer/sentencepiece_model.h"

#include <queue>

#include "absl/strings/str_format.h"
#include "runtime/tokenizer/tokenizer_internal.h"
#include "runtime/tokenizer/unicode.h"

namespace splitspec::model {
namespace {

struct Symbol {
  size_t start;
  size_t len;  // 0 once merged into its left neighbour
  int prev;
  int next;
};

// Adjacent symbols whose concatenation is a token. Stale once either side
// changed (checked through the combined length).
struct Pair {
  float score;
  int left;
  int right;
  size_t len;
};

struct PairBefore {
  bool operator()(const Pair& a, const Pair& b) const {
    if (a.score != b.score) return a.score < b.score;  // higher score first
    return a.left > b.left;                            // then leftmost
  }
};

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceModel>> SentencePieceModel::Create(
    const TokenizerVocab& vocab) {
  std::unique_ptr<SentencePieceModel> m(new SentencePieceModel());
  const size_t n = vocab.tokens.size();
  m->scores_ = vocab.scores.empty() ? std::vector<float>(n, 0.0f) : vocab.scores;
  m->token_ids_.reserve(n);
  for (size_t id = 0; id < n; ++id) {
    if (!vocab.tokens[id].empty()) m->token_ids_[vocab.tokens[id]] = static_cast<TokenId>(id);
  }
  m->unk_id_ = vocab.unk_id;
  bool all_bytes = true;
  for (int b = 0; b < 256; ++b) {
    auto it = m->token_ids_.find(absl::StrFormat("<0x%02X>", b));
    if (it == m->token_ids_.end()) {
      all_bytes = false;
      it = m->token_ids_.find(std::string(1, static_cast<char>(b)));
    }
    m->byte_tokens_[b] = it == m->token_ids_.end() ? kNoToken : it->second;
  }
  m->has_byte_fallback_ = all_bytes;
  if (!all_bytes && m->unk_id_ == kNoToken) {
    return absl::InvalidArgumentError(
        "SentencePiece vocabulary has neither byte tokens <0x00>..<0xFF> nor an unknown token "
        "(tokenizer.ggml.unknown_token_id)");
  }
  return m;
}

void SentencePieceModel::EmitUnknownPiece(std::string_view piece, std::vector<TokenId>* out) const {
  if (has_byte_fallback_) {
    for (char c : piece) out->push_back(byte_tokens_[static_cast<uint8_t>(c)]);
    return;
  }
  if (piece.size() == 1 && byte_tokens_[static_cast<uint8_t>(piece[0])] != kNoToken) {
    out->push_back(byte_tokens_[static_cast<uint8_t>(piece[0])]);
    return;
  }
  out->push_back(unk_id_);
}

void SentencePieceModel::Encode(std::string_view text, std::vector<TokenId>* out) const {
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < text.size();) {
    const size_t n =
        std::min(unicode::Utf8SequenceLength(static_cast<uint8_t>(text[pos])), text.size() - pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, n, index - 1, pos + n < text.size() ? index + 1 : -1});
    pos += n;
  }
  std::priority_queue<Pair, std::vector<Pair>, PairBefore> queue;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const size_t len = symbols[left].len + symbols[right].len;
    auto it = token_ids_.find(tokenizer_internal::AV(text.substr(symbols[left].start, len)));
    if (it == token_ids_.end()) return;
    queue.push({scores_[it->second], left, right, len});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i, i + 1);

  while (!queue.empty()) {
    const Pair p = queue.top();
    queue.pop();
    Symbol& left = symbols[p.left];
    Symbol& right = symbols[p.right];
    if (left.len == 0 || right.len == 0 || left.next != p.right || left.len + right.len != p.len) {
      continue;
    }
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = p.left;
    consider(left.prev, p.left);
    consider(p.left, left.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text.substr(symbols[i].start, symbols[i].len);
    auto it = token_ids_.find(tokenizer_internal::AV(piece));
    if (it != token_ids_.end()) {
      out->push_back(it->second);
    } else {
      EmitUnknownPiece(piece, out);
    }
  }
}

}  // namespace splitspec::model

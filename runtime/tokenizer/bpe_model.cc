#include "runtime/tokenizer/bpe_model.h"

#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "runtime/base/status_macros.h"
#include "runtime/tokenizer/bpe_byte_encoding.h"
#include "runtime/tokenizer/tokenizer_internal.h"
#include "runtime/tokenizer/unicode.h"

namespace splitspec::model {
namespace {

// One symbol of a word being merged: bytes [start, start+len) of the word, in a
// doubly linked list of the symbols still alive. A merged-away symbol has len 0.
struct Symbol {
  size_t start;
  size_t len;
  int prev;
  int next;
};

// A pair of adjacent symbols that a merge rule can join. Stale once either
// side changed length (the left one grew, or the right one was merged away).
struct Candidate {
  int rank;
  int left;
  int right;
  size_t left_len;
  size_t right_len;
};

struct CandidateAfter {
  bool operator()(const Candidate& a, const Candidate& b) const {
    if (a.rank != b.rank) return a.rank > b.rank;
    return a.left > b.left;
  }
};

using CandidateQueue = std::priority_queue<Candidate, std::vector<Candidate>, CandidateAfter>;

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(const TokenizerVocab& vocab) {
  ASSIGN_OR_RETURN(PreTokenizer pre, PreTokenizer::FromName(vocab.pre));
  std::unique_ptr<BpeModel> model(new BpeModel(pre));
  model->token_ids_.reserve(vocab.tokens.size());
  for (size_t id = 0; id < vocab.tokens.size(); ++id) {
    if (vocab.tokens[id].empty()) continue;
    model->token_ids_[vocab.tokens[id]] = static_cast<TokenId>(id);  // a later duplicate wins
  }
  model->ranks_.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& merge = vocab.merges[rank];
    const size_t sep = merge.size() > 1 ? merge.find(' ', 1) : std::string::npos;
    if (sep == std::string::npos || sep + 1 >= merge.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("BPE merge ", rank, " ('", merge, "') is not of the form 'left right'"));
    }
    model->ranks_.try_emplace(merge, static_cast<int>(rank));  // the first of duplicates wins
  }
  return model;
}

TokenId BpeModel::Find(std::string_view text) const {
  auto it = token_ids_.find(tokenizer_internal::AV(text));
  return it == token_ids_.end() ? kNoToken : it->second;
}

int BpeModel::Rank(std::string_view left, std::string_view right, std::string* scratch) const {
  scratch->assign(left);
  scratch->push_back(' ');
  scratch->append(right);
  auto it = ranks_.find(*scratch);
  return it == ranks_.end() ? -1 : it->second;
}

std::vector<TokenId> BpeModel::EncodeWord(const std::string& word) const {
  std::vector<TokenId> ids;
  if (pre_.ignore_merges()) {
    if (TokenId id = Find(word); id != kNoToken) return {id};
  }
  // One symbol per UTF-8 character of the byte-level word.
  std::vector<Symbol> symbols;
  for (size_t pos = 0; pos < word.size();) {
    const size_t n =
        std::min(unicode::Utf8SequenceLength(static_cast<uint8_t>(word[pos])), word.size() - pos);
    const int index = static_cast<int>(symbols.size());
    symbols.push_back({pos, n, index - 1, pos + n < word.size() ? index + 1 : -1});
    pos += n;
  }
  auto text = [&](int i) {
    return std::string_view(word).substr(symbols[i].start, symbols[i].len);
  };
  std::string scratch;
  CandidateQueue queue;
  auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int rank = Rank(text(left), text(right), &scratch);
    if (rank >= 0) queue.push({rank, left, right, symbols[left].len, symbols[right].len});
  };
  for (int i = 0; i + 1 < static_cast<int>(symbols.size()); ++i) consider(i, i + 1);

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    if (left.len != c.left_len || right.len != c.right_len || left.next != c.right) continue;
    left.len += right.len;
    right.len = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }

  for (int i = symbols.empty() ? -1 : 0; i >= 0; i = symbols[i].next) {
    const std::string_view piece = text(i);
    if (TokenId id = Find(piece); id != kNoToken) {
      ids.push_back(id);
      continue;
    }
    for (char byte : piece) {  // only single-byte (ASCII) pieces can be found
      if (TokenId id = Find(std::string_view(&byte, 1)); id != kNoToken) ids.push_back(id);
    }
  }
  return ids;
}

void BpeModel::Encode(std::string_view text, std::vector<TokenId>* out) const {
  for (const std::string& raw_word : pre_.Split(text)) {
    const std::string word = BytesToBpeText(raw_word);
    {
      MutexLock lock(&cache_mu_);
      auto it = cache_.find(word);
      if (it != cache_.end()) {
        out->insert(out->end(), it->second.begin(), it->second.end());
        continue;
      }
    }
    std::vector<TokenId> ids = EncodeWord(word);
    out->insert(out->end(), ids.begin(), ids.end());
    MutexLock lock(&cache_mu_);
    if (cache_.size() >= kMaxCachedWords) cache_.clear();
    cache_.emplace(word, std::move(ids));
  }
}

}  // namespace splitspec::model

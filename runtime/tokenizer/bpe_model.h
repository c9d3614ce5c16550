// Byte-level BPE (GPT-2 style) over one fragment of plain text, i.e. text with
// no special tokens in it (Tokenizer cuts those out first).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<BpeModel> bpe, BpeModel::Create(vocab));
//   std::vector<TokenId> ids;
//   bpe->Encode("Hello world", &ids);
//
// Steps: the pre-tokenizer named by vocab.pre splits the text into words; each
// word's bytes are written as byte-level text (bpe_byte_encoding.h); inside a
// word, adjacent symbols are merged by merge rank (lowest first; among equal
// ranks the leftmost pair) until no pair has a rank; each symbol becomes its
// token id. With the llama3 pre-tokenizer a word that is itself a token is
// emitted whole (llama.cpp's ignore_merges). A symbol that is not a token falls
// back to the tokens of its single bytes where those exist and is otherwise
// dropped, as llama.cpp does (it only happens for bytes the vocabulary lacks).
//
// Results per word are cached (at most kMaxCachedWords words; the cache is
// emptied when full), so repeated words cost one hash lookup.
//
// Thread safety: Encode may be called concurrently (the cache has its own lock).
#ifndef SPLITSPEC_RUNTIME_TOKENIZER_BPE_MODEL_H_
#define SPLITSPEC_RUNTIME_TOKENIZER_BPE_MODEL_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/base/mutex.h"
#include "runtime/tokenizer/pretokenizer.h"
#include "runtime/tokenizer/tokenizer_vocab.h"

namespace splitspec::model {

class BpeModel {
 public:
  static constexpr size_t kMaxCachedWords = 1 << 16;

  // REQUIRES: vocab.Validate() is OK and vocab.model == "gpt2".
  // Errors: InvalidArgument for an unsupported pre-tokenizer name, or a merge
  // that is not "left right" (names its rank and text).
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(const TokenizerVocab& vocab);

  // Appends the tokens of `text` to `out`.
  void Encode(std::string_view text, std::vector<TokenId>* out) const;

  const PreTokenizer& pre_tokenizer() const { return pre_; }
  size_t num_merges() const { return ranks_.size(); }

 private:
  explicit BpeModel(PreTokenizer pre) : pre_(pre) {}

  // Tokens of one byte-level word, merges applied.
  std::vector<TokenId> EncodeWord(const std::string& word) const;
  // Rank of merging `left` and `right`, or -1.
  int Rank(std::string_view left, std::string_view right, std::string* scratch) const;
  TokenId Find(std::string_view text) const;

  PreTokenizer pre_;
  absl::flat_hash_map<std::string, TokenId> token_ids_;
  absl::flat_hash_map<std::string, int> ranks_;  // key: "left right"

  mutable Mutex cache_mu_;
  // State below is protected by cache_mu_.
  mutable absl::flat_hash_map<std::string, std::vector<TokenId>> cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace splitspec::model

#endif  // SPLITSPEC_RUNTIME_TOKENIZER_BPE_MODEL_H_

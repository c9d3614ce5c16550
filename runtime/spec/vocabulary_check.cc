#include "runtime/spec/vocabulary_check.h"

#include "absl/strings/str_cat.h"

namespace splitspec::spec {
namespace {

absl::Status Mismatch(absl::string_view what, int64_t target, int64_t draft) {
  return absl::FailedPreconditionError(
      absl::StrCat("draft vocabulary differs from the target's: ", what, " is ", draft,
                   " in the draft, ", target, " in the target"));
}

}  // namespace

absl::Status CheckSameVocabulary(const model::Tokenizer& target, const model::Tokenizer& draft) {
  if (target.vocab_size() != draft.vocab_size()) {
    return Mismatch("vocabulary size", target.vocab_size(), draft.vocab_size());
  }
  if (target.is_sentencepiece() != draft.is_sentencepiece()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "draft vocabulary differs from the target's: the draft tokenizer is ",
        draft.is_sentencepiece() ? "SentencePiece" : "byte-level BPE", ", the target's is not"));
  }
  if (target.bos_id() != draft.bos_id())
    return Mismatch("the BOS id", target.bos_id(), draft.bos_id());
  if (target.eos_id() != draft.eos_id())
    return Mismatch("the EOS id", target.eos_id(), draft.eos_id());
  if (target.unk_id() != draft.unk_id())
    return Mismatch("the UNK id", target.unk_id(), draft.unk_id());
  if (target.pad_id() != draft.pad_id())
    return Mismatch("the PAD id", target.pad_id(), draft.pad_id());
  for (model::TokenId id = 0; id < target.vocab_size(); ++id) {
    if (target.TokenText(id) != draft.TokenText(id)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "draft vocabulary differs from the target's: token ", id, " is '", draft.TokenText(id),
          "' in the draft, '", target.TokenText(id), "' in the target"));
    }
    if (target.token_type(id) != draft.token_type(id)) {
      return Mismatch(absl::StrCat("the type of token ", id),
                      static_cast<int64_t>(target.token_type(id)),
                      static_cast<int64_t>(draft.token_type(id)));
    }
    if (target.IsEndOfGeneration(id) != draft.IsEndOfGeneration(id)) {
      return Mismatch(absl::StrCat("'ends generation' of token ", id), target.IsEndOfGeneration(id),
                      draft.IsEndOfGeneration(id));
    }
  }
  return absl::OkStatus();
}

}  // namespace splitspec::spec

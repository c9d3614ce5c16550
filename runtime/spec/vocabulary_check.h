// Whether a draft model may draft for a target: both must map every token id to
// the same token, with the same special ids, since draft blocks carry ids only.
//
//   RETURN_IF_ERROR(CheckSameVocabulary(target_tokenizer, draft_tokenizer));
#ifndef SPLITSPEC_RUNTIME_SPEC_VOCABULARY_CHECK_H_
#define SPLITSPEC_RUNTIME_SPEC_VOCABULARY_CHECK_H_

#include "absl/status/status.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::spec {

// OK if the vocabularies agree on: size, the text and type of every id, which
// ids end generation, BOS / EOS / UNK / PAD ids, and the tokenizer kind.
// Otherwise FailedPrecondition naming the first difference (the id and both
// texts, or the special id and both values). Thread-safe (reads only).
absl::Status CheckSameVocabulary(const model::Tokenizer& target, const model::Tokenizer& draft);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_VOCABULARY_CHECK_H_

// How a draft model whose vocabulary differs from the target's drafts for it
// (`--vocab-mapping`, the pool config's `vocab_mapping`; cross_vocab_drafter.h):
//
//   intersection  token-level intersection (TLI): the draft's q is restricted to the
//                 tokens both vocabularies share, renormalized and mapped to target
//                 ids; rejection sampling against the target's p is unchanged.
//   string        string-level exact match (SLEM): the draft's text is re-tokenized
//                 by the target's tokenizer and proposed as plain tokens (a one-hot
//                 q under rejection sampling, which is exact for any proposal).
//   auto          identity when the vocabularies are equal; else, per request,
//                 intersection under rejection verification (its q is known) and
//                 string under greedy and coupled verification.
#ifndef SPLITSPEC_RUNTIME_SPEC_VOCAB_MAPPING_H_
#define SPLITSPEC_RUNTIME_SPEC_VOCAB_MAPPING_H_

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "runtime/spec/verify_mode.h"

namespace splitspec::spec {

enum class VocabMapping { kAuto, kIntersection, kString };

// "auto" | "intersection" | "string"; InvalidArgument naming `name` otherwise.
absl::StatusOr<VocabMapping> ParseVocabMapping(absl::string_view name);
absl::string_view VocabMappingName(VocabMapping mapping);

// The mapping a request verified by `mode` gets (never kAuto): kAuto resolves as
// above, the others stand.
VocabMapping ResolveVocabMapping(VocabMapping mapping, VerifyMode mode);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_VOCAB_MAPPING_H_

// Building a Drafter from its command-line name, for every binary that drafts.
//
//   ASSIGN_OR_RETURN(DrafterSpec spec, ParseDrafterSpec("layerskip:8", /*draft_path=*/""));
//   ASSIGN_OR_RETURN(std::unique_ptr<Drafter> drafter,
//                    MakeDrafter(spec, target_path, &target_tokenizer, vocab, /*threads=*/1));
//
// Names: "none" (no drafter), "ngram" (prompt lookup, suffixes of <= 3 tokens),
// "lookup" (longest-suffix prompt lookup, runtime/spec/lookup_drafter.h), "model" (another GGUF,
// given as draft_path: a ModelDrafter when it has the target's vocabulary, else a
// CrossVocabDrafter mapping its tokens by `vocab_mapping`), "layerskip:L" (the first L
// layers of the target's own file + its final norm and head; the file is
// mmapped again, so the pages are shared with a co-located target).
#ifndef SPLITSPEC_RUNTIME_SPEC_DRAFTER_FACTORY_H_
#define SPLITSPEC_RUNTIME_SPEC_DRAFTER_FACTORY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "runtime/model/device.h"
#include "runtime/spec/drafter.h"
#include "runtime/spec/vocab_mapping.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::spec {

struct DrafterSpec {
  enum class Kind { kNone, kNgram, kLookup, kModel, kLayerSkip };
  Kind kind = Kind::kNone;
  int layers = 0;          // layerskip: L
  std::string draft_path;  // model: the draft GGUF
  std::string name;        // as given
  // Where a model or layerskip drafter's model runs (Transformer's device check
  // applies at load); ngram and lookup drafters run on the host whatever it says.
  model::DeviceSpec device = {};
  // model: how a draft whose vocabulary differs drafts for the target
  // (vocab_mapping.h). auto with equal vocabularies is the plain ModelDrafter;
  // intersection or string use the CrossVocabDrafter even then.
  VocabMapping vocab_mapping = VocabMapping::kAuto;
};

// Errors (InvalidArgument, naming the value): an unknown name, "layerskip:" without
// a positive integer, "model" without a draft path.
absl::StatusOr<DrafterSpec> ParseDrafterSpec(const std::string& name,
                                             const std::string& draft_path);

// nullptr for kNone. `target_tokenizer` may be null for ngram and lookup only; a
// CrossVocabDrafter borrows it (it must outlive the drafter). Errors:
// InvalidArgument if a model drafter has no target tokenizer; those of loading
// the draft model or the target's file (naming the file) and of the
// vocabulary check. A model drafter's decode_bytes_ratio() is set from both
// models' weights (left 0 if the target's file at target_path cannot be read:
// the prior is then unknown, not an error).
absl::StatusOr<std::unique_ptr<Drafter>> MakeDrafter(const DrafterSpec& spec,
                                                     const std::string& target_path,
                                                     const model::Tokenizer* target_tokenizer,
                                                     int target_vocab_size, int threads);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_DRAFTER_FACTORY_H_

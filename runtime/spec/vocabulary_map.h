// The token-level intersection of two vocabularies (a draft's and a target's that
// differ): which draft tokens stand for exactly the bytes of a target token, so a
// draft restricted to them proposes target tokens (Timor et al., ICML 2025: TLI).
//
//   ASSIGN_OR_RETURN(VocabularyMap map, VocabularyMap::Build(target_tokenizer, draft_tokenizer));
//   int32_t target_id = map.ToTarget(draft_id);          // kNoToken outside the intersection
//   ASSIGN_OR_RETURN(SparseDistribution q_target, map.MapToTarget(q_draft));
//
// A token's bytes are Tokenizer::Piece's: SentencePiece's "▁" is a space and its
// <0xNN> tokens are the byte NN; byte-level BPE's code points (Ġ, Ċ, ...) are the
// bytes they encode. Only normal and byte tokens with at least one byte take part:
// control, user-defined, unknown and unused tokens (BOS, EOS, chat markers) are in
// no intersection, since their meaning is the vocabulary's own, not their text.
// When several ids of one vocabulary share a byte string (a SentencePiece "A" and
// its <0x41>), the other side maps to one of them: the normal token before the
// byte token, then the lowest id; every one of them maps to the other side.
//
// Thread safety: immutable after Build; every const method may be called
// concurrently.
#ifndef SPLITSPEC_RUNTIME_SPEC_VOCABULARY_MAP_H_
#define SPLITSPEC_RUNTIME_SPEC_VOCABULARY_MAP_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/spec/sparse_distribution.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::spec {

// The bytes `id` stands for when it may be in an intersection (see above), else
// nullopt. REQUIRES: 0 <= id < tokenizer.vocab_size().
std::optional<std::string_view> IntersectionBytes(const model::Tokenizer& tokenizer,
                                                  model::TokenId id);

class VocabularyMap {
 public:
  // Maps every draft id [0, draft_logits) and target id [0, target.vocab_size()).
  // draft_logits is the draft model's logits width (>= draft.vocab_size(); ids past
  // the tokenizer's are in no intersection); 0 means draft.vocab_size().
  // FailedPrecondition if the vocabularies share no token (naming both sizes).
  static absl::StatusOr<VocabularyMap> Build(const model::Tokenizer& target,
                                             const model::Tokenizer& draft, int draft_logits = 0);

  // The target id standing for draft id `draft_id`'s bytes, or kNoToken (also for
  // an id outside the draft's vocabulary).
  int32_t ToTarget(int32_t draft_id) const {
    return draft_id >= 0 && draft_id < static_cast<int32_t>(to_target_.size())
               ? to_target_[draft_id]
               : model::kNoToken;
  }
  // The draft id standing for target id `target_id`'s bytes, or kNoToken.
  int32_t ToDraft(int32_t target_id) const {
    return target_id >= 0 && target_id < static_cast<int32_t>(to_draft_.size())
               ? to_draft_[target_id]
               : model::kNoToken;
  }

  // Draft ids that map to a target id.
  int shared_draft_tokens() const { return shared_draft_tokens_; }
  int draft_size() const { return static_cast<int>(to_target_.size()); }
  int target_size() const { return static_cast<int>(to_draft_.size()); }

  // The draft ids that map to a target id, as a token bitmask over the draft's
  // logits (runtime/spec/logits_pipeline.h's layout: ceil(draft_size / 32) words,
  // bit v % 32 of word v / 32 set = v allowed): what restricts the draft's q.
  absl::Span<const uint32_t> draft_mask() const { return draft_mask_; }

  // q over draft ids -> the same law over target ids: each draft id's mass goes to
  // its target id (ids sharing a target id add up), order by decreasing
  // probability (ties: lower target id first). InvalidArgument naming the first
  // draft id that maps to no target id (a q not restricted to the intersection).
  absl::StatusOr<SparseDistribution> MapToTarget(const SparseDistribution& q) const;

 private:
  std::vector<int32_t> to_target_;  // [draft_size]
  std::vector<int32_t> to_draft_;   // [target_size]
  std::vector<uint32_t> draft_mask_;
  int shared_draft_tokens_ = 0;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_VOCABULARY_MAP_H_

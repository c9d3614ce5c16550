// Drafting with a GGUF model whose vocabulary differs from the target's (a draft
// of another family): drafter "model" when the vocabularies differ. It speaks
// target ids on the Drafter protocol (runtime/spec/drafter.h) and runs a
// ModelDrafter over the draft's own ids inside, translating per request by the
// mapping vocab_mapping.h names (Timor et al., ICML 2025):
//
//   intersection (TLI): the draft's q is restricted to the draft tokens whose bytes
//     are a target token's (VocabularyMap), renormalized, sampled, and shipped
//     mapped to target ids; the target's rejection sampling is unchanged, so every
//     committed token has the target's law whatever q is.
//   string (SLEM): the draft drafts freely; its text is re-tokenized by the
//     target's tokenizer, from a look-behind window of the held target tokens
//     (boundary effects: a draft text that merges with the held tail), and those
//     target tokens are proposed: greedy verification accepts them iff they match
//     exactly; under rejection they ship a one-hot q (exact: given any proposal x,
//     accepting with p(x) and else sampling p without x samples p).
//
//   ASSIGN_OR_RETURN(std::unique_ptr<CrossVocabDrafter> drafter,
//                    CrossVocabDrafter::Load(draft_path, &target_tokenizer, {}));
//   SPLITSPEC_LOG(INFO) << drafter->Describe();
//
// Text: per request the drafter keeps the bytes of the held target tokens (control
// tokens as their text, the target's BOS as nothing) and the draft's own
// tokenization of them, kept incrementally: new text re-tokenizes the last
// `look_behind` draft tokens with it and keeps the common prefix, cutting the
// draft's KV cache where its tokenization diverges (ModelDrafter::Truncate). A
// byte that starts no UTF-8 character is tokenized as the vocabulary's token of
// that byte, so the tokens spell the text exactly; a text ending inside a UTF-8
// character that the draft's tokens do not cover (they cover it when the draft
// drafted those bytes itself) waits for the rest (the request drafts nothing
// meanwhile). A Truncate to target length n cuts the text after target
// token n and the draft's tokens to those inside it (accepted drafts keep their
// draft tokens: the cache is cut exactly where verification stopped).
// The request's sampling parameters shape q as the draft's ModelDrafter does,
// logit_bias mapped to draft ids (ids without one dropped). Drafted positions
// count draft tokens (the draft's random streams are keyed by them).
// Thread model: one thread (see Drafter).
#ifndef SPLITSPEC_RUNTIME_SPEC_CROSS_VOCAB_DRAFTER_H_
#define SPLITSPEC_RUNTIME_SPEC_CROSS_VOCAB_DRAFTER_H_

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "runtime/spec/drafter.h"
#include "runtime/spec/model_drafter.h"
#include "runtime/spec/vocab_mapping.h"
#include "runtime/spec/vocabulary_map.h"
#include "runtime/tokenizer/tokenizer.h"

namespace splitspec::spec {

// The token standing for each single byte in a vocabulary (kNoToken where none).
using ByteTokens = std::array<int32_t, 256>;

struct CrossVocabDrafterOptions {
  VocabMapping mapping = VocabMapping::kAuto;
  // Draft (and, under string, target) tokens re-tokenized behind new text; >= 1.
  int look_behind = 4;
  ModelDrafterOptions model;  // the draft model's threads, device, cache size, KV budget
};

class CrossVocabDrafter : public Drafter {
 public:
  // `target_tokenizer` is borrowed and must outlive the drafter. Errors:
  // FailedPrecondition from VocabularyMap::Build (no shared token);
  // InvalidArgument for look_behind < 1; ModelDrafter::Create's.
  static absl::StatusOr<std::unique_ptr<CrossVocabDrafter>> Create(
      std::unique_ptr<model::Transformer> draft, model::Tokenizer draft_tokenizer,
      const model::Tokenizer* target_tokenizer, const CrossVocabDrafterOptions& options);
  // Loads the draft GGUF and its tokenizer, then Create (errors name the file).
  static absl::StatusOr<std::unique_ptr<CrossVocabDrafter>> Load(
      const std::string& path, const model::Tokenizer* target_tokenizer,
      const CrossVocabDrafterOptions& options);

  absl::string_view name() const override { return "model"; }
  // Also InvalidArgument for an empty `tokens` or an id outside the target's vocabulary.
  absl::Status Start(const std::string& request_id, absl::Span<const int32_t> tokens) override;
  absl::Status Truncate(const std::string& request_id, int64_t length) override;
  void Release(const std::string& request_id) override;
  // Per-request errors as ModelDrafter's (naming the request), plus a context token
  // outside the target's vocabulary.
  absl::Status Propose(absl::Span<DraftRequest> batch) override;
  const model::KvBudget* kv_budget() const override { return inner_->kv_budget(); }

  // One line for the start-up log: both vocabulary sizes, the shared tokens and
  // the mapping per verification mode.
  std::string Describe() const;
  VocabMapping mapping() const { return options_.mapping; }
  const VocabularyMap& vocabulary_map() const { return map_; }
  // The draft's ModelDrafter (its model, KV budget).
  ModelDrafter& inner() { return *inner_; }
  // The draft tokens of `request_id` as the drafter holds them (empty if unknown).
  std::vector<int32_t> DraftTokens(const std::string& request_id) const;

 private:
  // Tokens of one vocabulary over a request's text: ids[i] stands for the bytes
  // text[start(i), ends[i]).
  struct Spans {
    std::vector<int32_t> ids;
    std::vector<size_t> ends;
    size_t covered() const { return ends.empty() ? 0 : ends.back(); }
    size_t start(size_t i) const { return i == 0 ? 0 : ends[i - 1]; }
    void Append(int32_t id, size_t end) {
      ids.push_back(id);
      ends.push_back(end);
    }
    void Resize(size_t n) {
      ids.resize(n);
      ends.resize(n);
    }
  };
  struct RequestState {
    std::string text;                   // bytes of the held target tokens
    Spans target;                       // the held target tokens (what the caller holds)
    Spans draft;                        // the draft's tokens of a prefix of text
    size_t draft_fixed = 0;             // draft[0, draft_fixed): its BOS, never re-tokenized
    std::vector<int32_t> inner_tokens;  // what the inner ModelDrafter holds
    bool inner_started = false;
  };
  // One request of a Propose call.
  struct Work {
    DraftRequest* request;
    RequestState* state;
    size_t held_before;  // target tokens before the call, for rollback
    VocabMapping mapping;
    DraftRequest inner;
  };

  CrossVocabDrafter(std::unique_ptr<ModelDrafter> inner, model::Tokenizer draft_tokenizer,
                    const model::Tokenizer* target_tokenizer, VocabularyMap map,
                    const CrossVocabDrafterOptions& options);

  // Appends target tokens (their bytes to the text).
  void AppendTarget(RequestState& state, absl::Span<const int32_t> ids) const;
  // Cuts the request back to its first `length` target tokens.
  void CutTarget(RequestState& state, size_t length) const;
  // Re-tokenizes the text the draft's tokens do not cover yet (see the header).
  void SyncDraft(RequestState& state) const;
  // Cuts the inner drafter back to the common prefix of what it holds and
  // state.draft, starting it if needed.
  absl::Status SyncInner(const std::string& request_id, RequestState& state);
  // The inner request for `w` (its context borrows w.state->draft.ids).
  absl::Status PrepareInner(Work& w);
  // After the inner Propose: the target tokens (and q) of w's drafts.
  void FinishIntersection(Work& w);
  void FinishString(Work& w);

  std::unique_ptr<ModelDrafter> inner_;
  model::Tokenizer draft_tokenizer_;
  const model::Tokenizer* target_tokenizer_;
  VocabularyMap map_;
  CrossVocabDrafterOptions options_;
  ByteTokens draft_bytes_;
  ByteTokens target_bytes_;
  absl::flat_hash_map<std::string, RequestState> requests_;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_CROSS_VOCAB_DRAFTER_H_

// One request's walk through a compiled grammar (grammar_compiler.h): which tokens may come
// next, as a bitmask or as -inf written into a logits row, and the state after each token,
// with the rollback speculation needs.
//
//   GrammarMatcher matcher(compiled);                 // one per request (and per choice of n)
//   RETURN_IF_ERROR(matcher.MaskLogits(logits_row));  // before sampling position i
//   TokenId t = Sample(logits_row);
//   matcher.AcceptToken(t);                          // true: t was allowed
//   ...
//   // Speculation: masks for the k+1 block positions after the draft, then the state as before.
//   std::vector<int32_t> masks((k + 1) * matcher.bitmask_words());
//   ASSIGN_OR_RETURN(int valid, matcher.FillDraftBitmasks(draft, absl::MakeSpan(masks)));
//   // Verify: position i of the block uses row i; the draft is cut after `valid` tokens.
//   // Then AcceptToken each committed token (the accepted prefix and the corrected token).
//
// Bitmask layout (xgrammar's): bitmask_words() = ceil(vocab_size / 32) int32 words; token t is
// allowed iff bit (t % 32) of word (t / 32) is set.
//
// Termination: when the grammar's text is complete only end-of-generation tokens are allowed;
// accepting one terminates the matcher, after which no token is allowed (an all-zero bitmask,
// MaskLogits writes -inf everywhere). Rollback undoes termination like any other token.
//
// Thread safety: none; a request's matcher is used by one thread at a time. Move-only.
#ifndef SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_MATCHER_H_
#define SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_MATCHER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/grammar/grammar_compiler.h"
#include "runtime/tokenizer/tokenizer_vocab.h"

namespace splitspec::grammar {

class GrammarMatcher {
 public:
  // REQUIRES: grammar != nullptr.
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  int32_t vocab_size() const { return grammar_->vocab_size(); }
  int32_t bitmask_words() const { return (vocab_size() + 31) / 32; }

  // Writes the tokens allowed next into `bitmask` (layout above). Does not change the state.
  // Errors: InvalidArgument when bitmask.size() != bitmask_words() (bitmask unchanged).
  absl::Status FillNextTokenBitmask(absl::Span<int32_t> bitmask);

  // Sets logits[t] = -infinity for every token t not allowed next; allowed entries are left as
  // they are. Does not change the state.
  // Errors: InvalidArgument when logits.size() != vocab_size() (logits unchanged).
  absl::Status MaskLogits(absl::Span<float> logits);

  // Feeds `token`: true when the grammar allows it next (the state advances by one token),
  // false when not, or when `token` is outside [0, vocab_size()) or the matcher is terminated
  // (the state is unchanged).
  bool AcceptToken(model::TokenId token);

  // Undoes the last `num_tokens` accepted tokens: the state is then exactly that of a matcher
  // fed only the tokens before them. Errors: OutOfRange when num_tokens < 0 or exceeds
  // num_accepted_tokens() (state unchanged).
  absl::Status Rollback(int num_tokens);

  // Tokens accepted and not rolled back.
  int num_accepted_tokens() const { return num_accepted_tokens_; }
  // An end-of-generation token was accepted.
  bool IsTerminated() const;
  // The text so far is a complete match (only end-of-generation tokens may follow).
  bool IsCompleted() const;

  // The masks of a verification block: row i (bitmasks[i * bitmask_words(), ...)) gets the
  // tokens allowed after the current state plus draft[0..i). Stops at the first draft token
  // the grammar does not allow; returns `valid`, the number of leading draft tokens allowed,
  // with rows 0..valid filled (rows after them untouched). The state afterwards is the state
  // before the call (the drafted tokens are fed, then rolled back).
  // Errors: InvalidArgument when bitmasks.size() < (draft.size() + 1) * bitmask_words()
  // (nothing written, state unchanged).
  absl::StatusOr<int> FillDraftBitmasks(absl::Span<const model::TokenId> draft,
                                        absl::Span<int32_t> bitmasks);

 private:
  struct Impl;  // xgrammar's matcher
  std::shared_ptr<const CompiledGrammar> grammar_;
  std::unique_ptr<Impl> impl_;
  int num_accepted_tokens_ = 0;
  std::vector<int32_t> scratch_bitmask_;  // MaskLogits' bitmask
};

// Whether `bitmask` (layout above) allows `token`. REQUIRES: 0 <= token < 32 * bitmask.size().
inline bool BitmaskAllows(absl::Span<const int32_t> bitmask, model::TokenId token) {
  return (static_cast<uint32_t>(bitmask[token / 32]) >> (token % 32)) & 1u;
}

// Sets logits[t] = -infinity for every t the bitmask does not allow. For a seam that computes a
// block's masks once (FillDraftBitmasks) and applies them to several rows (the target's p and
// the draft's q). REQUIRES: bitmask.size() == ceil(logits.size() / 32).
void ApplyBitmaskToLogits(absl::Span<const int32_t> bitmask, absl::Span<float> logits);

}  // namespace splitspec::grammar

#endif  // SPLITSPEC_RUNTIME_GRAMMAR_GRAMMAR_MATCHER_H_

// Model-free drafting by longest-suffix prompt lookup over the prompt and the
// generated text.
//
//   LookupDrafterConfig config;            // defaults: see the fields
//   RETURN_IF_ERROR(config.Validate());
//   LookupDrafter drafter(config);
//   // then the Drafter protocol of runtime/spec/drafter.h
//
// Per request it keeps an index from each token to the positions where it
// occurs in the sequence (built incrementally as the sequence grows, rolled
// back by Truncate). To propose, it takes the latest `max_candidates`
// occurrences of the last token and measures, for each, how many tokens before
// it agree with the sequence's suffix (the match length, up to max_match); the
// occurrence with the longest match wins (the latest among equals). A longer
// match is stronger evidence that the text is being repeated, so the proposal
// grows with it: min(k, tokens_per_matched * match length, tokens available
// after the occurrence). Nothing is proposed when the last token never occurred
// before or the match is shorter than min_match.
//
// A chain proposal reports each position's confidence class (DraftRequest.confidence,
// LookupConfidenceClass): the match length it continues, counting the drafts before
// it as accepted, and whether another examined occurrence of the suffix continues
// with a different first token; the speculation policy cuts the block by them.
//
// Trees (DraftRequest.tree_nodes > 0): every match among those occurrences (of
// length >= min_match) gives a continuation of the length its chain proposal
// would have; they are merged into a trie (runtime/spec/draft_tree.h) longest
// match first, latest among equals, within tree_nodes nodes. The first path is
// the chain proposal; the other branches are what the text continued with at
// the other places the suffix occurred. Each node reports a confidence class, the
// class its position has in the chain of the longest match through it
// (LookupConfidenceClass; a child of the root is contested when the matches begin
// differently), so the policy prices a tree as it prices a chain (spec_policy.h,
// CutTreeProposal).
//
// Compared with NgramDrafter (suffixes of at most 3 tokens, the latest match,
// always k tokens): the longest match tells a repeated passage from a common
// word, and a weak match proposes little, so little verification is wasted.
// The draft is deterministic, so in rejection mode each q row is OneHot(token).
// Thread-compatible (see Drafter).
#ifndef SPLITSPEC_RUNTIME_SPEC_LOOKUP_DRAFTER_H_
#define SPLITSPEC_RUNTIME_SPEC_LOOKUP_DRAFTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/drafter.h"

namespace splitspec::spec {

struct LookupDrafterConfig {
  int min_match = 1;           // shortest suffix match that proposes anything; >= 1
  int max_match = 32;          // match lengths are measured up to this; >= min_match
  int tokens_per_matched = 2;  // proposal <= tokens_per_matched * match length; >= 1
  int max_candidates = 64;     // latest occurrences of the last token examined; >= 1

  // OK, or InvalidArgument naming the first field out of range and its value.
  absl::Status Validate() const;
};

// The best match of the sequence's suffix: the continuation starts at
// `continuation` (an index into the sequence) and the `length` tokens before it
// equal the sequence's last `length` tokens. length 0: no match.
struct LookupMatch {
  int64_t continuation = 0;
  int length = 0;
};

// The token -> positions index of one sequence.
class LookupIndex {
 public:
  // Indexes `tokens` beyond the indexed prefix. REQUIRES its first size()
  // tokens to be the ones indexed.
  void Extend(absl::Span<const int32_t> tokens);
  // Forgets positions >= length.
  void Truncate(int64_t length);
  int64_t size() const { return static_cast<int64_t>(tokens_.size()); }

  // The longest match of the indexed sequence's suffix (see the file comment).
  LookupMatch Find(const LookupDrafterConfig& config) const;
  // Every match among the latest max_candidates occurrences of the last token
  // with length >= min_match: longest first, latest among equals (the first is
  // Find()'s).
  std::vector<LookupMatch> FindAll(const LookupDrafterConfig& config) const;

 private:
  // How many tokens ending at position j (1 <= result <= max_match) equal the ones
  // ending at the last token. REQUIRES: tokens_[j] == tokens_.back().
  int SuffixMatchLength(int64_t j, int max_match) const;

  std::vector<int32_t> tokens_;
  absl::flat_hash_map<int32_t, std::vector<int64_t>> positions_;  // ascending
};

// The confidence class (DraftRequest.confidence: 0 least likely accepted .. 3) of
// a chain position whose suffix match, counting the drafts before it as accepted,
// is `suffix_match` tokens long; `contested`: another examined occurrence of the
// suffix continues with a different token (the block's first position only).
// NgramDrafter reports the same classes: its suffixes are matches too.
int8_t LookupConfidenceClass(int suffix_match, bool contested);

// Each node's confidence class in a trie built by TrieFromContinuations from
// `continuations` (in insertion order), where continuations[j] follows a suffix
// match of match_lengths[j] tokens: a node takes the class its position has in the
// chain of the first continuation through it (its ancestors counted as accepted);
// `contested`: the continuations begin with different tokens (depth 1 only).
// REQUIRES match_lengths.size() == continuations.size() >= 1 when the tree has nodes.
std::vector<int8_t> SuffixMatchTreeClasses(const DraftTree& tree,
                                           absl::Span<const std::vector<int32_t>> continuations,
                                           absl::Span<const int> match_lengths, bool contested);

// The proposal for `context` (at most k tokens; empty without a match). Builds
// a fresh index: for tests and one-off use; the drafter keeps its index.
std::vector<int32_t> LookupProposal(absl::Span<const int32_t> context, int k,
                                    const LookupDrafterConfig& config);

// The tree proposal for `context` (see the file comment): depth <= k, at most
// tree_nodes nodes, no q; `classes` (if not null): each node's confidence class, as
// the drafter reports it (DraftRequest.confidence). Builds a fresh index, as
// LookupProposal.
DraftTree LookupTreeProposal(absl::Span<const int32_t> context, int k, int tree_nodes,
                             const LookupDrafterConfig& config,
                             std::vector<int8_t>* classes = nullptr);

class LookupDrafter : public Drafter {
 public:
  // REQUIRES config.Validate().ok().
  explicit LookupDrafter(const LookupDrafterConfig& config) : config_(config) {}

  absl::string_view name() const override { return "lookup"; }
  bool ProposesTrees() const override { return true; }
  absl::Status Start(const std::string& request_id, absl::Span<const int32_t> tokens) override;
  absl::Status Truncate(const std::string& request_id, int64_t length) override;
  void Release(const std::string& request_id) override { requests_.erase(request_id); }
  absl::Status Propose(absl::Span<DraftRequest> batch) override;

 private:
  struct RequestState {
    int64_t held = 0;
    LookupIndex index;  // a prefix of what is held
  };
  void ProposeOne(DraftRequest& request);

  LookupDrafterConfig config_;
  absl::flat_hash_map<std::string, RequestState> requests_;
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_LOOKUP_DRAFTER_H_

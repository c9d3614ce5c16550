// Model-free drafting by prompt lookup: find the latest earlier occurrence of
// the sequence's last n tokens (n from max_n down to min_n) within the last
// `window` tokens of prompt + output, and propose the tokens that followed it.
//
//   NgramDrafterConfig config;          // min_n 1, max_n 3, window 1024
//   RETURN_IF_ERROR(config.Validate());
//   NgramDrafter drafter(config);
//   // then the Drafter protocol of runtime/spec/drafter.h
//
// Proposes min(k, tokens following the match) tokens, none when nothing matches.
// Each proposed node reports the lookup drafter's confidence class
// (DraftRequest.confidence, LookupConfidenceClass): the suffix length n it
// continues, counting the drafts before it, and whether another match of the
// last min_n tokens in the window continues with a different token; the
// speculation policy prices the block by them.
// Trees (DraftRequest.tree_nodes > 0): the continuations of every earlier match
// in the window, longest n first, latest first among equal n, distinct by their
// tokens, merged into a trie (runtime/spec/draft_tree.h) within tree_nodes nodes;
// its first path is the chain proposal.
// The draft is deterministic given the context, so its distribution is one-hot:
// in rejection mode each q row is OneHot(token), and verification accepts x
// with probability p(x) and corrects from norm(max(0, p - onehot(x))), which is
// exact. Sampling parameters do not affect the proposals.
// Thread-compatible (see Drafter).
#ifndef SPLITSPEC_RUNTIME_SPEC_NGRAM_DRAFTER_H_
#define SPLITSPEC_RUNTIME_SPEC_NGRAM_DRAFTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/drafter.h"

namespace splitspec::spec {

struct NgramDrafterConfig {
  int min_n = 1;      // shortest suffix tried; >= 1
  int max_n = 3;      // longest suffix tried first; >= min_n
  int window = 1024;  // how many of the latest tokens are searched; >= max_n + 1

  // OK, or InvalidArgument naming the first field out of range and its value.
  absl::Status Validate() const;
};

// The continuation of the latest earlier match of the context's suffix, at most
// k tokens (empty if none); `classes` (if not null): each token's confidence
// class (see the file comment). Exposed for tests; the drafter calls it per request.
std::vector<int32_t> NgramLookup(absl::Span<const int32_t> context, int k,
                                 const NgramDrafterConfig& config,
                                 std::vector<int8_t>* classes = nullptr);

// Up to max_count distinct continuations (each at most k tokens) of the earlier
// matches of the context's suffix, in the tree's priority order (see the file
// comment); the first is NgramLookup's. Empty when k < 1 or nothing matches.
// `match_lengths` (if not null): the suffix length n each continuation follows.
std::vector<std::vector<int32_t>> NgramContinuations(absl::Span<const int32_t> context, int k,
                                                     int max_count,
                                                     const NgramDrafterConfig& config,
                                                     std::vector<int>* match_lengths = nullptr);

// The tree proposal: the trie of NgramContinuations(context, k, tree_nodes), at
// most tree_nodes nodes, no q; `classes` (if not null): each node's confidence class.
DraftTree NgramTreeProposal(absl::Span<const int32_t> context, int k, int tree_nodes,
                            const NgramDrafterConfig& config,
                            std::vector<int8_t>* classes = nullptr);

class NgramDrafter : public Drafter {
 public:
  // REQUIRES config.Validate().ok().
  explicit NgramDrafter(const NgramDrafterConfig& config) : config_(config) {}

  absl::string_view name() const override { return "ngram"; }
  bool ProposesTrees() const override { return true; }
  absl::Status Start(const std::string& request_id, absl::Span<const int32_t> tokens) override;
  absl::Status Truncate(const std::string& request_id, int64_t length) override;
  void Release(const std::string& request_id) override { held_.erase(request_id); }
  absl::Status Propose(absl::Span<DraftRequest> batch) override;

 private:
  // Proposes for one request; its errors go to request.status.
  void ProposeOne(DraftRequest& request);

  NgramDrafterConfig config_;
  absl::flat_hash_map<std::string, int64_t> held_;  // request -> tokens held
};

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_NGRAM_DRAFTER_H_

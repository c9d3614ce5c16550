// A draft tree (issue 30): the alternatives a drafter proposes for the next few
// positions, verified by the target in one forward (runtime/spec/tree_verify.h).
//
//   // Lookup: several earlier continuations, best first, merged into a trie.
//   DraftTree tree = TrieFromContinuations({{5, 6, 7}, {5, 9}, {8}}, /*max_nodes=*/8);
//   // tree.tokens  = {5, 6, 7, 9, 8}
//   // tree.parents = {-1, 0, 1, 0, -1}
//   RETURN_IF_ERROR(tree.Validate(vocab));
//   std::vector<int32_t> path = tree.PathTo(2);   // {0, 1, 2}: tokens 5 6 7
//
// Shape. Node i carries tokens[i]; parents[i] is its parent node, or -1 when node
// i is a child of the root. The root is no node: it is the last committed token
// (at position L), so a node at depth d (depth 1 = a child of the root) is the
// draft for position L + d. Nodes are in depth-first (pre-)order: parents[i] is
// -1 or an ancestor-or-self of node i - 1, so parents[i] < i, every subtree is a
// contiguous range of indices, and the children of a node are in index order.
// Siblings carry distinct tokens (a target token descends into at most one child).
// A chain is the tree whose every node has one child: parents = {-1, 0, 1, ...}.
//
// q (rejection mode, optional). Empty, or one row per node: q[i] is the draft's
// distribution at node i's parent (the context node i was drawn in), as the chain
// ships one q row per drafted token. Two kinds of sibling groups exist, and
// runtime/spec/tree_verify.h verifies each by its exact rule:
//   point mass: deterministic candidates (lookup, n-gram): every child's q row is
//     OneHot(its own token), or the whole tree has no q;
//   sampled: children drawn without replacement from one q (SampleSiblings below):
//     every child of the group carries that same q row, in draw order.
//
// The target's forward over a tree (runtime/model/language_model.h,
// SequenceInput.tree_parents) indexes the root as its node 0: TreeForwardParents
// gives that layout, and the forward's logits row r is the target's p after its
// node r (row 0: the root's p, for the depth-1 nodes; row i + 1: after node i).
//
// Value type; thread-compatible. Pure functions; thread-safe.
#ifndef SPLITSPEC_RUNTIME_SPEC_DRAFT_TREE_H_
#define SPLITSPEC_RUNTIME_SPEC_DRAFT_TREE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "runtime/spec/sparse_distribution.h"

namespace splitspec::spec {

// The parent index that names the root (the last committed token).
inline constexpr int32_t kTreeRoot = -1;

struct DraftTree {
  std::vector<int32_t> tokens;        // [N] draft token of each node
  std::vector<int32_t> parents;       // [N] parents[i] in [-1, i), depth-first order
  std::vector<SparseDistribution> q;  // [N] or empty (see the file comment)

  // The chain tokens[0] -> tokens[1] -> ...: the tree with branching 1. q: [N] or empty.
  static DraftTree Chain(std::vector<int32_t> tokens, std::vector<SparseDistribution> q = {});

  int32_t size() const { return static_cast<int32_t>(tokens.size()); }
  bool empty() const { return tokens.empty(); }
  // True iff every node has at most one child (parents == {-1, 0, 1, ...}).
  bool IsChain() const;
  // The length of the tree's first path: nodes 0, 1, ... while each is the child
  // of the one before (in depth-first order, the path to the first leaf).
  int32_t FirstPathLength() const;

  // OK, or InvalidArgument naming the node and value at fault: sizes differ (tokens,
  // parents, q when not empty); a parent outside [-1, i) or breaking depth-first
  // order; a token outside [0, vocab); two siblings with the same token; a q row
  // that SparseDistribution::Validate refuses or that gives its node's token q = 0.
  absl::Status Validate(int32_t vocab) const;

  // Depth of each node [N] (1 for the root's children). REQUIRES a valid shape.
  std::vector<int32_t> Depths() const;
  int32_t MaxDepth() const;  // 0 for the empty tree
  // The children of `node` (kTreeRoot for the root's) in index order.
  std::vector<int32_t> Children(int32_t node) const;
  // The nodes from depth 1 down to `node`, inclusive. REQUIRES 0 <= node < size().
  std::vector<int32_t> PathTo(int32_t node) const;
  // The tokens of PathTo(node).
  std::vector<int32_t> PathTokens(int32_t node) const;
};

// OK, or InvalidArgument naming the node: parents[i] outside [-1, i) or not -1 or
// an ancestor-or-self of node i - 1 (depth-first order).
absl::Status ValidateTreeParents(absl::Span<const int32_t> parents);

// DraftTree::Validate over borrowed arrays (q: [N] or empty), for callers that
// hold a tree as spans (a decoded DraftBlock, a TreeVerifyRequest).
absl::Status ValidateDraftTree(absl::Span<const int32_t> tokens, absl::Span<const int32_t> parents,
                               absl::Span<const SparseDistribution> q, int32_t vocab);

// The depth of the deepest node (0 for no nodes): how many draft forwards a model
// drafter spends on the tree, one per level. REQUIRES a valid parent list.
int32_t TreeDepth(absl::Span<const int32_t> parents);

// The tree's parents in the target forward's layout (SequenceInput.tree_parents):
// [N + 1], entry 0 = -1 for the root, entry i + 1 = parents[i] + 1.
std::vector<int32_t> TreeForwardParents(absl::Span<const int32_t> parents);

// The trie of `continuations` (token sequences that each extend the committed
// text, in priority order: for lookup and n-gram, the most recent and longest
// match first), within `max_nodes` nodes: continuations are inserted in order,
// each adding the nodes its longest prefix already in the trie lacks, and the
// last one inserted may be cut to the remaining budget. Children are ordered by
// first insertion, so the first continuation is the tree's first path. No q
// (point-mass candidates). max_nodes <= 0 gives the empty tree.
DraftTree TrieFromContinuations(absl::Span<const std::vector<int32_t>> continuations,
                                int max_nodes);

// `count` distinct tokens drawn from q without replacement, in draw order: draw j
// (from 0) samples q with draws 0..j-1 removed and the rest renormalized, with the
// uniform UniformDouble(seed, position, kDraftSample, j)
// (kernels/cpu/sampling_philox.h). This is the sibling sampling that the sampled
// rule of tree_verify.h is exact for; the first draw is the chain drafter's
// (ChooseDraftToken) draw from the same q. Fewer than `count` tokens when q's
// support is smaller. REQUIRES q.Validate(vocab).ok() for some vocab.
std::vector<int32_t> SampleSiblings(const SparseDistribution& q, int count, uint64_t seed,
                                    int64_t position);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_DRAFT_TREE_H_

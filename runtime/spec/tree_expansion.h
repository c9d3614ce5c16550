// How a model drafter grows a draft tree (issue 30, EAGLE-2 style): level by
// level, one draft forward per level over the nodes being expanded, each node's
// children the drafter's top candidates (greedy) or draws without replacement
// from its q (rejection mode), spending the node budget on the nodes of highest
// path value (the product of the draft probabilities along the path: the draft's
// own estimate of the chance that the target accepts the whole path).
//
//   // After the level's forward gave each frontier node its candidates' probabilities:
//   std::vector<int> children = PlanLevel(frontier, depth, max_depth, nodes_left);
//
// The plan of one level. The frontier nodes (those whose rows the level's forward
// computed) carry their path value v and their candidates' probabilities in
// decreasing order r_1 >= r_2 >= ...; the j-th child of a node is worth v * r_j
// (exactly its path value under greedy; under sampling the value of the j-th most
// likely token, an estimate known before anything is drawn). The level's children
// compete with the nodes later levels could add, whose candidates are not known
// yet: the plan projects them, assuming a node's descendants rank their candidates
// as the frontier node they descend from does, and grows the projected tree in
// decreasing value (Sequoia's best-first growth: a taken node's next sibling and
// first child become candidates) until `nodes_left` nodes are taken. A frontier
// node gets as many children as the growth took at this level. The first path
// (the chain the drafter would propose, a prefix of the tree's depth-first order)
// is taken first, down to max_depth: the tree always contains the chain.
//
// Exactness (runtime/spec/tree_verify.h). Greedy trees are exact whatever their
// tokens. For sampled trees the rule at a node needs its children to be draws
// without replacement from its q, the j-th drawn from q without the first j - 1,
// whatever made the drafter stop at m children, as long as that choice did not
// look at the draws it stops before (a stopping rule: each step of recursive
// rejection is exact given the draws before it, and the fallback after the last
// child is the residual sample either way). The plan reads only the frontier's
// values and q rows, fixed by the draws of earlier levels (which use other
// positions' random numbers), never the tokens this level will draw: the number
// of children of every node is fixed before its children are drawn. The same
// holds for which nodes are fed to the next level's forward (chosen by value
// after this level's draws, which affects only the next positions' draws). A
// rule that pruned drawn children by their own value (EAGLE-2's final re-ranking)
// would keep a sibling according to its own token and break the rule, so there
// is none.
//
// Pure; thread-safe.
#ifndef SPLITSPEC_RUNTIME_SPEC_TREE_EXPANSION_H_
#define SPLITSPEC_RUNTIME_SPEC_TREE_EXPANSION_H_

#include <vector>

#include "absl/types/span.h"

namespace splitspec::spec {

// One node whose children a level decides.
struct FrontierNode {
  double value = 1.0;          // path value v (the root: 1)
  std::vector<double> ranked;  // its candidates' probabilities, decreasing; >= 1 entry
  bool first_path = false;     // on the tree's first path (at most one per level)
};

// The number of children of each frontier node [frontier.size()] at depth
// `depth` (1: the root's children) of a tree of depth at most max_depth and at
// most nodes_left more nodes: the first-path node gets at least one (when
// nodes_left >= 1), no node more than its ranked.size(), and the sum is at most
// nodes_left. REQUIRES 1 <= depth <= max_depth.
std::vector<int> PlanLevel(absl::Span<const FrontierNode> frontier, int depth, int max_depth,
                           int nodes_left);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_TREE_EXPANSION_H_

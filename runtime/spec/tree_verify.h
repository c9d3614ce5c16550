// Exact verification of a draft tree (issue 30, runtime/spec/draft_tree.h): the
// target's rows for every node come from one forward over the tree, and one pass
// from the root down picks the accepted path and the token after it.
//
//   TreeVerifyRequest request;
//   request.mode = VerifyMode::kRejection;
//   request.target_probs = p;            // [N + 1, vocab]: the root's row, then node i's
//   request.SetTree(tree);               // borrows tree.tokens / parents / q
//   request.seed = params.seed;
//   request.start_position = frontier;   // position of the depth-1 nodes
//   ASSIGN_OR_RETURN(TreeVerifyOutcome outcome, VerifyTree(request, vocab));
//   // keep outcome.accepted_nodes in the KV cache, commit outcome.committed
//
// The pass. Start at the root (the last committed token). At a node v of depth d
// (the root: d = 0) the target's token for position t = start_position + d has
// the row p = p_v (row 0 for the root, row v + 1 for node v) and v's children
// c_1..c_m (in index order) are the candidates for it:
//   leaf (m = 0): if want_bonus commit the bonus, the mode's own choice from p at t
//     (ChooseTargetToken: argmax p; a sample of p with UniformDouble(seed, t,
//     kSample); Gumbel-argmax of (seed, t)); stop. Without want_bonus commit nothing
//     more (p is not read, but must be present).
//   greedy:  y = argmax p (lowest id on ties).
//   coupled: y = argmax(log p + g), g the Gumbel noise of (seed, t).
//   rejection, point-mass children (lookup, n-gram: every child's q is OneHot of its
//     token, or the tree has no q): y = a sample of p with UniformDouble(seed, t, kSample).
//   ... for these three, if a child carries y accept it and continue from it; else
//     commit y as the correction and stop.
//   rejection, sampled children (all carry the same q, drawn without replacement in
//     index order: SampleSiblings of draft_tree.h): recursive rejection sampling.
//     p_1 = p, q_1 = q; for j = 1..m, x_j = the token of c_j: accept c_j (continue
//     from it) iff u_j < p_j(x_j) / q_j(x_j), u_j = UniformDouble(seed, t, kAcceptTest,
//     j - 1); else p_{j+1} = norm(max(0, p_j - q_j)) and q_{j+1} = q_j without x_j,
//     renormalized. If every child is rejected, commit a sample of p_{m+1} with
//     UniformDouble(seed, t, kResidual) (of p_m when p_{m+1} has no mass, p_m == q_m up
//     to round-off), and stop.
//
// Why each rule is exact (the committed tokens are distributed as the target's own
// sampling, token after token):
//   greedy, coupled, point mass: y is the token target-only decoding itself chooses
//     at t after the accepted prefix (ChooseTargetToken with the same seed and
//     position; its row depends on the prefix only, since the forward's row of a node
//     is bitwise the chain's along its path). The children only decide whether y was
//     guessed, never which token is committed. So the output is, token for token,
//     target-only decoding's with the same seed, whatever the tree: greedy gives the
//     argmax sequence, coupled is exact by the Gumbel-max trick (and keeps its
//     promise that a seeded output is a function of prefix, seed and position only,
//     so coupled trees need no rule of their own), and point mass gives a sample of p
//     (deterministic candidates have nothing to reject: a point-mass q would make
//     p(x)/q(x) = p(x) the acceptance, which is exactly P(y = x)). Since the tree
//     only sets how many of these tokens one step commits, these rules are exact
//     for any tree, however its tokens were found (a sampled tree sent without q
//     included; recursive rejection sampling below just accepts more of it).
//   sampled (recursive rejection sampling without replacement; SpecTr, Sequoia): one
//     step j is the chain's rule (Leviathan et al. 2023): a token accepted from q_j
//     with probability min(1, p_j/q_j), else one from norm(max(0, p_j - q_j)), is
//     distributed as p_j, provided the fallback does not depend on which x_j was
//     rejected. The fallback here is steps j + 1.. over p_{j+1} (which does not
//     depend on x_j), distributed as p_{j+1} by induction (the last fallback is the
//     residual sample itself). Step j + 1's candidate x_{j+1} is, given x_j, a draw
//     from q_{j+1} = q_j without x_j: exactly the drafter's next draw without
//     replacement. Removing x_j loses nothing: x_j can be rejected only if p_j(x_j) <=
//     q_j(x_j), and then p_{j+1}(x_j) = 0. The uniforms u_j, the residual's and the
//     drafter's (kDraftSample) are independent streams, and each depth has its own
//     position, so each step's randomness is fresh. A rule that keeps q_{j+1} = q_j
//     (SpecInfer's, exact for children drawn independently WITH replacement) is not
//     exact for these draws; the tests show it fails.
//   Each committed token is thus distributed as p after the committed prefix, so the
//   whole sequence has the target's law; the bonus after a leaf is the target's own
//   choice from the row after the whole path.
// Identities: a chain tree (branching 1) with q rows in rejection mode, and any chain
// in greedy or coupled mode, commits bitwise what VerifyBlock (runtime/spec/verify.h)
// commits for the same chain (u_1 is the chain's acceptance uniform, the residual and
// the bonus the same). A point-mass chain commits a different but equally exact
// sample: the chain's rule tests u < p(x) instead of sampling p.
// Classifier-free guidance: the rows are the guided p; nothing above relates p to q
// (as in runtime/spec/verify.h), so the rules stay exact for the guided law.
//
// Thread-compatible: pure functions of their inputs.
#ifndef SPLITSPEC_RUNTIME_SPEC_TREE_VERIFY_H_
#define SPLITSPEC_RUNTIME_SPEC_TREE_VERIFY_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/sparse_distribution.h"
#include "runtime/spec/verify_mode.h"

namespace splitspec::spec {

// One draft tree of one request. Spans are borrowed for the duration of the call.
struct TreeVerifyRequest {
  VerifyMode mode = VerifyMode::kRejection;
  absl::Span<const float> target_probs;    // [N + 1, vocab]: root's row, then node i's at i + 1
  absl::Span<const int32_t> draft_tokens;  // [N]
  absl::Span<const int32_t> parents;       // [N] (draft_tree.h), depth-first order
  absl::Span<const SparseDistribution> draft_q;  // [N] or empty; read in rejection mode only
  uint64_t seed = 0;
  int64_t start_position = 0;  // position of the depth-1 nodes (the frontier), >= 0
  bool want_bonus = true;

  // Borrows the tree's tokens, parents and q (the tree must outlive the request).
  void SetTree(const DraftTree& tree) {
    draft_tokens = tree.tokens;
    parents = tree.parents;
    draft_q = tree.q;
  }
};

struct TreeVerifyOutcome {
  // The accepted path, depth 1 first: accepted_nodes[0] is a child of the root and
  // each next one a child of the one before. Its length is the accepted count.
  std::vector<int32_t> accepted_nodes;
  // The tokens of accepted_nodes, then the correction or the bonus if any.
  std::vector<int32_t> committed;
  bool rejected = false;  // true iff committed.back() is a correction
};

// Verifies one tree by the rules above. Errors (InvalidArgument, naming the value at
// fault): vocab < 1; a tree that DraftTree::Validate refuses (sizes, parents, tokens,
// repeated sibling tokens, a q row, a node's token with q = 0); target_probs not
// [N + 1, vocab]; start_position < 0; in rejection mode, a sibling group whose q rows
// are neither all point masses on their own tokens nor all the same row; a target
// row read by the rule with a negative or non-finite entry or no mass (naming the
// row, its node and position). Only the rows of the root and of accepted nodes are
// read. Nothing is committed on error.
absl::StatusOr<TreeVerifyOutcome> VerifyTree(const TreeVerifyRequest& request, int32_t vocab);

}  // namespace splitspec::spec

#endif  // SPLITSPEC_RUNTIME_SPEC_TREE_VERIFY_H_

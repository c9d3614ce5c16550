#include "runtime/spec/tree_verify.h"

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/sampling_philox.h"
#include "kernels/cpu/verify.h"
#include "runtime/base/status_macros.h"
#include "runtime/spec/sampling.h"

namespace splitspec::spec {
namespace {

using kernels::RandomPurpose;
using kernels::UniformDouble;

// How the children of one node are verified in rejection mode (tree_verify.h).
enum class GroupRule { kPointMass, kSampled };

// True iff q puts all its mass on `token`.
bool IsPointMassOn(const SparseDistribution& q, int32_t token) {
  for (size_t j = 0; j < q.token_ids.size(); ++j) {
    if (q.token_ids[j] != token && q.probs[j] != 0.0f) return false;
  }
  return true;
}

bool SameRow(const SparseDistribution& a, const SparseDistribution& b) {
  return a.token_ids == b.token_ids && a.probs == b.probs;
}

// The tree's shape, checked once: the children of each node (entry v + 1 for node
// v, entry 0 for the root) and, in rejection mode, each group's rule.
struct TreeIndex {
  std::vector<std::vector<int32_t>> children;
  std::vector<GroupRule> rules;
};

absl::StatusOr<TreeIndex> IndexTree(const TreeVerifyRequest& r) {
  TreeIndex index;
  const size_t n = r.draft_tokens.size();
  index.children.resize(n + 1);
  for (size_t i = 0; i < n; ++i)
    index.children[r.parents[i] + 1].push_back(static_cast<int32_t>(i));
  index.rules.assign(n + 1, GroupRule::kPointMass);
  if (r.mode != VerifyMode::kRejection || r.draft_q.empty()) return index;
  for (size_t v = 0; v <= n; ++v) {
    const std::vector<int32_t>& group = index.children[v];
    if (group.empty()) continue;
    bool point_mass = true, shared = true;
    for (int32_t c : group) {
      point_mass = point_mass && IsPointMassOn(r.draft_q[c], r.draft_tokens[c]);
      shared = shared && SameRow(r.draft_q[c], r.draft_q[group[0]]);
    }
    if (point_mass) continue;
    if (!shared) {
      const std::string parent = v == 0 ? std::string("the root") : absl::StrCat("node ", v - 1);
      return absl::InvalidArgumentError(absl::StrCat(
          "the children of ", parent,
          " carry q rows that are neither all point masses on their own tokens nor one shared "
          "row (siblings drawn without replacement from one q)"));
    }
    index.rules[v] = GroupRule::kSampled;
  }
  return index;
}

// The error of a malformed target row read at `node` (kTreeRoot for the root).
absl::Status BadTargetRow(int32_t node, int64_t position) {
  const std::string where =
      node == kTreeRoot ? std::string("the root") : absl::StrCat("node ", node);
  return absl::InvalidArgumentError(absl::StrCat("target row ", node + 1, " (after ", where,
                                                 ", position ", position,
                                                 "): negative or non-finite entry, or no mass"));
}

// What one node's step decided: the child accepted (or -1) and otherwise the
// token committed after the accepted path.
struct StepResult {
  int32_t accepted_child = -1;
  int32_t committed = -1;
};

// Recursive rejection sampling over `group` (siblings drawn without replacement
// from their shared q) against p [vocab] at `position`.
absl::StatusOr<StepResult> SampledStep(const TreeVerifyRequest& r, int32_t vocab, int32_t node,
                                       const float* p, const std::vector<int32_t>& group,
                                       int64_t position) {
  const SparseDistribution& q = r.draft_q[group[0]];
  const int32_t q_size = static_cast<int32_t>(q.token_ids.size());
  // p_j and q_j of the rule; step 1 reads p and q as given (as the chain's rule does).
  const float* p_now = p;
  std::vector<float> p_next, residual;
  std::vector<float> q_now = q.probs;
  double q_left = 0.0;  // mass of q not yet drawn
  for (float w : q.probs) q_left += w;
  for (size_t j = 0; j < group.size(); ++j) {
    const int32_t x = r.draft_tokens[group[j]];
    int32_t x_entry = 0;
    while (q.token_ids[x_entry] != x) ++x_entry;  // present: Validate checked q(x) > 0
    if (!kernels::IsValidWeight(p_now[x])) return BadTargetRow(node, position);
    const double u =
        UniformDouble(r.seed, position, RandomPurpose::kAcceptTest, static_cast<uint32_t>(j));
    if (u < static_cast<double>(p_now[x]) / static_cast<double>(q_now[x_entry])) {
      return StepResult{group[j], -1};
    }
    residual.resize(vocab);
    const int32_t code = kernels::SparseRejectionResidual(p_now, vocab, q.token_ids.data(),
                                                          q_now.data(), q_size, residual.data());
    if (code == kernels::kVerifyBadTargetRow) return BadTargetRow(node, position);
    if (code != kernels::kVerifyOk) {
      return absl::InvalidArgumentError(
          absl::StrCat("q of draft tree node ", group[j], ": negative or non-finite entry"));
    }
    if (j + 1 == group.size()) {
      const double u_residual = UniformDouble(r.seed, position, RandomPurpose::kResidual);
      int32_t correction = kernels::SampleFromWeights(residual.data(), vocab, u_residual);
      if (correction < 0) correction = kernels::SampleFromWeights(p_now, vocab, u_residual);
      if (correction < 0) return BadTargetRow(node, position);
      return StepResult{-1, correction};
    }
    // p_{j+1} = norm(residual), or p_j again when round-off left the residual no mass.
    double residual_mass = 0.0;
    for (float w : residual) residual_mass += w;
    if (residual_mass > 0.0) {
      p_next.resize(vocab);
      for (int32_t v = 0; v < vocab; ++v)
        p_next[v] = static_cast<float>(residual[v] / residual_mass);
      p_now = p_next.data();
    }
    // q_{j+1} = q_j without x, renormalized (from the shipped q, so errors do not add up).
    q_left -= q.probs[x_entry];
    q_now[x_entry] = 0.0f;
    if (!(q_left > 0.0)) {  // the draft drew every token of q: it cannot have drawn another
      return absl::InvalidArgumentError(absl::StrCat(
          "draft tree node ", group[j + 1], ": q has no mass left after its earlier siblings"));
    }
    for (int32_t e = 0; e < q_size; ++e) {
      if (q_now[e] != 0.0f) q_now[e] = static_cast<float>(q.probs[e] / q_left);
    }
  }
  return absl::InternalError("unreachable: a sampled step ends on its last sibling");
}

}  // namespace

absl::StatusOr<TreeVerifyOutcome> VerifyTree(const TreeVerifyRequest& request, int32_t vocab) {
  const TreeVerifyRequest& r = request;
  if (vocab < 1) return absl::InvalidArgumentError(absl::StrCat("vocab must be >= 1, got ", vocab));
  const size_t n = r.draft_tokens.size();
  // q is read in rejection mode only (as in the chain's rules).
  RETURN_IF_ERROR(ValidateDraftTree(
      r.draft_tokens, r.parents,
      r.mode == VerifyMode::kRejection ? r.draft_q : absl::Span<const SparseDistribution>(),
      vocab));
  if (r.target_probs.size() != (n + 1) * static_cast<size_t>(vocab)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "target_probs has ", r.target_probs.size(), " floats, need (nodes + 1) * vocab = ",
        (n + 1) * vocab, " for ", n, " nodes, vocab = ", vocab));
  }
  if (r.start_position < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("start_position must be >= 0, got ", r.start_position));
  }
  ASSIGN_OR_RETURN(const TreeIndex index, IndexTree(r));

  TreeVerifyOutcome outcome;
  int32_t node = kTreeRoot;
  for (int64_t position = r.start_position;; ++position) {
    const float* p = r.target_probs.data() + static_cast<size_t>(node + 1) * vocab;
    const absl::Span<const float> row(p, vocab);
    const std::vector<int32_t>& group = index.children[node + 1];
    StepResult step;
    if (group.empty()) {  // a leaf: the bonus
      if (!r.want_bonus) break;
      absl::StatusOr<int32_t> bonus = ChooseTargetToken(r.mode, row, r.seed, position);
      if (!bonus.ok()) return BadTargetRow(node, position);
      outcome.committed.push_back(*bonus);
      break;
    }
    if (r.mode == VerifyMode::kRejection && index.rules[node + 1] == GroupRule::kSampled) {
      ASSIGN_OR_RETURN(step, SampledStep(r, vocab, node, p, group, position));
    } else {
      // The target's own token at this position; the children only guess it.
      absl::StatusOr<int32_t> y = ChooseTargetToken(r.mode, row, r.seed, position);
      if (!y.ok()) return BadTargetRow(node, position);
      step.committed = *y;
      for (int32_t c : group) {
        if (r.draft_tokens[c] == *y) step = StepResult{c, -1};
      }
    }
    if (step.accepted_child < 0) {
      outcome.committed.push_back(step.committed);
      outcome.rejected = true;
      break;
    }
    node = step.accepted_child;
    outcome.accepted_nodes.push_back(node);
    outcome.committed.push_back(r.draft_tokens[node]);
  }
  return outcome;
}

}  // namespace splitspec::spec

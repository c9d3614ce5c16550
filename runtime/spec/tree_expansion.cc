#include "runtime/spec/tree_expansion.h"

#include <queue>
#include <tuple>

namespace splitspec::spec {
namespace {

// A node of the projected tree not taken yet: the rank-th candidate (from 0) of a
// node of path value parent_value at depth - 1, ranked as frontier[source] ranks.
struct Candidate {
  double value;
  double parent_value;
  int depth;
  int source;
  int rank;
};

// Highest value first; ties: shallower, then lower source and rank (deterministic).
struct LowerPriority {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return std::make_tuple(a.value, -a.depth, -a.source, -a.rank) <
           std::make_tuple(b.value, -b.depth, -b.source, -b.rank);
  }
};

}  // namespace

std::vector<int> PlanLevel(absl::Span<const FrontierNode> frontier, int depth, int max_depth,
                           int nodes_left) {
  std::vector<int> children(frontier.size(), 0);
  std::priority_queue<Candidate, std::vector<Candidate>, LowerPriority> queue;
  int taken = 0;
  auto candidate = [&](double parent_value, int at_depth, int source, int rank) {
    const std::vector<double>& ranked = frontier[source].ranked;
    if (at_depth > max_depth || rank >= static_cast<int>(ranked.size())) return;
    queue.push({parent_value * ranked[rank], parent_value, at_depth, source, rank});
  };
  // Takes `c`; its next sibling and (unless `chain_follows`) its first child become
  // candidates.
  auto take = [&](const Candidate& c, bool chain_follows) {
    ++taken;
    if (c.depth == depth) ++children[c.source];
    candidate(c.parent_value, c.depth, c.source, c.rank + 1);
    if (!chain_follows) candidate(c.value, c.depth + 1, c.source, 0);
  };

  // The first path, down to max_depth.
  for (size_t f = 0; f < frontier.size(); ++f) {
    if (!frontier[f].first_path || frontier[f].ranked.empty()) continue;
    const std::vector<double>& ranked = frontier[f].ranked;
    double value = frontier[f].value;
    for (int d = depth; d <= max_depth && taken < nodes_left; ++d) {
      const Candidate chain = {value * ranked[0], value, d, static_cast<int>(f), 0};
      take(chain, /*chain_follows=*/d < max_depth);
      value = chain.value;
    }
    break;
  }
  for (size_t f = 0; f < frontier.size(); ++f) {
    if (!frontier[f].first_path) candidate(frontier[f].value, depth, static_cast<int>(f), 0);
  }
  while (taken < nodes_left && !queue.empty()) {
    const Candidate best = queue.top();
    queue.pop();
    take(best, /*chain_follows=*/false);
  }
  return children;
}

}  // namespace splitspec::spec

#include "runtime/spec/draft_tree.h"

#include <algorithm>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "kernels/cpu/sampling.h"
#include "kernels/cpu/sampling_philox.h"

namespace splitspec::spec {

DraftTree DraftTree::Chain(std::vector<int32_t> tokens, std::vector<SparseDistribution> q) {
  DraftTree tree;
  tree.parents.resize(tokens.size());
  for (size_t i = 0; i < tokens.size(); ++i) tree.parents[i] = static_cast<int32_t>(i) - 1;
  tree.tokens = std::move(tokens);
  tree.q = std::move(q);
  return tree;
}

bool DraftTree::IsChain() const {
  for (size_t i = 0; i < parents.size(); ++i) {
    if (parents[i] != static_cast<int32_t>(i) - 1) return false;
  }
  return true;
}

int32_t DraftTree::FirstPathLength() const {
  int32_t length = 0;
  while (length < size() && parents[length] == length - 1) ++length;
  return length;
}

absl::Status ValidateTreeParents(absl::Span<const int32_t> parents) {
  // `path` holds the ancestors-or-self of node i - 1, root side first: in
  // depth-first order node i's parent must be one of them (or the root).
  std::vector<int32_t> path;
  for (int32_t i = 0; i < static_cast<int32_t>(parents.size()); ++i) {
    const int32_t parent = parents[i];
    if (parent < kTreeRoot || parent >= i) {
      return absl::InvalidArgumentError(
          absl::StrCat("draft tree node ", i, ": parent ", parent, " outside [-1, ", i, ")"));
    }
    while (!path.empty() && path.back() != parent) path.pop_back();
    if (parent != kTreeRoot && path.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("draft tree node ", i, ": parent ", parent, " is not on the path to node ",
                       i - 1, ", so the nodes are not in depth-first order"));
    }
    path.push_back(i);
  }
  return absl::OkStatus();
}

absl::Status ValidateDraftTree(absl::Span<const int32_t> tokens, absl::Span<const int32_t> parents,
                               absl::Span<const SparseDistribution> q, int32_t vocab) {
  const int32_t n = static_cast<int32_t>(tokens.size());
  if (parents.size() != tokens.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("draft tree has ", tokens.size(), " tokens but ", parents.size(), " parents"));
  }
  if (!q.empty() && q.size() != tokens.size()) {
    return absl::InvalidArgumentError(absl::StrCat("draft tree has ", tokens.size(), " tokens but ",
                                                   q.size(),
                                                   " q rows (need one per node, or none)"));
  }
  if (absl::Status status = ValidateTreeParents(parents); !status.ok()) return status;
  for (int32_t i = 0; i < n; ++i) {
    if (tokens[i] < 0 || tokens[i] >= vocab) {
      return absl::InvalidArgumentError(
          absl::StrCat("draft tree node ", i, ": token ", tokens[i], " outside [0, ", vocab, ")"));
    }
    if (q.empty()) continue;
    if (absl::Status status = q[i].Validate(vocab); !status.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("draft tree node ", i, ": q: ", status.message()));
    }
    if (!(q[i].ProbabilityOf(tokens[i]) > 0.0f)) {
      return absl::InvalidArgumentError(
          absl::StrCat("draft tree node ", i, ": token ", tokens[i],
                       " has q = 0, so the draft cannot have drawn it"));
    }
  }
  // Siblings' tokens: one (parent, token) pair per node.
  absl::flat_hash_set<std::pair<int32_t, int32_t>> seen;
  for (int32_t i = 0; i < n; ++i) {
    if (!seen.insert({parents[i], tokens[i]}).second) {
      return absl::InvalidArgumentError(absl::StrCat("draft tree node ", i, ": token ", tokens[i],
                                                     " repeats a sibling's (parent ", parents[i],
                                                     ")"));
    }
  }
  return absl::OkStatus();
}

absl::Status DraftTree::Validate(int32_t vocab) const {
  return ValidateDraftTree(tokens, parents, q, vocab);
}

std::vector<int32_t> DraftTree::Depths() const {
  std::vector<int32_t> depths(tokens.size());
  for (size_t i = 0; i < parents.size(); ++i)
    depths[i] = parents[i] == kTreeRoot ? 1 : depths[parents[i]] + 1;
  return depths;
}

int32_t DraftTree::MaxDepth() const { return TreeDepth(parents); }

int32_t TreeDepth(absl::Span<const int32_t> parents) {
  std::vector<int32_t> depths(parents.size());
  int32_t deepest = 0;
  for (size_t i = 0; i < parents.size(); ++i) {
    depths[i] = parents[i] == kTreeRoot ? 1 : depths[parents[i]] + 1;
    deepest = std::max(deepest, depths[i]);
  }
  return deepest;
}

std::vector<int32_t> DraftTree::Children(int32_t node) const {
  std::vector<int32_t> children;
  for (int32_t i = std::max(node + 1, 0); i < size(); ++i) {
    if (parents[i] == node) children.push_back(i);
  }
  return children;
}

std::vector<int32_t> DraftTree::PathTo(int32_t node) const {
  std::vector<int32_t> path;
  for (int32_t v = node; v != kTreeRoot; v = parents[v]) path.push_back(v);
  std::reverse(path.begin(), path.end());
  return path;
}

std::vector<int32_t> DraftTree::PathTokens(int32_t node) const {
  std::vector<int32_t> path = PathTo(node);
  for (int32_t& v : path) v = tokens[v];
  return path;
}

std::vector<int32_t> TreeForwardParents(absl::Span<const int32_t> parents) {
  std::vector<int32_t> forward(parents.size() + 1);
  forward[0] = -1;
  for (size_t i = 0; i < parents.size(); ++i) forward[i + 1] = parents[i] + 1;
  return forward;
}

namespace {

struct TrieNode {
  int32_t token = -1;
  std::vector<int32_t> children;  // indices into the trie's node list, by first insertion
};

void EmitDepthFirst(const std::vector<TrieNode>& trie, int32_t node, int32_t parent,
                    DraftTree& tree) {
  const int32_t index = tree.size();
  tree.tokens.push_back(trie[node].token);
  tree.parents.push_back(parent);
  for (int32_t child : trie[node].children) EmitDepthFirst(trie, child, index, tree);
}

}  // namespace

DraftTree TrieFromContinuations(absl::Span<const std::vector<int32_t>> continuations,
                                int max_nodes) {
  // trie[0] is the root; the budget counts the other nodes.
  std::vector<TrieNode> trie(1);
  int nodes = 0;
  for (const std::vector<int32_t>& continuation : continuations) {
    int32_t at = 0;
    for (int32_t token : continuation) {
      auto& children = trie[at].children;
      auto it = std::find_if(children.begin(), children.end(),
                             [&](int32_t c) { return trie[c].token == token; });
      if (it != children.end()) {
        at = *it;
        continue;
      }
      if (nodes >= max_nodes) break;
      trie.push_back(TrieNode{token, {}});
      const int32_t added = static_cast<int32_t>(trie.size()) - 1;
      trie[at].children.push_back(added);
      at = added;
      ++nodes;
    }
  }
  DraftTree tree;
  tree.tokens.reserve(nodes);
  tree.parents.reserve(nodes);
  for (int32_t child : trie[0].children) EmitDepthFirst(trie, child, kTreeRoot, tree);
  return tree;
}

std::vector<int32_t> SampleSiblings(const SparseDistribution& q, int count, uint64_t seed,
                                    int64_t position) {
  std::vector<float> weights = q.probs;  // drawn entries are zeroed: SampleFromWeights renormalizes
  std::vector<int32_t> drawn;
  const int n = static_cast<int>(weights.size());
  for (int j = 0; j < count && n > 0; ++j) {
    const double u = kernels::UniformDouble(seed, position, kernels::RandomPurpose::kDraftSample,
                                            static_cast<uint32_t>(j));
    const int index = kernels::SampleFromWeights(weights.data(), n, u);
    if (index < 0) break;  // no mass left: the support is exhausted
    drawn.push_back(q.token_ids[index]);
    weights[index] = 0.0f;
  }
  return drawn;
}

}  // namespace splitspec::spec

// Draft trees over the Markov "language models" of markov_model.h, for the tree
// verification tests: the target's rows of a tree (what one tree forward gives),
// trees sampled from a draft model (siblings without replacement) and random tries.
#ifndef SPLITSPEC_TESTS_UNIT_SPEC_TREE_TEST_UTIL_H_
#define SPLITSPEC_TESTS_UNIT_SPEC_TREE_TEST_UTIL_H_

#include <cstdint>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "runtime/spec/draft_tree.h"
#include "runtime/spec/sampling.h"
#include "tests/unit/spec/markov_model.h"

namespace splitspec::spec::testing {

// The target's rows of `tree` after the committed token `last`: [N + 1, vocab], row 0
// the root's, row i + 1 after node i (a Markov row depends on the previous token only).
inline std::vector<float> TreeRows(const MarkovModel& target, int32_t last, const DraftTree& tree) {
  std::vector<float> rows = target.Next(last);
  for (int32_t token : tree.tokens) {
    const std::vector<float>& row = target.Next(token);
    rows.insert(rows.end(), row.begin(), row.end());
  }
  return rows;
}

// A tree drafted from `draft` after `last`: each node of depth d < branching.size()
// gets up to branching[d] children drawn without replacement (SampleSiblings) from
// the draft's top-q_top_k q at position start + d, each child carrying that q.
inline DraftTree SampledTree(const MarkovModel& draft, int32_t last,
                             const std::vector<int>& branching, int q_top_k, uint64_t seed,
                             int64_t start) {
  DraftTree tree;
  struct Expander {
    const MarkovModel& draft;
    const std::vector<int>& branching;
    int q_top_k;
    uint64_t seed;
    int64_t start;
    DraftTree& tree;
    void Expand(int32_t parent, int32_t parent_token, size_t depth) {
      if (depth == branching.size()) return;
      absl::StatusOr<SparseDistribution> q = TopQDistribution(draft.Next(parent_token), q_top_k);
      EXPECT_TRUE(q.ok()) << q.status();
      for (int32_t x : SampleSiblings(*q, branching[depth], seed, start + depth)) {
        const int32_t index = tree.size();
        tree.tokens.push_back(x);
        tree.parents.push_back(parent);
        tree.q.push_back(*q);
        Expand(index, x, depth + 1);
      }
    }
  };
  Expander{draft, branching, q_top_k, seed, start, tree}.Expand(kTreeRoot, last, 0);
  return tree;
}

// A trie of `count` random continuations of lengths in [1, max_length] over `vocab`,
// within max_nodes nodes (point-mass candidates, as lookup proposes them).
inline DraftTree RandomTrie(int vocab, int count, int max_length, int max_nodes,
                            std::mt19937_64& rng) {
  std::vector<std::vector<int32_t>> continuations(count);
  for (auto& c : continuations) {
    const int length = std::uniform_int_distribution<int>(1, max_length)(rng);
    for (int i = 0; i < length; ++i)
      c.push_back(std::uniform_int_distribution<int32_t>(0, vocab - 1)(rng));
  }
  return TrieFromContinuations(continuations, max_nodes);
}

}  // namespace splitspec::spec::testing

#endif  // SPLITSPEC_TESTS_UNIT_SPEC_TREE_TEST_UTIL_H_
